package engine

import (
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/zeebo/xxh3"

	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// prefixCache is the tenant-scoped prefix cache (invariant 9). It indexes
// full, sealed pages by (tenant, chain hash of every token up to the end of
// the page). Each entry holds a prefix lease on its page (kvcache Retain),
// so the page stays readable after the request that wrote it ends; a hit
// appends the page to the new request's table with a lease of its own
// (AppendShared, which re-verifies the page checksum: the prefix cache to
// new request handoff).
//
// Cross-tenant hits are impossible by construction: the tenant is part of
// the map key, so a lookup by one tenant cannot even name another tenant's
// entry; and the pool refuses to share a page across tenants anyway
// (AppendShared checks the page's tenant), so the timing channel of the
// cache cannot cross tenants either.
//
// The hash only finds candidates. An entry stores its page's tokens and
// its parent entry (the entry of the page before it, in the sequence that
// computed it), and a hit must match both exactly: the tokens of the page,
// and the parent being the very entry the lookup matched one page earlier.
// By induction from the first page (parent nil) every token of the prefix
// is compared, so a hash collision, at any page, can only cost a miss, never
// make a request reuse K/V computed over other tokens. A child whose parent
// entry was dropped and computed again no longer matches; it is replaced
// when its page is computed again.
//
// Eviction is LRU, and only of entries whose page the cache alone keeps
// alive (evicting others would free nothing). A hit refreshes the chain
// leaf-first, so parents stay younger than their children and are evicted
// after them.
//
// Host tier (Config.HostTierBytes > 0): an evicted entry is not dropped but
// spilled: its sealed page is copied to the host tier (Pool.OffloadRetained,
// which checks the device data against the sealed checksum as it copies;
// the host copy records the page's tenant) and the entry stays in the index,
// host-resident, in a second LRU. Host entries are dropped LRU when the
// host tier is full, and a swap-out of a running sequence always wins over
// them (dropHostFor). A hit on a host entry restores it into a fresh device
// page (Pool.Restore verifies the checksum on the device before the page is
// usable: the host tier to device handoff), re-indexes it as
// device-resident and then shares it with the request exactly like any
// other hit (AppendShared, verified again). The restored page is owned by
// the request it was restored for only until the cache's prefix lease takes
// over, as for a page the request computed itself.
//
// Detect, then recover: a host copy that fails its restore checksum (a bad
// transfer, a flipped bit in host memory), or a device entry that fails its
// checksum at a hit, is dropped from the cache (the pool quarantines a bad
// device page; a copy found bad in host memory frees the page it was meant
// for), nothing of it is ever served, and the request that hit it computes
// that prefix again instead (the scheduler's recomputeOrFail, bounded).
// The host tier is scoped like the
// device cache: the key still includes the tenant, and Restore refuses a
// host copy of another tenant.
//
// Owned by the scheduler goroutine.
type prefixCache struct {
	pool    *kvcache.Pool
	met     *metrics
	log     *slog.Logger
	ps      int
	seed    uint64
	spill   bool // evictions go to the host tier
	entries map[prefixKey]*list.Element
	lru     *list.List // device-resident; front = most recently used; values are *prefixEntry
	hostLRU *list.List // host-resident; front = most recently spilled or touched
	// inflight are the spills whose copy has not completed yet: their
	// pages come back when it does (poll), never waited for.
	inflight []spillCopy
	// disk is the tier below the host tier (Config.KVDisk), or nil.
	disk *diskTier
}

type spillCopy struct {
	ent *prefixEntry
	hp  *kvcache.HostPage
}

// errSpillInFlight is attach's answer when the prefix runs into an entry
// whose spill copy is still in flight: the request waits a step and tries
// again rather than the scheduler waiting on the copy.
var errSpillInFlight = errors.New("engine: prefix page still being copied to the host tier")

// maxPrefixWaits bounds the steps one request waits, in a row, for spill
// copies on the way to its prefix; past it the rest of the prefix is
// computed, so a pool too small to hold the whole prefix cannot cycle
// between spilling and restoring it.
const maxPrefixWaits = 16

// prefixStore is what the scheduler asks of the prefix cache. The cache
// itself (prefixCache) and the disabled cache (noPrefixCache) implement it,
// so the scheduler never asks whether there is one.
type prefixStore interface {
	// attach appends the longest cached prefix of s to the empty table t
	// and returns the tokens it covers (see prefixCache.attach).
	attach(s *seq, t *kvcache.PageTable, keepFree int) (int, error)
	// offer registers the full pages s has written since the last offer.
	offer(s *seq)
	// evict frees one page the cache alone holds, or starts a spill that
	// will, and says which (roomFreed, roomPending) or that it cannot.
	evict() room
	// spilling finishes the spills whose copies completed and reports
	// whether any is still in flight.
	spilling() bool
	// dropHostFor gives host-tier room back for a swap-out.
	dropHostFor(need int64) bool
	len() int
	hostLen() int
	// clear drops every entry (Close).
	clear()
	// persist writes every entry to the disk tier, if there is one
	// (graceful Close, before clear; disktier.go).
	persist()
	// dropTenant drops every entry of tenant (erasure, erase.go).
	dropTenant(tenant string) (device, host int)
}

// noPrefixCache is the disabled prefix cache (Config.DisablePrefixCache):
// it never hits, holds nothing and frees nothing.
type noPrefixCache struct{}

func (noPrefixCache) attach(*seq, *kvcache.PageTable, int) (int, error) { return 0, nil }
func (noPrefixCache) offer(*seq)                                        {}
func (noPrefixCache) evict() room                                       { return roomNone }
func (noPrefixCache) spilling() bool                                    { return false }
func (noPrefixCache) dropHostFor(int64) bool                            { return false }
func (noPrefixCache) len() int                                          { return 0 }
func (noPrefixCache) hostLen() int                                      { return 0 }
func (noPrefixCache) clear()                                            {}
func (noPrefixCache) dropTenant(string) (int, int)                      { return 0, 0 }
func (noPrefixCache) persist()                                          {}

type prefixKey struct {
	tenant string
	hash   uint64
}

type prefixEntry struct {
	key    prefixKey
	parent *prefixEntry // the entry of the page before, nil for a first page
	tokens []int
	ref    kvcache.PageRef   // the device page, while host == nil
	host   *kvcache.HostPage // the host copy of a spilled entry
	strong [32]byte          // strongHash of the prefix up to this page's end: its disk identity
}

const prefixSeed = 0x6b76707265666978 // "kvprefix"

func newPrefixCache(pool *kvcache.Pool, met *metrics, log *slog.Logger, spill bool) *prefixCache {
	// The KV type seeds the chain, so pages of different types never
	// share a key even if entries were ever pooled across engines.
	seed := xxh3.HashStringSeed(pool.Geometry().DType.String(), prefixSeed)
	return &prefixCache{pool: pool, met: met, log: log, ps: pool.Geometry().PageSize, spill: spill, seed: seed,
		entries: map[prefixKey]*list.Element{}, lru: list.New(), hostLRU: list.New()}
}

// len is the number of device-resident entries (each holds a prefix lease).
func (c *prefixCache) len() int { return c.lru.Len() }

// hostLen is the number of host-resident entries.
func (c *prefixCache) hostLen() int { return c.hostLRU.Len() }

// chainHash is the hash of page i of s.tokens chained over all pages before it.
func (c *prefixCache) chainHash(s *seq, i int) uint64 {
	for len(s.hashes) <= i {
		k := len(s.hashes)
		parent := c.seed
		if k > 0 {
			parent = s.hashes[k-1]
		}
		s.hashes = append(s.hashes, pageHash(parent, s.tokens[k*c.ps:(k+1)*c.ps]))
	}
	return s.hashes[i]
}

// pageHash chains the hash of one page's tokens onto its parent's. A
// variable so a test can force collisions.
var pageHash = func(parent uint64, page []int) uint64 {
	var buf [8 * 64]byte
	b := buf[:0]
	for _, t := range page {
		b = binary.LittleEndian.AppendUint64(b, uint64(t))
	}
	return xxh3.HashSeed(b, parent)
}

// brokenChain marks a sequence whose pages can no longer be offered: a page
// of its prefix could not be cached, so later pages would have no parent.
var brokenChain = &prefixEntry{}

// attach appends the longest cached prefix of s.tokens to the empty table t
// and returns the number of tokens it covers. At least one token is always
// left to compute, since the step that computes it yields the logits.
// Host-resident entries on the way are restored first (see restore); a
// restore leaves keepFree pages free for the running sequences, and where
// it cannot, the prefix ends there. An error means a cached page failed its
// checksum, on the device or on its way back from the host tier: an
// isolation failure.
func (c *prefixCache) attach(s *seq, t *kvcache.PageTable, keepFree int) (_ int, err error) {
	defer func() {
		if !errors.Is(err, errSpillInFlight) {
			s.dropDiskRead() // this lookup is over: what it did not import goes
		}
	}()
	if s.needsPromptLogits() || s.emb != nil {
		// Cached pages come without the logits (or hidden states, for an
		// embedding) s must compute.
		return 0, nil
	}
	maxPages := (len(s.tokens) - 1) / c.ps
	var chain []*list.Element
	hostHits := 0
	var parent *prefixEntry
	for i := range maxPages {
		h := c.chainHash(s, i)
		el, ok := c.entries[prefixKey{s.tenant, h}]
		if !ok {
			var err error
			el, err = c.fromDisk(s, i, parent, keepFree)
			if err != nil && (s.prefixWaits < maxPrefixWaits || errors.Is(err, errDiskReadInFlight)) {
				s.hostHitsWaiting += hostHits
				return 0, err // pages come back from spills: wait a step
			}
			if el == nil {
				break
			}
		}
		ent := el.Value.(*prefixEntry)
		if ent.parent != parent || !slices.Equal(ent.tokens, s.tokens[i*c.ps:(i+1)*c.ps]) {
			// A hash collision, or a child of a parent that was dropped
			// since: never reuse K/V computed over other tokens. The entry
			// makes way for the page s is about to compute.
			c.remove(el)
			break
		}
		fromHost := ent.host != nil
		if fromHost && !ent.host.Ready() {
			if s.prefixWaits < maxPrefixWaits {
				s.hostHitsWaiting += hostHits
				return 0, errSpillInFlight
			}
			break // waited long enough: compute the rest
		}
		if fromHost {
			var err error
			el, err = c.restore(s, el, keepFree)
			if errors.Is(err, errSpillInFlight) && s.prefixWaits >= maxPrefixWaits {
				break
			}
			if err != nil {
				if errors.Is(err, errSpillInFlight) {
					s.hostHitsWaiting += hostHits
				}
				return 0, err
			}
			if el == nil {
				break // no page to restore into, or the copy is gone: compute
			}
		}
		if err := t.AppendShared(ent.ref); err != nil {
			c.remove(el)
			if errors.Is(err, kvcache.ErrIsolation) {
				return 0, err
			}
			break // e.g. the page was quarantined meanwhile
		}
		if fromHost {
			hostHits++
		}
		chain = append(chain, el)
		parent = ent
	}
	for i := len(chain) - 1; i >= 0; i-- {
		c.lru.MoveToFront(chain[i])
	}
	// Pages restored before a wait for a spill copy (errSpillInFlight) are
	// device hits now, but host hits of this lookup.
	hostHits += s.hostHitsWaiting
	s.hostHitsWaiting = 0
	c.met.prefixLookup(len(chain), min(hostHits, len(chain)), len(chain) < maxPages)
	s.offered, s.prefixTail = len(chain), parent
	return len(chain) * c.ps, nil
}

// restore brings the host-resident entry el back to the device for s: a
// fresh page, filled from the host copy and verified on the device before
// anything can read it (Pool.Restore: the host tier to device handoff),
// then held by the cache's prefix lease like any device entry. It makes
// room by evicting device entries (never ones s already shares, which hold
// s's lease), but leaves keepFree pages free.
//
// It returns the entry's new element; nil when there is no page to spare
// (the entry stays on the host) or the copy is unusable (dropped); or an
// isolation error when the copy failed its checksum on restore. Then the
// copy is dropped, and the request that hit it recomputes the prefix.
func (c *prefixCache) restore(s *seq, el *list.Element, keepFree int) (*list.Element, error) {
	ent := el.Value.(*prefixEntry)
	// Out of the index while it restores, so the evictions below cannot
	// drop its host copy.
	c.hostLRU.Remove(el)
	delete(c.entries, ent.key)
	putBack := func() { c.entries[ent.key] = c.hostLRU.PushFront(ent) }
	tenant := kvcache.Tenant(ent.key.tenant)
	// The page is restored into a table of s's own, then retained by the
	// cache and released by the table, so it ends up held by the cache
	// alone, and s shares it through AppendShared like any other hit.
	scratch := c.pool.NewTable(kvcache.RequestID(s.id), tenant)
	defer func() {
		if err := scratch.Release(); err != nil {
			c.bookkeeping("releasing a prefix restore table", s.id, err)
		}
	}()
	var ref kvcache.PageRef
	err := findRoom(func() error {
		if free := c.pool.FreePages(); free <= keepFree {
			return fmt.Errorf("%w: %d pages free, %d kept for running sequences", kvcache.ErrNoPages, free, keepFree)
		}
		var err error
		ref, err = c.pool.Restore(ent.host, scratch)
		return err
	}, c.evict, nil)
	if err == nil {
		err = c.pool.Retain(ref, tenant)
	}
	switch {
	case err == nil:
	case errors.Is(err, errPagesPending):
		putBack() // a spill frees a page when its copy completes
		return nil, errSpillInFlight
	case errors.Is(err, kvcache.ErrNoPages):
		putBack()
		return nil, nil
	default:
		c.dropCopy(ent)
		if errors.Is(err, kvcache.ErrIsolation) {
			return nil, fmt.Errorf("prefix page of request %d restored from the host tier: %w", s.id, err)
		}
		c.log.Warn("engine: prefix page restore from the host tier failed; recomputing", "request", s.id, "err", err)
		return nil, nil
	}
	ent.host.Discard()
	ent.host, ent.ref = nil, ref
	el = c.lru.PushFront(ent)
	c.entries[ent.key] = el
	return el, nil
}

// offer registers the full pages s has written since the last offer, each
// with the entry of the page before it as its parent (s.prefixTail).
// Shared pages are in the cache already.
func (c *prefixCache) offer(s *seq) {
	full := s.fed / c.ps
	if s.offered >= full {
		return
	}
	refs := s.table.Refs()
	for i := s.offered; i < full && s.prefixTail != brokenChain; i++ {
		if s.table.Shared(i) {
			s.prefixTail = brokenChain // never here: shared pages come first
			break
		}
		page := s.tokens[i*c.ps : (i+1)*c.ps]
		key := prefixKey{s.tenant, c.chainHash(s, i)}
		el, ok := c.entries[key]
		if ok {
			ent := el.Value.(*prefixEntry)
			if ent.host == nil && ent.parent == s.prefixTail && slices.Equal(ent.tokens, page) {
				s.prefixTail = ent // this very page is cached already
				continue
			}
		}
		if err := c.pool.Retain(refs[i], kvcache.Tenant(s.tenant)); err != nil {
			s.prefixTail = brokenChain // not sealed (e.g. quarantined): not shareable
			break
		}
		if ok {
			// A host copy of this page (s computed it again, so a restore
			// was saved), a collision, or a child of a dropped parent: the
			// page s has just computed replaces it.
			c.remove(el)
		}
		ent := &prefixEntry{key: key, parent: s.prefixTail, tokens: slices.Clone(page), ref: refs[i],
			strong: strongHash(strongOf(s.prefixTail), page)}
		c.entries[key] = c.lru.PushFront(ent)
		s.prefixTail = ent
	}
	s.offered = full
}

// evict frees the page of the least recently used device entry that only
// the cache holds. With a host tier the entry is spilled there (see
// spillEntry) and stays in the index, and its page frees when the copy
// completes (roomPending); else it is dropped (roomFreed). Entries on
// quarantined pages are dropped on the way. While a spill is in flight and
// nothing else can go, it answers roomPending: pages are on their way.
func (c *prefixCache) evict() room {
	c.poll()
	for el := c.lru.Back(); el != nil; {
		prev := el.Prev()
		ent := el.Value.(*prefixEntry)
		info, err := c.pool.Info(ent.ref)
		switch {
		case err != nil || info.State == kvcache.PageQuarantined:
			c.remove(el)
		case info.State == kvcache.PageReleasing && info.Leases[kvcache.LeasePrefix] == 1 &&
			info.Leases[kvcache.LeaseStep] == 0 && info.Leases[kvcache.LeaseCopy] == 0:
			if !c.spill {
				c.toDisk(ent)
				c.remove(el)
				return roomFreed
			}
			if r := c.spillEntry(el); r != roomNone {
				return r
			}
		}
		el = prev
	}
	if len(c.inflight) > 0 {
		return roomPending
	}
	return roomNone
}

// spilling finishes completed spills and reports whether any is in flight.
func (c *prefixCache) spilling() bool {
	c.poll()
	return len(c.inflight) > 0
}

// spillEntry starts copying the device entry el to the host tier, making
// room there by dropping host entries LRU, and drops the cache's lease at
// once: the copy lease keeps the page, unreadable by anyone else and out of
// circulation, until the copy completes (invariant 5), and then it frees.
// The entry is host-resident from now on, but no restore uses it before
// its copy completed (attach waits); poll drops it if the copy failed.
// If the copy cannot be started (host tier full of swapped sequences) the
// entry is written to the disk tier, if there is one, and dropped, and the
// page freed now (roomFreed).
func (c *prefixCache) spillEntry(el *list.Element) room {
	ent := el.Value.(*prefixEntry)
	c.lru.Remove(el)
	delete(c.entries, ent.key)
	var hp *kvcache.HostPage
	var err error
	for {
		hp, err = c.pool.OffloadRetained(ent.ref, kvcache.Tenant(ent.key.tenant))
		if errors.Is(err, kvcache.ErrHostTierFull) && c.dropHost() {
			continue
		}
		break
	}
	if errors.Is(err, kvcache.ErrHostTierFull) {
		// The host tier is full of swapped sequences' copies: the page
		// goes on to the disk tier, if any, rather than being lost.
		c.toDisk(ent)
	}
	c.drop(ent)
	if err != nil {
		c.met.prefixEvict(false)
		if errors.Is(err, kvcache.ErrIsolation) {
			c.log.Error("engine: cached prefix page could not be spilled", "page", ent.ref, "tenant", ent.key.tenant, "err", err)
			return roomNone
		}
		return roomFreed
	}
	ent.host, ent.ref = hp, kvcache.PageRef{}
	c.entries[ent.key] = c.hostLRU.PushFront(ent)
	c.inflight = append(c.inflight, spillCopy{ent, hp})
	return roomPending
}

// poll finishes every spill whose copy has completed, without waiting for
// any. A failed copy is dropped from the index; if the page failed its
// sealed checksum as it was copied, the pool has quarantined it.
func (c *prefixCache) poll() {
	keep := c.inflight[:0]
	for _, sp := range c.inflight {
		if !sp.hp.Ready() {
			keep = append(keep, sp)
			continue
		}
		err := sp.hp.Err()
		c.met.prefixEvict(err == nil)
		if err == nil {
			continue
		}
		if errors.Is(err, kvcache.ErrIsolation) {
			c.log.Error("engine: cached prefix page failed its checksum on spill; quarantined", "tenant", sp.ent.key.tenant, "err", err)
		}
		// Only an entry still in the index is dropped here. One that is out
		// of it is either dropped already or being restored (attach), and
		// the restore meets the copy's error and drops it.
		if el, ok := c.entries[sp.ent.key]; ok && el.Value == sp.ent && sp.ent.host == sp.hp {
			delete(c.entries, sp.ent.key)
			c.hostLRU.Remove(el)
			sp.hp.Discard()
			sp.ent.host = nil
		}
	}
	clear(c.inflight[len(keep):])
	c.inflight = keep
}

// dropHost drops the least recently used host entry, if there is one.
func (c *prefixCache) dropHost() bool {
	el := c.hostLRU.Back()
	if el == nil {
		return false
	}
	c.toDisk(el.Value.(*prefixEntry)) // the host tier is full: on to the disk tier
	c.remove(el)
	return true
}

// dropHostFor drops host entries, LRU, until the host tier has need bytes
// free or none is left, and reports whether it dropped any: a swap-out of
// a running sequence wins over spilled prefix pages.
func (c *prefixCache) dropHostFor(need int64) bool {
	dropped := false
	for c.hostLRU.Len() > 0 {
		if st := c.pool.Stats(); st.HostTierCapacity-st.HostTierUsed >= need {
			break
		}
		dropped = c.dropHost() || dropped
	}
	return dropped
}

// dropCopy discards the host copy of ent, which is out of the index.
func (c *prefixCache) dropCopy(ent *prefixEntry) {
	ent.host.Discard()
	ent.host = nil
	c.met.prefixHostEvict()
}

// drop gives up the cache's prefix lease on the device page of ent.
func (c *prefixCache) drop(ent *prefixEntry) {
	if err := c.pool.Drop(ent.ref, kvcache.LeasePrefix); err != nil {
		c.bookkeeping("dropping a prefix lease", 0, err)
	}
}

// bookkeeping counts and logs a failed release or lease drop: the cache's
// accounting disagrees with the pool's, which is a bug (tests fail on it).
func (c *prefixCache) bookkeeping(what string, req uint64, err error) {
	c.met.bookkeepingError()
	c.log.Error("engine: prefix cache: "+what, "request", req, "err", err)
}

// remove drops the entry el from the index and releases what it holds:
// the prefix lease of a device entry, the host copy of a host entry.
func (c *prefixCache) remove(el *list.Element) {
	ent := el.Value.(*prefixEntry)
	delete(c.entries, ent.key)
	if ent.host != nil {
		c.hostLRU.Remove(el)
		c.dropCopy(ent)
		return
	}
	c.lru.Remove(el)
	c.drop(ent)
	c.met.prefixEvict(false)
}

// clear drops every entry, on the device and in the host tier (Close).
func (c *prefixCache) clear() {
	for el := c.lru.Back(); el != nil; el = c.lru.Back() {
		c.remove(el)
	}
	for el := c.hostLRU.Back(); el != nil; el = c.hostLRU.Back() {
		c.remove(el)
	}
	c.inflight = nil // their copies were discarded above
}
