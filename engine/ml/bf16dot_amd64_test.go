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

type bf16Variant struct {
	name         string
	set, restore func()
}

// bf16Variants are the ways BF16 products run on this CPU: with the
// AVX512_BF16 kernels where it has them, and with hasBF16 cleared (the
// emulation with AVX-512, as on a CPU without AVX512_BF16).
func bf16Variants() []bf16Variant {
	saved := hasBF16
	v := []bf16Variant{{"emulated", func() { hasBF16 = false }, func() { hasBF16 = saved }}}
	if hasBF16 {
		v = append(v,
			bf16Variant{"native", func() { bf16BlockMode = 1 }, func() { bf16BlockMode = 0 }},
			bf16Variant{"native rows, emulated blocks", func() { bf16BlockMode = 2 }, func() { bf16BlockMode = 0 }})
	}
	return v
}

// TestBF16BlockChoice logs which block kernel the one-time timing chose
// (both give the same bits; TestBF16MatMulMatchesRef runs both).
func TestBF16BlockChoice(t *testing.T) {
	if !useBF16() {
		t.Skip("no AVX512_BF16")
	}
	t.Logf("VDPBF16PS block kernel: %v", bf16BlockNative())
}
