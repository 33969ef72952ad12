package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
)

// MetaKV is one entry of the model's metadata.
type MetaKV struct {
	Key, Value string
}

// modelFacts are computed on first use, once per engine: the file is read
// again for its metadata, and the fingerprint touches weight data.
type modelFacts struct {
	once sync.Once
	meta []MetaKV
	fp   [32]byte
}

func (e *Engine) facts() *modelFacts {
	e.mfacts.once.Do(func() {
		e.mfacts.meta = e.readMetadata()
		e.mfacts.fp = e.fingerprint(e.mfacts.meta)
	})
	return &e.mfacts
}

// Metadata returns the model's metadata as llama.cpp's llama_model_meta_*
// functions give it (and llama-cpp-python's Llama.metadata): every GGUF
// key whose value is not an array, with its value as text (numbers in
// decimal, floats with six decimals, booleans as true/false), sorted by
// key. A model that is not a GGUF file (a llama2.c checkpoint, a built-in
// model, Config.Weights) gets the general.* and <arch>.* keys of its
// configuration, and its chat template if it has one. The slice is the
// caller's.
func (e *Engine) Metadata() []MetaKV {
	return slices.Clone(e.facts().meta)
}

// MetadataValue returns the value of key in Metadata.
func (e *Engine) MetadataValue(key string) (string, bool) {
	m := e.facts().meta
	i, ok := slices.BinarySearchFunc(m, key, func(kv MetaKV, k string) int {
		switch {
		case kv.Key < k:
			return -1
		case kv.Key > k:
			return 1
		}
		return 0
	})
	if !ok {
		return "", false
	}
	return m[i].Value, true
}

func (e *Engine) readMetadata() []MetaKV {
	var out []MetaKV
	if e.cfg.ModelPath != "" && isGGUF(e.cfg.ModelPath) {
		f, err := gguf.Open(e.cfg.ModelPath)
		if err == nil {
			for _, kv := range f.Metadata {
				if v, ok := metaString(kv.Value); ok {
					out = append(out, MetaKV{kv.Key, v})
				}
			}
			_ = f.Close()
		} else {
			e.log.Warn("engine: reading the model's metadata again failed; giving its configuration instead", "err", err)
		}
	}
	if out == nil {
		c := e.mcfg
		a := c.Arch
		if a == "" {
			a = "llama"
		}
		out = []MetaKV{
			{"general.architecture", a},
			{"general.name", e.weights.Name},
			{a + ".context_length", strconv.Itoa(c.MaxContext)},
			{a + ".embedding_length", strconv.Itoa(c.Dim)},
			{a + ".feed_forward_length", strconv.Itoa(c.Hidden)},
			{a + ".block_count", strconv.Itoa(c.Layers)},
			{a + ".attention.head_count", strconv.Itoa(c.Heads)},
			{a + ".attention.head_count_kv", strconv.Itoa(c.KVHeads)},
			{a + ".attention.layer_norm_rms_epsilon", fmt.Sprintf("%f", c.NormEps)},
			{a + ".rope.freq_base", fmt.Sprintf("%f", c.RopeTheta)},
		}
		if t, ok := e.weights.ChatTemplates[""]; ok {
			out = append(out, MetaKV{"tokenizer.chat_template", t})
		}
	}
	slices.SortStableFunc(out, func(a, b MetaKV) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	// A duplicated key (a malformed file): llama.cpp's map keeps the first.
	return slices.CompactFunc(out, func(a, b MetaKV) bool { return a.Key == b.Key })
}

func isGGUF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	_, err = f.ReadAt(magic[:], 0)
	return err == nil && string(magic[:]) == "GGUF"
}

// metaString formats a scalar GGUF value as llama.cpp's gguf_kv_to_str
// does; arrays are left out, as llama.cpp leaves them out of the model's
// metadata.
func metaString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case float32:
		return fmt.Sprintf("%f", x), true
	case float64:
		return fmt.Sprintf("%f", x), true
	case uint8, uint16, uint32, uint64, int8, int16, int32, int64:
		return fmt.Sprint(x), true
	}
	return "", false
}

// fingerprint identifies the model the engine runs, for sealing saved
// state: SHA-256 over its configuration, its metadata, its whole
// vocabulary, and samples of its weights (the start, middle and end of the
// embedding and output matrices and of every layer's matrices, and the
// final norm), so that a fine-tune of the same architecture differs. It is
// the same for the same model file wherever it is opened.
func (e *Engine) fingerprint(meta []MetaKV) [32]byte {
	h := sha256.New()
	put := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	put("kvwarden model fingerprint v1")
	c := e.mcfg
	put(fmt.Sprintf("%s %d %d %d %d %d %d %d %d %d %g %g %d %+v", c.Arch, c.Dim, c.Hidden, c.Layers, c.Heads, c.KVHeads,
		c.HeadDim, c.Vocab, c.MaxContext, c.RopeDim, c.NormEps, c.RopeTheta, c.BOS, c.Block))
	for _, kv := range meta {
		put(kv.Key)
		put(kv.Value)
	}
	n := e.tok.VocabSize()
	put(strconv.Itoa(n))
	for id := range n {
		put(e.tok.Piece(id))
	}
	sampleMatrix := func(m *ml.Matrix) {
		if m == nil {
			put("-")
			return
		}
		put(fmt.Sprintf("%v %dx%d", m.Type, m.Rows, m.Cols))
		const chunk = 4096
		d := m.Data
		if len(d) <= 3*chunk {
			h.Write(d)
			return
		}
		mid := len(d)/2 - chunk/2
		h.Write(d[:chunk])
		h.Write(d[mid : mid+chunk])
		h.Write(d[len(d)-chunk:])
	}
	floats := func(v []float32) {
		var b [4]byte
		for _, f := range v {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(f))
			h.Write(b[:])
		}
		put("")
	}
	w := e.weights
	sampleMatrix(w.Embed)
	sampleMatrix(w.Output)
	floats(w.Norm)
	for _, l := range w.Layers {
		for _, m := range l.Matrices() {
			sampleMatrix(m)
		}
		floats(l.AttnNorm)
		floats(l.FFNNorm)
	}
	var fp [32]byte
	h.Sum(fp[:0])
	return fp
}

// Fingerprint identifies the model (see SaveState).
func (e *Engine) Fingerprint() [32]byte { return e.facts().fp }
