//go:build amd64 && !purego

package ml

// prefetchLines asks for every cache line of p[:n] (prefetch_amd64.s).
//
//go:noescape
func prefetchLines(p *byte, n int)

// kqPrefetchRows is how far ahead of the rows being computed a K-quant
// matvec asks for its weight rows: its rows are short (a few hundred
// bytes), too short for the hardware prefetchers to run ahead of four
// streams at once.
const kqPrefetchRows = 32
