package gguf

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOpenStories260K(t *testing.T) {
	f, err := Open(filepath.Join(modelsDir(t), "stories260K.gguf"))
	require.NoError(t, err)
	defer f.Close()

	require.EqualValues(t, 3, f.Version)
	require.EqualValues(t, 32, f.Alignment)
	require.Equal(t, "llama", f.Architecture())
	require.Len(t, f.Tensors, 48)
	require.Len(t, f.Metadata, 19)

	ctx, ok := f.Uint("llama.context_length")
	require.True(t, ok)
	require.EqualValues(t, 128, ctx)
	eps, ok := f.Float("llama.attention.layer_norm_rms_epsilon")
	require.True(t, ok)
	require.InDelta(t, 1e-5, eps, 1e-12)
	model, _ := f.String("tokenizer.ggml.model")
	require.Equal(t, "llama", model)

	toks, ok := f.Strings("tokenizer.ggml.tokens")
	require.True(t, ok)
	require.Len(t, toks, 512)
	require.Equal(t, "<unk>", toks[0])
	require.Equal(t, "<0x00>", toks[3])
	scores, ok := f.Float32s("tokenizer.ggml.scores")
	require.True(t, ok)
	require.Len(t, scores, 512)
	types, ok := f.Int32s("tokenizer.ggml.token_type")
	require.True(t, ok)
	require.Equal(t, []int32{2, 3, 3, 6}, types[:4])
	_, ok = f.Strings("tokenizer.ggml.scores") // wrong type
	require.False(t, ok)
	_, ok = f.String("no.such.key")
	require.False(t, ok)

	emb, ok := f.Tensor("token_embd.weight")
	require.True(t, ok)
	require.Equal(t, []uint64{64, 512}, emb.Dims)
	require.Equal(t, TypeF32, emb.Type)
	require.EqualValues(t, 64*512*4, emb.Size)
	require.Len(t, emb.Data, 64*512*4)
	out, _ := f.Tensor("output.weight")
	require.Equal(t, emb.Data, out.Data, "output is a copy of the embedding")

	require.NoError(t, f.Close())
	require.NoError(t, f.Close(), "Close is idempotent")
	require.Nil(t, f.Tensors[0].Data)
	require.Len(t, toks, 512, "metadata survives Close")
}

func TestBuilderRoundTrip(t *testing.T) {
	for _, version := range []uint32{2, 3} {
		b := NewBuilder()
		b.Version = version
		nested := &Array{Elem: ValueArray, Values: []*Array{
			{Elem: ValueInt32, Values: []int32{1, -2}},
			{Elem: ValueString, Values: []string{"x", ""}},
		}}
		b.Set("general.architecture", "llama").
			Set("u8", uint8(200)).Set("i8", int8(-3)).Set("u16", uint16(60000)).Set("i16", int16(-30000)).
			Set("u32", uint32(1<<31)).Set("i32", int32(-5)).Set("f32", float32(1.5)).Set("bool", true).
			Set("u64", uint64(math.MaxUint64)).Set("i64", int64(math.MinInt64)).Set("f64", math.Pi).
			Set("strs", []string{"a", "▁b", ""}).Set("f32s", []float32{0.5, -1}).Set("i32s", []int32{7}).
			Set("u8s", []uint8{}).Set("bools", []bool{true, false}).Set("nested", nested).
			Set("general.alignment", uint32(64))
		b.AddF32("a", []uint64{3}, []float32{1, 2, 3})
		b.AddTensor("q", TypeQ8_0, []uint64{64, 2}, make([]byte, 4*34))
		b.AddF32("s", nil, []float32{42})
		data, err := b.Bytes()
		require.NoError(t, err)

		f, err := Parse(data)
		require.NoError(t, err)
		require.Equal(t, version, f.Version)
		require.EqualValues(t, 64, f.Alignment)
		require.Zero(t, f.DataOffset%64)
		for key, want := range map[string]any{
			"u8": uint8(200), "i8": int8(-3), "u16": uint16(60000), "i16": int16(-30000), "u32": uint32(1 << 31),
			"i32": int32(-5), "f32": float32(1.5), "bool": true, "u64": uint64(math.MaxUint64),
			"i64": int64(math.MinInt64), "f64": math.Pi,
		} {
			kv, ok := f.Lookup(key)
			require.True(t, ok, key)
			require.Equal(t, want, kv.Value, key)
		}
		u, ok := f.Uint("i32")
		require.False(t, ok, "negative is not a Uint")
		require.Zero(t, u)
		i, ok := f.Int("u16")
		require.True(t, ok)
		require.EqualValues(t, 60000, i)
		_, ok = f.Int("u64")
		require.False(t, ok, "MaxUint64 does not fit an int64")
		fl, ok := f.Float("f32")
		require.True(t, ok)
		require.Equal(t, 1.5, fl)
		s, _ := f.Strings("strs")
		require.Equal(t, []string{"a", "▁b", ""}, s)
		fs, _ := f.Float32s("f32s")
		require.Equal(t, []float32{0.5, -1}, fs)
		is, _ := f.Int32s("i32s")
		require.Equal(t, []int32{7}, is)
		a, ok := f.Array("nested")
		require.True(t, ok)
		require.Equal(t, nested, a)
		bo, _ := f.Array("bools")
		require.Equal(t, []bool{true, false}, bo.Values)

		ta, _ := f.Tensor("a")
		require.Equal(t, []byte{0, 0, 0x80, 0x3f}, ta.Data[:4])
		tq, _ := f.Tensor("q")
		require.Equal(t, TypeQ8_0, tq.Type)
		require.EqualValues(t, 128, tq.Elements)
		require.EqualValues(t, 0, tq.Offset%64)
		ts, _ := f.Tensor("s")
		require.Empty(t, ts.Dims)
		require.EqualValues(t, 1, ts.Elements)

		again, err := rebuild(f)
		require.NoError(t, err)
		require.Equal(t, data, again)
	}
}

func TestBuilderErrors(t *testing.T) {
	_, err := NewBuilder().Set("x", 5).Bytes()
	require.EqualError(t, err, `gguf: metadata "x": unsupported value type int`)
	_, err = NewBuilder().AddTensor("t", TypeF32, []uint64{2}, make([]byte, 4)).Bytes()
	require.EqualError(t, err, `gguf: tensor "t": 4 bytes of data, want 8`)
	_, err = NewBuilder().AddTensor("t", TypeQ4_K, []uint64{32}, nil).Bytes()
	require.EqualError(t, err, `gguf: tensor "t": 32 columns is not a multiple of the Q4_K block size`)
	_, err = NewBuilder().Set("general.alignment", uint32(3)).Bytes()
	require.Error(t, err)
}

// rebuild writes a parsed file back out with a Builder.
func rebuild(f *File) ([]byte, error) {
	b := NewBuilder()
	b.Version = f.Version
	for _, kv := range f.Metadata {
		b.Set(kv.Key, kv.Value)
	}
	for _, t := range f.Tensors {
		b.AddTensor(t.Name, t.Type, t.Dims, t.Data)
	}
	return b.Bytes()
}

// raw builds deliberately malformed files.
type raw struct{ encoder }

func (r *raw) header(version uint32, tensors, kvs uint64) *raw {
	r.raw([]byte(Magic))
	r.u32(version)
	r.u64(tensors)
	r.u64(kvs)
	return r
}

func (r *raw) kvU32(key string, v uint32) *raw {
	r.str(key)
	r.u32(uint32(ValueUint32))
	r.u32(v)
	return r
}

func (r *raw) tensor(name string, dims []uint64, typ GGMLType, off uint64) *raw {
	r.str(name)
	r.u32(uint32(len(dims)))
	for _, d := range dims {
		r.u64(d)
	}
	r.u32(uint32(typ))
	r.u64(off)
	return r
}

func (r *raw) padTo(n int) *raw {
	for len(r.b) < n {
		r.b = append(r.b, 0)
	}
	return r
}

func newRaw() *raw { return &raw{} }

func TestHostile(t *testing.T) {
	valid, err := NewBuilder().Set("general.architecture", "llama").
		AddF32("w", []uint64{4, 2}, make([]float32, 8)).Bytes()
	require.NoError(t, err)

	validMeta, err := NewBuilder().Set("general.architecture", "llama").Bytes()
	require.NoError(t, err)

	deep := newRaw().header(3, 0, 1)
	deep.str("deep")
	deep.u32(uint32(ValueArray))
	for i := 0; i < 20; i++ {
		deep.u32(uint32(ValueArray))
		deep.u64(1)
	}

	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "gguf: magic at offset 0 is truncated: needs 4 bytes, 0 remain (file is 0 bytes)"},
		{"bad magic", []byte("GGML\x03\x00\x00\x00"), `gguf: magic at offset 0 is "GGML", want "GGUF": not a GGUF file`},
		{"version 1", newRaw().header(1, 0, 0).b, "gguf: version at offset 4 is 1: only GGUF versions 2 and 3 are supported"},
		{"big-endian", []byte("GGUF\x00\x00\x00\x03"), "gguf: version at offset 4 is 0x3000000: a big-endian GGUF file, which is not supported"},
		{"truncated header", valid[:12], "gguf: tensor count at offset 8 is truncated: needs 8 bytes, 4 remain (file is 12 bytes)"},
		{"truncated body", valid[:len(valid)-3], `gguf: tensor "w" data offset at offset 102 is 0 with size 32, extends past the end of the file: the data section starts at 128, the file is 157 bytes`},
		{"truncated before tensor infos", valid[:40], "gguf: tensor count at offset 8 is 1, exceeds file size: 1 tensor infos need at least 24 bytes each, 16 bytes remain"},
		{"truncated metadata", validMeta[:40], "gguf: metadata key #0 length at offset 24 is 20, exceeds the 8 bytes remaining in the file"},
		{"bogus tensor count", newRaw().header(3, 1e18, 0).b, "gguf: tensor count at offset 8 is 1000000000000000000, exceeds file size: 1000000000000000000 tensor infos need at least 24 bytes each, 0 bytes remain"},
		{"bogus metadata count", newRaw().header(3, 0, 1<<40).padTo(100).b, "gguf: metadata count at offset 16 is 1099511627776, exceeds file size: 1099511627776 entries need at least 13 bytes each, 76 bytes remain"},
		{"huge key length", func() []byte { r := newRaw().header(3, 0, 1); r.u64(math.MaxUint64); return r.padTo(64).b }(),
			"gguf: metadata key #0 length at offset 24 is 18446744073709551615, exceeds the 32 bytes remaining in the file"},
		{"unknown value type", func() []byte { r := newRaw().header(3, 0, 1); r.str("k"); r.u32(13); return r.padTo(64).b }(),
			`gguf: metadata "k" type at offset 33 is 13, not a GGUF value type`},
		{"truncated value", func() []byte {
			r := newRaw().header(3, 0, 1)
			r.str("k")
			r.u32(uint32(ValueUint64))
			r.u32(0)
			return r.b
		}(),
			`gguf: metadata "k" at offset 37 is truncated: needs 8 bytes, 4 remain (file is 41 bytes)`},
		{"huge array", func() []byte {
			r := newRaw().header(3, 0, 1)
			r.str("k")
			r.u32(uint32(ValueArray))
			r.u32(uint32(ValueString))
			r.u64(1e6)
			return r.padTo(100).b
		}(), `gguf: metadata "k" length at offset 41 is 1000000, exceeds file size: string elements need at least 8 bytes each, 51 bytes remain`},
		{"huge array element", func() []byte {
			r := newRaw().header(3, 0, 1)
			r.str("k")
			r.u32(uint32(ValueArray))
			r.u32(uint32(ValueString))
			r.u64(2)
			r.str("ok")
			r.u64(1 << 62)
			return r.padTo(100).b
		}(), `gguf: metadata "k"[1] length at offset 59 is 4611686018427387904, exceeds the 33 bytes remaining in the file`},
		{"unknown element type", func() []byte {
			r := newRaw().header(3, 0, 1)
			r.str("k")
			r.u32(uint32(ValueArray))
			r.u32(99)
			r.u64(0)
			return r.b
		}(), `gguf: metadata "k" element type at offset 37 is 99, not a GGUF value type`},
		{"deep nesting", deep.b, `gguf: metadata "deep"[0][0][0][0][0][0][0][0] at offset 136 nests arrays more than 8 deep`},
		{"duplicate key", newRaw().header(3, 0, 2).kvU32("k", 1).kvU32("k", 2).b, `gguf: metadata key "k" at offset 41 is a duplicate`},
		{"alignment type", func() []byte {
			r := newRaw().header(3, 0, 1)
			r.str("general.alignment")
			r.u32(uint32(ValueUint64))
			r.u64(32)
			return r.b
		}(), "gguf: general.alignment at offset 24 has type uint64, want uint32"},
		{"alignment zero", newRaw().header(3, 0, 1).kvU32("general.alignment", 0).b, "gguf: general.alignment at offset 24 is 0, not a power of two"},
		{"alignment 48", newRaw().header(3, 0, 1).kvU32("general.alignment", 48).b, "gguf: general.alignment at offset 24 is 48, not a power of two"},
		{"too many dims", newRaw().header(3, 1, 0).tensor("t", []uint64{1, 1, 1, 1, 1}, TypeF32, 0).padTo(128).b,
			`gguf: tensor "t" dimension count at offset 33 is 5, more than 4`},
		{"huge dims", newRaw().header(3, 1, 0).tensor("t", []uint64{1 << 32, 1 << 32}, TypeF32, 0).padTo(128).b,
			`gguf: tensor "t" dimension 1 at offset 45 is 4294967296: the element count overflows`},
		{"dim too large", newRaw().header(3, 1, 0).tensor("t", []uint64{math.MaxUint64}, TypeF32, 0).padTo(128).b,
			`gguf: tensor "t" dimension 0 at offset 37 is 18446744073709551615, too large`},
		{"size overflows", newRaw().header(3, 1, 0).tensor("t", []uint64{1 << 62}, TypeF32, 0).padTo(128).b,
			`gguf: tensor "t" size at offset 45 overflows: 4611686018427387904 elements of F32`},
		{"unknown tensor type", newRaw().header(3, 1, 0).tensor("t", []uint64{4}, 99, 0).padTo(128).b,
			`gguf: tensor "t" type at offset 45 is 99, not a known ggml type`},
		{"removed tensor type", newRaw().header(3, 1, 0).tensor("t", []uint64{4}, 4, 0).padTo(128).b,
			`gguf: tensor "t" type at offset 45 is 4, not a known ggml type`},
		{"block size", newRaw().header(3, 1, 0).tensor("t", []uint64{48, 2}, TypeQ8_0, 0).padTo(256).b,
			`gguf: tensor "t" dimension 0 at offset 37 is 48, not a multiple of the Q8_0 block size 32`},
		{"misaligned offset", newRaw().header(3, 1, 0).tensor("t", []uint64{4}, TypeF32, 4).padTo(128).b,
			`gguf: tensor "t" data offset at offset 49 is 4, not a multiple of the alignment 32`},
		{"tensor out of bounds", newRaw().header(3, 1, 0).tensor("t", []uint64{4}, TypeF32, 64).padTo(128).b,
			`gguf: tensor "t" data offset at offset 49 is 64 with size 16, extends past the end of the file: the data section starts at 64, the file is 128 bytes`},
		{"offset near 2^64", newRaw().header(3, 1, 0).tensor("t", []uint64{4}, TypeF32, math.MaxUint64-31).padTo(128).b,
			`gguf: tensor "t" data offset at offset 49 is 18446744073709551584 with size 16, extends past the end of the file: the data section starts at 64, the file is 128 bytes`},
		{"duplicate tensor", newRaw().header(3, 2, 0).tensor("t", []uint64{4}, TypeF32, 0).tensor("t", []uint64{4}, TypeF32, 32).padTo(256).b,
			`gguf: tensor name "t" at offset 57 is a duplicate`},
		{"truncated tensor info", newRaw().header(3, 1, 0).tensor("t", []uint64{4}, TypeF32, 0).b[:50],
			`gguf: tensor "t" data offset at offset 49 is truncated: needs 8 bytes, 1 remain (file is 50 bytes)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse(c.data)
			require.Nil(t, f)
			require.EqualError(t, err, c.want)
			var fe *FormatError
			require.True(t, errors.As(err, &fe))
		})
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(filepath.Join(dir, "missing.gguf"))
	require.ErrorIs(t, err, os.ErrNotExist)

	empty := filepath.Join(dir, "empty.gguf")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	_, err = Open(empty)
	require.ErrorContains(t, err, "empty.gguf: gguf: magic at offset 0 is truncated")

	good := filepath.Join(dir, "good.gguf")
	require.NoError(t, NewBuilder().Set("general.architecture", "llama").AddF32("w", []uint64{2}, []float32{1, 2}).WriteFile(good))
	f, err := Open(good)
	require.NoError(t, err)
	w, ok := f.Tensor("w")
	require.True(t, ok)
	require.Equal(t, []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40}, w.Data)
	require.NoError(t, f.Close())
}

// fuzzSeeds are small valid files that exercise every value type.
func fuzzSeeds() [][]byte {
	var seeds [][]byte
	add := func(b *Builder) {
		data, err := b.Bytes()
		if err != nil {
			panic(err)
		}
		seeds = append(seeds, data)
	}
	add(NewBuilder())
	add(NewBuilder().Set("general.architecture", "llama").Set("llama.block_count", uint32(1)).
		Set("tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>", "a"}).
		Set("tokenizer.ggml.scores", []float32{0, 0, 0, -1}).
		Set("tokenizer.ggml.token_type", []int32{2, 3, 3, 1}).
		AddF32("token_embd.weight", []uint64{2, 4}, make([]float32, 8)).
		AddF32("output_norm.weight", []uint64{2}, []float32{1, 1}))
	b := NewBuilder()
	b.Version = 2
	add(b.Set("u8", uint8(1)).Set("i8", int8(-1)).Set("u16", uint16(2)).Set("i16", int16(-2)).
		Set("i64", int64(-3)).Set("u64", uint64(3)).Set("f64", 0.25).Set("b", true).
		Set("nested", []*Array{{Elem: ValueUint8, Values: []uint8{1, 2}}}).
		Set("general.alignment", uint32(8)).
		AddTensor("q", TypeQ4_K, []uint64{256}, make([]byte, 144)).
		AddTensor("h", TypeF16, []uint64{3}, make([]byte, 6)))
	return seeds
}

// TestWriteSeedCorpus regenerates the committed seed corpus when
// GGUF_WRITE_SEEDS=1.
func TestWriteSeedCorpus(t *testing.T) {
	if os.Getenv("GGUF_WRITE_SEEDS") == "" {
		t.Skip("set GGUF_WRITE_SEEDS=1 to rewrite testdata/fuzz/FuzzParse/seed-*")
	}
	for i, s := range fuzzSeeds() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(s)))
		require.NoError(t, os.WriteFile(filepath.Join("testdata", "fuzz", "FuzzParse", fmt.Sprintf("seed-valid-%d", i)), []byte(body), 0o644))
	}
}

// FuzzParse checks that Parse never panics, that failures are
// FormatErrors, that tensor data lies inside the input, and that writing a
// parsed file back out is a fixed point.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error is not a FormatError: %v", err)
			}
			return
		}
		for _, ti := range file.Tensors {
			if uint64(len(ti.Data)) != ti.Size {
				t.Fatalf("tensor %q: %d bytes, size %d", ti.Name, len(ti.Data), ti.Size)
			}
			if len(ti.Data) > 0 {
				lo := int(file.DataOffset) + int(ti.Offset)
				if &data[lo] != &ti.Data[0] || lo+len(ti.Data) > len(data) {
					t.Fatalf("tensor %q data is not where its offset says", ti.Name)
				}
			}
		}
		out, err := rebuild(file)
		if err != nil {
			t.Fatalf("rebuild: %v", err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("parse of rebuilt file: %v", err)
		}
		out2, err := rebuild(again)
		if err != nil {
			t.Fatalf("second rebuild: %v", err)
		}
		if !bytes.Equal(out, out2) {
			t.Fatalf("rebuild is not a fixed point")
		}
	})
}
