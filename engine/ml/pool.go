package ml

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The worker pool splits the rows of a product across persistent
// goroutines. Workers spin briefly after each job, then park, so that the
// back-to-back products of a forward pass do not pay a wake-up each.
//
// One job runs at a time. A caller that finds the pool busy (another
// goroutine's product) does its work alone rather than queueing.

const spinFor = 50 * time.Microsecond

type job struct {
	fn    func(lo, hi int)
	total int
	chunk int
	// align > 0 makes the job guided (runGuided): next and left then
	// count items, not chunks.
	align  int
	next   atomic.Int64 // next chunk to claim
	left   atomic.Int64 // chunks not yet finished
	maxHlp int32        // workers allowed to join
	joined atomic.Int32
	// segs, for a guided job with guidedSteal: one segment of the items
	// per thread, each packed as lo<<32 | hi (see runSteal).
	segs []atomic.Uint64
}

// run does pieces of j until none is left to claim; slot is the
// caller's 0 or a helper's join order (1..maxHlp).
func (j *job) run(slot int) {
	if j.segs != nil {
		j.runSteal(slot)
		return
	}
	if j.align > 0 {
		j.runGuided()
		return
	}
	for {
		c := int(j.next.Add(1) - 1)
		lo := c * j.chunk
		if lo >= j.total {
			return
		}
		j.fn(lo, min(lo+j.chunk, j.total))
		j.left.Add(-1)
	}
}

// guidedChunks makes one-row products split their rows by guided
// self-scheduling (parallelForGuided) instead of in equal chunks (a
// variable for BenchmarkGuidedTune).
var guidedChunks = true

// runGuided claims ranges of about a 1/(2*threads) share of the items
// left, at least chunk and a multiple of align, so the pieces shrink as
// the job ends: the first claims are long contiguous runs (the weight
// stream's prefetch stays ahead within them), and what a thread can be
// left running alone at the end is a small piece rather than one of
// equal chunks (an eighth of the product with 2 threads).
func (j *job) runGuided() {
	div := int64(2 * (j.maxHlp + 1))
	a, minc, total := int64(j.align), int64(j.chunk), int64(j.total)
	for {
		lo := j.next.Load()
		rem := total - lo
		if rem <= 0 {
			return
		}
		size := (rem + div - 1) / div
		size = max(minc, (size+a-1)/a*a)
		hi := min(lo+size, total)
		if !j.next.CompareAndSwap(lo, hi) {
			continue
		}
		j.fn(int(lo), int(hi))
		j.left.Add(lo - hi)
	}
}

// guidedSteal makes guided jobs split their items into one contiguous
// segment per thread, each thread claiming pieces of at least chunk items
// from the front of its own and, once that is empty, taking half of what
// is left of another's from its back (runSteal), instead of all threads
// claiming shrinking shares of one range (runGuided). A thread that the
// OS deschedules on a busy machine then holds up the product by one
// piece rather than by the share it claimed, a quarter of the rows left
// with two threads. A variable for the benchmarks.
var guidedSteal = true

// runSteal is runGuided with one segment per thread (guidedSteal). A
// segment is one word, lo<<32 | hi, so that its owner's claims from the
// front and other threads' from the back never overlap.
func (j *job) runSteal(slot int) {
	a, minc := uint64(j.align), uint64(j.chunk)
	do := func(lo, hi uint64) {
		j.fn(int(lo), int(hi))
		j.left.Add(int64(lo) - int64(hi))
	}
	own := &j.segs[slot]
	for {
		w := own.Load()
		lo, hi := w>>32, w&0xffffffff
		if lo >= hi {
			break
		}
		// No piece shorter than chunk but at the end of the items: the
		// rest of a segment is 0 or at least chunk long.
		end := lo + minc
		if end+minc > hi {
			end = hi
		}
		if own.CompareAndSwap(w, end<<32|hi) {
			do(lo, end)
		}
	}
	for k := 1; k < len(j.segs); k++ {
		seg := &j.segs[(slot+k)%len(j.segs)]
		for {
			w := seg.Load()
			lo, hi := w>>32, w&0xffffffff
			if lo >= hi {
				break
			}
			// Half of what is left, from a multiple of align (lo is one),
			// or all of it where a half would be shorter than chunk.
			start := (lo + (hi-lo)/2) / a * a
			if start-lo < minc || hi-start < minc {
				start = lo
			}
			if seg.CompareAndSwap(w, lo<<32|start) {
				do(start, hi)
			}
		}
	}
}

type workerPool struct {
	busy    sync.Mutex
	cur     atomic.Pointer[job]
	gen     atomic.Uint64
	mu      sync.Mutex
	cond    *sync.Cond
	started int
}

var (
	pool     = &workerPool{}
	nthreads atomic.Int32
)

func init() {
	pool.cond = sync.NewCond(&pool.mu)
	nthreads.Store(int32(PhysicalCores()))
}

// SetThreads sets how many threads (the caller included) a matrix product
// may use; n < 1 means PhysicalCores(). The worker pool is process-wide.
func SetThreads(n int) {
	if n < 1 {
		n = PhysicalCores()
	}
	nthreads.Store(int32(n))
}

// Threads reports the current thread setting.
func Threads() int { return int(nthreads.Load()) }

func (p *workerPool) ensure(helpers int) {
	p.mu.Lock()
	for p.started < helpers {
		p.started++
		go p.worker()
	}
	p.mu.Unlock()
}

func (p *workerPool) worker() {
	last := p.gen.Load()
	for {
		g := p.gen.Load()
		if g == last {
			deadline := time.Now().Add(spinFor)
			for i := 1; ; i++ {
				if g = p.gen.Load(); g != last {
					break
				}
				if i%128 == 0 {
					if time.Now().After(deadline) {
						break
					}
					runtime.Gosched()
				}
			}
		}
		if g == last {
			p.mu.Lock()
			for p.gen.Load() == last {
				p.cond.Wait()
			}
			p.mu.Unlock()
			g = p.gen.Load()
		}
		last = g
		j := p.cur.Load()
		if j == nil {
			continue
		}
		slot := j.joined.Add(1)
		if slot > j.maxHlp {
			continue
		}
		j.run(int(slot))
	}
}

// parallelForGuided is parallelFor with guided self-scheduling (see
// job.runGuided): fn gets ranges of at least minChunk items (but the
// last) that start at multiples of align.
func parallelForGuided(total, minChunk, align, threads int, fn func(lo, hi int)) {
	minChunk = max(align, (minChunk+align-1)/align*align)
	threads = min(threads, (total+minChunk-1)/minChunk)
	if threads <= 1 || !pool.busy.TryLock() {
		fn(0, total)
		return
	}
	defer pool.busy.Unlock()
	pool.ensure(threads - 1)
	j := &job{fn: fn, total: total, chunk: minChunk, align: align, maxHlp: int32(threads - 1)}
	j.left.Store(int64(total))
	if guidedSteal && total < 1<<31 {
		// Segment bounds on multiples of align, the last ending at total.
		j.segs = make([]atomic.Uint64, threads)
		per := (total + threads - 1) / threads
		per = max(minChunk, (per+align-1)/align*align)
		for i := range j.segs {
			lo, hi := min(i*per, total), min((i+1)*per, total)
			j.segs[i].Store(uint64(lo)<<32 | uint64(hi))
		}
	}
	runJob(j)
}

// parallelFor calls fn over [0,total) in chunks of chunk, on up to threads
// goroutines (the caller included). It returns when all chunks are done.
func parallelFor(total, chunk, threads int, fn func(lo, hi int)) {
	nchunks := (total + chunk - 1) / chunk
	threads = min(threads, nchunks)
	if threads <= 1 || !pool.busy.TryLock() {
		fn(0, total)
		return
	}
	defer pool.busy.Unlock()
	pool.ensure(threads - 1)
	j := &job{fn: fn, total: total, chunk: chunk, maxHlp: int32(threads - 1)}
	j.left.Store(int64(nchunks))
	runJob(j)
}

// runJob hands j to the pool's workers, runs it on the caller too and
// waits until every piece is done.
func runJob(j *job) {
	pool.cur.Store(j)
	pool.mu.Lock()
	pool.gen.Add(1)
	pool.cond.Broadcast()
	pool.mu.Unlock()
	j.run(0)
	for i := 0; j.left.Load() != 0; i++ {
		if i%64 == 63 {
			runtime.Gosched()
		}
	}
	pool.cur.Store(nil)
}
