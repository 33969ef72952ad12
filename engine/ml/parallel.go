package ml

// Parallel runs fn over [0, total) in chunks of at least chunk items on the
// package's worker pool, for element-wise work of the forward pass (SiLU,
// norms) that would otherwise run on one core beside multi-threaded matrix
// products. fn must only touch its own [lo, hi) range.
func Parallel(total, chunk int, fn func(lo, hi int)) {
	if total <= 0 {
		return
	}
	parallelFor(total, max(chunk, 1), Threads(), fn)
}
