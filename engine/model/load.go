package model

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
)

// Load opens a model file, telling the format from its first bytes: GGUF
// files (magic "GGUF") go to LoadGGUF, anything else to LoadLlama2C. The
// *gguf.File is nil for llama2.c checkpoints; for GGUF files it carries
// the tokenizer metadata. Weights.Close releases the file mapping (and
// closes the gguf.File); the File's metadata stays usable after that.
func Load(path string) (*Weights, *gguf.File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	var magic [4]byte
	n, err := io.ReadFull(fh, magic[:])
	fh.Close()
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, nil, err
	}
	if n == 4 && string(magic[:]) == gguf.Magic {
		return LoadGGUF(path)
	}
	w, err := LoadLlama2C(path)
	return w, nil, err
}

// LoadGGUF maps a GGUF file of architecture "llama" and returns its
// weights, which point into the mapping wherever the storage type allows
// (F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K matrices are not copied), together
// with the parsed file for the tokenizer (tokenizer.ggml.* metadata).
// Weights.Close unmaps the file.
//
// See FromGGUF for how metadata becomes Config.
func LoadGGUF(path string) (*Weights, *gguf.File, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, nil, err
	}
	w, err := FromGGUF(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	w.Name = filepath.Base(path)
	w.SetCloser(f)
	return w, f, nil
}

// FromGGUF builds weights from a parsed GGUF file (from gguf.Open or
// gguf.Parse). The weights alias f's data; closing f invalidates them.
//
// Config comes from the llama.* metadata: embedding_length (Dim),
// feed_forward_length (Hidden), block_count, attention.head_count,
// attention.head_count_kv (default: head_count), attention.key_length
// (HeadDim; default Dim/heads), attention.layer_norm_rms_epsilon,
// rope.freq_base (default 10000), rope.dimension_count (default HeadDim),
// rope.scaling.type/factor (or the older rope.scale_linear; only linear
// scaling is implemented), and context_length. Vocab is the row count of
// token_embd. BOS and EOS come from tokenizer.ggml.bos_token_id and
// eos_token_id (-1 when absent). A missing output tensor means tied
// embeddings: Output is Embed.
//
// Context length: Config.MaxContext is the file's llama.context_length,
// taken at its word, even where it is known to be too small. The case in
// point is stories260K.gguf: llama.cpp's llama2.c converter hard-codes
// context_length = 128 although the checkpoint was trained with seq_len
// 512. The loader does not second-guess metadata; instead the engine and
// CLI accept an explicit max-context override that may exceed the file's
// claim (with a warning), as llama.cpp does with -c 512. Greedy output of
// that model stays identical to run.c well past 128 positions (RoPE has no
// trained length limit; quality beyond the training length is the user's
// risk).
func FromGGUF(f *gguf.File) (*Weights, error) {
	arch := f.Architecture()
	if arch != "llama" {
		if arch == "" {
			return nil, fmt.Errorf("model: gguf metadata general.architecture is missing; want %q", "llama")
		}
		return nil, fmt.Errorf("model: gguf architecture %q is not supported (only %q)", arch, "llama")
	}
	g := ggufLoader{f: f, arch: arch}
	cfg, err := g.config()
	if err != nil {
		return nil, err
	}
	w := &Weights{Config: cfg, Name: "gguf", ChatTemplates: ChatTemplates(f)}
	if w.Embed, err = g.matrix("token_embd", -1, cfg.Dim); err != nil {
		return nil, err
	}
	w.Config.Vocab = w.Embed.Rows
	if err := g.vocab(&w.Config); err != nil {
		return nil, err
	}
	cfg = w.Config
	if _, ok := g.tensor("output"); ok {
		if w.Output, err = g.matrix("output", cfg.Vocab, cfg.Dim); err != nil {
			return nil, err
		}
	} else {
		w.Output = w.Embed // tied embeddings
	}
	if w.Norm, err = g.vector("output_norm", cfg.Dim); err != nil {
		return nil, err
	}
	qDim := cfg.Heads * cfg.HeadDim
	w.Layers = make([]Layer, cfg.Layers)
	for i := range w.Layers {
		l := &w.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		for _, m := range []struct {
			dst        **ml.Matrix
			name       string
			rows, cols int
		}{
			{&l.Q, "attn_q", qDim, cfg.Dim},
			{&l.K, "attn_k", cfg.KVDim(), cfg.Dim},
			{&l.V, "attn_v", cfg.KVDim(), cfg.Dim},
			{&l.O, "attn_output", cfg.Dim, qDim},
			{&l.Gate, "ffn_gate", cfg.Hidden, cfg.Dim},
			{&l.Up, "ffn_up", cfg.Hidden, cfg.Dim},
			{&l.Down, "ffn_down", cfg.Dim, cfg.Hidden},
		} {
			if *m.dst, err = g.matrix(p+m.name, m.rows, m.cols); err != nil {
				return nil, err
			}
		}
		if l.AttnNorm, err = g.vector(p+"attn_norm", cfg.Dim); err != nil {
			return nil, err
		}
		if l.FFNNorm, err = g.vector(p+"ffn_norm", cfg.Dim); err != nil {
			return nil, err
		}
	}
	// Tensors this architecture does not use would silently change the
	// results if ignored.
	for _, t := range f.Tensors {
		switch {
		case strings.HasSuffix(t.Name, ".bias"):
			return nil, fmt.Errorf("model: tensor %s: attention/FFN biases are not implemented for llama", t.Name)
		case strings.HasPrefix(t.Name, "rope_freqs"):
			return nil, fmt.Errorf("model: tensor %s: per-dimension RoPE frequency factors (Llama 3.1 rope scaling) are not implemented", t.Name)
		}
	}
	if err := w.Check(); err != nil {
		return nil, err
	}
	return w, nil
}

type ggufLoader struct {
	f    *gguf.File
	arch string
}

// uint reads a required (def < 0) or optional non-negative integer key.
func (g ggufLoader) uint(suffix string, def int) (int, error) {
	key := g.arch + "." + suffix
	kv, ok := g.f.Lookup(key)
	if !ok {
		if def < 0 {
			return 0, fmt.Errorf("model: gguf metadata %s is missing", key)
		}
		return def, nil
	}
	v, ok := g.f.Uint(key)
	if !ok {
		if _, isArr := kv.Value.(*gguf.Array); isArr {
			return 0, fmt.Errorf("model: gguf metadata %s is a per-layer array, which is not implemented", key)
		}
		return 0, fmt.Errorf("model: gguf metadata %s at offset %d has type %v, want a non-negative integer", key, kv.Offset, kv.Type)
	}
	if v > 1<<30 {
		return 0, fmt.Errorf("model: gguf metadata %s = %d at offset %d is implausibly large", key, v, kv.Offset)
	}
	return int(v), nil
}

// float reads a required (ok == false) or optional float key.
func (g ggufLoader) float(suffix string, def float64, required bool) (float64, error) {
	key := g.arch + "." + suffix
	kv, ok := g.f.Lookup(key)
	if !ok {
		if required {
			return 0, fmt.Errorf("model: gguf metadata %s is missing", key)
		}
		return def, nil
	}
	v, ok := g.f.Float(key)
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("model: gguf metadata %s at offset %d is not a finite number (%v %v)", key, kv.Offset, kv.Type, kv.Value)
	}
	return v, nil
}

func (g ggufLoader) config() (Config, error) {
	var c Config
	var err error
	get := func(dst *int, suffix string, def int) {
		if err == nil {
			*dst, err = g.uint(suffix, def)
		}
	}
	get(&c.Dim, "embedding_length", -1)
	get(&c.Hidden, "feed_forward_length", -1)
	get(&c.Layers, "block_count", -1)
	get(&c.Heads, "attention.head_count", -1)
	get(&c.MaxContext, "context_length", -1)
	get(&c.KVHeads, "attention.head_count_kv", c.Heads)
	if err != nil {
		return c, err
	}
	if c.Heads == 0 || c.Dim%c.Heads != 0 {
		return c, fmt.Errorf("model: gguf %s.embedding_length %d is not a multiple of attention.head_count %d", g.arch, c.Dim, c.Heads)
	}
	get(&c.HeadDim, "attention.key_length", c.Dim/c.Heads)
	var vdim int
	get(&vdim, "attention.value_length", c.HeadDim)
	get(&c.RopeDim, "rope.dimension_count", c.HeadDim)
	if err != nil {
		return c, err
	}
	if vdim != c.HeadDim {
		return c, fmt.Errorf("model: gguf %s.attention.value_length %d differs from key_length %d, which is not implemented", g.arch, vdim, c.HeadDim)
	}
	if n, ok := g.f.Uint(g.arch + ".expert_count"); ok && n > 0 {
		return c, fmt.Errorf("model: gguf %s.expert_count = %d: mixture-of-experts models are not implemented", g.arch, n)
	}

	eps, err := g.float("attention.layer_norm_rms_epsilon", 0, true)
	if err != nil {
		return c, err
	}
	c.NormEps = float32(eps)
	theta, err := g.float("rope.freq_base", 10000, false)
	if err != nil {
		return c, err
	}
	c.RopeTheta = float32(theta)

	scaling, _ := g.f.String(g.arch + ".rope.scaling.type")
	switch scaling {
	case "", "none":
		// The older key for linear scaling.
		scale, err := g.float("rope.scale_linear", 1, false)
		if err != nil {
			return c, err
		}
		if scale != 1 {
			c.RopeScaling, c.RopeScale = "linear", float32(scale)
		}
	case "linear":
		factor, err := g.float("rope.scaling.factor", 0, true)
		if err != nil {
			return c, err
		}
		c.RopeScaling, c.RopeScale = "linear", float32(factor)
	default:
		return c, fmt.Errorf("model: gguf %s.rope.scaling.type %q is not implemented (only linear)", g.arch, scaling)
	}
	if c.RopeScaling != "" && !(c.RopeScale > 0) {
		return c, fmt.Errorf("model: gguf rope scaling factor %g must be positive", c.RopeScale)
	}
	c.BOS, c.EOS = -1, -1
	c.Vocab = 1 // set from token_embd before Check
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}

// vocab checks the vocabulary size claims against token_embd and reads the
// BOS/EOS ids.
func (g ggufLoader) vocab(c *Config) error {
	if n, ok := g.f.Lookup(g.arch + ".vocab_size"); ok {
		if v, _ := g.f.Uint(n.Key); v != uint64(c.Vocab) {
			return fmt.Errorf("model: gguf %s = %v disagrees with token_embd's %d rows", n.Key, n.Value, c.Vocab)
		}
	}
	if toks, ok := g.f.Array("tokenizer.ggml.tokens"); ok && toks.Len() > c.Vocab {
		return fmt.Errorf("model: gguf tokenizer.ggml.tokens has %d entries, more than token_embd's %d rows", toks.Len(), c.Vocab)
	}
	id := func(key string) (int, error) {
		kv, ok := g.f.Lookup(key)
		if !ok {
			return -1, nil
		}
		if i, ok := g.f.Int(key); ok {
			switch {
			case i == -1 || i == math.MaxUint32:
				return -1, nil // "unset"
			case i >= 0 && i < int64(c.Vocab):
				return int(i), nil
			}
		}
		return 0, fmt.Errorf("model: gguf metadata %s = %v at offset %d is not a token id below %d", key, kv.Value, kv.Offset, c.Vocab)
	}
	var err error
	if c.BOS, err = id("tokenizer.ggml.bos_token_id"); err != nil {
		return err
	}
	c.EOS, err = id("tokenizer.ggml.eos_token_id")
	return err
}

// tensor finds name.weight or, failing that, name.
func (g ggufLoader) tensor(name string) (*gguf.TensorInfo, bool) {
	if t, ok := g.f.Tensor(name + ".weight"); ok {
		return t, true
	}
	return g.f.Tensor(name)
}

// shape2 returns (rows, cols) of a tensor with at most two dimensions
// larger than 1.
func shape2(t *gguf.TensorInfo) (rows, cols uint64, ok bool) {
	if len(t.Dims) < 1 {
		return 0, 0, false
	}
	cols, rows = t.Dims[0], 1
	if len(t.Dims) > 1 {
		rows = t.Dims[1]
	}
	for _, d := range t.Dims[min(2, len(t.Dims)):] {
		if d != 1 {
			return 0, 0, false
		}
	}
	return rows, cols, true
}

// matrix returns tensor name as a rows x cols matrix (rows < 0: any).
func (g ggufLoader) matrix(name string, rows, cols int) (*ml.Matrix, error) {
	t, ok := g.tensor(name)
	if !ok {
		return nil, fmt.Errorf("model: gguf tensor %s is missing", name)
	}
	r, c, ok := shape2(t)
	if !ok || c != uint64(cols) || (rows >= 0 && r != uint64(rows)) || r == 0 || r > math.MaxInt32 {
		want := fmt.Sprint(rows)
		if rows < 0 {
			want = "vocab"
		}
		return nil, fmt.Errorf("model: gguf tensor %s has dims %v, want [%d %s] (ggml order: columns first)", t.Name, t.Dims, cols, want)
	}
	var typ ml.Type
	switch t.Type {
	case gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeQ4_K, gguf.TypeQ6_K:
		typ = ml.Type(t.Type)
	default:
		return nil, fmt.Errorf("model: gguf tensor %s has type %v, which is not supported (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K are)", t.Name, t.Type)
	}
	data := t.Data
	// The kernels read F32 as float32 and 16-bit values as uint16; GGUF's
	// alignment normally guarantees this, but an odd general.alignment
	// would not, so copy in that case.
	align := uintptr(2)
	if typ == ml.F32 {
		align = 4
	}
	if len(data) > 0 && uintptr(unsafe.Pointer(&data[0]))%align != 0 {
		data = alignedCopy(data)
	}
	m, err := ml.NewMatrix(typ, int(r), int(c), data)
	if err != nil {
		return nil, fmt.Errorf("model: gguf tensor %s: %w", t.Name, err)
	}
	return m, nil
}

// vector returns a one-dimensional tensor of n values as float32,
// aliasing the file for aligned F32 data and converting F16/BF16.
func (g ggufLoader) vector(name string, n int) ([]float32, error) {
	t, ok := g.tensor(name)
	if !ok {
		return nil, fmt.Errorf("model: gguf tensor %s is missing", name)
	}
	r, c, ok := shape2(t)
	if !ok || r != 1 || c != uint64(n) {
		return nil, fmt.Errorf("model: gguf tensor %s has dims %v, want [%d]", t.Name, t.Dims, n)
	}
	return decodeF32(t.Name, t.Type, t.Data, n)
}

// decodeF32 turns n values of type typ into float32s, without copying
// aligned F32 data.
func decodeF32(name string, typ gguf.GGMLType, data []byte, n int) ([]float32, error) {
	switch typ {
	case gguf.TypeF32:
		if uintptr(unsafe.Pointer(&data[0]))%4 == 0 {
			return ml.BytesF32(data), nil
		}
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		return out, nil
	case gguf.TypeF16, gguf.TypeBF16:
		out := make([]float32, n)
		for i := range out {
			h := binary.LittleEndian.Uint16(data[2*i:])
			if typ == gguf.TypeF16 {
				out[i] = ml.F16ToF32(h)
			} else {
				out[i] = ml.BF16ToF32(h)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("model: gguf tensor %s has type %v; norm weights must be F32, F16 or BF16", name, typ)
}

// alignedCopy copies b into memory aligned for float32.
func alignedCopy(b []byte) []byte {
	f := make([]float32, (len(b)+3)/4)
	out := unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(b))
	copy(out, b)
	return out
}
