package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/arch"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
	"github.com/kvwarden/kvwarden/engine/model/gguf/mmap"
)

// Load opens a model file, telling the format from its first bytes: GGUF
// files (magic "GGUF") go to LoadGGUF, anything else to LoadLlama2C; a
// file that is not a llama2.c checkpoint either is ErrNotModelFile. The
// *gguf.File is nil for llama2.c checkpoints; for GGUF files it carries
// the tokenizer metadata. Weights.Close releases the file mapping (and
// closes the gguf.File); the File's metadata stays usable after that.
func Load(path string) (*Weights, *gguf.File, error) { return LoadWith(path, LoadOptions{}) }

// LoadWith is Load with options.
func LoadWith(path string, o LoadOptions) (*Weights, *gguf.File, error) {
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
		return loadGGUF(path, o)
	}
	w, err := loadLlama2C(path, o)
	if fe := (*llama2cFormatError)(nil); errors.As(err, &fe) {
		return nil, nil, notModelFile(path, fe)
	}
	return w, nil, err
}

// LoadGGUF maps a GGUF file of a registered architecture (arch.Names) and
// returns its weights, which point into the mapping wherever the storage
// type allows (matrices of every ml.SupportedTypes type are not copied), together with
// the parsed file for the tokenizer (tokenizer.ggml.* metadata).
// Weights.Close unmaps the file.
//
// See FromGGUF for how metadata becomes Config.
func LoadGGUF(path string) (*Weights, *gguf.File, error) { return loadGGUF(path, LoadOptions{}) }

func loadGGUF(path string, o LoadOptions) (*Weights, *gguf.File, error) {
	f, err := gguf.OpenWith(path, mmap.Options{Mode: o.Mode})
	if err != nil {
		return nil, nil, err
	}
	w, err := FromGGUF(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	w.Name = filepath.Base(path)
	w.Placement = f.Placement()
	w.SetCloser(f)
	return w, f, nil
}

// FromGGUF builds weights from a parsed GGUF file (from gguf.Open or
// gguf.Parse). The weights alias f's data; closing f invalidates them.
//
// general.architecture selects the registry entry (engine/model/arch);
// an unknown one is an ErrUnsupported error listing the supported ones.
// Config comes from the <arch>.* metadata: embedding_length (Dim),
// feed_forward_length (Hidden), block_count, attention.head_count,
// attention.head_count_kv (default: head_count), attention.key_length
// (HeadDim; default Dim/heads), attention.layer_norm_rms_epsilon,
// rope.freq_base (default 10000), rope.dimension_count (default HeadDim),
// rope.scaling.* (none, linear, yarn; others are refused by name), and
// context_length; the architecture's Describe reads the rest into
// Config.Block. Vocab is the row count of token_embd. BOS and EOS come
// from tokenizer.ggml.bos_token_id and eos_token_id (-1 when absent). A
// missing output tensor means tied embeddings: Output is Embed. Every
// tensor of the file must be used: one the description does not read is
// refused rather than silently ignored.
//
// Context length: Config.MaxContext is the file's context_length, taken at
// its word, even where it is known to be too small. The case in point is
// stories260K.gguf: llama.cpp's llama2.c converter hard-codes
// context_length = 128 although the checkpoint was trained with seq_len
// 512. The loader does not second-guess metadata; instead the engine and
// CLI accept an explicit max-context override that may exceed the file's
// claim (with a warning), as llama.cpp does with -c 512. Greedy output of
// that model stays identical to run.c well past 128 positions (RoPE has no
// trained length limit; quality beyond the training length is the user's
// risk).
func FromGGUF(f *gguf.File) (*Weights, error) {
	name := f.Architecture()
	if name == "bert" || name == "nomic-bert" || name == "jina-bert-v2" {
		return fromGGUFBert(f)
	}
	if name == "modern-bert" {
		return fromGGUFModernBert(f)
	}
	a, err := arch.Lookup(name)
	if err != nil {
		return nil, err
	}
	g := &ggufLoader{f: f, arch: name, used: map[string]bool{}}
	cfg, err := g.config(a)
	if err != nil {
		return nil, err
	}
	if err := g.checkCounts(cfg); err != nil {
		return nil, err
	}
	if _, ok := g.tensor("blk.0.attn_q_norm"); ok && a.QKNormIfPresent {
		cfg.Block.QKNorm = true
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
	if w.Norm, err = g.norm("output_norm", cfg.Dim); err != nil {
		return nil, err
	}
	for _, rf := range []struct {
		dst  *[]float32
		name string
	}{{&w.RopeFreqs, "rope_freqs"}, {&w.RopeLong, "rope_factors_long"}, {&w.RopeShort, "rope_factors_short"}} {
		if _, ok := g.tensor(rf.name); ok {
			if *rf.dst, err = g.vector(rf.name, cfg.RopeDim/2); err != nil {
				return nil, err
			}
		}
	}
	qDim, kvDim := cfg.Heads*cfg.HeadDim, cfg.KVDim()
	ffnNorm := a.FFNNorm
	if ffnNorm == "" {
		ffnNorm = "ffn_norm"
	}
	w.Layers = make([]Layer, cfg.Layers)
	for i := range w.Layers {
		l := &w.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		oCols := qDim
		if cfg.Block.MLA.KVRank > 0 {
			if err := g.latentAttn(l, p, cfg); err != nil {
				return nil, err
			}
			oCols = cfg.Heads * cfg.Block.MLA.VDim
		} else if a.FusedQKV {
			qkv, err := g.matrix(p+"attn_qkv", qDim+2*kvDim, cfg.Dim)
			if err != nil {
				return nil, err
			}
			parts := splitRows(qkv, qDim, kvDim, kvDim)
			l.Q, l.K, l.V = parts[0], parts[1], parts[2]
		} else {
			for _, m := range []struct {
				dst  **ml.Matrix
				name string
				rows int
			}{{&l.Q, "attn_q", qDim}, {&l.K, "attn_k", kvDim}, {&l.V, "attn_v", kvDim}} {
				if *m.dst, err = g.matrix(p+m.name, m.rows, cfg.Dim); err != nil {
					return nil, err
				}
			}
		}
		if l.O, err = g.matrix(p+"attn_output", cfg.Dim, oCols); err != nil {
			return nil, err
		}
		if cfg.Block.MoELayer(i) {
			if l.MoE, err = g.experts(p, cfg); err != nil {
				return nil, err
			}
		} else if err := g.denseFFN(l, p, a, cfg); err != nil {
			return nil, err
		}
		for _, v := range []struct {
			dst  *[]float32
			name string
			n    int
			want bool
			norm bool
		}{
			{&l.AttnNorm, "attn_norm", cfg.Dim, true, true},
			{&l.FFNNorm, ffnNorm, cfg.Dim, true, true},
			{&l.QNorm, "attn_q_norm", cfg.HeadDim, cfg.Block.QKNorm, true},
			{&l.KNorm, "attn_k_norm", cfg.HeadDim, cfg.Block.QKNorm, true},
			{&l.PostAttnNorm, "post_attention_norm", cfg.Dim, cfg.Block.PostNorms, true},
			{&l.PostFFNNorm, "post_ffw_norm", cfg.Dim, cfg.Block.PostNorms, true},
		} {
			if !v.want {
				continue
			}
			if *v.dst, err = g.norm(p+v.name, v.n); err != nil {
				return nil, err
			}
		}
		// Biases are optional in every architecture: used when present.
		for _, v := range []struct {
			dst  *[]float32
			name string
			n    int
		}{
			{&l.QBias, "attn_q.bias", qDim}, {&l.KBias, "attn_k.bias", kvDim},
			{&l.VBias, "attn_v.bias", kvDim}, {&l.OBias, "attn_output.bias", cfg.Dim},
			{&l.Sinks, "attn_sinks.weight", cfg.Heads},
		} {
			if t, ok := f.Tensor(p + v.name); ok {
				if *v.dst, err = g.vector(t.Name, v.n); err != nil {
					return nil, err
				}
			}
		}
	}
	// A reranker's head (Qwen3-Reranker: cls.output, the yes/no rows).
	if w.Rank, err = g.rankHead(w.Config, false); err != nil {
		return nil, err
	}
	// A tensor nothing reads would silently change the results if ignored
	// (an FFN bias, a fused tensor of another layout).
	for _, t := range f.Tensors {
		if !g.used[t.Name] && !g.skipped(t.Name) {
			return nil, fmt.Errorf("%w: tensor %s (%v %v) is not part of the %s block this engine implements", ErrUnsupported, t.Name, t.Type, t.Dims, name)
		}
	}
	if err := w.Check(); err != nil {
		return nil, err
	}
	return w, nil
}

// checkCounts holds the metadata's counts to what the file really carries,
// before anything is sized by them. block_count sizes the layer slice: a
// 2 KB file claiming 2^30 blocks made the loader ask for ~318 GB (a fatal
// out-of-memory error, not a Go error) before it looked at a single tensor.
// Every block needs its own tensors, so the file must hold an attn_norm
// tensor for each block it claims. The other counts (head counts, head
// and hidden sizes, expert counts, the vocabulary) size nothing before a
// tensor of the file confirms them: each matrix and vector is checked
// against the product of the counts before it is used (expert counts
// against ffn_gate_inp and the ffn_*_exps dimensions), the vocabulary is
// token_embd's row count, and tokenizer and per-layer arrays were bounded
// by the file size when the file was parsed (gguf.Parse).
func (g *ggufLoader) checkCounts(c Config) error {
	if c.Layers > len(g.f.Tensors) {
		return fmt.Errorf("model: gguf %s.block_count is %d but the file has %d tensors in all (each block needs several)",
			g.arch, c.Layers, len(g.f.Tensors))
	}
	have := 0
	for i := range c.Layers {
		if _, ok := g.tensor(fmt.Sprintf("blk.%d.attn_norm", i)); ok {
			have++
		}
	}
	if have < c.Layers {
		return fmt.Errorf("model: gguf %s.block_count is %d but the file holds blk.N.attn_norm for %d of those blocks",
			g.arch, c.Layers, have)
	}
	return nil
}

// denseFFN loads layer prefix p's gated FFN (gate and up fused in ffn_up
// where the architecture says so).
func (g *ggufLoader) denseFFN(l *Layer, p string, a arch.Arch, cfg Config) error {
	var err error
	if a.FusedGateUp {
		gu, err := g.matrix(p+"ffn_up", 2*cfg.Hidden, cfg.Dim)
		if err != nil {
			return err
		}
		parts := splitRows(gu, cfg.Hidden, cfg.Hidden)
		l.Gate, l.Up = parts[0], parts[1]
	} else {
		if l.Gate, err = g.matrix(p+"ffn_gate", cfg.Hidden, cfg.Dim); err != nil {
			return err
		}
		if l.Up, err = g.matrix(p+"ffn_up", cfg.Hidden, cfg.Dim); err != nil {
			return err
		}
	}
	l.Down, err = g.matrix(p+"ffn_down", cfg.Dim, cfg.Hidden)
	return err
}

// splitRows views consecutive row ranges of m as matrices, without copying.
func splitRows(m *ml.Matrix, rows ...int) []*ml.Matrix {
	rb, _ := m.Type.RowBytes(m.Cols)
	out := make([]*ml.Matrix, len(rows))
	r0 := 0
	for i, n := range rows {
		out[i] = &ml.Matrix{Type: m.Type, Rows: n, Cols: m.Cols, Data: m.Data[r0*rb : (r0+n)*rb : (r0+n)*rb]}
		r0 += n
	}
	return out
}

type ggufLoader struct {
	f    *gguf.File
	arch string
	used map[string]bool // tensors read

	// for arch.Meta
	dim, heads, headDim, layers int
	normOffset                  float32
	// nextn is the count of trailing multi-token-prediction layers
	// (nextn_predict_layers), whose tensors are skipped.
	nextn int
}

// skipped reports whether tensor name belongs to a skipped trailing
// layer (blk.N. with N at or past the decoder's layers).
func (g *ggufLoader) skipped(name string) bool {
	if g.nextn == 0 {
		return false
	}
	var n int
	if _, err := fmt.Sscanf(name, "blk.%d.", &n); err != nil {
		return false
	}
	return n >= g.layers && n < g.layers+g.nextn
}

// arch.Meta, over the architecture's metadata keys.
func (g *ggufLoader) Uint(key string, def int) (int, error) { return g.uint(key, def) }
func (g *ggufLoader) Float(key string, def float64, required bool) (float64, error) {
	return g.float(key, def, required)
}
func (g *ggufLoader) Has(key string) bool { return g.f.Has(g.arch + "." + key) }
func (g *ggufLoader) Layers() int         { return g.layers }
func (g *ggufLoader) Dim() int            { return g.dim }
func (g *ggufLoader) Heads() int          { return g.heads }
func (g *ggufLoader) HeadDim() int        { return g.headDim }

func (g *ggufLoader) Bool(key string, def bool) (bool, error) {
	k := g.arch + "." + key
	kv, ok := g.f.Lookup(k)
	if !ok {
		return def, nil
	}
	v, ok := g.f.Bool(k)
	if !ok {
		return false, fmt.Errorf("model: gguf metadata %s at offset %d has type %v, want a bool", k, kv.Offset, kv.Type)
	}
	return v, nil
}

// uint reads a required (def < 0) or optional non-negative integer key.
func (g *ggufLoader) uint(suffix string, def int) (int, error) {
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
			return 0, fmt.Errorf("%w: gguf metadata %s is a per-layer array", ErrUnsupported, key)
		}
		return 0, fmt.Errorf("model: gguf metadata %s at offset %d has type %v, want a non-negative integer", key, kv.Offset, kv.Type)
	}
	if v > 1<<30 {
		return 0, fmt.Errorf("model: gguf metadata %s = %d at offset %d is implausibly large", key, v, kv.Offset)
	}
	return int(v), nil
}

// float reads a required (ok == false) or optional float key.
func (g *ggufLoader) float(suffix string, def float64, required bool) (float64, error) {
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

func (g *ggufLoader) config(a arch.Arch) (Config, error) {
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
	get(&g.nextn, "nextn_predict_layers", 0)
	get(&c.Heads, "attention.head_count", -1)
	get(&c.MaxContext, "context_length", -1)
	get(&c.KVHeads, "attention.head_count_kv", c.Heads)
	if err != nil {
		return c, err
	}
	if g.nextn > 0 {
		// Multi-token-prediction layers trail the decoder's; the forward
		// pass does not run them (as llama.cpp does not).
		if g.nextn >= c.Layers {
			return c, fmt.Errorf("model: gguf %s.nextn_predict_layers %d leaves none of the %d layers", g.arch, g.nextn, c.Layers)
		}
		c.Layers -= g.nextn
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
	if c.Block.Scaling, err = arch.ScalingFromMeta(g, scaling); err != nil {
		return c, err
	}
	c.Arch = g.arch
	g.dim, g.heads, g.headDim, g.layers = c.Dim, c.Heads, c.HeadDim, c.Layers
	if err := a.Describe(g, &c.Block); err != nil {
		return c, fmt.Errorf("model: %s metadata: %w", g.arch, err)
	}
	g.normOffset = c.Block.NormOffset
	// Latent attention's values are the latent (its first kv_lora_rank
	// key values); everywhere else V is as wide as K.
	if mla := c.Block.MLA; mla.KVRank > 0 && vdim != mla.KVRank {
		return c, fmt.Errorf("model: gguf %s.attention.value_length %d differs from kv_lora_rank %d", g.arch, vdim, mla.KVRank)
	} else if mla.KVRank == 0 && vdim != c.HeadDim {
		return c, fmt.Errorf("%w: gguf %s.attention.value_length %d differs from key_length %d", ErrUnsupported, g.arch, vdim, c.HeadDim)
	}
	if err := g.pooling(&c); err != nil {
		return c, err
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
func (g *ggufLoader) vocab(c *Config) error {
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
func (g *ggufLoader) tensor(name string) (*gguf.TensorInfo, bool) {
	if t, ok := g.f.Tensor(name + ".weight"); ok {
		return t, true
	}
	return g.f.Tensor(name)
}

// use finds a tensor the model reads and marks it used.
func (g *ggufLoader) use(name string) (*gguf.TensorInfo, error) {
	t, ok := g.tensor(name)
	if !ok {
		return nil, fmt.Errorf("%w: gguf tensor %s is missing (architecture %s needs it)", ErrUnsupported, name, g.arch)
	}
	g.used[t.Name] = true
	return t, nil
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
func (g *ggufLoader) matrix(name string, rows, cols int) (*ml.Matrix, error) {
	t, err := g.use(name)
	if err != nil {
		return nil, err
	}
	r, c, ok := shape2(t)
	if !ok || c != uint64(cols) || (rows >= 0 && r != uint64(rows)) || r == 0 || r > math.MaxInt32 {
		want := fmt.Sprint(rows)
		if rows < 0 {
			want = "vocab"
		}
		return nil, fmt.Errorf("model: gguf tensor %s has dims %v, want [%d %s] (ggml order: columns first)", t.Name, t.Dims, cols, want)
	}
	typ := t.Type
	if !typ.Supported() {
		return nil, fmt.Errorf("%w: gguf tensor %s has type %v (supported: %s): %w", ErrUnsupported, t.Name, t.Type, ml.SupportedTypeNames(), ml.ErrUnsupportedType)
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
func (g *ggufLoader) vector(name string, n int) ([]float32, error) {
	t, err := g.use(name)
	if err != nil {
		return nil, err
	}
	r, c, ok := shape2(t)
	if !ok || r != 1 || c != uint64(n) {
		return nil, fmt.Errorf("model: gguf tensor %s has dims %v, want [%d]", t.Name, t.Dims, n)
	}
	return decodeF32(t.Name, t.Type, t.Data, n)
}

// norm is vector plus the block's norm weight offset (a copy when the
// offset is not zero).
func (g *ggufLoader) norm(name string, n int) ([]float32, error) {
	v, err := g.vector(name, n)
	if err != nil || g.normOffset == 0 {
		return v, err
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = x + g.normOffset
	}
	return out, nil
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
	return nil, fmt.Errorf("%w: gguf tensor %s has type %v; vectors (norms, biases) must be F32, F16 or BF16", ErrUnsupported, name, typ)
}

// alignedCopy copies b into memory aligned for float32.
func alignedCopy(b []byte) []byte {
	f := make([]float32, (len(b)+3)/4)
	out := unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(b))
	copy(out, b)
	return out
}
