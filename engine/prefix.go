package engine

import (
	"container/list"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/zeebo/xxh3"

	"github.com/kvwarden/kvwarden/engine/kvcache"
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
// Entries also store their page's tokens and their parent's hash and are
// compared exactly on a hit, so a 64-bit hash collision cannot make a
// request reuse K/V computed for different tokens.
//
// Eviction is LRU, and only of entries whose page the cache alone keeps
// alive (evicting others would free nothing). A hit refreshes the chain
// leaf-first, so parents stay younger than their children and are evicted
// after them.
//
// Owned by the scheduler goroutine.
type prefixCache struct {
	pool    *kvcache.Pool
	met     *metrics
	ps      int
	entries map[prefixKey]*list.Element
	lru     *list.List // front = most recently used; values are *prefixEntry
}

type prefixKey struct {
	tenant string
	hash   uint64
}

type prefixEntry struct {
	key    prefixKey
	parent uint64
	tokens []int
	ref    kvcache.PageRef
}

const prefixSeed = 0x6b76707265666978 // "kvprefix"

func newPrefixCache(pool *kvcache.Pool, met *metrics) *prefixCache {
	return &prefixCache{pool: pool, met: met, ps: pool.Geometry().PageSize,
		entries: map[prefixKey]*list.Element{}, lru: list.New()}
}

func (c *prefixCache) len() int { return c.lru.Len() }

// chainHash is the hash of page i of s.ctx chained over all pages before it.
func (c *prefixCache) chainHash(s *seq, i int) uint64 {
	for len(s.hashes) <= i {
		k := len(s.hashes)
		parent := uint64(prefixSeed)
		if k > 0 {
			parent = s.hashes[k-1]
		}
		var buf [8 * 64]byte
		b := buf[:0]
		for _, t := range s.ctx[k*c.ps : (k+1)*c.ps] {
			b = binary.LittleEndian.AppendUint64(b, uint64(t))
		}
		s.hashes = append(s.hashes, xxh3.HashSeed(b, parent))
	}
	return s.hashes[i]
}

// attach appends the longest cached prefix of s.ctx to the empty table t
// and returns the number of tokens it covers. At least one token is always
// left to compute, since the step that computes it yields the logits. An
// error means a cached page failed its checksum: an isolation failure.
func (c *prefixCache) attach(s *seq, t *kvcache.PageTable) (int, error) {
	maxPages := (len(s.ctx) - 1) / c.ps
	var chain []*list.Element
	parent := uint64(prefixSeed)
	for i := range maxPages {
		h := c.chainHash(s, i)
		el, ok := c.entries[prefixKey{s.tenant, h}]
		if !ok {
			break
		}
		ent := el.Value.(*prefixEntry)
		if ent.parent != parent || !slices.Equal(ent.tokens, s.ctx[i*c.ps:(i+1)*c.ps]) {
			break // a hash collision: never reuse K/V of other tokens
		}
		if err := t.AppendShared(ent.ref); err != nil {
			c.remove(el)
			if errors.Is(err, kvcache.ErrIsolation) {
				return 0, err
			}
			break // e.g. the page was quarantined meanwhile
		}
		chain = append(chain, el)
		parent = h
	}
	for i := len(chain) - 1; i >= 0; i-- {
		c.lru.MoveToFront(chain[i])
	}
	c.met.mu.Lock()
	c.met.prefixHits += uint64(len(chain))
	if len(chain) < maxPages {
		c.met.prefixMiss++
	}
	c.met.mu.Unlock()
	if n := len(chain); n > 0 {
		s.offered = n
	}
	return len(chain) * c.ps, nil
}

// offer registers the full pages s has written since the last offer.
// Shared pages are in the cache already.
func (c *prefixCache) offer(s *seq) {
	full := s.fed / c.ps
	if s.offered >= full {
		return
	}
	refs := s.table.Refs()
	for i := s.offered; i < full; i++ {
		if s.table.Shared(i) {
			continue
		}
		h := c.chainHash(s, i)
		key := prefixKey{s.tenant, h}
		if _, ok := c.entries[key]; ok {
			continue
		}
		if err := c.pool.Retain(refs[i], kvcache.Tenant(s.tenant)); err != nil {
			continue // not sealed (e.g. quarantined): not shareable
		}
		parent := uint64(prefixSeed)
		if i > 0 {
			parent = s.hashes[i-1]
		}
		ent := &prefixEntry{key: key, parent: parent, tokens: slices.Clone(s.ctx[i*c.ps : (i+1)*c.ps]), ref: refs[i]}
		c.entries[key] = c.lru.PushFront(ent)
	}
	s.offered = full
}

// evict drops the least recently used entry whose page only the cache
// holds, so that the page returns to the free list, and reports whether it
// found one. Entries on quarantined pages are dropped on the way.
func (c *prefixCache) evict() bool {
	for el := c.lru.Back(); el != nil; {
		prev := el.Prev()
		ent := el.Value.(*prefixEntry)
		info, err := c.pool.Info(ent.ref)
		switch {
		case err != nil || info.State == kvcache.PageQuarantined:
			c.remove(el)
		case info.State == kvcache.PageReleasing && info.Leases[kvcache.LeasePrefix] == 1 &&
			info.Leases[kvcache.LeaseStep] == 0 && info.Leases[kvcache.LeaseCopy] == 0:
			c.remove(el)
			return true
		}
		el = prev
	}
	return false
}

func (c *prefixCache) remove(el *list.Element) {
	ent := el.Value.(*prefixEntry)
	c.lru.Remove(el)
	delete(c.entries, ent.key)
	_ = c.pool.Drop(ent.ref, kvcache.LeasePrefix)
	c.met.mu.Lock()
	c.met.prefixEvict++
	c.met.mu.Unlock()
}

// clear drops every entry (Close).
func (c *prefixCache) clear() {
	for el := c.lru.Back(); el != nil; el = c.lru.Back() {
		c.remove(el)
	}
}
