//go:build amd64 && !purego

package ml

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkKQ8Micro runs the eight-row Q4_K matvec kernels alone (no
// MatMul around them) over eight L1-resident rows of 4096 values, 100
// calls per iteration, alternating Z (512-bit) and Y (256-bit, scales
// decoded ahead) twice, and reports weight GB per thread-CPU-second: the
// kernels' instruction cost without DRAM or call overhead.
//
//	go test -run '^$' -bench KQ8Micro -benchtime 2000x ./engine/ml/
func BenchmarkKQ8Micro(b *testing.B) {
	if !useQ8VNNI() {
		b.Skip("no VNNI")
	}
	const cols = 4096
	nb := cols / 256
	r := rand.New(rand.NewPCG(1, 2))
	w := randBlocks(r, Q4_K, 8*nb)
	rb := nb * 144
	x := randF32(r, cols)
	act := make([]byte, nb*q8KActBlock)
	quantizeActGeneric(Q4_K.traits().act, act, x)
	var out [8]float32
	for _, k := range []struct {
		name string
		f    kqKernel
	}{{"Z", kqQ4KDot8VNNIZ}, {"Y", kqQ4KDot8VNNIY}, {"Z", kqQ4KDot8VNNIZ}, {"Y", kqQ4KDot8VNNIY}} {
		b.Run(k.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c0 := threadCPU()
			for range b.N {
				for range 100 {
					k.f(&w[0], rb, &act[0], 0, nb, &out[0])
				}
			}
			b.ReportMetric(float64(b.N)*100*float64(8*rb)/(threadCPU()-c0)/1e9, "cpu-GB/s")
		})
	}
}

// BenchmarkIQXMicro is BenchmarkKQ8Micro for the one-row IQ4_XS kernels:
// eight L1-resident rows of 4096 values (two four-row calls, or one call
// of the eight-row kernel: A8), alternating the kernels.
//
//	go test -run '^$' -bench IQXMicro -benchtime 2000x ./engine/ml/
func BenchmarkIQXMicro(b *testing.B) {
	if !useVBMI() {
		b.Skip("no VNNI and VBMI")
	}
	const cols = 4096
	nb := cols / 256
	r := rand.New(rand.NewPCG(1, 2))
	w := randBlocks(r, IQ4_XS, 8*nb)
	rb := nb * 136
	x := randF32(r, cols)
	act := make([]byte, nb*q8KActBlock)
	quantizeActGeneric(IQ4_XS.traits().act, act, x)
	arr := make([]byte, nb*iqxArrBlock)
	iqxArrangeAct(&arr[0], &act[0], nb)
	var out8 [8]float32
	for _, k := range []struct {
		name string
		f    kqKernel
		a    []byte
	}{
		{"Z", kqIQ4XSDot4VNNIZ, act}, {"M", kqIQ4XSDot4VNNIM, act}, {"A", kqIQ4XSDot4VNNIA, arr}, {"A8", nil, arr},
		{"Z", kqIQ4XSDot4VNNIZ, act}, {"M", kqIQ4XSDot4VNNIM, act}, {"A", kqIQ4XSDot4VNNIA, arr}, {"A8", nil, arr},
	} {
		b.Run(k.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c0 := threadCPU()
			for range b.N {
				for range 100 {
					if k.f == nil {
						kqIQ4XSDot8VNNIA(&w[0], rb, &k.a[0], 0, nb, &out8[0])
						continue
					}
					k.f(&w[0], rb, &k.a[0], 0, nb, &out8[0])
					k.f(&w[4*rb], rb, &k.a[0], 0, nb, &out8[0])
				}
			}
			b.ReportMetric(float64(b.N)*100*float64(8*rb)/(threadCPU()-c0)/1e9, "cpu-GB/s")
		})
	}
}
