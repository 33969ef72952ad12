package engine

import (
	"container/list"
	"errors"
	"fmt"
	"slices"

	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// The prefix cache's side of the disk tier (disktier.go).

// strongOf is the strong hash of the prefix up to the end of ent's page;
// zero for none (the first page's parent).
func strongOf(ent *prefixEntry) [32]byte {
	if ent == nil || ent == brokenChain {
		return [32]byte{}
	}
	return ent.strong
}

// toDisk queues ent's page for the disk tier (without waiting): from its
// device page, or from its completed host copy. A page that cannot be
// read out is simply not written: the disk tier is a cache.
func (c *prefixCache) toDisk(ent *prefixEntry) {
	if c.disk == nil {
		return
	}
	c.writeDisk(ent, false)
}

func (c *prefixCache) writeDisk(ent *prefixEntry, wait bool) {
	var raw []byte
	var err error
	if ent.host != nil {
		if !ent.host.Ready() {
			return
		}
		raw, err = c.pool.ExportHost(ent.host)
	} else {
		raw, err = c.pool.ExportPage(ent.ref, kvcache.Tenant(ent.key.tenant))
	}
	if err != nil {
		c.log.Warn("engine: prefix page not written to the disk tier", "tenant", ent.key.tenant, "err", err)
		return
	}
	c.disk.put(ent.key.tenant, ent.strong, c.position(ent), ent.tokens, raw, wait, c.pool.DropRaw)
}

// position is the page index of ent in its prefix.
func (c *prefixCache) position(ent *prefixEntry) int {
	n := 0
	for p := ent.parent; p != nil && p != brokenChain; p = p.parent {
		n++
	}
	return n
}

// persist writes every entry, device and host, to the disk tier and waits
// for the writes (graceful Close).
func (c *prefixCache) persist() {
	if c.disk == nil {
		return
	}
	for _, l := range []*list.List{c.lru, c.hostLRU} {
		for el := l.Front(); el != nil; el = el.Next() {
			c.writeDisk(el.Value.(*prefixEntry), true)
		}
	}
	c.disk.flush()
}

// errDiskReadInFlight is fromDisk's answer while the disk tier's reader
// reads the prefix: the sequence waits (FCFS) without counting against
// maxPrefixWaits, since a read always completes and frees nothing another
// step could take back, and the scheduler goes on decoding the others.
var errDiskReadInFlight = fmt.Errorf("%w: (a disk tier read)", errSpillInFlight)

// fromDisk looks for page i of s (whose prefix matched up to parent) in the
// disk tier. The files are read on the disk tier's reader, never here: the
// first lookup that reaches a page on disk starts a read of it and of the
// pages after it (up to diskQueueBytes) and returns errDiskReadInFlight;
// the read wakes the scheduler when done, and the lookups after it import
// the pages read, one a call, each into a fresh device page (verified on
// the device, as a restore from the host tier is) indexed as a device
// entry. nil: a miss, or no page to import into (leaving keepFree pages
// free), and s computes the rest; errSpillInFlight: pages are on their way
// back from spills, s may wait.
func (c *prefixCache) fromDisk(s *seq, i int, parent *prefixEntry, keepFree int) (*list.Element, error) {
	if c.disk == nil {
		return nil, nil
	}
	page := s.tokens[i*c.ps : (i+1)*c.ps]
	strong := strongHash(strongOf(parent), page)
	r := s.diskRead
	if r != nil && !r.covers(i, strong) {
		s.dropDiskRead() // the prefix matched differently since it started
		r = nil
	}
	if r == nil {
		if !c.disk.has(s.tenant, strong) {
			return nil, nil
		}
		last := min((len(s.tokens)-1)/c.ps, i+max(1, diskQueueBytes/c.disk.rawLen))
		strongs, tokens := [][32]byte{strong}, [][]int{page}
		for j := i + 1; j < last; j++ {
			p := s.tokens[j*c.ps : (j+1)*c.ps]
			strongs, tokens = append(strongs, strongHash(strongs[len(strongs)-1], p)), append(tokens, p)
		}
		if s.diskRead = c.disk.startRead(s.tenant, i, strongs, tokens, c.pool.DropRaw); s.diskRead == nil {
			return nil, nil // the reader is swamped: compute
		}
		return nil, errDiskReadInFlight
	}
	if !r.ready() {
		return nil, errDiskReadInFlight
	}
	if c.disk.erasedSince(r) {
		return nil, nil // attach drops the read
	}
	raw := r.page(i)
	if raw == nil {
		return nil, nil
	}
	tenant := kvcache.Tenant(s.tenant)
	scratch := c.pool.NewTable(kvcache.RequestID(s.id), tenant)
	defer func() {
		if err := scratch.Release(); err != nil {
			c.bookkeeping("releasing a disk import table", s.id, err)
		}
	}()
	var ref kvcache.PageRef
	err := findRoom(func() error {
		if free := c.pool.FreePages(); free <= keepFree {
			return kvcache.ErrNoPages
		}
		var err error
		ref, err = c.pool.ImportPage(scratch, raw)
		return err
	}, c.evict, nil)
	if err == nil {
		r.take(i)
		c.pool.DropRaw(raw)
		err = c.pool.Retain(ref, tenant)
	}
	if errors.Is(err, errPagesPending) {
		return nil, errSpillInFlight // the page stays in the read for the next try
	}
	if err != nil {
		c.log.Debug("engine: disk tier hit not imported; computing", "request", s.id, "err", err)
		return nil, nil
	}
	key := prefixKey{s.tenant, c.chainHash(s, i)}
	ent := &prefixEntry{key: key, parent: parent, tokens: slices.Clone(page), ref: ref, strong: strong}
	el := c.lru.PushFront(ent)
	c.entries[key] = el
	c.disk.hit()
	return el, nil
}

// dropDiskRead gives up s's disk read, if any (its pages not imported are
// dropped): the lookup it served is over, or s is.
func (s *seq) dropDiskRead() {
	if s.diskRead != nil {
		s.diskRead.abandon()
		s.diskRead = nil
	}
}

// diskReading reports whether s waits for a disk read.
func (s *seq) diskReading() bool { return s.diskRead != nil && !s.diskRead.ready() }
