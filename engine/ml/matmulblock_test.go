package ml

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMatMulTokenBlocking requires a product cut into token blocks to give
// every output the bits of the uncut product and of the row alone, for
// every weight type, at every SIMD level, through MatMul and MatMulGroup,
// with a block size that leaves a short last block.
func TestMatMulTokenBlocking(t *testing.T) {
	defer SetThreads(0)
	saved := tokenBlockBytes
	defer func() { tokenBlockBytes = saved }()
	const rows, cols = 40, 512
	n := 2*minTokenBlock + 45
	for _, ty := range SupportedTypes() {
		r := rand.New(rand.NewPCG(uint64(ty), 5))
		w := randMatrix(t, r, ty, rows, cols)
		w2 := randMatrix(t, r, ty, rows+8, cols)
		x := randF32(r, n*cols)
		for _, lvl := range supportedLevels() {
			level := simdLevel()
			setSIMDLevel(lvl)
			for _, threads := range []int{1, 2} {
				SetThreads(threads)
				name := fmt.Sprintf("%v level=%d threads=%d", ty, lvl, threads)

				tokenBlockBytes = 0
				whole := make([]float32, n*rows)
				MatMul(whole, x, n, w)
				whole2 := make([]float32, n*(rows+8))
				MatMul(whole2, x, n, w2)

				tokenBlockBytes = 1 // blocks of minTokenBlock rows
				require.Equal(t, minTokenBlock, tokenBlock(n, actRowBytes(w)))
				blocked := make([]float32, n*rows)
				MatMul(blocked, x, n, w)
				requireBits(t, whole, blocked, n, name+" MatMul blocked vs whole")
				g1, g2 := make([]float32, n*rows), make([]float32, n*(rows+8))
				MatMulGroup([][]float32{g1, g2}, x, n, []*Matrix{w, w2})
				requireBits(t, whole, g1, n, name+" MatMulGroup blocked vs whole (first)")
				requireBits(t, whole2, g2, n, name+" MatMulGroup blocked vs whole (second)")

				one := make([]float32, rows)
				for _, i := range []int{0, minTokenBlock - 1, minTokenBlock, n - 1} {
					MatMul(one, x[i*cols:(i+1)*cols], 1, w)
					requireBits(t, one, blocked[i*rows:(i+1)*rows], 1, fmt.Sprintf("%s row %d alone", name, i))
				}
			}
			setSIMDLevel(level)
		}
	}
}

func TestTokenBlock(t *testing.T) {
	saved := tokenBlockBytes
	defer func() { tokenBlockBytes = saved }()
	tokenBlockBytes = 2 << 20
	tests := []struct {
		name              string
		n, rowBytes, want int
	}{
		{"decode is never cut", 1, 32768, 1},
		{"2 MiB of rows: one block", 512, 4096, 512},
		{"within half a block of one: not cut", 768, 4096, 768},
		{"cut into 2 MiB blocks", 800, 4096, 512},
		{"the block's floor", 4096, 32768, minTokenBlock},
		{"bert-base f32 rows", 4096, 4 * 768, 682},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, tokenBlock(tc.n, tc.rowBytes), tc.name)
	}
	tokenBlockBytes = 0
	require.Equal(t, 4096, tokenBlock(4096, 32768))

	f32, err := Quantize(F32, 1, 768, make([]float32, 768))
	require.NoError(t, err)
	require.Equal(t, 4*768, actRowBytes(f32))
	q8, err := Quantize(Q8_0, 1, 768, make([]float32, 768))
	require.NoError(t, err)
	require.Equal(t, 768/32*q8ActBlock, actRowBytes(q8))
}
