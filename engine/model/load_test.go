package model

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/testmodels"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/arch"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
)

// testModelsDir returns the shared model directory: $KVWARDEN_TEST_MODELS,
// or ../shared/models next to the repository root (found through go.mod).
// When it is missing the test is skipped, or fails if $CI is set.
func testModelsDir(t testing.TB) string {
	t.Helper()
	return testmodels.RequireDir(t)
}

var stories260KConfig = Config{
	Dim: 64, Hidden: 172, Layers: 5, Heads: 8, KVHeads: 4, HeadDim: 8, Vocab: 512,
	MaxContext: 512, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 8, BOS: 1, EOS: 2, Arch: "llama",
}

func TestLoadGGUFStories260K(t *testing.T) {
	w, f, err := LoadGGUF(filepath.Join(testModelsDir(t), "stories260K.gguf"))
	require.NoError(t, err)
	defer w.Close()

	want := stories260KConfig
	want.MaxContext = 128 // the converter's hard-coded claim; see FromGGUF
	require.Equal(t, want, w.Config)
	require.Equal(t, "stories260K.gguf", w.Name)
	require.NotSame(t, w.Embed, w.Output, "the file has its own output tensor")
	require.Equal(t, w.Embed.Data, w.Output.Data)

	// No copies: the weights point into the mapping.
	emb, _ := f.Tensor("token_embd.weight")
	require.Same(t, &emb.Data[0], &w.Embed.Data[0])
	norm, _ := f.Tensor("blk.4.ffn_norm.weight")
	require.Same(t, &norm.Data[0], &ml.F32Bytes(w.Layers[4].FFNNorm)[0])

	// The tokenizer metadata is there for the tokenizer package.
	toks, ok := f.Strings("tokenizer.ggml.tokens")
	require.True(t, ok)
	require.Len(t, toks, 512)
	require.NoError(t, w.Close())
	require.NoError(t, w.Close())
	require.Len(t, toks, 512)
}

// TestLoadersAgree checks that the llama2.c checkpoint and its GGUF
// conversion give bit-identical weights.
func TestLoadersAgree(t *testing.T) {
	dir := testModelsDir(t)
	a, err := LoadLlama2C(filepath.Join(dir, "stories260K.bin"))
	require.NoError(t, err)
	defer a.Close()
	b, f, err := LoadGGUF(filepath.Join(dir, "stories260K.gguf"))
	require.NoError(t, err)
	defer b.Close()
	require.NotNil(t, f)

	ca, cb := a.Config, b.Config
	require.Equal(t, 512, ca.MaxContext)
	require.Equal(t, 128, cb.MaxContext)
	ca.MaxContext, cb.MaxContext = 0, 0
	require.Equal(t, ca, cb)

	mat := func(name string, x, y *ml.Matrix) {
		require.Equal(t, x.Type, y.Type, name)
		require.Equal(t, [2]int{x.Rows, x.Cols}, [2]int{y.Rows, y.Cols}, name)
		require.Equal(t, x.Data, y.Data, name)
	}
	mat("embed", a.Embed, b.Embed)
	mat("output", a.Output, b.Output)
	require.Equal(t, a.Norm, b.Norm)
	for i := range a.Layers {
		la, lb := a.Layers[i], b.Layers[i]
		require.Equal(t, la.AttnNorm, lb.AttnNorm)
		require.Equal(t, la.FFNNorm, lb.FFNNorm)
		mat("q", la.Q, lb.Q)
		mat("k", la.K, lb.K)
		mat("v", la.V, lb.V)
		mat("o", la.O, lb.O)
		mat("gate", la.Gate, lb.Gate)
		mat("up", la.Up, lb.Up)
		mat("down", la.Down, lb.Down)
	}
}

func TestLoadSniffsFormat(t *testing.T) {
	dir := testModelsDir(t)
	w, f, err := Load(filepath.Join(dir, "stories260K.gguf"))
	require.NoError(t, err)
	require.NotNil(t, f)
	require.Equal(t, 128, w.Config.MaxContext)
	require.NoError(t, w.Close())

	w, f, err = Load(filepath.Join(dir, "stories260K.bin"))
	require.NoError(t, err)
	require.Nil(t, f)
	require.Equal(t, 512, w.Config.MaxContext)
	require.NoError(t, w.Close())

	_, _, err = Load(filepath.Join(dir, "tok512.bin"))
	require.ErrorIs(t, err, ErrNotModelFile)
	require.ErrorContains(t, err, "tok512.bin: it does not start with the GGUF magic")
	require.ErrorContains(t, err, "llama2c: header")

	_, _, err = Load(filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// tinyModel is a small llama GGUF that tests can break one piece at a time.
type tinyModel struct {
	kvs     []tinyKV
	tensors []tinyTensor
}

type tinyKV struct {
	key   string
	value any // nil: leave out
}

type tinyTensor struct {
	name string
	typ  gguf.GGMLType
	dims []uint64
	data []byte // nil: zeros of the right size
}

func newTinyModel() *tinyModel {
	const dim, hidden, vocab, heads, kvHeads = 32, 64, 8, 4, 2
	m := &tinyModel{kvs: []tinyKV{
		{"general.architecture", "llama"},
		{"llama.context_length", uint32(64)},
		{"llama.embedding_length", uint32(dim)},
		{"llama.feed_forward_length", uint32(hidden)},
		{"llama.block_count", uint32(1)},
		{"llama.attention.head_count", uint32(heads)},
		{"llama.attention.head_count_kv", uint32(kvHeads)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-6)},
		{"llama.rope.freq_base", float32(500000)},
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>", "a", "b", "c", "d", "e"}},
		{"tokenizer.ggml.bos_token_id", uint32(1)},
		{"tokenizer.ggml.eos_token_id", uint32(2)},
	}}
	kvDim := uint64(dim / heads * kvHeads)
	add := func(name string, dims ...uint64) {
		m.tensors = append(m.tensors, tinyTensor{name: name, typ: gguf.TypeF32, dims: dims})
	}
	add("token_embd.weight", dim, vocab)
	add("output_norm.weight", dim)
	add("output.weight", dim, vocab)
	add("blk.0.attn_norm.weight", dim)
	add("blk.0.attn_q.weight", dim, dim)
	add("blk.0.attn_k.weight", dim, kvDim)
	add("blk.0.attn_v.weight", dim, kvDim)
	add("blk.0.attn_output.weight", dim, dim)
	add("blk.0.ffn_norm.weight", dim)
	add("blk.0.ffn_gate.weight", dim, hidden)
	add("blk.0.ffn_up.weight", dim, hidden)
	add("blk.0.ffn_down.weight", hidden, dim)
	return m
}

func (m *tinyModel) set(key string, value any) *tinyModel {
	for i := range m.kvs {
		if m.kvs[i].key == key {
			m.kvs[i].value = value
			return m
		}
	}
	m.kvs = append(m.kvs, tinyKV{key, value})
	return m
}

func (m *tinyModel) tensor(name string) *tinyTensor {
	for i := range m.tensors {
		if m.tensors[i].name == name {
			return &m.tensors[i]
		}
	}
	m.tensors = append(m.tensors, tinyTensor{name: name, typ: gguf.TypeF32, dims: []uint64{32}})
	return &m.tensors[len(m.tensors)-1]
}

func (m *tinyModel) drop(name string) *tinyModel {
	for i := range m.tensors {
		if m.tensors[i].name == name {
			m.tensors = append(m.tensors[:i], m.tensors[i+1:]...)
			break
		}
	}
	return m
}

func (m *tinyModel) bytes(t testing.TB) []byte {
	b := gguf.NewBuilder()
	for _, kv := range m.kvs {
		if kv.value != nil {
			b.Set(kv.key, kv.value)
		}
	}
	for i, tt := range m.tensors {
		data := tt.data
		if data == nil {
			n := uint64(1)
			for _, d := range tt.dims {
				n *= d
			}
			data = make([]byte, n/uint64(tt.typ.BlockSize())*uint64(tt.typ.BlockBytes()))
			for j := range data {
				data[j] = byte(i + j) // distinct, finite-ish contents
			}
			if tt.typ == gguf.TypeF32 {
				for j := 0; j+4 <= len(data); j += 4 {
					binary.LittleEndian.PutUint32(data[j:], math.Float32bits(float32(i)+float32(j)/1024))
				}
			}
		}
		b.AddTensor(tt.name, tt.typ, tt.dims, data)
	}
	data, err := b.Bytes()
	require.NoError(t, err)
	return data
}

func (m *tinyModel) load(t testing.TB) (*Weights, error) {
	f, err := gguf.Parse(m.bytes(t))
	require.NoError(t, err)
	return FromGGUF(f)
}

func TestFromGGUFTiny(t *testing.T) {
	w, err := newTinyModel().load(t)
	require.NoError(t, err)
	require.Equal(t, Config{
		Dim: 32, Hidden: 64, Layers: 1, Heads: 4, KVHeads: 2, HeadDim: 8, Vocab: 8, MaxContext: 64,
		NormEps: 1e-6, RopeTheta: 500000, RopeDim: 8, BOS: 1, EOS: 2, Arch: "llama",
	}, w.Config)
	require.Equal(t, float32(1), w.Norm[0])

	// Tied embeddings: no output tensor.
	w, err = newTinyModel().drop("output.weight").load(t)
	require.NoError(t, err)
	require.Same(t, w.Embed, w.Output)

	// Defaults: head_count_kv = head_count, rope.freq_base = 10000, no BOS/EOS.
	m := newTinyModel().set("llama.attention.head_count_kv", nil).set("llama.rope.freq_base", nil).
		set("tokenizer.ggml.bos_token_id", nil).set("tokenizer.ggml.eos_token_id", uint32(math.MaxUint32)).
		set("llama.attention.head_count", uint32(2))
	m.tensor("blk.0.attn_k.weight").dims = []uint64{32, 32}
	m.tensor("blk.0.attn_v.weight").dims = []uint64{32, 32}
	w, err = m.load(t)
	require.NoError(t, err)
	require.Equal(t, 2, w.Config.KVHeads)
	require.Equal(t, 16, w.Config.HeadDim)
	require.Equal(t, float32(10000), w.Config.RopeTheta)
	require.Equal(t, -1, w.Config.BOS)
	require.Equal(t, -1, w.Config.EOS)

	// Linear RoPE scaling, new and old keys.
	w, err = newTinyModel().set("llama.rope.scaling.type", "linear").set("llama.rope.scaling.factor", float32(4)).load(t)
	require.NoError(t, err)
	require.Equal(t, arch.Scaling{Kind: arch.ScalingLinear, Factor: 4}, w.Config.Block.Scaling)
	w, err = newTinyModel().set("llama.rope.scale_linear", float32(2)).load(t)
	require.NoError(t, err)
	require.Equal(t, arch.Scaling{Kind: arch.ScalingLinear, Factor: 2}, w.Config.Block.Scaling)

	// Storage types: quantized matrices stay as they are, 16-bit norms are converted.
	m = newTinyModel()
	m.tensor("blk.0.attn_q.weight").typ = gguf.TypeQ8_0
	m.tensor("blk.0.attn_k.weight").typ = gguf.TypeF16
	m.tensor("blk.0.attn_v.weight").typ = gguf.TypeBF16
	m.tensor("blk.0.attn_output.weight").typ = gguf.TypeQ4_0
	q4k := m.tensor("blk.0.ffn_down.weight")
	q4k.typ, q4k.dims = gguf.TypeQ4_K, []uint64{256, 32}
	m.set("llama.feed_forward_length", uint32(256))
	m.tensor("blk.0.ffn_gate.weight").dims = []uint64{32, 256}
	m.tensor("blk.0.ffn_up.weight").dims = []uint64{32, 256}
	norm := m.tensor("blk.0.attn_norm.weight")
	norm.typ, norm.data = gguf.TypeF16, make([]byte, 64)
	for i := 0; i < 32; i++ {
		binary.LittleEndian.PutUint16(norm.data[2*i:], ml.F32ToF16(float32(i)/4))
	}
	bnorm := m.tensor("blk.0.ffn_norm.weight")
	bnorm.typ, bnorm.data = gguf.TypeBF16, make([]byte, 64)
	for i := 0; i < 32; i++ {
		binary.LittleEndian.PutUint16(bnorm.data[2*i:], ml.F32ToBF16(-float32(i)))
	}
	w, err = m.load(t)
	require.NoError(t, err)
	l := w.Layers[0]
	require.Equal(t, []ml.Type{ml.Q8_0, ml.F16, ml.BF16, ml.Q4_0, ml.Q4_K}, []ml.Type{l.Q.Type, l.K.Type, l.V.Type, l.O.Type, l.Down.Type})
	require.Equal(t, float32(7.75), l.AttnNorm[31])
	require.Equal(t, float32(-31), l.FFNNorm[31])

	// Q6_K (what Q4_K_M files use for some matrices) loads too.
	m = newTinyModel()
	q6k := m.tensor("blk.0.ffn_down.weight")
	q6k.typ, q6k.dims = gguf.TypeQ6_K, []uint64{256, 32}
	m.set("llama.feed_forward_length", uint32(256))
	m.tensor("blk.0.ffn_gate.weight").dims = []uint64{32, 256}
	m.tensor("blk.0.ffn_up.weight").dims = []uint64{32, 256}
	w, err = m.load(t)
	require.NoError(t, err)
	require.Equal(t, ml.Q6_K, w.Layers[0].Down.Type)

	// An odd alignment leaves F32 data misaligned; the loader copies it.
	w, err = newTinyModel().set("general.alignment", uint32(1)).set("general.name", "x").load(t)
	require.NoError(t, err)
	require.Zero(t, uintptr(unsafeAddr(w.Embed.Data))%4)
}

func TestFromGGUFErrors(t *testing.T) {
	supported := strings.Join(arch.Names(), ", ")
	cases := []struct {
		name string
		edit func(m *tinyModel)
		want string
	}{
		{"no architecture", func(m *tinyModel) { m.set("general.architecture", nil) },
			"model: unsupported: gguf metadata general.architecture is missing (supported: " + supported + ")"},
		{"other architecture", func(m *tinyModel) { m.set("general.architecture", "mamba") },
			`model: unsupported: architecture "mamba" (supported: ` + supported + ")"},
		{"missing key", func(m *tinyModel) { m.set("llama.block_count", nil) },
			"model: gguf metadata llama.block_count is missing"},
		{"key of wrong type", func(m *tinyModel) { m.set("llama.block_count", "one") },
			"model: gguf metadata llama.block_count at offset 184 has type string, want a non-negative integer"},
		{"negative key", func(m *tinyModel) { m.set("llama.block_count", int32(-1)) },
			"model: gguf metadata llama.block_count at offset 184 has type int32, want a non-negative integer"},
		{"per-layer key", func(m *tinyModel) { m.set("llama.attention.head_count_kv", []uint32{2}) },
			"model: unsupported: gguf metadata llama.attention.head_count_kv is a per-layer array"},
		{"huge dims", func(m *tinyModel) { m.set("llama.embedding_length", uint64(1)<<40) },
			"model: gguf metadata llama.embedding_length = 1099511627776 at offset 105 is implausibly large"},
		{"heads do not divide dim", func(m *tinyModel) { m.set("llama.attention.head_count", uint32(5)) },
			"model: gguf llama.embedding_length 32 is not a multiple of attention.head_count 5"},
		{"GQA mismatch", func(m *tinyModel) { m.set("llama.attention.head_count_kv", uint32(3)) },
			"model: 4 heads is not a multiple of 3 KV heads"},
		{"NaN epsilon", func(m *tinyModel) { m.set("llama.attention.layer_norm_rms_epsilon", float32(math.NaN())) },
			"model: gguf metadata llama.attention.layer_norm_rms_epsilon at offset 304 is not a finite number (float32 NaN)"},
		{"longrope", func(m *tinyModel) {
			m.set("llama.rope.scaling.type", "longrope").set("llama.rope.scaling.factor", float32(4))
		}, `model: unsupported: rope scaling type "longrope" (supported: none, linear, yarn, and llama3 and longrope through the rope_freqs and rope_factors_long/short tensors)`},
		{"yarn without original context", func(m *tinyModel) {
			m.set("llama.rope.scaling.type", "yarn").set("llama.rope.scaling.factor", float32(4))
		}, "model: gguf metadata llama.rope.scaling.original_context_length is missing"},
		{"linear without factor", func(m *tinyModel) { m.set("llama.rope.scaling.type", "linear") },
			"model: gguf metadata llama.rope.scaling.factor is missing"},
		{"rope freqs size", func(m *tinyModel) { m.tensor("rope_freqs.weight").dims = []uint64{3} },
			"model: gguf tensor rope_freqs.weight has dims [3], want [4]"},
		{"bias size", func(m *tinyModel) { m.tensor("blk.0.attn_k.bias").dims = []uint64{32} },
			"model: gguf tensor blk.0.attn_k.bias has dims [32], want [16]"},
		{"FFN bias", func(m *tinyModel) { m.tensor("blk.0.ffn_down.bias").dims = []uint64{32} },
			"model: unsupported: tensor blk.0.ffn_down.bias (F32 [32]) is not part of the llama block this engine implements"},
		{"experts", func(m *tinyModel) { m.set("llama.expert_count", uint32(8)) },
			"model: unsupported: gguf llama.expert_count = 8: mixture-of-experts models"},
		{"missing tensor", func(m *tinyModel) { m.drop("blk.0.ffn_up.weight") },
			"model: unsupported: gguf tensor blk.0.ffn_up is missing (architecture llama needs it)"},
		{"missing norm", func(m *tinyModel) { m.drop("output_norm.weight") },
			"model: unsupported: gguf tensor output_norm is missing (architecture llama needs it)"},
		{"wrong shape", func(m *tinyModel) { m.tensor("blk.0.attn_k.weight").dims = []uint64{32, 32} },
			"model: gguf tensor blk.0.attn_k.weight has dims [32 32], want [32 16] (ggml order: columns first)"},
		{"transposed", func(m *tinyModel) { m.tensor("blk.0.ffn_down.weight").dims = []uint64{32, 64} },
			"model: gguf tensor blk.0.ffn_down.weight has dims [32 64], want [64 32] (ggml order: columns first)"},
		{"3-D", func(m *tinyModel) { m.tensor("blk.0.attn_q.weight").dims = []uint64{32, 16, 2} },
			"model: gguf tensor blk.0.attn_q.weight has dims [32 16 2], want [32 32] (ggml order: columns first)"},
		{"wrong embedding width", func(m *tinyModel) { m.tensor("token_embd.weight").dims = []uint64{16, 16} },
			"model: gguf tensor token_embd.weight has dims [16 16], want [32 vocab] (ggml order: columns first)"},
		{"output vocab differs", func(m *tinyModel) { m.tensor("output.weight").dims = []uint64{32, 9} },
			"model: gguf tensor output.weight has dims [32 9], want [32 8] (ggml order: columns first)"},
		{"norm shape", func(m *tinyModel) { m.tensor("blk.0.ffn_norm.weight").dims = []uint64{16} },
			"model: gguf tensor blk.0.ffn_norm.weight has dims [16], want [32]"},
		{"unsupported type", func(m *tinyModel) {
			m.set("llama.feed_forward_length", uint32(256))
			m.tensor("blk.0.ffn_gate.weight").dims = []uint64{32, 256}
			m.tensor("blk.0.ffn_up.weight").dims = []uint64{32, 256}
			q := m.tensor("blk.0.ffn_down.weight")
			q.typ, q.dims = gguf.TypeIQ2_XXS, []uint64{256, 32}
		}, "model: unsupported: gguf tensor blk.0.ffn_down.weight has type IQ2_XXS (supported: F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, BF16, MXFP4): unsupported tensor type"},
		{"quantized norm", func(m *tinyModel) { m.tensor("output_norm.weight").typ = gguf.TypeQ8_0 },
			"model: unsupported: gguf tensor output_norm.weight has type Q8_0; vectors (norms, biases) must be F32, F16 or BF16"},
		{"vocab_size disagrees", func(m *tinyModel) { m.set("llama.vocab_size", uint32(9)) },
			"model: gguf llama.vocab_size = 9 disagrees with token_embd's 8 rows"},
		{"too many tokens", func(m *tinyModel) {
			m.set("tokenizer.ggml.tokens", []string{"0", "1", "2", "3", "4", "5", "6", "7", "8"})
		}, "model: gguf tokenizer.ggml.tokens has 9 entries, more than token_embd's 8 rows"},
		{"bogus BOS", func(m *tinyModel) { m.set("tokenizer.ggml.bos_token_id", uint32(8)) },
			"model: gguf metadata tokenizer.ggml.bos_token_id = 8 at offset 565 is not a token id below 8"},
		{"odd head dim", func(m *tinyModel) {
			m.set("llama.attention.key_length", uint32(7)).set("llama.attention.value_length", uint32(7))
		},
			"model: head dim 7 is odd; RoPE needs pairs"},
		{"value length differs", func(m *tinyModel) { m.set("llama.attention.value_length", uint32(16)) },
			"model: unsupported: gguf llama.attention.value_length 16 differs from key_length 8"},
		// Issue 25 item 6: the layer slice was allocated from block_count
		// (2^30 blocks: ~318 GB, a fatal out-of-memory) before any tensor
		// was looked at.
		{"block count beyond the tensors", func(m *tinyModel) { m.set("llama.block_count", uint32(1)<<30) },
			"model: gguf llama.block_count is 1073741824 but the file has 12 tensors in all (each block needs several)"},
		{"block count beyond the blocks", func(m *tinyModel) { m.set("llama.block_count", uint32(3)) },
			"model: gguf llama.block_count is 3 but the file holds blk.N.attn_norm for 1 of those blocks"},
		{"block count beyond the blocks, with a stray high block", func(m *tinyModel) {
			m.set("llama.block_count", uint32(4))
			m.tensor("blk.3.attn_norm.weight")
		}, "model: gguf llama.block_count is 4 but the file holds blk.N.attn_norm for 2 of those blocks"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newTinyModel()
			c.edit(m)
			w, err := m.load(t)
			require.Nil(t, w)
			require.EqualError(t, err, c.want)
			if strings.HasPrefix(c.want, "model: unsupported") {
				require.ErrorIs(t, err, ErrUnsupported)
			}
		})
	}
}

func TestLoadGGUFFileErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.gguf")
	require.NoError(t, os.WriteFile(path, []byte("GGUF\x03\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\x7f\x00\x00\x00\x00\x00\x00\x00\x00"), 0o644))
	_, _, err := LoadGGUF(path)
	require.ErrorContains(t, err, "bad.gguf: gguf: tensor count at offset 8 is 9223372036854775807, exceeds file size")
	_, _, err = Load(path)
	require.ErrorContains(t, err, "bad.gguf: gguf: tensor count at offset 8")

	path = filepath.Join(dir, "wrongshape.gguf")
	m := newTinyModel()
	m.tensor("blk.0.attn_v.weight").dims = []uint64{32, 8}
	require.NoError(t, os.WriteFile(path, m.bytes(t), 0o644))
	_, _, err = LoadGGUF(path)
	require.EqualError(t, err, path+": model: gguf tensor blk.0.attn_v.weight has dims [32 8], want [32 16] (ggml order: columns first)")

	path = filepath.Join(dir, "good.gguf")
	require.NoError(t, os.WriteFile(path, newTinyModel().bytes(t), 0o644))
	w, f, err := Load(path)
	require.NoError(t, err)
	require.Equal(t, "good.gguf", w.Name)
	require.Equal(t, "llama", f.Architecture())
	require.NoError(t, w.Close())
}

func unsafeAddr(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
