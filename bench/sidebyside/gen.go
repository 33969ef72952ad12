package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
)

// shapes are the model shapes mkgguf writes: the stories110M shape the
// earlier tables use, and the sizes people run (TinyLlama-1.1B, Llama-3-8B).
var shapes = map[string]model.Config{
	"110m": model.Stories110MConfig(),
	"1b": {
		Dim: 2048, Hidden: 5632, Layers: 22, Heads: 32, KVHeads: 4, HeadDim: 64,
		Vocab: 32000, MaxContext: 2048, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 64, BOS: 1, EOS: 2,
	},
	"8b": {
		Dim: 4096, Hidden: 14336, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128,
		Vocab: 128256, MaxContext: 8192, NormEps: 1e-5, RopeTheta: 500000, RopeDim: 128, BOS: 1, EOS: 2,
	},
}

func shapeNames() string {
	var s []string
	for k := range shapes {
		s = append(s, k)
	}
	sort.Strings(s)
	return strings.Join(s, "|")
}

// fileType is a llama.cpp file type: the base type of the matrices, the
// type of the attn_v/ffn_down matrices of the layers llama-quantize gives
// more bits (the _M mixes), of the output matrix, and general.file_type;
// experts is the type of the 3-D expert tensors where the mix gives them
// their own (MXFP4_MOE; F32, the zero value, where it does not).
type fileType struct {
	base, more, output, experts ml.Type
	ftype                       uint32
}

// fileTypes mirror what llama-quantize writes for these names: the
// K-quant _M mixes use Q6_K for the output matrix and for attn_v and
// ffn_down of the first and last eighth of the layers and every third
// layer between; Q4_0 keeps Q6_K for the output matrix.
var fileTypes = map[string]fileType{
	"f32":    {base: ml.F32, more: ml.F32, output: ml.F32, ftype: 0},
	"f16":    {base: ml.F16, more: ml.F16, output: ml.F16, ftype: 1},
	"bf16":   {base: ml.BF16, more: ml.BF16, output: ml.BF16, ftype: 32},
	"q8_0":   {base: ml.Q8_0, more: ml.Q8_0, output: ml.Q8_0, ftype: 7},
	"q4_0":   {base: ml.Q4_0, more: ml.Q4_0, output: ml.Q6_K, ftype: 2},
	"q4_k_m": {base: ml.Q4_K, more: ml.Q6_K, output: ml.Q6_K, ftype: 15},
	"q5_k_m": {base: ml.Q5_K, more: ml.Q6_K, output: ml.Q6_K, ftype: 17},
	"q6_k":   {base: ml.Q6_K, more: ml.Q6_K, output: ml.Q6_K, ftype: 18},
	// IQ4_XS everywhere but the output matrix (llama-quantize varies a
	// few attention matrices too; the bytes per token differ by little).
	"iq4_xs": {base: ml.IQ4_XS, more: ml.IQ4_XS, output: ml.Q6_K, ftype: 30},
}

func fileTypeNames() string {
	var s []string
	for k := range fileTypes {
		s = append(s, k)
	}
	sort.Strings(s)
	return strings.Join(s, "|")
}

// moreBits is llama-quantize's use_more_bits(i, n).
func moreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}

// splitmix is a small deterministic generator; each row has its own.
type splitmix uint64

func (s *splitmix) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// uniform is a value of unit variance, uniform in [-sqrt3, sqrt3).
func (s *splitmix) uniform() float32 {
	return (float32(s.next()>>40)/(1<<24)*2 - 1) * 1.7320508
}

func (s *splitmix) fill(p []byte) {
	for len(p) >= 8 {
		binary.LittleEndian.PutUint64(p, s.next())
		p = p[8:]
	}
	for i := range p {
		p[i] = byte(s.next())
	}
}

// randomTensor fills dst (rows x cols of type t) with random weights of
// standard deviation about 1/sqrt(cols). Quantized types get random
// blocks (random quants, scales chosen for that deviation and a mean near
// zero) rather than quantized random floats: the files are for speed, and
// a Go K-quant quantizer is not needed to write them. Rows are generated
// in parallel, each from its own seed, so the bytes do not depend on the
// number of threads.
func randomTensor(dst []byte, t ml.Type, rows, cols int, seed uint64) error {
	rb, err := t.RowBytes(cols)
	if err != nil {
		return err
	}
	if len(dst) != rows*rb {
		return fmt.Errorf("random %v tensor %dx%d: %d bytes, want %d", t, rows, cols, len(dst), rows*rb)
	}
	std := float32(1 / math.Sqrt(float64(cols)))
	var fillRow func(row []byte, s *splitmix)
	h := func(f float32) uint16 { return ml.F32ToF16(f) }
	switch t {
	case ml.F32:
		fillRow = func(row []byte, s *splitmix) {
			for i := 0; i < cols; i++ {
				binary.LittleEndian.PutUint32(row[4*i:], math.Float32bits(std*s.uniform()))
			}
		}
	case ml.F16, ml.BF16:
		conv := ml.F32ToF16
		if t == ml.BF16 {
			conv = ml.F32ToBF16
		}
		fillRow = func(row []byte, s *splitmix) {
			for i := 0; i < cols; i++ {
				binary.LittleEndian.PutUint16(row[2*i:], conv(std*s.uniform()))
			}
		}
	case ml.Q8_0: // d, 32 int8 (uniform int8: deviation 73.9)
		fillRow = func(row []byte, s *splitmix) {
			for b := 0; b < len(row); b += 34 {
				binary.LittleEndian.PutUint16(row[b:], h(std/73.9))
				s.fill(row[b+2 : b+34])
			}
		}
	case ml.Q4_0: // d, 16 bytes of 4-bit quants minus 8 (deviation 4.6)
		fillRow = func(row []byte, s *splitmix) {
			for b := 0; b < len(row); b += 18 {
				binary.LittleEndian.PutUint16(row[b:], h(std/4.6))
				s.fill(row[b+2 : b+18])
			}
		}
	case ml.Q4_K, ml.Q5_K:
		// d, dmin, 12 bytes of 6-bit scales and mins, [qh 32], qs 128.
		// Scales in [32,64) with mins of half the scale and dmin of
		// 15 (31 for Q5_K) d: each sub-block is centred near zero.
		levels, bb := float32(15), 144
		if t == ml.Q5_K {
			levels, bb = 31, 176
		}
		d := std / (levels / 3.46 * 47)
		fillRow = func(row []byte, s *splitmix) {
			for b := 0; b < len(row); b += bb {
				blk := row[b : b+bb]
				binary.LittleEndian.PutUint16(blk, h(d))
				binary.LittleEndian.PutUint16(blk[2:], h(d*levels))
				var sc, m [8]byte
				r := s.next()
				for j := range sc {
					sc[j] = 32 + byte(r>>(6*j))&31
					m[j] = sc[j] / 2
				}
				q := blk[4:16]
				for j := range 4 {
					q[j] = sc[j] | (sc[j+4]>>4)<<6
					q[j+4] = m[j] | (m[j+4]>>4)<<6
					q[j+8] = sc[j+4]&15 | (m[j+4]&15)<<4
				}
				s.fill(blk[16:])
			}
		}
	case ml.IQ4_XS:
		// d, then random 6-bit scales (minus 32) and 4-bit indices into
		// the non-linear table (values -127..113, deviation about 70).
		d := std / (18 * 70)
		fillRow = func(row []byte, s *splitmix) {
			for b := 0; b < len(row); b += 136 {
				binary.LittleEndian.PutUint16(row[b:], h(d))
				s.fill(row[b+2 : b+136])
			}
		}
	case ml.MXFP4:
		// An E8M0 scale, then 16 bytes of random E2M1 codes (doubled
		// values 0..12 and negatives, deviation 5.85): one power-of-two
		// scale for the whole tensor, the nearest to the deviation wanted.
		e := byte(128 + math.Round(math.Log2(float64(std)/5.85)))
		fillRow = func(row []byte, s *splitmix) {
			for b := 0; b < len(row); b += 17 {
				row[b] = e
				s.fill(row[b+1 : b+17])
			}
		}
	case ml.Q6_K:
		// ql 128, qh 64, 16 int8 scales, d: quants 0..63 minus 32
		// (deviation 18.5), scales in [16,48).
		d := std / (18.5 * 32)
		fillRow = func(row []byte, s *splitmix) {
			for b := 0; b < len(row); b += 210 {
				blk := row[b : b+210]
				s.fill(blk[:192])
				r := s.next()
				for j := range 16 {
					blk[192+j] = 16 + byte(r>>(4*j))&31
				}
				binary.LittleEndian.PutUint16(blk[208:], h(d))
			}
		}
	default:
		return fmt.Errorf("random %v tensors are not implemented", t)
	}
	var wg sync.WaitGroup
	var next int
	var mu sync.Mutex
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				lo := next
				next += 64
				mu.Unlock()
				if lo >= rows {
					return
				}
				for r := lo; r < min(lo+64, rows); r++ {
					s := splitmix(seed*0x9e3779b97f4a7c15 ^ uint64(r+1)*0xbf58476d1ce4e5b9)
					fillRow(dst[r*rb:(r+1)*rb], &s)
				}
			}
		}()
	}
	wg.Wait()
	return nil
}
