//go:build amd64 && !purego

package ml

import (
	"regexp"
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

// bf16Kernels are the assembly functions that execute AVX512_BF16
// instructions (the BYTE-encoded macros of bf16dot_amd64.h). A CPU without
// them faults, so each is called only under useBF16 (and by bf16SelfCheck
// only with hasBF16); a kernel that starts using them must be added here
// and guarded.
var bf16Kernels = []string{"bf16Dot4x4", "bf16DotRows", "bf16Round"}

// TestBF16KernelsListed requires the functions of the package's .s files
// that execute an AVX512_BF16 instruction, directly or through macros, to
// be bf16Kernels.
func TestBF16KernelsListed(t *testing.T) {
	found := kernelsUsing(t, regexp.MustCompile(`\b(VDPBF16PS|VCVTNEPS2BF16|VCVTNE2PS2BF16|DPBF_\w+|CVTBF_\w+)\b`))
	require.Equal(t, bf16Kernels, found, "functions executing AVX512_BF16 instructions: list them in bf16Kernels and call them only under useBF16")
}

// TestNoBF16Fallback runs BF16 products as an AVX-512 CPU without
// AVX512_BF16 does: useBF16 must be false (so no bf16Kernels function is
// called), and the products must still give the reference's bits.
func TestNoBF16Fallback(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512")
	}
	saved := hasBF16
	defer func() { hasBF16 = saved }()
	hasBF16 = false
	require.False(t, useBF16())
	require.False(t, bf16SelfCheck(true), "the VDPBF16PS self-check must not run without AVX512_BF16")
	t.Run("MatMul", TestBF16MatMulMatchesRef)
	t.Run("Subnormals", TestBF16Subnormals)
}
