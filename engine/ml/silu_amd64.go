//go:build amd64 && !purego

package ml

//go:noescape
func siluMulAVX512(gate, up *float32, n16 int)

//go:noescape
func siluMulAVX2(gate, up *float32, n8 int)

//go:noescape
func expShiftAVX512(x *float32, n16 int, m float32)

//go:noescape
func attnScoresAVX512(dst, q, kv *float32, offs *int, n, d int, scale float32)

//go:noescape
func attnAccumAVX512(out, w, kv *float32, offs *int, n, d int)

// siluMul runs the vector kernel over whole vectors and the same kernel
// over a zero-padded copy of the tail, so every element takes the same
// path wherever a chunk boundary falls (the kernels are bit-identical to
// siluMulGeneric in any case).
func siluMul(gate, up []float32) {
	var lanes int
	var kern func(g, u *float32, n int)
	switch {
	case useAVX512:
		lanes, kern = 16, siluMulAVX512
	case useAVX2:
		lanes, kern = 8, siluMulAVX2
	default:
		siluMulGeneric(gate, up)
		return
	}
	up = up[:len(gate)]
	nv := len(gate) &^ (lanes - 1)
	if nv > 0 {
		kern(&gate[0], &up[0], nv)
	}
	if nv < len(gate) {
		var g, u [16]float32
		m := copy(g[:], gate[nv:])
		copy(u[:], up[nv:])
		kern(&g[0], &u[0], lanes)
		copy(gate[nv:], g[:m])
	}
}

func attnScores(dst, q, kv []float32, offs []int, scale float32) {
	if useAVX512 {
		attnScoresAVX512(&dst[0], &q[0], &kv[0], &offs[0], len(dst), len(q), scale)
		return
	}
	if useAVX2 {
		d := len(q)
		for t, o := range offs[:len(dst)] {
			dst[t] = dot(q, kv[o:o+d]) * scale
		}
		return
	}
	attnScoresGeneric(dst, q, kv, offs, scale)
}

func attnAccum(out, w, kv []float32, offs []int) {
	if useAVX512 {
		attnAccumAVX512(&out[0], &w[0], &kv[0], &offs[0], len(w), len(out))
		return
	}
	if useAVX2 {
		d := len(out)
		for t, o := range offs[:len(w)] {
			axpy(out, w[t], kv[o:o+d])
		}
		return
	}
	attnAccumGeneric(out, w, kv, offs)
}

// expShift sets x[i] = expf(x[i] - m), bit-identical at every level.
func expShift(x []float32, m float32) {
	if !useAVX512 {
		expShiftGeneric(x, m)
		return
	}
	nv := len(x) &^ 15
	if nv > 0 {
		expShiftAVX512(&x[0], nv, m)
	}
	if nv < len(x) {
		var b [16]float32
		k := copy(b[:], x[nv:])
		expShiftAVX512(&b[0], 16, m)
		copy(x[nv:], b[:k])
	}
}
