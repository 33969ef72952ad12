//go:build amd64 && !purego

package ml

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBF16SelfCheck runs the one-time self-check on the AVX512_BF16
// kernels (where the CPU has them) and on the emulation: both must give
// dotBF16Ref's bits on its random and crafted rows.
func TestBF16SelfCheck(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512")
	}
	require.True(t, bf16SelfCheck(false), "emulation")
	if !hasBF16 {
		t.Log("no AVX512_BF16: the VDPBF16PS kernels are not checked here")
		return
	}
	require.True(t, bf16SelfCheck(true), "VDPBF16PS")
	require.True(t, useBF16())
}
