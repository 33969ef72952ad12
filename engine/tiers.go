package engine

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/kvwarden/kvwarden/internal/kvcache"
	"github.com/kvwarden/kvwarden/internal/kvseal"
)

// ErrBadTenant is an erasure for a tenant name that cannot be one.
var ErrBadTenant = errors.New("engine: bad tenant name")

// tiers is the engine's state for the tiers below the device pool: the
// keyring that seals every page leaving it, and the erasures waiting for
// the scheduler.
type tiers struct {
	keys *kvseal.Keyring
	disk *diskTier // Config.KVDisk, or nil

	mu      sync.Mutex
	pending []*eraseMsg // for the scheduler (erasures)
}

type eraseMsg struct {
	tenant string
	res    EraseResult
	done   chan struct{}
}

// EraseResult is what EraseTenantKV erased.
type EraseResult struct {
	Tenant string `json:"tenant"`
	// Epoch is the tenant's key epoch from now on.
	Epoch uint64 `json:"key_epoch"`
	// PrefixDevicePages are the tenant's prefix-cache pages dropped from
	// the device pool (pages a running request shares stay with it until
	// it ends, and are no longer cached).
	PrefixDevicePages int `json:"prefix_device_pages"`
	// PrefixHostPages are its prefix-cache entries dropped from the host
	// tier.
	PrefixHostPages int `json:"prefix_host_pages"`
	// HostPages and HostBytes are every host-tier copy of the tenant's
	// (prefix spills and swapped sequences) at the erasure: all unreadable
	// from then on (a swapped request of the tenant recomputes).
	HostPages int   `json:"host_pages"`
	HostBytes int64 `json:"host_bytes"`
	// DiskFiles and DiskBytes are the tenant's disk tier files deleted.
	DiskFiles int   `json:"disk_files"`
	DiskBytes int64 `json:"disk_bytes"`
}

// newKeyring is the keyring every page that leaves the pool is sealed
// with: from Config.KVKeyFile, else a random per-process key. The model
// fingerprint is bound in on first use (tiers.init sets it).
func newKeyring(c Config) (*kvseal.Keyring, error) {
	if c.KVKeyFile == "" {
		k, err := kvseal.NewRandom(nil)
		if err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
		return k, nil
	}
	master, err := kvseal.ReadKeyFile(c.KVKeyFile)
	if err != nil {
		return nil, &ConfigError{Field: "KVKeyFile", Msg: err.Error()}
	}
	defer clear(master)
	return kvseal.New(master, nil)
}

// init binds the keyring to the model and opens the disk tier, before the
// scheduler starts: nothing is sealed before then.
func (t *tiers) init(e *Engine, r resolved) error {
	t.keys = r.keys
	t.keys.SetFingerprint(e.kvFingerprint)
	c := e.cfg
	if c.KVDisk == "" {
		return nil
	}
	pc, ok := e.sched.prefix.(*prefixCache)
	if !ok {
		return badField("KVDisk", "the disk tier holds prefix-cache pages, and the prefix cache is disabled")
	}
	g := e.pool.Geometry()
	d, err := openDiskTier(c.KVDisk, c.KVDiskBudget, t.keys, e.kvFingerprint(), g.PageSize, int(g.PageBytes()),
		c.ZeroOnRelease || c.Poison, c.KVKeyFile != "", e.log)
	if err != nil {
		return err
	}
	t.keys.SetEpochStore(d.epochs)
	d.notify = e.signal // a completed read wakes the scheduler
	if e.hooks.UnsafePlainTiers {
		d.seal = plainSealer{}
	}
	t.disk, pc.disk = d, d
	return nil
}

func (t *tiers) close() {
	if t.disk != nil {
		t.disk.close()
	}
	if t.keys != nil {
		t.keys.Close()
	}
}

func (t *tiers) diskStats() DiskStats {
	if t.disk == nil {
		return DiskStats{}
	}
	return t.disk.stats()
}

// abandon frees what New built when it fails after the engine was made
// (the scheduler never started).
func (e *Engine) abandon() {
	close(e.loopDone)
	_ = e.pool.Close()
	e.draft.close()
	if e.ownW {
		_ = e.weights.Close()
	}
	if c, ok := e.runner.(io.Closer); ok {
		_ = c.Close()
	}
	e.tiers.close()
}

// kvFingerprint is what a sealed page is bound to besides its tenant and
// identity: the model (Fingerprint: architecture, dimensions, RoPE,
// tokenizer, weights) and the KV layout (type, page size, planes), so a
// page is never read into another model, KV type or page layout.
func (e *Engine) kvFingerprint() []byte { return kvFingerprintOf(e.Fingerprint(), e.pool.Geometry()) }

// kvFingerprintOf is kvFingerprint for a model fingerprint and a pool
// geometry.
func kvFingerprintOf(fp [32]byte, g kvcache.Geometry) []byte {
	h := sha256.New()
	h.Write([]byte("kvwarden kv fingerprint v1"))
	h.Write(fp[:])
	var b []byte
	for _, v := range []int{int(g.DType), g.PageSize, g.Layers, g.KVHeads, g.HeadDim} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	if g.KOnly {
		// Only K-only layouts add the plane count, so every two-plane
		// fingerprint (and the disk pages sealed under it) is unchanged,
		// while a K-only page can never open as a two-plane one.
		b = binary.LittleEndian.AppendUint64(b, uint64(g.Planes()))
	}
	h.Write(b)
	return h.Sum(nil)
}

// EraseTenantKV crypto-erases tenant's cached KV outside running requests:
// it rotates the tenant's key epoch, so every page of the tenant's that
// left the pool (host tier) is unreadable at once, and drops the tenant's
// prefix-cache entries, on the device and in the host tier. A request of
// the tenant that is running keeps its own pages; one that is swapped out
// recomputes. It returns what was erased; it waits for the scheduler's
// next step boundary, or for ctx.
func (e *Engine) EraseTenantKV(ctx context.Context, tenant string) (EraseResult, error) {
	if len(tenant) > 1024 {
		return EraseResult{}, fmt.Errorf("%w: %d bytes", ErrBadTenant, len(tenant))
	}
	if ctx == nil {
		ctx = context.Background()
	}
	m := &eraseMsg{tenant: tenant, done: make(chan struct{})}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return EraseResult{}, ErrClosed
	}
	e.tiers.mu.Lock()
	e.tiers.pending = append(e.tiers.pending, m)
	e.tiers.mu.Unlock()
	e.signal()
	select {
	case <-m.done:
		return m.res, nil
	case <-e.loopDone:
		// The scheduler ended without taking it: erase what is outside
		// the pool anyway (the pool's caches are gone with it).
		select {
		case <-m.done:
			return m.res, nil
		default:
		}
		return EraseResult{}, ErrClosed
	case <-ctx.Done():
		return EraseResult{}, context.Cause(ctx)
	}
}

// erasures runs the pending erasures, on the scheduler goroutine at a step
// boundary: the key first, so a copy racing it is sealed under the erased
// epoch (unreadable) or is of a page the cache drops next.
func (sc *scheduler) erasures() {
	t := &sc.e.tiers
	t.mu.Lock()
	ms := t.pending
	t.pending = nil
	t.mu.Unlock()
	for _, m := range ms {
		r := &m.res
		r.Tenant = m.tenant
		r.HostPages, r.HostBytes = sc.pool.HostUsage(kvcache.Tenant(m.tenant))
		ep, err := t.keys.Erase(m.tenant)
		if err != nil {
			sc.e.log.Error("engine: erasing a tenant's key", "err", err)
		}
		r.Epoch = ep
		r.PrefixDevicePages, r.PrefixHostPages = sc.prefix.dropTenant(m.tenant)
		if t.disk != nil {
			r.DiskFiles, r.DiskBytes = t.disk.erase(m.tenant)
		}
		sc.e.met.erasure()
		sc.e.log.Info("engine: tenant KV erased", "tenant", m.tenant, "key_epoch", ep,
			"prefix_device_pages", r.PrefixDevicePages, "prefix_host_pages", r.PrefixHostPages, "host_pages", r.HostPages)
		close(m.done)
	}
}

// dropTenant drops every entry of tenant, device-resident and spilled
// (their host copies are discarded), and returns how many of each.
func (c *prefixCache) dropTenant(tenant string) (device, host int) {
	for k, el := range c.entries {
		if k.tenant != tenant {
			continue
		}
		if el.Value.(*prefixEntry).host != nil {
			host++
		} else {
			device++
		}
		c.remove(el)
	}
	return device, host
}
