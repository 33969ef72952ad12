package engine

import (
	"slices"
	"sync"
)

// Reads from the disk tier run on its reader goroutine, never on the
// scheduler's: a prefix lookup that reaches a page on disk starts one read
// for that page and the ones after it (a read-ahead), and the sequence
// waits at the head of the queue (FCFS) while the running sequences keep
// decoding. The read wakes the scheduler when it completes (notify); the
// scheduler then imports the pages it read into the pool (prefix_disk.go).
// The scheduler alone owns its state: a diskRead is shared with the reader
// only through its channel and mutex.

// diskRead is a read-ahead of consecutive pages of one prefix.
type diskRead struct {
	tenant string
	gen    uint64 // the tenant's erasures when it started: pages of an erased epoch are dropped
	tag    [16]byte
	first  int        // the index of its first page in the prefix
	strong [][32]byte // each page's strong chain hash
	tokens [][]int    // each page's tokens (the reader's own copy)
	drop   func([]byte)
	done   chan struct{}

	mu        sync.Mutex
	abandoned bool
	// pages are the KV bytes of pages first, first+1, ... up to the first
	// that was not on disk or did not open; set before done closes. A page
	// taken by the scheduler is nil.
	pages [][]byte
}

// startRead queues a read of the pages whose strong hashes are strong (the
// first at index first of tenant's prefix, holding tokens[0], ...) for
// the reader, without waiting. nil: the reader's queue is full, or the
// tier closed (the caller computes instead).
func (d *diskTier) startRead(tenant string, first int, strong [][32]byte, tokens [][]int, drop func([]byte)) *diskRead {
	tag := d.tenantTag(tenant)
	d.mu.Lock()
	gen := d.gens[tag]
	d.mu.Unlock()
	r := &diskRead{tenant: tenant, gen: gen, tag: tag, first: first, strong: strong, drop: drop, done: make(chan struct{})}
	for _, t := range tokens {
		r.tokens = append(r.tokens, slices.Clone(t))
	}
	d.sendMu.RLock()
	defer d.sendMu.RUnlock()
	if d.closed {
		return nil
	}
	select {
	case d.reads <- r:
		return r
	default:
		return nil
	}
}

// has reports whether the page is in the index, or on its way to disk
// (no file is read).
func (d *diskTier) has(tenant string, strong [32]byte) bool {
	name := d.name(tenant, strong)
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.files[name]
	_, queued := d.pending[name]
	return ok || queued
}

// erasedSince reports whether r's tenant was erased after r started: the
// pages it read were sealed under an erased epoch, and are dropped unread.
func (d *diskTier) erasedSince(r *diskRead) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gens[r.tag] != r.gen
}

func (d *diskTier) reader() {
	defer d.wg.Done()
	for r := range d.reads {
		var pages [][]byte
		for k := range r.strong {
			if r.isAbandoned() {
				break
			}
			raw, ok := d.load(r.tenant, r.strong[k], r.first+k, r.tokens[k])
			if !ok {
				break
			}
			pages = append(pages, raw)
		}
		r.finish(pages)
		if d.notify != nil {
			d.notify()
		}
	}
}

func (r *diskRead) isAbandoned() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.abandoned
}

// finish hands the pages read to the scheduler, or drops them when it has
// abandoned the read meanwhile.
func (r *diskRead) finish(pages [][]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.abandoned {
		for _, p := range pages {
			r.drop(p)
		}
		return
	}
	r.pages = pages
	close(r.done)
}

// ready reports, without blocking, whether the read completed.
func (r *diskRead) ready() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// covers reports whether page i of the prefix, with strong hash strong, is
// one r reads.
func (r *diskRead) covers(i int, strong [32]byte) bool {
	k := i - r.first
	return k >= 0 && k < len(r.strong) && r.strong[k] == strong
}

// page returns the KV bytes read for page i, once ready; nil when it was
// not read (not on disk, or unusable) or was taken.
func (r *diskRead) page(i int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k := i - r.first; k >= 0 && k < len(r.pages) {
		return r.pages[k]
	}
	return nil
}

// take marks page i as the caller's (imported; the caller drops it).
func (r *diskRead) take(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k := i - r.first; k >= 0 && k < len(r.pages) {
		r.pages[k] = nil
	}
}

// abandon gives the read up: the pages read and not taken are dropped,
// now if it completed, else by the reader when it does. Idempotent.
func (r *diskRead) abandon() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.abandoned {
		return
	}
	r.abandoned = true
	for k, p := range r.pages {
		if p != nil {
			r.drop(p)
			r.pages[k] = nil
		}
	}
}
