package ml

import (
	"fmt"
	"math"
)

// Operations some architectures add to the Llama block (engine/model/arch):
// NeoX RoPE, the tanh-GELU gate, and soft-capping.

// RoPEApplyNeoX rotates the pairs (i, i+len(cs)/2), i < len(cs)/2, of every
// head of v by the table from model.Rope (cos at cs[2i], sin at cs[2i+1]):
// the half-split rotation of GPT-NeoX, Qwen, Phi-3 and Gemma.
func RoPEApplyNeoX(v []float32, headDim int, cs []float32) {
	ropeDim := len(cs)
	if headDim <= 0 || len(v)%headDim != 0 || ropeDim > headDim || ropeDim%2 != 0 {
		panic(fmt.Sprintf("ml: RoPE len %d headDim %d ropeDim %d", len(v), headDim, ropeDim))
	}
	half := ropeDim / 2
	for h := 0; h+headDim <= len(v); h += headDim {
		a := v[h : h+half]
		b := v[h+half : h+ropeDim]
		for i := range half {
			fcr, fci := cs[2*i], cs[2*i+1]
			v0, v1 := a[i], b[i]
			a[i] = float32(v0*fcr) - float32(v1*fci)
			b[i] = float32(v0*fci) + float32(v1*fcr)
		}
	}
}

// GELUTanh is the tanh approximation of GELU (PyTorch's
// gelu(approximate="tanh")), evaluated in float64 and rounded once.
func GELUTanh(x float32) float32 {
	const c = 0.7978845608028654 // sqrt(2/pi)
	v := float64(x)
	return float32(0.5 * v * (1 + math.Tanh(c*(v+0.044715*v*v*v))))
}

// GELUMul computes gate = gelu_tanh(gate) * up in place (GeGLU).
func GELUMul(gate, up []float32) {
	if len(gate) != len(up) {
		panic(fmt.Sprintf("ml: GELUMul lengths %d and %d", len(gate), len(up)))
	}
	up = up[:len(gate)]
	for i, g := range gate {
		gate[i] = GELUTanh(g) * up[i]
	}
}

// SoftCap replaces every x by c*tanh(x/c) (Gemma 2's logit soft-capping).
func SoftCap(x []float32, c float32) {
	inv := 1 / c
	for i, v := range x {
		x[i] = float32(math.Tanh(float64(v*inv))) * c
	}
}

// Scale multiplies x by s in place.
func Scale(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}
