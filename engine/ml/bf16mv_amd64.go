//go:build amd64 && !purego

package ml

// f16PfRows is how many rows ahead the eight-row F16 matvec
// (gemvF16x8) prefetches into L2: a pass over eight rows asks,
// four lines a step, for the eight rows f16PfRows on (the hardware
// prefetchers alone left one core at 24-26 weight GB per thread-CPU-second
// on the 8B shapes; 8 rows ahead gave 19-27 against 18-25 alternating, 16
// rows 28-29 against 24-27: BenchmarkMatVecCore). A variable for that
// benchmark's A/B; 0 prefetches the rows being read.
var f16PfRows = 16
