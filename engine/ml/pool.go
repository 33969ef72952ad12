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
}

func (j *job) run() {
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
		if j == nil || j.joined.Add(1) > j.maxHlp {
			continue
		}
		j.run()
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
	j.run()
	for i := 0; j.left.Load() != 0; i++ {
		if i%64 == 63 {
			runtime.Gosched()
		}
	}
	pool.cur.Store(nil)
}
