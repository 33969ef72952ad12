//go:build amd64 && !purego

package ml

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGemvF16x1Bits checks that the one-row F16 matvec gives the eight-row
// kernel's bits for every path through its loop: groups of four steps,
// single steps, the masked tail, and row strides wider than the row.
func TestGemvF16x1Bits(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512")
	}
	cases := []struct{ rows, k, pad int }{
		{8, 16, 0}, {8, 5, 0}, {16, 64, 0}, {8, 100, 0}, {24, 768, 0},
		{16, 2048, 0}, {8, 2048 + 48 + 7, 0}, {8, 333, 16}, {32, 5632, 0},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%dx%d+%d", c.rows, c.k, c.pad), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.rows), uint64(c.k)))
			ws := 2*c.k + c.pad
			w := randF16Rows(r, c.rows, c.k, ws)
			x := randF32(r, c.k)
			want := make([]float32, c.rows)
			got := make([]float32, c.rows)
			gemvF16x8(&x[0], &w[0], ws, c.k, &want[0], c.rows)
			gemvF16x1(&x[0], &w[0], ws, c.k, &got[0], c.rows)
			requireBits(t, want, got, c.rows, "gemvF16x1 vs gemvF16x8")
			require.NotZero(t, got[0])
		})
	}
}

// randF16Rows returns rows rows of k normally distributed f16 values, ws
// bytes apart (ws >= 2k: the padding stays zero).
func randF16Rows(r *rand.Rand, rows, k, ws int) []byte {
	w := make([]byte, rows*ws)
	for i := range rows {
		for j := range k {
			v := F32ToF16(float32(r.NormFloat64()))
			w[i*ws+2*j], w[i*ws+2*j+1] = byte(v), byte(v>>8)
		}
	}
	return w
}
