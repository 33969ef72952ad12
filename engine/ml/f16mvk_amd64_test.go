//go:build amd64 && !purego

package ml

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGemvF16LongBits checks that the K-blocked one-row F16 matvec gives
// the one-row kernel's bits over one and several K blocks, partial row
// groups, the masked tail and row strides wider than the row.
func TestGemvF16LongBits(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512")
	}
	defer func(rows, k int, quad bool) {
		f16LongRows, f16LongK, f16LongQuad = rows, k, quad
	}(f16LongRows, f16LongK, f16LongQuad)
	cases := []struct{ rows, k, pad, group, blockK int }{
		{8, 5, 0, 16, 4096}, {8, 16, 0, 4, 64}, {20, 333, 16, 16, 64},
		{9, 1000, 0, 4, 128}, {37, 2048 + 48 + 7, 0, 16, 512},
		{40, 14336, 0, 16, 4096}, {17, 14336 + 9, 32, 8, 6000},
		{5, 300, 0, 64, 64}, {44, 4096, 0, 16, 6144}, {3, 700, 0, 16, 128},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%dx%d+%d/%d/%d", c.rows, c.k, c.pad, c.group, c.blockK), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.rows), uint64(c.k)))
			ws := 2*c.k + c.pad
			w := make([]byte, c.rows*ws)
			for i := range c.rows {
				for j := range c.k {
					v := F32ToF16(float32(r.NormFloat64()))
					w[i*ws+2*j], w[i*ws+2*j+1] = byte(v), byte(v>>8)
				}
			}
			x := randF32(r, c.k)
			want := make([]float32, c.rows)
			got := make([]float32, c.rows)
			gemvF16x1(&x[0], &w[0], ws, c.k, &want[0], c.rows)
			f16LongRows, f16LongK = c.group, c.blockK
			for _, quad := range []bool{false, true} {
				f16LongQuad = quad
				clear(got)
				gemvF16Long(&x[0], w, ws, c.k, got, c.rows)
				requireBits(t, want, got, c.rows, fmt.Sprintf("gemvF16Long (quad %v) vs gemvF16x1", quad))
				require.NotZero(t, got[0])
			}
		})
	}
}
