package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"path/filepath"
	"unsafe"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/gguf/mmap"
)

// llama2cHeaderBytes is the size of the legacy checkpoint header: seven
// int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
// seq_len).
const llama2cHeaderBytes = 28

// llama2cExportMagic starts llama2.c's newer "version 1/2" export files
// ("ak42" as a little-endian uint32), which this loader does not read.
const llama2cExportMagic = 0x616b3432

// LoadLlama2C maps a legacy (version 0) llama2.c checkpoint, as written by
// llama2.c's export.py --version 0 and run by run.c. The header is seven
// int32: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
// seq_len; a negative vocab_size means the classifier is not shared with
// the embedding and is stored after the (unused) freq_cis tables. The
// float32 weights follow in the order token_embedding, rms_att, wq, wk,
// wv, wo, rms_ffn, w1, w2, w3, rms_final, freq_cis_real, freq_cis_imag,
// [wcls]; w1 becomes Gate, w3 Up and w2 Down.
//
// The format records no hyperparameters beyond the header, so Config uses
// run.c's: NormEps 1e-5, RopeTheta 10000, HeadDim dim/n_heads, BOS 1,
// EOS 2, MaxContext seq_len. The weights alias the mapping (no copy);
// Weights.Close unmaps it. The file size must match the header exactly.
func LoadLlama2C(path string) (*Weights, error) { return loadLlama2C(path, LoadOptions{}) }

func loadLlama2C(path string, o LoadOptions) (*Weights, error) {
	r, err := mmap.MapWith(path, mmap.Options{Mode: o.Mode})
	if err != nil {
		return nil, err
	}
	w, err := llama2cFromBytes(r.Data)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("%s: %w", path, &llama2cFormatError{err})
	}
	w.Name = filepath.Base(path)
	w.Placement = r.Placement
	w.SetCloser(r)
	return w, nil
}

// llama2cFromBytes builds weights that alias data (copied first if data
// is not 4-byte aligned).
func llama2cFromBytes(data []byte) (*Weights, error) {
	if len(data) < llama2cHeaderBytes {
		return nil, fmt.Errorf("llama2c: file is %d bytes, too short for the %d-byte header", len(data), llama2cHeaderBytes)
	}
	var h [7]int32
	for i := range h {
		h[i] = int32(binary.LittleEndian.Uint32(data[4*i:]))
	}
	if uint32(h[0]) == llama2cExportMagic {
		return nil, fmt.Errorf("llama2c: file starts with magic \"ak42\" (llama2.c export version %d); only legacy version-0 checkpoints are supported", h[1])
	}
	names := [7]string{"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"}
	for i, v := range h {
		if i == 5 {
			if v == 0 || v == math.MinInt32 {
				return nil, fmt.Errorf("llama2c: header vocab_size at offset 20 is %d", v)
			}
			continue
		}
		if v <= 0 {
			return nil, fmt.Errorf("llama2c: header %s at offset %d is %d, must be positive", names[i], 4*i, v)
		}
	}
	dim, hidden, layers, heads, kvHeads, vocab, seqLen := int(h[0]), int(h[1]), int(h[2]), int(h[3]), int(h[4]), int(h[5]), int(h[6])
	shared := vocab > 0
	if !shared {
		vocab = -vocab
	}
	hdr := fmt.Sprintf("dim %d, hidden_dim %d, n_layers %d, n_heads %d, n_kv_heads %d, vocab_size %d, seq_len %d", h[0], h[1], h[2], h[3], h[4], h[5], h[6])
	if dim%heads != 0 {
		return nil, fmt.Errorf("llama2c: header (%s): dim is not a multiple of n_heads", hdr)
	}
	headDim := dim / heads
	if heads%kvHeads != 0 || headDim%2 != 0 {
		return nil, fmt.Errorf("llama2c: header (%s): n_heads must be a multiple of n_kv_heads and dim/n_heads even", hdr)
	}
	kvDim := kvHeads * headDim

	// Offsets in float32 units, overflow-checked: a bogus header must give
	// an error, not a wrapped size that happens to fit.
	var sz sizer
	embed := sz.add(vocab, dim)
	rmsAtt := sz.add(layers, dim)
	wq := sz.add(layers, dim, dim)
	wk := sz.add(layers, kvDim, dim)
	wv := sz.add(layers, kvDim, dim)
	wo := sz.add(layers, dim, dim)
	rmsFFN := sz.add(layers, dim)
	w1 := sz.add(layers, hidden, dim)
	w2 := sz.add(layers, dim, hidden)
	w3 := sz.add(layers, hidden, dim)
	rmsFinal := sz.add(dim)
	sz.add(seqLen, headDim/2) // freq_cis_real
	sz.add(seqLen, headDim/2) // freq_cis_imag
	wcls := embed
	if !shared {
		wcls = sz.add(vocab, dim)
	}
	have := uint64(len(data) - llama2cHeaderBytes)
	switch {
	case sz.overflow || sz.n > math.MaxInt64/4:
		return nil, fmt.Errorf("llama2c: header (%s) implies an impossibly large model", hdr)
	case have < 4*sz.n:
		return nil, fmt.Errorf("llama2c: file is truncated: %d bytes, but the header (%s) needs %d", len(data), hdr, 4*sz.n+llama2cHeaderBytes)
	case have > 4*sz.n:
		return nil, fmt.Errorf("llama2c: file is %d bytes, %d more than the header (%s) implies; not a legacy llama2.c checkpoint?", len(data), have-4*sz.n, hdr)
	}

	body := data[llama2cHeaderBytes:]
	if uintptr(unsafe.Pointer(&body[0]))%4 != 0 {
		body = alignedCopy(body)
	}
	f := ml.BytesF32(body)
	vec := func(off uint64, n int) []float32 { return f[off : off+uint64(n) : off+uint64(n)] }
	mat := func(off uint64, rows, cols int) *ml.Matrix {
		return ml.FromF32(rows, cols, vec(off, rows*cols))
	}

	w := &Weights{
		Config: Config{
			Dim: dim, Hidden: hidden, Layers: layers, Heads: heads, KVHeads: kvHeads,
			HeadDim: headDim, Vocab: vocab, MaxContext: seqLen,
			NormEps: 1e-5, RopeTheta: 10000, RopeDim: headDim, Arch: "llama",
			BOS: 1, EOS: 2,
		},
		Name:   "llama2.c",
		Embed:  mat(embed, vocab, dim),
		Norm:   vec(rmsFinal, dim),
		Layers: make([]Layer, layers),
	}
	if vocab < 3 {
		w.Config.BOS, w.Config.EOS = -1, -1
	}
	w.Output = w.Embed
	if !shared {
		w.Output = mat(wcls, vocab, dim)
	}
	for l := range w.Layers {
		u := uint64(l)
		w.Layers[l] = Layer{
			AttnNorm: vec(rmsAtt+u*uint64(dim), dim),
			Q:        mat(wq+u*uint64(dim*dim), dim, dim),
			K:        mat(wk+u*uint64(kvDim*dim), kvDim, dim),
			V:        mat(wv+u*uint64(kvDim*dim), kvDim, dim),
			O:        mat(wo+u*uint64(dim*dim), dim, dim),
			FFNNorm:  vec(rmsFFN+u*uint64(dim), dim),
			Gate:     mat(w1+u*uint64(hidden*dim), hidden, dim),
			Down:     mat(w2+u*uint64(dim*hidden), dim, hidden),
			Up:       mat(w3+u*uint64(hidden*dim), hidden, dim),
		}
	}
	if err := w.Check(); err != nil {
		return nil, fmt.Errorf("llama2c: %w", err)
	}
	return w, nil
}

// sizer lays out consecutive arrays, tracking overflow.
type sizer struct {
	n        uint64
	overflow bool
}

// add reserves the product of dims elements and returns their offset.
func (s *sizer) add(dims ...int) uint64 {
	off := s.n
	p := uint64(1)
	for _, d := range dims {
		hi, lo := bits.Mul64(p, uint64(d))
		if hi != 0 {
			s.overflow = true
		}
		p = lo
	}
	sum, carry := bits.Add64(s.n, p, 0)
	if carry != 0 {
		s.overflow = true
	}
	s.n = sum
	return off
}
