package engine

import (
	"bytes"
	"container/list"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/kvwarden/kvwarden/internal/kvcache"
	"github.com/kvwarden/kvwarden/internal/kvseal"
)

// The disk tier (Config.KVDisk): prefix-cache pages below the host tier.
//
// A page goes to disk when it leaves the host tier because the host tier
// is full (LRU; or when it leaves the device and there is no host tier),
// and the whole prefix cache is written on a graceful Close. On start the
// directory is indexed, and a prefix lookup that misses in memory looks
// for the next page on disk before it computes.
//
// One file per page. Its name is a MAC (under a key derived from the
// master key) of the KV fingerprint, the tenant and the page's strong
// chain hash (SHA-256 over every token up to the end of the page), so a
// name reveals neither, another tenant or model never finds it, and a
// lookup needs no index beyond the directory listing. The file is
//
//	magic "KVWDISK1" | tenant tag [16] | fingerprint tag [8] | sealed payload
//
// where the payload is the page's position, its tokens and its KV bytes,
// zstd compressed, then sealed (kvseal) under the tenant's key with the
// header, the strong chain hash and the position as additional data. A
// file that fails its tag (torn, corrupted, another key, an erased epoch)
// is a miss; it is counted and deleted, never read as KV. The tags in the
// header let the index count a tenant's files for erasure and set aside
// files of another model without opening them.
//
// Writes are crash-safe: temporary file, fsync, rename, fsync of the
// directory; the index is the directory itself, rebuilt on start, and a
// temporary file left by a crash is deleted then. The budget is a hard
// limit: a file's size is reserved, evicting files first, before it is
// written. Eviction is tenant-fair: the least recently used file of the
// tenant that holds the most bytes goes first, so one tenant's traffic
// cannot push every other tenant's prefixes off the disk.
//
// Tenants' key epochs (salts) are persisted in the directory (epochs),
// keyed by tenant tag, so pages outlive a restart with the same key file
// and an erasure outlives the process. With a random per-process key
// nothing on disk can be opened after a restart: the directory is cleared
// on start.

const (
	diskMagic   = "KVWDISK1"
	diskHdrSize = 8 + 16 + 8
	diskExt     = ".kvp"
	diskTmp     = ".tmp-"
	epochsFile  = "epochs"
	lockFile    = "LOCK"
)

// DiskStats is the disk tier's state and counters (Stats.Disk).
type DiskStats struct {
	Used, Budget int64 // bytes of page files, and the limit
	Files        int
	Writes       uint64 // pages written
	Hits         uint64 // pages read back and served
	SealFailures uint64 // files that failed their tag (or were malformed): deleted, each a miss
	Evictions    uint64 // files deleted to stay under the budget
	Erased       uint64 // files deleted by tenant erasures
	Skipped      uint64 // pages not written: larger than the budget, or no room left to evict
	// Dropped are pages not written because the writer's queue was full
	// (diskQueueBytes): the scheduler never waits on the disk, so a disk
	// slower than the spills loses the pages it cannot keep up with, each
	// only a later miss.
	Dropped     uint64
	WriteErrors uint64
}

type diskTier struct {
	dir    string
	budget int64
	keys   *kvseal.Keyring
	seal   kvcache.Sealer // keys, or plainSealer (TestHooks.UnsafePlainTiers)
	log    *slog.Logger
	ps     int
	rawLen int
	scrub  bool
	fp     []byte  // KV fingerprint
	fpTag  [8]byte // its tag in file headers
	zenc   *zstd.Encoder
	zdec   *zstd.Decoder
	lock   *os.File
	fs     diskFS

	mu      sync.Mutex
	files   map[string]*diskFile
	tenants map[[16]byte]*tenantFiles // by tenant tag
	used    int64                     // bytes of the files, and of writes reserved or deletions pending
	gens    map[[16]byte]uint64       // tenant tag -> erasures, so a write racing one is dropped
	// pending are the pages queued for the writer or being written, by
	// file name: a lookup finds them as it finds files (a page evicted a
	// moment ago is not a miss because its fsync has not returned yet).
	pending map[string]*diskJob
	orphans []*diskFile // out of the index, but deleting them failed: still counted in used
	st      DiskStats

	sendMu sync.RWMutex
	closed bool
	jobs   chan *diskJob
	reads  chan *diskRead // for the reader (prefix restores), off the scheduler goroutine
	wg     sync.WaitGroup
	// notify wakes the scheduler when a read completes (Engine.signal);
	// set before the scheduler starts.
	notify func()

	epochs *epochStore
}

type diskFile struct {
	name string
	size int64
	tag  [16]byte
	el   *list.Element // in its tenant's LRU list
}

// tenantFiles is one tenant's files, least recently used at the back.
type tenantFiles struct {
	lru   *list.List
	bytes int64
}

// diskJob is one page for the writer, or (raw nil) a flush marker.
type diskJob struct {
	tenant string
	tag    [16]byte
	gen    uint64
	strong [32]byte
	pos    int
	tokens []int
	raw    []byte
	done   chan struct{}
	remove []*diskFile // files to delete (an erasure), instead of a page
}

// errDiskInUse is a disk tier directory another engine holds.
var errDiskInUse = errors.New("engine: disk tier directory in use by another engine")

// openDiskTier opens (creating it if needed) and indexes the directory.
// persistent: the master key came from a key file, so files of an earlier
// run may open; otherwise they are deleted.
func openDiskTier(dir string, budget int64, keys *kvseal.Keyring, fp []byte, ps, rawLen int, scrub, persistent bool, log *slog.Logger) (*diskTier, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("engine: disk tier: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("engine: disk tier: %w", err)
	}
	if err := lockFileExclusive(lock); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("%w: %s: %w", errDiskInUse, dir, err)
	}
	d := &diskTier{dir: dir, budget: budget, keys: keys, seal: keys, log: log, ps: ps, rawLen: rawLen, scrub: scrub, fp: fp, lock: lock,
		fs: newDiskFS(), files: map[string]*diskFile{}, tenants: map[[16]byte]*tenantFiles{}, gens: map[[16]byte]uint64{}, pending: map[string]*diskJob{},
		jobs: make(chan *diskJob, diskQueuePages(rawLen)), reads: make(chan *diskRead, 64)}
	d.st.Budget = budget
	t := keys.MAC([]byte("kvwarden disk fingerprint v1"), fp)
	copy(d.fpTag[:], t[:])
	fail := func(err error) (*diskTier, error) {
		d.unlock()
		return nil, err
	}
	if d.zenc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1)); err != nil {
		return fail(fmt.Errorf("engine: disk tier: zstd: %w", err))
	}
	if d.zdec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1)); err != nil {
		return fail(fmt.Errorf("engine: disk tier: zstd: %w", err))
	}
	if !persistent {
		// Sealed under a key that died with its process: unreadable.
		if err := d.clearDir(); err != nil {
			return fail(err)
		}
	}
	if d.epochs, err = loadEpochs(filepath.Join(dir, epochsFile), keys); err != nil {
		return fail(err)
	}
	if err := d.index(); err != nil {
		return fail(err)
	}
	d.wg.Add(2)
	go d.writer()
	go d.reader()
	return d, nil
}

// diskQueueBytes bounds the page bytes waiting for the writer (and what
// one read-ahead holds): past it a spilled page is dropped (Dropped)
// rather than the scheduler waiting for the disk or the queue growing
// without bound in memory.
const diskQueueBytes = 32 << 20

// diskQueuePages is the writer's queue length for pages of rawLen bytes:
// diskQueueBytes of them, at least 2 and at most 64.
func diskQueuePages(rawLen int) int {
	return min(64, max(2, diskQueueBytes/max(1, rawLen)))
}

func (d *diskTier) unlock() {
	if d.lock != nil {
		_ = unlockFile(d.lock)
		_ = d.lock.Close()
		d.lock = nil
	}
}

// clearDir deletes every page file and the epochs.
func (d *diskTier) clearDir() error {
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return fmt.Errorf("engine: disk tier: %w", err)
	}
	n := 0
	for _, e := range ents {
		if name := e.Name(); strings.HasSuffix(name, diskExt) || name == epochsFile || strings.HasPrefix(name, diskTmp) {
			if err := os.Remove(filepath.Join(d.dir, name)); err == nil {
				n++
			}
		}
	}
	if n > 0 {
		d.log.Info("engine: disk tier: no key file, so the pages of an earlier run cannot be opened; deleted them", "dir", d.dir, "files", n)
	}
	return nil
}

// index rebuilds the index from the directory: page files by age (the
// least recently written first out), temporary files of a crash deleted,
// malformed files deleted.
func (d *diskTier) index() error {
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return fmt.Errorf("engine: disk tier: %w", err)
	}
	type found struct {
		f     *diskFile
		mtime int64
	}
	var all []found
	for _, e := range ents {
		name := e.Name()
		path := filepath.Join(d.dir, name)
		tmp := strings.HasPrefix(name, diskTmp)
		if !tmp && (!strings.HasSuffix(name, diskExt) || !e.Type().IsRegular()) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		// A file to delete is counted until it is gone (deleteLocked).
		drop := func() { d.used += info.Size(); d.deleteLocked(&diskFile{name: name, size: info.Size()}) }
		if tmp {
			drop() // a write that never completed
			continue
		}
		hdr, err := readHeader(d.fs, path)
		if err != nil {
			d.st.SealFailures++
			drop()
			continue
		}
		f := &diskFile{name: name, size: info.Size()}
		copy(f.tag[:], hdr[8:24])
		all = append(all, found{f, info.ModTime().UnixNano()})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mtime < all[j].mtime })
	for _, x := range all {
		d.insertLocked(x.f)
	}
	for d.used > d.budget && d.evictLocked() {
	}
	d.log.Info("engine: disk tier indexed", "dir", d.dir, "files", len(d.files), "bytes", d.used, "budget", d.budget)
	return nil
}

func readHeader(fsys diskFS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	hdr := make([]byte, diskHdrSize)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		return nil, err
	}
	if string(hdr[:8]) != diskMagic {
		return nil, fmt.Errorf("not a disk tier page")
	}
	return hdr, nil
}

func (d *diskTier) tenantTag(tenant string) [16]byte {
	m := d.keys.MAC([]byte("kvwarden tenant tag v1"), []byte(tenant))
	var t [16]byte
	copy(t[:], m[:])
	return t
}

func (d *diskTier) name(tenant string, strong [32]byte) string {
	m := d.keys.MAC([]byte("kvwarden disk page v1"), d.fp, []byte(tenant), strong[:])
	return hex.EncodeToString(m[:20]) + diskExt
}

func diskAD(hdr []byte, strong [32]byte, pos int) []byte {
	ad := append([]byte("kvwarden disk page v1"), hdr...)
	ad = append(ad, strong[:]...)
	return binary.LittleEndian.AppendUint64(ad, uint64(pos))
}

// put queues a page for the writer without waiting. When the queue is full
// (diskQueuePages: the disk is slower than the spills) the page is dropped
// and counted (Dropped): it is only a cache, and the scheduler, which
// spills, must never wait on the disk. wait: queue it even if that waits
// (graceful shutdown).
func (d *diskTier) put(tenant string, strong [32]byte, pos int, tokens []int, raw []byte, wait bool, drop func([]byte)) {
	tag := d.tenantTag(tenant)
	name := d.name(tenant, strong)
	j := &diskJob{tenant: tenant, tag: tag, strong: strong, pos: pos, tokens: slices.Clone(tokens), raw: raw}
	d.mu.Lock()
	j.gen = d.gens[tag]
	_, have := d.files[name]
	_, queued := d.pending[name]
	if !have && !queued {
		d.pending[name] = j // before the writer can see it: it unpends it
	}
	d.mu.Unlock()
	if have || queued {
		drop(raw) // on disk already, or on its way
		return
	}
	d.sendMu.RLock()
	defer d.sendMu.RUnlock()
	if d.closed {
		d.unpend(name, j, drop)
		return
	}
	if wait {
		d.jobs <- j
		return
	}
	select {
	case d.jobs <- j:
	default:
		d.unpend(name, j, drop)
		d.mu.Lock()
		d.st.Dropped++
		d.mu.Unlock()
	}
}

// unpend takes j out of the pages a lookup finds in memory (written, or
// given up) and lets go of its page with drop.
func (d *diskTier) unpend(name string, j *diskJob, drop func([]byte)) {
	d.mu.Lock()
	if d.pending[name] == j {
		delete(d.pending, name)
	}
	d.mu.Unlock()
	drop(j.raw)
}

// loadPending copies out the page named name if it is still on its way to
// disk (pending) and is this tenant's, position and tokens.
func (d *diskTier) loadPending(name string, tag [16]byte, pos int, tokens []int) ([]byte, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	j := d.pending[name]
	if j == nil || j.tag != tag || j.gen != d.gens[tag] || j.pos != pos || !slices.Equal(j.tokens, tokens) {
		return nil, false
	}
	return slices.Clone(j.raw), true
}

// flush waits until every page queued before it is written.
func (d *diskTier) flush() {
	j := &diskJob{done: make(chan struct{})}
	d.sendMu.RLock()
	if d.closed {
		d.sendMu.RUnlock()
		return
	}
	d.jobs <- j
	d.sendMu.RUnlock()
	<-j.done
}

func (d *diskTier) writer() {
	defer d.wg.Done()
	for j := range d.jobs {
		if j.remove != nil {
			d.remove(j.remove)
		}
		if j.raw != nil {
			d.write(j)
		}
		if j.done != nil {
			close(j.done)
		}
	}
}

func (d *diskTier) wipe(b []byte) {
	if d.scrub {
		clear(b[:cap(b)])
	}
}

func (d *diskTier) write(j *diskJob) {
	name := d.name(j.tenant, j.strong)
	// Readable from memory until it is on disk (or given up): then indexed.
	defer d.unpend(name, j, d.wipe)
	d.mu.Lock()
	_, have := d.files[name]
	stale := d.gens[j.tag] != j.gen
	d.mu.Unlock()
	if have || stale {
		return
	}
	plain := make([]byte, 0, 8+4*len(j.tokens)+len(j.raw))
	plain = binary.LittleEndian.AppendUint32(plain, uint32(j.pos))
	plain = binary.LittleEndian.AppendUint32(plain, uint32(len(j.tokens)))
	for _, t := range j.tokens {
		plain = binary.LittleEndian.AppendUint32(plain, uint32(t))
	}
	plain = append(plain, j.raw...)
	comp := d.zenc.EncodeAll(plain, nil)
	d.wipe(plain)
	hdr := make([]byte, diskHdrSize, diskHdrSize+len(comp)+kvseal.Overhead)
	copy(hdr, diskMagic)
	copy(hdr[8:24], j.tag[:])
	copy(hdr[24:32], d.fpTag[:])
	file, err := d.seal.Seal(hdr, j.tenant, diskAD(hdr[:diskHdrSize], j.strong, j.pos), comp)
	d.wipe(comp)
	if err != nil {
		d.mu.Lock()
		d.st.WriteErrors++
		d.mu.Unlock()
		d.log.Warn("engine: disk tier: sealing a page failed", "err", err)
		return
	}
	size := int64(len(file))
	d.mu.Lock()
	if size > d.budget {
		d.st.Skipped++
		d.mu.Unlock()
		return
	}
	for d.used+size > d.budget && d.evictLocked() {
	}
	if d.used+size > d.budget {
		// Nothing left to evict, and bytes still pending deletion (an
		// erasure in flight, files whose deletion failed) hold the room.
		d.st.Skipped++
		d.mu.Unlock()
		return
	}
	d.used += size // reserved before the write: the budget is never exceeded
	d.mu.Unlock()
	leftover, err := writeAtomic(d.fs, d.dir, name, file)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		if leftover != "" {
			// The temporary file outlived the failure: its bytes stay
			// counted until an eviction deletes it.
			d.orphans = append(d.orphans, &diskFile{name: leftover, size: size})
		} else {
			d.used -= size
		}
		d.st.WriteErrors++
		d.log.Warn("engine: disk tier: writing a page failed", "err", err)
		return
	}
	if d.gens[j.tag] != j.gen {
		// Its tenant was erased while it was written.
		d.deleteLocked(&diskFile{name: name, size: size, tag: j.tag})
		return
	}
	d.used -= size // reserved; insertLocked counts it
	d.forgetOrphanLocked(name)
	d.insertLocked(&diskFile{name: name, size: size, tag: j.tag})
	d.st.Writes++
}

// writeAtomic writes b to dir/name crash-safely: a temporary file,
// fsynced, renamed over name, and the directory fsynced. On an error,
// leftover names the temporary file if it could not be deleted.
func writeAtomic(fsys diskFS, dir, name string, b []byte) (leftover string, err error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(dir, diskTmp+hex.EncodeToString(rnd[:]))
	f, err := fsys.Create(tmp)
	if err != nil {
		return "", err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		if rerr := fsys.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			leftover = filepath.Base(tmp)
		}
		return leftover, err
	}
	if df, err := os.Open(dir); err == nil {
		_ = df.Sync()
		_ = df.Close()
	}
	return "", nil
}

// insertLocked indexes f as its tenant's most recently used file.
func (d *diskTier) insertLocked(f *diskFile) {
	tf := d.tenants[f.tag]
	if tf == nil {
		tf = &tenantFiles{lru: list.New()}
		d.tenants[f.tag] = tf
	}
	f.el = tf.lru.PushFront(f)
	tf.bytes += f.size
	d.files[f.name] = f
	d.used += f.size
}

// unindexLocked takes f out of the index (its bytes stay counted in used
// until the file is deleted).
func (d *diskTier) unindexLocked(f *diskFile) {
	tf := d.tenants[f.tag]
	tf.lru.Remove(f.el)
	if tf.bytes -= f.size; tf.lru.Len() == 0 {
		delete(d.tenants, f.tag)
	}
	delete(d.files, f.name)
}

// evictLocked deletes the least recently used file of the tenant holding
// the most bytes; false when there is none.
func (d *diskTier) evictLocked() bool {
	if d.retryOrphansLocked() {
		return true
	}
	var big *tenantFiles
	for _, tf := range d.tenants {
		if big == nil || tf.bytes > big.bytes {
			big = tf
		}
	}
	if big == nil {
		return false
	}
	d.dropLocked(big.lru.Back().Value.(*diskFile))
	d.st.Evictions++
	return true
}

func (d *diskTier) dropLocked(f *diskFile) {
	d.unindexLocked(f)
	d.deleteLocked(f)
}

// deleteLocked deletes a file already out of the index. A file that could
// not be deleted still takes disk space, so its bytes stay counted
// against the budget until a later eviction deletes it.
func (d *diskTier) deleteLocked(f *diskFile) {
	if err := d.fs.Remove(filepath.Join(d.dir, f.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.log.Warn("engine: disk tier: deleting a page file failed; retried later", "err", err)
		d.orphans = append(d.orphans, f)
		return
	}
	d.used -= f.size
}

// forgetOrphanLocked stops counting a file that could not be deleted and
// has just been replaced by a rename over its name (its bytes are gone).
func (d *diskTier) forgetOrphanLocked(name string) {
	for i, f := range d.orphans {
		if f.name == name {
			d.used -= f.size
			d.orphans = slices.Delete(d.orphans, i, i+1)
			return
		}
	}
}

// retryOrphansLocked tries again to delete the files whose deletion
// failed; true if that freed bytes.
func (d *diskTier) retryOrphansLocked() bool {
	freed := false
	keep := d.orphans[:0]
	for _, f := range d.orphans {
		if err := d.fs.Remove(filepath.Join(d.dir, f.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			keep = append(keep, f)
			continue
		}
		d.used -= f.size
		freed = true
	}
	clear(d.orphans[len(keep):])
	d.orphans = keep
	return freed
}

// load reads the page at pos of tenant whose strong chain hash is strong,
// and whose tokens must be tokens. It returns the page's KV bytes, or
// false for a miss: not on disk, or a file that fails its tag or does not
// hold these tokens (deleted and counted).
func (d *diskTier) load(tenant string, strong [32]byte, pos int, tokens []int) ([]byte, bool) {
	name := d.name(tenant, strong)
	if raw, ok := d.loadPending(name, d.tenantTag(tenant), pos, tokens); ok {
		return raw, true
	}
	d.mu.Lock()
	f, ok := d.files[name]
	if ok {
		d.tenants[f.tag].lru.MoveToFront(f.el)
	}
	d.mu.Unlock()
	if !ok {
		return nil, false
	}
	bad := func(why string, err error) ([]byte, bool) {
		d.mu.Lock()
		if f, ok := d.files[name]; ok {
			d.dropLocked(f)
		}
		d.st.SealFailures++
		d.mu.Unlock()
		d.log.Warn("engine: disk tier: page file unusable; deleted (a miss)", "reason", why, "err", err)
		return nil, false
	}
	b, err := d.fs.ReadFile(filepath.Join(d.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		d.mu.Lock()
		_, still := d.files[name]
		d.mu.Unlock()
		if !still {
			return nil, false // evicted or erased since the lookup: a plain miss
		}
	}
	if err != nil {
		return bad("unreadable", err)
	}
	tag := d.tenantTag(tenant)
	if len(b) < diskHdrSize+kvseal.Overhead || string(b[:8]) != diskMagic || !bytes.Equal(b[8:24], tag[:]) || !bytes.Equal(b[24:32], d.fpTag[:]) {
		return bad("malformed header", nil)
	}
	comp, err := d.seal.Open(nil, tenant, diskAD(b[:diskHdrSize], strong, pos), b[diskHdrSize:])
	if err != nil {
		return bad("authentication", err)
	}
	plain, err := d.zdec.DecodeAll(comp, make([]byte, 0, 8+4*len(tokens)+d.rawLen))
	d.wipe(comp)
	off := 8 + 4*len(tokens)
	if err != nil || len(plain) != off+d.rawLen || binary.LittleEndian.Uint32(plain) != uint32(pos) ||
		binary.LittleEndian.Uint32(plain[4:]) != uint32(len(tokens)) {
		if plain != nil {
			d.wipe(plain)
		}
		return bad("payload", err)
	}
	for i, t := range tokens {
		if binary.LittleEndian.Uint32(plain[8+4*i:]) != uint32(t) {
			d.wipe(plain)
			return bad("tokens", nil)
		}
	}
	clear(plain[:off])
	return plain[off:], true
}

// erase takes every file of tenant out of the index at once, and drops
// its writes in flight; the writer deletes the files (in order: before any
// later write lands), so the scheduler does not wait on the filesystem.
func (d *diskTier) erase(tenant string) (files int, size int64) {
	tag := d.tenantTag(tenant)
	d.mu.Lock()
	d.gens[tag]++
	var gone []*diskFile
	if tf := d.tenants[tag]; tf != nil {
		for el := tf.lru.Front(); el != nil; el = el.Next() {
			gone = append(gone, el.Value.(*diskFile))
		}
	}
	for _, f := range gone {
		d.unindexLocked(f)
		size += f.size
	}
	for name, j := range d.pending {
		if j.tag == tag {
			delete(d.pending, name) // the writer drops it (gens), and wipes it
		}
	}
	d.st.Erased += uint64(len(gone))
	d.mu.Unlock()
	if len(gone) == 0 {
		return 0, 0
	}
	d.sendMu.RLock()
	defer d.sendMu.RUnlock()
	if d.closed {
		d.remove(gone)
		return len(gone), size
	}
	d.jobs <- &diskJob{remove: gone}
	return len(gone), size
}

// remove deletes files already out of the index.
func (d *diskTier) remove(fs []*diskFile) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range fs {
		d.deleteLocked(f)
	}
}

// hit counts a page read back and served.
func (d *diskTier) hit() {
	d.mu.Lock()
	d.st.Hits++
	d.mu.Unlock()
}

func (d *diskTier) stats() DiskStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.st
	s.Used, s.Files = d.used, len(d.files)
	return s
}

// close waits for the writer and releases the directory.
func (d *diskTier) close() {
	d.sendMu.Lock()
	if d.closed {
		d.sendMu.Unlock()
		return
	}
	d.closed = true
	close(d.jobs)
	close(d.reads)
	d.sendMu.Unlock()
	d.wg.Wait()
	_ = d.zenc.Close()
	d.zdec.Close()
	d.unlock()
}

// strongHash chains a page's tokens onto its parent's strong hash: the
// disk tier's page identity (SHA-256, so no two prefixes share one).
func strongHash(parent [32]byte, page []int) [32]byte {
	h := sha256.New()
	h.Write(parent[:])
	var b [8]byte
	for _, t := range page {
		binary.LittleEndian.PutUint64(b[:], uint64(t))
		h.Write(b[:])
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// epochStore persists tenants' key epochs in the disk tier directory
// (kvseal.EpochStore): one line per tenant tag, rewritten atomically.
type epochStore struct {
	path string
	keys *kvseal.Keyring
	mu   sync.Mutex
	m    map[string]kvseal.Epoch // hex tenant tag -> epoch
}

func loadEpochs(path string, keys *kvseal.Keyring) (*epochStore, error) {
	s := &epochStore{path: path, keys: keys, m: map[string]kvseal.Epoch{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("engine: disk tier: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		ep, err1 := strconv.ParseUint(f[1], 10, 64)
		salt, err2 := hex.DecodeString(f[2])
		if err1 != nil || err2 != nil || len(salt) != kvseal.SaltSize || len(f[0]) != 32 {
			continue // a damaged line: that tenant's pages become misses
		}
		var e kvseal.Epoch
		e.Epoch = ep
		copy(e.Salt[:], salt)
		s.m[f[0]] = e
	}
	return s, nil
}

func (s *epochStore) key(tenant string) string {
	m := s.keys.MAC([]byte("kvwarden tenant tag v1"), []byte(tenant))
	return hex.EncodeToString(m[:16])
}

func (s *epochStore) Load(tenant string) (kvseal.Epoch, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[s.key(tenant)]
	return e, ok
}

func (s *epochStore) Save(tenant string, e kvseal.Epoch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[s.key(tenant)] = e
	keys := make([]string, 0, len(s.m))
	for k := range s.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		e := s.m[k]
		fmt.Fprintf(&b, "%s %d %s\n", k, e.Epoch, hex.EncodeToString(e.Salt[:]))
	}
	_, err := writeAtomic(osFS{}, filepath.Dir(s.path), filepath.Base(s.path), []byte(b.String()))
	return err
}
