package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/kvseal"
)

// A fault the fault file system injects inside one operation.
type diskFault int

const (
	faultNone       diskFault = iota
	faultENOSPC               // write: part of the bytes, then ENOSPC (a full disk)
	faultWriteEIO             // write: EIO before any byte
	faultSyncEIO              // fsync: EIO (the bytes may never have reached the disk)
	faultTorn                 // write: half the bytes, reported as all: renamed torn
	faultCrash                // write: half the bytes, then the process "dies": the temporary file stays
	faultRenameEIO            // rename: EIO
	faultReadEIO              // read of a page file: EIO
	faultUnreadable           // read of a page file: EACCES
	faultShortRead            // read of a page file: the first bytes only, no error
	faultOpenEIO              // header read while indexing: EIO
	faultRemoveEIO            // deleting a page file (eviction, erasure, a bad file): EIO
)

var faultNames = map[diskFault]string{
	faultENOSPC: "enospc", faultWriteEIO: "write-eio", faultSyncEIO: "sync-eio", faultTorn: "torn",
	faultCrash: "crash", faultRenameEIO: "rename-eio", faultReadEIO: "read-eio",
	faultUnreadable: "unreadable", faultShortRead: "short-read", faultOpenEIO: "open-eio",
	faultRemoveEIO: "remove-eio",
}

var (
	writeFaults = []diskFault{faultENOSPC, faultWriteEIO, faultSyncEIO, faultTorn, faultCrash, faultRenameEIO}
	readFaults  = []diskFault{faultReadEIO, faultUnreadable, faultShortRead}
)

// faultFS is osFS that fails operations inside the disk tier's writes and
// reads. pick chooses the fault (or faultNone) for each operation from the
// candidates that operation can suffer; injected counts what it did.
type faultFS struct {
	osFS
	mu       sync.Mutex
	pick     func(candidates []diskFault) diskFault
	crashed  map[string]bool // temporary files a simulated crash abandoned
	injected map[diskFault]int
}

func newFaultFS(pick func([]diskFault) diskFault) *faultFS {
	return &faultFS{pick: pick, crashed: map[string]bool{}, injected: map[diskFault]int{}}
}

func (f *faultFS) choose(c []diskFault) diskFault {
	f.mu.Lock()
	defer f.mu.Unlock()
	x := f.pick(c)
	if x != faultNone {
		f.injected[x]++
	}
	return x
}

// heal stops the faults.
func (f *faultFS) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pick = func([]diskFault) diskFault { return faultNone }
}

func (f *faultFS) count(x diskFault) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected[x]
}

// install makes every disk tier opened until the test ends use f.
func (f *faultFS) install(t *testing.T) {
	old := newDiskFS
	newDiskFS = func() diskFS { return f }
	t.Cleanup(func() { newDiskFS = old })
}

func pathErr(op, path string, err error) error { return &fs.PathError{Op: op, Path: path, Err: err} }

type faultWriter struct {
	fs    *faultFS
	f     *os.File
	fault diskFault
}

func (f *faultFS) Create(path string) (diskWriter, error) {
	w, err := f.osFS.Create(path)
	if err != nil {
		return nil, err
	}
	return &faultWriter{fs: f, f: w.(*os.File), fault: f.choose(writeFaults)}, nil
}

func (w *faultWriter) Write(b []byte) (int, error) {
	switch w.fault {
	case faultENOSPC:
		n, _ := w.f.Write(b[:len(b)/3])
		return n, pathErr("write", w.f.Name(), syscall.ENOSPC)
	case faultWriteEIO:
		return 0, pathErr("write", w.f.Name(), syscall.EIO)
	case faultTorn:
		_, err := w.f.Write(b[:len(b)/2])
		return len(b), err
	case faultCrash:
		n, _ := w.f.Write(b[:len(b)/2])
		w.fs.mu.Lock()
		w.fs.crashed[w.f.Name()] = true
		w.fs.mu.Unlock()
		return n, pathErr("write", w.f.Name(), syscall.EIO)
	}
	return w.f.Write(b)
}

func (w *faultWriter) Sync() error {
	if w.fault == faultSyncEIO {
		return pathErr("fsync", w.f.Name(), syscall.EIO)
	}
	return w.f.Sync()
}

func (w *faultWriter) Close() error { return w.f.Close() }

func (f *faultFS) Rename(from, to string) error {
	if strings.Contains(filepath.Base(from), diskTmp) && f.choose([]diskFault{faultRenameEIO}) == faultRenameEIO {
		return pathErr("rename", from, syscall.EIO)
	}
	return f.osFS.Rename(from, to)
}

// Remove does nothing for a temporary file a simulated crash abandoned:
// the process that would have deleted it is dead. The next start must.
func (f *faultFS) Remove(path string) error {
	f.mu.Lock()
	crashed := f.crashed[path]
	delete(f.crashed, path)
	f.mu.Unlock()
	if crashed {
		return nil
	}
	// Only page files: a start must still delete what a crash left (a
	// temporary file it cannot delete is counted against the budget, and
	// would fail the checks for leftovers here).
	if strings.HasSuffix(path, diskExt) && f.choose([]diskFault{faultRemoveEIO}) == faultRemoveEIO {
		return pathErr("unlink", path, syscall.EIO)
	}
	return f.osFS.Remove(path)
}

func (f *faultFS) ReadFile(path string) ([]byte, error) {
	switch f.choose(readFaults) {
	case faultReadEIO:
		return nil, pathErr("read", path, syscall.EIO)
	case faultUnreadable:
		return nil, pathErr("open", path, syscall.EACCES)
	case faultShortRead:
		b, err := f.osFS.ReadFile(path)
		return b[:len(b)/2], err
	}
	return f.osFS.ReadFile(path)
}

func (f *faultFS) Open(path string) (diskReader, error) {
	if f.choose([]diskFault{faultOpenEIO}) == faultOpenEIO {
		return nil, pathErr("open", path, syscall.EIO)
	}
	return f.osFS.Open(path)
}

// only injects x wherever it can happen.
func only(x diskFault) func([]diskFault) diskFault {
	return func(c []diskFault) diskFault {
		for _, y := range c {
			if y == x {
				return x
			}
		}
		return faultNone
	}
}

// tmpFiles lists the disk tier's temporary files in dir.
func tmpFiles(t *testing.T, dir string) []string {
	m, err := filepath.Glob(filepath.Join(dir, diskTmp+"*"))
	require.NoError(t, err)
	return m
}

// pageBytes is the size of the page files in dir.
func pageBytes(t *testing.T, dir string) int64 {
	var n int64
	for _, f := range pageFiles(t, dir) {
		info, err := os.Stat(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		require.NoError(t, err)
		n += info.Size()
	}
	return n
}

// TestDiskTierWriteFaults: a fault inside the write of every page (a full
// disk, EIO on write, fsync or rename, a torn write, a crash mid-write) is
// never an error to the client: the output is exact, the page is counted
// as a write error (or, torn, is a miss with a seal failure after the
// restart), and a restart leaves no temporary file and serves the exact
// output again.
func TestDiskTierWriteFaults(t *testing.T) {
	for _, fault := range writeFaults {
		t.Run(faultNames[fault], func(t *testing.T) {
			dir, key := t.TempDir(), writeKeyFile(t, 5)
			ffs := newFaultFS(only(fault))
			ffs.install(t)
			e := newEcho(t, diskConfig(t, dir, key))
			want := echoOracle(longPrompt, 5, e.MaxContext(), false)
			r, err := e.Generate(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
			require.NoError(t, err)
			require.Equal(t, want, r.Tokens)
			require.NoError(t, e.Close()) // writes the prefix cache: every write fails
			s := e.Stats()
			require.Positive(t, ffs.count(fault), "the fault was injected")
			if fault == faultTorn {
				require.Positive(t, s.Disk.Writes, "a torn write looks like a success to the writer")
			} else {
				require.Zero(t, s.Disk.Writes)
				require.Positive(t, s.Disk.WriteErrors)
			}
			require.Zero(t, s.IsolationFailures)
			require.LessOrEqual(t, pageBytes(t, dir), diskConfig(t, dir, key).KVDiskBudget)

			newDiskFS = func() diskFS { return osFS{} } // the restart meets a sound disk
			e2 := newEcho(t, diskConfig(t, dir, key))
			require.Empty(t, tmpFiles(t, dir), "the start deleted what the crash left")
			r, err = e2.Generate(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
			require.NoError(t, err)
			require.Equal(t, want, r.Tokens)
			require.Zero(t, r.CachedTokens, "nothing sound was written: a miss")
			s = e2.Stats()
			require.Zero(t, s.Disk.Hits)
			if fault == faultTorn {
				require.Positive(t, s.Disk.SealFailures, "the torn files failed their tag")
			}
			require.Zero(t, s.IsolationFailures)
		})
	}
}

// TestDiskTierReadFaults: a fault inside the read of a page file (EIO, a
// file that cannot be opened, a short read) is a miss and a counter: the
// prompt is computed again with the exact output, no error.
func TestDiskTierReadFaults(t *testing.T) {
	for _, fault := range append(readFaults, faultOpenEIO) {
		t.Run(faultNames[fault], func(t *testing.T) {
			dir, key := t.TempDir(), writeKeyFile(t, 6)
			r1 := seedDisk(t, dir, key)
			ffs := newFaultFS(only(fault))
			ffs.install(t)
			e := newEcho(t, diskConfig(t, dir, key))
			r, err := e.Generate(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
			require.NoError(t, err)
			require.Equal(t, r1.Tokens, r.Tokens)
			require.Zero(t, r.CachedTokens, "an unreadable page is a miss")
			s := e.Stats()
			require.Positive(t, ffs.count(fault), "the fault was injected")
			require.Zero(t, s.Disk.Hits)
			require.Positive(t, s.Disk.SealFailures, "each unreadable file is counted")
			require.Zero(t, s.IsolationFailures)
		})
	}
}

// TestDiskTierFaultChaos: the chaos test with faults inside the disk
// tier's operations rather than between requests: over several restarts
// with the same key file, a deterministic share of the writes and reads
// fail in every way faultFS knows while three tenants reuse prefixes under
// pressure (device to host to disk). Every output equals the echo oracle
// (a run without any tier), no request errs, no isolation check fails,
// the page files never exceed the budget, and each start leaves no
// temporary file.
func TestDiskTierFaultChaos(t *testing.T) {
	dir, key := t.TempDir(), writeKeyFile(t, 11)
	rng := rand.New(rand.NewPCG(27, 2))
	ops := map[diskFault]int{} // by kind of operation
	all := append(append(append([]diskFault(nil), writeFaults...), readFaults...), faultOpenEIO, faultRemoveEIO)
	ffs := newFaultFS(func(c []diskFault) diskFault {
		// One operation in three fails, cycling through the faults it can
		// suffer, so every kind is met whatever the interleaving.
		ops[c[0]]++
		n := ops[c[0]]
		if n%3 != 0 {
			return faultNone
		}
		return c[(n/3-1)%len(c)]
	})
	ffs.install(t)
	tenants := []string{"a", "b", "c"}
	prompts := map[string][][]int{}
	for ti, tn := range tenants {
		base := tenantPrompt(ti+1, 1, 20)
		for v := range 3 {
			prompts[tn] = append(prompts[tn], append(append([]int(nil), base...), tenantPrompt(ti+1, 10+v, 9)[1:]...))
		}
	}
	var hits, sealFailures, writeErrors uint64
	for round := range 5 {
		cfg := diskConfig(t, dir, key)
		cfg.KVDiskBudget = 24 * 1024
		e := newEcho(t, cfg)
		require.Empty(t, tmpFiles(t, dir), "round %d: the start deleted what a crash left", round)
		for range 12 {
			tn := tenants[rng.IntN(len(tenants))]
			p := prompts[tn][rng.IntN(len(prompts[tn]))]
			r, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 4, Tenant: tn})
			require.NoError(t, err, "round %d", round)
			require.Equal(t, echoOracle(p, 4, e.MaxContext(), false), r.Tokens, "round %d tenant %s", round, tn)
			if rng.IntN(3) == 0 {
				spillAll(t, e, "filler", 100+rng.IntN(1000))
			}
			e.tiers.disk.flush() // sizes of files that coexisted
			require.LessOrEqual(t, pageBytes(t, dir), cfg.KVDiskBudget, "round %d", round)
		}
		require.LessOrEqual(t, e.Stats().Disk.Used, cfg.KVDiskBudget)
		require.NoError(t, e.Close()) // writes the prefix cache, meeting faults too
		s := e.Stats()
		require.Zero(t, s.IsolationFailures, "round %d", round)
		require.Zero(t, s.Pool.IsolationViolations, "round %d", round)
		require.LessOrEqual(t, s.Disk.Used, cfg.KVDiskBudget)
		hits += s.Disk.Hits
		sealFailures += s.Disk.SealFailures
		writeErrors += s.Disk.WriteErrors
		require.LessOrEqual(t, pageBytes(t, dir), cfg.KVDiskBudget)
	}
	var met []string
	for _, x := range all {
		if ffs.count(x) > 0 {
			met = append(met, faultNames[x])
		}
	}
	t.Logf("faults injected: %v; disk hits %d, seal failures %d, write errors %d", met, hits, sealFailures, writeErrors)
	require.Positive(t, hits, "the disk tier served hits between the faults")
	require.Positive(t, sealFailures, "read faults and torn files were misses")
	require.Positive(t, writeErrors, "write faults were counted")
	// How many pages are written or read depends on the writer keeping up
	// (a busy writer skips pages), so only the kinds are required here;
	// TestDiskTierWriteFaults and TestDiskTierReadFaults meet each fault.
	for _, kind := range [][]diskFault{writeFaults, readFaults, {faultRemoveEIO}} {
		n := 0
		for _, x := range kind {
			n += ffs.count(x)
		}
		require.Positive(t, n, "faults of every kind were met (%s)", fmt.Sprint(met))
	}
}

// TestDiskTierRemoveFaults: when deleting page files fails (EIO on every
// unlink), evictions cannot free room: the files that would not go stay
// counted, writes that do not fit are skipped, and neither the budget nor
// any output suffers. Once deletions work again, the room comes back.
func TestDiskTierRemoveFaults(t *testing.T) {
	dir := t.TempDir()
	cfg := noEOS(echoConfig(t, 16, 4))
	probe := newEcho(t, cfg)
	pb := probe.pool.Geometry().PageBytes()
	require.NoError(t, probe.Close())
	budget := 5*pb + 100
	cfg.KVDisk, cfg.KVDiskBudget, cfg.KVKeyFile = dir, budget, writeKeyFile(t, 3)
	ffs := newFaultFS(only(faultRemoveEIO))
	ffs.install(t)
	e := newEcho(t, cfg)
	run := func(from, to int) {
		for i := from; i < to; i++ {
			p := tenantPrompt(i%5, 100+i, 30)
			r, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 3, Tenant: []string{"a", "b", "c"}[i%3]})
			require.NoError(t, err)
			require.Equal(t, echoOracle(p, 3, e.MaxContext(), false), r.Tokens)
			e.tiers.disk.flush()
			require.LessOrEqual(t, dirBytes(t, dir), budget)
			require.LessOrEqual(t, e.Stats().Disk.Used, budget)
			require.Equal(t, e.Stats().Disk.Used, dirBytes(t, dir), "files that would not go are still counted")
		}
	}
	run(0, 30)
	s := e.Stats().Disk
	require.Positive(t, ffs.count(faultRemoveEIO), "evictions tried to delete")
	require.Positive(t, s.Skipped, "writes that did not fit were skipped: %+v", s)

	// Every other deletion fails, and the same prompts come again: a page
	// is written anew over the name of a file that would not go, which
	// then counts once.
	var n int
	ffs.mu.Lock()
	ffs.pick = func(c []diskFault) diskFault {
		if n++; n%2 == 0 {
			return only(faultRemoveEIO)(c)
		}
		return faultNone
	}
	ffs.mu.Unlock()
	run(0, 30)
	run(0, 30)

	ffs.heal()
	run(30, 60)
	s2 := e.Stats().Disk
	require.Greater(t, s2.Writes, s.Writes, "the room came back")
	require.Equal(t, s2.Files, len(pageFiles(t, dir)), "every file that would not go is gone")
	require.NoError(t, e.Close())
}

// TestDiskTierUnsafePlainTiers: the benchmark switch that turns sealing
// off keeps the tiers working (a restart serves the prefix from disk with
// the exact output), and it does turn sealing off: the page files then
// hold the tokens in the clear (zstd leaves short literals readable).
func TestDiskTierUnsafePlainTiers(t *testing.T) {
	dir, key := t.TempDir(), writeKeyFile(t, 4)
	cfg := diskConfig(t, dir, key)
	cfg.th().UnsafePlainTiers = true
	cfg.Compression = "zstd"
	e := newEcho(t, cfg)
	r1, err := e.Generate(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	require.NoError(t, e.Close()) // writes every page (spills may skip some)

	files := pageFiles(t, dir)
	require.NotEmpty(t, files)
	zdec, err := zstd.NewReader(nil)
	require.NoError(t, err)
	defer zdec.Close()
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	_, err = zdec.DecodeAll(b[diskHdrSize:len(b)-kvseal.Overhead], nil)
	require.NoError(t, err, "a plain page is a zstd frame, not ciphertext")

	e2 := newEcho(t, cfg)
	r, err := e2.Generate(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	require.Equal(t, r1.Tokens, r.Tokens)
	require.Equal(t, 24, r.CachedTokens, "the prefix from the plain disk tier")
	spillAll(t, e2, "filler", 7) // through the plain host tier
	r, err = e2.Generate(t.Context(), Request{Tokens: longPrompt, MaxTokens: 5, Tenant: "alice"})
	require.NoError(t, err)
	require.Equal(t, r1.Tokens, r.Tokens)
	require.Positive(t, e2.Stats().PrefixSpills)
	require.Zero(t, e2.Stats().IsolationFailures)
}
