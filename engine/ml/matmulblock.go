package ml

// Token blocking of large products. The kernels hold a tile of weight rows
// and sweep every activation row across it, so a product of many
// activation rows (a long prefill chunk, an embedding batch) streams all
// of them from L3 or memory once per weight tile: at 4096 rows of 8192
// values that is 32 MiB of f32 per tile, and the product falls to a
// fraction of its small-batch rate. Cutting the rows into blocks that stay
// in L2 and running the whole product per block reads the weights once
// per block instead, which for blocks of a few hundred rows is the
// cheaper stream. Every kernel computes an output from its activation row
// and weight row alone (the batch invariance the kernels promise), so
// each output is the same bits whatever the blocking.

// tokenBlockBytes is the activation bytes (as f32) of one block; 0 turns
// blocking off (a variable for the benchmarks and tests).
var tokenBlockBytes = 4 << 20

// minTokenBlock is the fewest rows a block holds: below it the weight
// tiles' decode and packing, repeated per block, would cost more than the
// activation traffic saved.
const minTokenBlock = 128

// tokenBlock returns the activation rows per block of a product with K
// columns, or n when the product should not be cut.
func tokenBlock(n, K int) int {
	if tokenBlockBytes <= 0 || K <= 0 {
		return n
	}
	rows := max(minTokenBlock, tokenBlockBytes/(4*K))
	if n <= rows+rows/2 {
		return n
	}
	return rows
}

// x0Cols is the columns of a group's shared activation rows (0 for none).
func x0Cols(ws []*Matrix) int {
	if len(ws) == 0 {
		return 0
	}
	return ws[0].Cols
}
