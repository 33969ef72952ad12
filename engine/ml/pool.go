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
	// spans holds, per participant (the caller 0, workers from 1), the
	// range [lo,hi) it has claimed and not yet begun, packed by packSpan,
	// for a guided job whose items fit in 32 bits (nil otherwise).
	spans []atomic.Uint64
	step  int64 // items a guided participant runs per call to fn
}

// stealStep is how many minimum pieces a guided participant runs per call
// to fn: the granularity at which the rest of its claim can be taken from
// it (the 32 KiB minimum makes it 2 MiB of weights, about 0.1 ms). At 16
// (512 KiB) BenchmarkGuidedTune ran 2-6% slower than whole claims (each
// call restarts the kernels' prefetch); at 64 and 256, within the noise
// of them.
const stealStep = 64

func packSpan(lo, hi int64) uint64       { return uint64(lo)<<32 | uint64(hi) }
func unpackSpan(v uint64) (lo, hi int64) { return int64(v >> 32), int64(v & (1<<32 - 1)) }

// run works on j as participant me (0: the caller).
func (j *job) run(me int) {
	if j.spans != nil {
		j.runStealing(me)
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

// guidedSteal makes guided jobs run their claims a step at a time and
// steal (job.runStealing; a variable for BenchmarkGuidedTune).
var guidedSteal = true

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

// runStealing is runGuided in which a claim is not run in one call but a
// step at a time from its front, and a participant that finds nothing
// left to claim takes the back half of the largest claim not yet begun.
// Without it, a worker whose thread the OS deschedules (on a machine with
// other busy processes) holds up to a quarter of a product (the first
// claims of two threads) while the caller, done with its own, spins
// waiting: on the 2-core machine with other jobs running, a tenth of the
// one-sequence decode time of gpt-oss's shape was that wait. Now what one
// thread can hold back is the step it is in.
func (j *job) runStealing(me int) {
	div := int64(2 * (j.maxHlp + 1))
	a, minc, total := int64(j.align), int64(j.chunk), int64(j.total)
	own := &j.spans[me]
	for {
		v := own.Load()
		if lo, hi := unpackSpan(v); lo < hi {
			end := min(lo+j.step, hi)
			if hi-end < minc {
				end = hi // no remainder under the minimum piece
			}
			if !own.CompareAndSwap(v, packSpan(end, hi)) {
				continue // a thief took the back half
			}
			j.fn(int(lo), int(end))
			j.left.Add(lo - end)
			continue
		}
		// Own claim used up: claim the next range as runGuided does.
		if lo := j.next.Load(); lo < total {
			size := ((total - lo) + div - 1) / div
			size = max(minc, (size+a-1)/a*a)
			hi := min(lo+size, total)
			if j.next.CompareAndSwap(lo, hi) {
				// Only this participant writes a span it finds empty;
				// thieves take only from non-empty ones.
				own.Store(packSpan(lo, hi))
			}
			continue
		}
		if !j.steal(me) {
			return
		}
	}
}

// steal moves the back half of the largest span not yet begun (both
// halves at least the minimum piece, the half an aligned boundary) to
// participant me's span, which is empty. It reports false when no span is
// large enough to halve.
func (j *job) steal(me int) bool {
	a, minc := int64(j.align), int64(j.chunk)
	for {
		best, bv, bsize := -1, uint64(0), int64(0)
		for i := range j.spans {
			if i == me {
				continue
			}
			v := j.spans[i].Load()
			if lo, hi := unpackSpan(v); hi-lo > bsize {
				best, bv, bsize = i, v, hi-lo
			}
		}
		if best < 0 || bsize < 2*minc {
			return false
		}
		lo, hi := unpackSpan(bv)
		mid := lo + bsize/2/a*a
		if j.spans[best].CompareAndSwap(bv, packSpan(lo, mid)) {
			j.spans[me].Store(packSpan(mid, hi))
			return true
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
		me := j.joined.Add(1)
		if me > j.maxHlp {
			continue
		}
		j.run(int(me))
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
	if guidedSteal && total < 1<<32 {
		j.spans = make([]atomic.Uint64, threads)
		j.step = int64(stealStep * minChunk)
	}
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
	j.run(0)
	for i := 0; j.left.Load() != 0; i++ {
		if i%64 == 63 {
			runtime.Gosched()
		}
	}
	pool.cur.Store(nil)
}
