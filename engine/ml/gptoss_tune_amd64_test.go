package ml

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// BenchmarkGptossStepTune runs the matrix products of one decode token of
// gpt-oss-20b's shape cut to 8 layers (Q8_0 attention and output, 4 MXFP4
// experts a layer; 1.27 GB, no attention, norms or routing) with the
// one-row products scheduled as before stealing ("whole": guided claims
// run in one call, MatMulEach in equal pieces) and now ("steal"),
// alternating step by step so that a loaded machine weighs on both alike.
// steal-x is whole's time over steal's (above 1: steal is faster), the
// median of the rounds; steal-cpu-x the same for CPU time.
//
//	KVW_THREADS=2 go test -run '^$' -bench GptossStepTune -benchtime 16x ./engine/ml/
func BenchmarkGptossStepTune(b *testing.B) {
	const dim, heads, kvDim, hidden, vocab, layers, used = 2880, 4096, 512, 2880, 201088, 8, 4
	r := rand.New(rand.NewPCG(7, 8))
	mk := func(t Type, rows, cols int) *Matrix {
		m, err := NewMatrix(t, rows, cols, randBlocks(r, t, rows*cols/t.BlockSize()))
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	type layer struct{ qkv, o, gateUp, down []*Matrix }
	ls := make([]layer, layers)
	for i := range ls {
		ls[i].qkv = []*Matrix{mk(Q8_0, heads, dim), mk(Q8_0, kvDim, dim), mk(Q8_0, kvDim, dim)}
		ls[i].o = []*Matrix{mk(Q8_0, dim, heads)}
		for range used {
			ls[i].gateUp = append(ls[i].gateUp, mk(MXFP4, hidden, dim), mk(MXFP4, hidden, dim))
			ls[i].down = append(ls[i].down, mk(MXFP4, dim, hidden))
		}
	}
	out := mk(Q8_0, vocab, dim)
	x := randF32(rand.New(rand.NewPCG(1, 2)), heads)
	q, k, v, o := make([]float32, heads), make([]float32, kvDim), make([]float32, kvDim), make([]float32, dim)
	gu := make([][]float32, 2*used)
	gxs, gns := make([][]float32, 2*used), make([]int, 2*used)
	dn, dxs, dns := make([][]float32, used), make([][]float32, used), make([]int, used)
	for j := range gu {
		gu[j], gxs[j], gns[j] = make([]float32, hidden), x[:dim], 1
	}
	for j := range dn {
		dn[j], dxs[j], dns[j] = make([]float32, dim), gu[2*j], 1
	}
	logits := make([]float32, vocab)
	step := func() (time.Duration, float64) {
		c0, t0 := processCPU(), time.Now()
		for _, l := range ls {
			MatMulGroup([][]float32{q, k, v}, x[:dim], 1, l.qkv)
			MatMul(o, x[:heads], 1, l.o[0])
			MatMulEach(gu, gxs, gns, l.gateUp)
			MatMulEach(dn, dxs, dns, l.down)
		}
		MatMul(logits, x[:dim], 1, out)
		return time.Since(t0), processCPU() - c0
	}
	savedSteal, savedEach := guidedSteal, eachGuided
	defer func() { guidedSteal, eachGuided = savedSteal, savedEach }()
	set := []func(){func() { guidedSteal, eachGuided = false, false }, func() { guidedSteal, eachGuided = true, true }}
	step()
	var ratios, cpuRatios []float64
	b.ResetTimer()
	for i := range b.N {
		var t [2]time.Duration
		var c [2]float64
		for j := range 2 {
			jj := (i + j) % 2
			set[jj]()
			t[jj], c[jj] = step()
		}
		ratios = append(ratios, float64(t[0])/float64(t[1]))
		cpuRatios = append(cpuRatios, c[0]/c[1])
	}
	sort.Float64s(ratios)
	sort.Float64s(cpuRatios)
	b.ReportMetric(ratios[len(ratios)/2], "steal-x")
	b.ReportMetric(cpuRatios[len(cpuRatios)/2], "steal-cpu-x")
}
