package ml

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/kvwarden/kvwarden/engine/model/gguf/mmap"
)

// decodeSet is the matrices one decode token of a TinyLlama-1.1B-shaped
// model streams (22 layers of Q, K, V, O, gate, up, down and the output
// matrix), in the groups the forward pass calls them in.
type decodeSet struct {
	layers [][7]*Matrix
	out    *Matrix
	bytes  int64
}

var decodeSets = map[string]*decodeSet{}

// benchHuge reports whether KVW_BENCH_HUGE=1 asks for the decode sets'
// weights on 2 MiB pages (as a weight file whose page cache is in 2 MiB
// folios is mapped; mmap.Recache) rather than on the Go heap's 4 KiB
// pages.
func benchHuge() bool { return os.Getenv("KVW_BENCH_HUGE") == "1" }

// hugeArena is the rest of the current anonymous mapping advised for
// 2 MiB pages that hugeBytes carves slices from.
var hugeArena []byte

// hugeBytes returns n bytes (64-byte aligned) from anonymous memory
// advised for 2 MiB pages; the benchmark sets keep them for the process.
func hugeBytes(b *testing.B, n int) []byte {
	n = (n + 63) &^ 63
	if len(hugeArena) < n {
		size := max(n, 256<<20)
		m, err := hugeAlloc(size)
		if err != nil {
			b.Fatal(err)
		}
		hugeArena = m
	}
	out := hugeArena[:n:n]
	hugeArena = hugeArena[n:]
	return out
}

// tinyLlamaSet builds the set with body matrices of type body and the
// output (and, as in llama.cpp's _M mixes, V and down) of type out. With
// layers < 22 it is that many layers and no output matrix.
func tinyLlamaSet(b *testing.B, body, out Type, layers int) *decodeSet {
	key := fmt.Sprint(body, out, layers, benchHuge())
	if s := decodeSets[key]; s != nil {
		return s
	}
	const dim, hidden, kvDim, vocab = 2048, 5632, 256, 32000
	r := rand.New(rand.NewPCG(5, uint64(body)))
	s := &decodeSet{}
	mk := func(t Type, rows, cols int) *Matrix {
		data := randBlocks(r, t, rows*cols/t.BlockSize())
		if t == F16 {
			// Finite values of magnitude 2^-7..2^-6 (no NaN, no subnormals).
			for i := 0; i < len(data); i += 2 {
				data[i+1] = data[i+1]&0x83 | 0x20
			}
		}
		if benchHuge() {
			data = append(hugeBytes(b, len(data))[:0], data...)
		}
		m, err := NewMatrix(t, rows, cols, data)
		if err != nil {
			b.Fatal(err)
		}
		s.bytes += int64(len(m.Data))
		return m
	}
	for range layers {
		s.layers = append(s.layers, [7]*Matrix{
			mk(body, dim, dim), mk(body, kvDim, dim), mk(out, kvDim, dim), mk(body, dim, dim),
			mk(body, hidden, dim), mk(body, hidden, dim), mk(out, dim, hidden),
		})
	}
	if layers == 22 {
		s.out = mk(out, vocab, dim)
	}
	decodeSets[key] = s
	return s
}

// BenchmarkDecodeStream runs the matrix-vector products of one decode
// token of the 1B shape (no attention, norms or sampling: the weight
// stream alone) and reports the weight bytes read per second against the
// read bandwidth measured just before on the same threads (of-bound).
// "l3" is one layer's attention products (5 MB in Q4_K), cache-resident:
// the kernels' rate without DRAM.
//
//	KVW_THREADS=2 go test -run '^$' -bench DecodeStream -benchtime 10x ./engine/ml/
func BenchmarkDecodeStream(b *testing.B) {
	for _, c := range []struct {
		name      string
		body, out Type
	}{{"Q4_K_M", Q4_K, Q6_K}, {"Q6_K", Q6_K, Q6_K}, {"Q8_0", Q8_0, Q8_0}, {"F16", F16, F16}} {
		for _, where := range []string{"dram", "l3"} {
			b.Run(c.name+"/"+where, func(b *testing.B) {
				layers := 22
				if where == "l3" {
					layers = 1
				}
				s := tinyLlamaSet(b, c.body, c.out, layers)
				x := randF32(rand.New(rand.NewPCG(1, 2)), 5632)
				q, k, v := make([]float32, 2048), make([]float32, 256), make([]float32, 256)
				o, g, u := make([]float32, 2048), make([]float32, 5632), make([]float32, 5632)
				logits := make([]float32, 32000)
				dsts3, dsts2 := [][]float32{q, k, v}, [][]float32{g, u}
				step := func() {
					if where == "l3" {
						l := s.layers[0]
						MatMulGroup(dsts3, x[:2048], 1, l[:3])
						MatMul(o, x[:2048], 1, l[3])
						return
					}
					for _, l := range s.layers {
						MatMulGroup(dsts3, x[:2048], 1, l[:3])
						MatMul(o, x[:2048], 1, l[3])
						MatMulGroup(dsts2, x[:2048], 1, l[4:6])
						MatMul(o, x[:5632], 1, l[6])
					}
					if s.out != nil {
						MatMul(logits, x[:2048], 1, s.out)
					}
				}
				step()
				var bw float64
				if where == "dram" {
					bw = measureBandwidth()
				}
				b.ResetTimer()
				c0 := processCPU()
				for range b.N {
					step()
				}
				cpu := processCPU() - c0
				sec := b.Elapsed().Seconds() / float64(b.N)
				bytes := s.bytes
				if where == "l3" {
					bytes = 0
					for _, m := range s.layers[0][:4] {
						bytes += int64(len(m.Data))
					}
				}
				b.ReportMetric(float64(bytes)/sec/1e9, "GB/s")
				// Bytes per CPU-second of the whole process (spinning
				// workers included): the per-core rate, which time slices
				// lost to other processes do not lower.
				b.ReportMetric(float64(bytes)*float64(b.N)/cpu/1e9, "GB/cpu-s")
				if bw > 0 {
					b.ReportMetric(bw/1e9, "bwGB/s")
					b.ReportMetric(float64(s.bytes)/sec/bw, "of-bound")
					b.ReportMetric(1/sec, "tok/s")
				}
			})
		}
	}
}

// anonHuge reports how many bytes of the mapping holding b are on 2 MiB
// pages (AnonHugePages in smaps) and how many are resident.
func anonHuge(b *testing.B, data []byte) (huge, resident int64) {
	huge, resident, err := mmap.HugeMapped(data)
	if err != nil {
		b.Fatal(err)
	}
	return huge, resident
}
