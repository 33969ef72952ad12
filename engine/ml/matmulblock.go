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

// tokenBlockBytes is the activation bytes of one block (f32 rows, or the
// quantized rows the integer kernels read); 0 turns blocking off (a
// variable for the benchmarks and tests).
var tokenBlockBytes = 2 << 20

// minTokenBlock is the fewest rows a block holds: below it the weight
// tiles' decode and packing, repeated per block, would cost more than the
// activation traffic saved.
const minTokenBlock = 128

// tokenBlock returns the activation rows per block of a product whose
// kernels read rowBytes per activation row, or n when the product should
// not be cut.
func tokenBlock(n, rowBytes int) int {
	if tokenBlockBytes <= 0 || rowBytes <= 0 {
		return n
	}
	rows := max(minTokenBlock, tokenBlockBytes/rowBytes)
	if n <= rows+rows/2 {
		return n
	}
	return rows
}

// actRowBytes is what the kernels of a product with w read per activation
// row.
func actRowBytes(w *Matrix) int {
	f := w.Type.traits().act
	if f == actF32 {
		return 4 * w.Cols
	}
	return w.Cols / f.blockSize() * f.blockBytes()
}

// groupRowBytes is actRowBytes for a MatMulGroup: the most any of its
// products reads (0 for none).
func groupRowBytes(ws []*Matrix) int {
	b := 0
	for _, w := range ws {
		b = max(b, actRowBytes(w))
	}
	return b
}
