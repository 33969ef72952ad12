//go:build amd64 && !purego

package ml

// prefetchLines asks for every cache line of p[:n] (prefetch_amd64.s).
//
//go:noescape
func prefetchLines(p *byte, n int)

// prefetchLinesL2 asks for every cache line of p[:n] into the L2 cache.
//
//go:noescape
func prefetchLinesL2(p *byte, n int)

// kqPrefetchBytes is how far ahead of the rows being computed a K-quant
// matvec asks for its weight rows, and kqPrefetch the instruction: its
// rows are short (a few hundred bytes to a few KB), too short for the
// hardware prefetchers to run ahead of four streams at once. Into the L2
// cache, about 32 KB ahead: far enough to cover DRAM latency at the rate
// one core consumes weights, and not into the 32 KB L1, which a prefetch
// that far ahead would thrash (PREFETCHT0 32 rows ahead, the earlier
// setting, was 1.25x slower on the 1B Q4_K_M decode stream and 1.5x on
// Q6_K: BenchmarkPrefetchTune). They are variables for that benchmark.
var (
	kqPrefetchBytes = 32 << 10
	kqPrefetch      = prefetchLinesL2
)

// kqPfDist is how far ahead the 512-bit Q4_K and Q6_K matvec kernels
// prefetch (PREFETCHT1) the lines of the block they are reading, a few
// lines per block, spread through their loop; 0 means four rows (the next
// call's rows). Those two kernels skip matvecK's per-call prefetch: its
// burst of 72 or more prefetches at once fills the core's miss buffers
// and stalls the kernel until they drain, where prefetches spread through
// the loop overlap with its arithmetic (1.2-1.26x on the 1B Q4_K_M decode
// stream, by time and by CPU time: BenchmarkKernelPrefetchTune).
var kqPfDist = 32 << 10

// kqPfRows is the least distance of that prefetch in rows: the same blocks
// of the rows one to two calls on (the eight-row kernels take eight rows
// per call). kqPfDist's 32 KB, tuned on the 1B shape's rows of 1-5 KB,
// lands inside the eight rows a call is reading when they are longer (the
// 8B shape's ffn_down: 8 KB in Q4_K, 11.8 KB in Q6_K): there the weights
// streamed at 20.8 (Q4_K) and 18.2 (Q6_K) GB per thread-CPU-second, and
// at 26.0, 29.3 with 8 rows, 26.4, 31.9 with 12 and 26.3, 32.2 with 16
// (BenchmarkMatVecCore, one thread, alternating in one run; the 4096-wide
// shapes, whose 8 rows are within 32 KB, are unchanged).
var kqPfRows = 12

// kqZCallPrefetch turns matvecK's per-call prefetch back on for those two
// kernels (for the benchmark).
var kqZCallPrefetch = false
