package engine

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
	"github.com/kvwarden/kvwarden/internal/embedtest"
)

// refBERT is an independent float64 BERT encoder (llama.cpp's graph):
// token + type-0 + position embeddings, LayerNorm, then per layer
// bidirectional attention, residual, LayerNorm, GELU (tanh) FFN,
// residual, LayerNorm. It returns every token's output.
func refBERT(w *model.Weights, toks []int) [][]float64 {
	c, enc := w.Config, w.Encoder
	dim, hd := c.Dim, c.HeadDim
	row := func(m *ml.Matrix, r int) []float64 {
		f := make([]float32, m.Cols)
		ml.Dequantize(f, m, r)
		out := make([]float64, len(f))
		for i, v := range f {
			out[i] = float64(v)
		}
		return out
	}
	lin := func(m *ml.Matrix, b []float32, x []float64) []float64 {
		out := make([]float64, m.Rows)
		for r := range m.Rows {
			for k, v := range row(m, r) {
				out[r] += v * x[k]
			}
			if b != nil {
				out[r] += float64(b[r])
			}
		}
		return out
	}
	ln := func(x []float64, wt, b []float32) []float64 {
		var mean, ss float64
		for _, v := range x {
			mean += v
		}
		mean /= float64(len(x))
		for _, v := range x {
			ss += (v - mean) * (v - mean)
		}
		inv := 1 / math.Sqrt(ss/float64(len(x))+float64(enc.Eps))
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = (v-mean)*inv*float64(wt[i]) + float64(b[i])
		}
		return out
	}
	n := len(toks)
	x := make([][]float64, n)
	for i, t := range toks {
		e, ty := row(w.Embed, t), row(enc.TokenTypes, 0)
		for d := range e {
			e[d] += ty[d]
		}
		if enc.Pos != nil {
			for d, p := range row(enc.Pos, i) {
				e[d] += p
			}
		}
		x[i] = ln(e, enc.EmbNorm, enc.EmbNormB)
	}
	// nomic-bert: NeoX RoPE on Q and K.
	rope := func(v []float64, pos int) {
		for h := 0; h < len(v); h += hd {
			for j := range hd / 2 {
				th := float64(pos) * math.Pow(float64(c.RopeTheta), -2*float64(j)/float64(hd))
				a, b := h+j, h+j+hd/2
				x0, x1 := v[a], v[b]
				v[a] = x0*math.Cos(th) - x1*math.Sin(th)
				v[b] = x0*math.Sin(th) + x1*math.Cos(th)
			}
		}
	}
	for l := range c.Layers {
		L, EL := &w.Layers[l], &enc.Layers[l]
		q, k, v := make([][]float64, n), make([][]float64, n), make([][]float64, n)
		for i := range n {
			q[i], k[i], v[i] = lin(L.Q, L.QBias, x[i]), lin(L.K, L.KBias, x[i]), lin(L.V, L.VBias, x[i])
			if enc.RoPE {
				rope(q[i], i)
				rope(k[i], i)
			}
		}
		for i := range n {
			att := make([]float64, dim)
			for h := range c.Heads {
				s := make([]float64, n)
				mx := math.Inf(-1)
				for j := range n {
					for d := range hd {
						s[j] += q[i][h*hd+d] * k[j][h*hd+d]
					}
					s[j] /= math.Sqrt(float64(hd))
					mx = math.Max(mx, s[j])
				}
				var sum float64
				for j := range s {
					s[j] = math.Exp(s[j] - mx)
					sum += s[j]
				}
				for j := range n {
					for d := range hd {
						att[h*hd+d] += s[j] / sum * v[j][h*hd+d]
					}
				}
			}
			o := lin(L.O, L.OBias, att)
			for d := range dim {
				o[d] += x[i][d]
			}
			x[i] = ln(o, L.AttnNorm, EL.AttnNormB)
		}
		for i := range n {
			u := lin(L.Up, EL.UpB, x[i])
			if enc.Gated {
				g := lin(L.Gate, nil, x[i])
				for j := range u {
					u[j] *= g[j] / (1 + math.Exp(-g[j]))
				}
			} else {
				for j, g := range u {
					u[j] = 0.5 * g * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(g+0.044715*g*g*g)))
				}
			}
			d := lin(L.Down, EL.DownB, u)
			for j := range dim {
				d[j] += x[i][j]
			}
			x[i] = ln(d, L.FFNNorm, EL.FFNNormB)
		}
	}
	return x
}

// refRank is the classification head over the first token, in float64.
func refRank(w *model.Weights, h []float64) float64 {
	enc := w.Rank
	cur := make([]float64, enc.Cls.Rows)
	f := make([]float32, enc.Cls.Cols)
	for r := range enc.Cls.Rows {
		ml.Dequantize(f, enc.Cls, r)
		for k, v := range f {
			cur[r] += float64(v) * h[k]
		}
		cur[r] = math.Tanh(cur[r] + float64(enc.ClsB[r]))
	}
	ml.Dequantize(f, enc.ClsOut, 0)
	out := float64(enc.ClsOutB[0])
	for k, v := range f {
		out += float64(v) * cur[k]
	}
	return out
}

func maxAbs(got []float32, want []float64) float64 {
	worst := 0.0
	for i := range want {
		worst = math.Max(worst, math.Abs(float64(got[i])-want[i]))
	}
	return worst
}

// A nomic-bert file (RoPE, fused QKV, SwiGLU) equals the float64
// reference too, on mean pooling, its default.
func TestEmbedNomicBERTMatchesReference(t *testing.T) {
	path, w := embedtest.WriteBERT(t, embedtest.BERTSpec{Pooling: 1, Lower: true, Nomic: true})
	e := newEmbedEngine(t, path, Config{MaxContext: 64, KVPages: 64})
	require.Equal(t, "nomic-bert", e.ModelConfig().Arch)
	toks := embedtest.Tokens(50, 4)
	none, err := e.Embed(t.Context(), EmbedRequest{Tokens: [][]int{toks}, Pooling: model.PoolingNone, NoNormalize: true})
	require.NoError(t, err)
	want := refBERT(w, toks)
	for i := range want {
		require.Less(t, maxAbs(none.Data[0].PerToken[i], want[i]), 1e-4, "token %d", i)
	}
}

// A BERT file (token types, absolute positions, post-LayerNorm, GELU,
// bidirectional attention, WordPiece): the engine's per-token outputs
// equal the float64 reference, its CLS and mean pooling the oracle over
// them, and the input is [CLS] ... [SEP].
func TestEmbedBERTMatchesReference(t *testing.T) {
	path, w := embedtest.WriteBERT(t, embedtest.BERTSpec{Pooling: 2, Lower: true})
	e := newEmbedEngine(t, path, Config{MaxContext: 64, KVPages: 64})
	require.True(t, e.ModelConfig().NonCausal)
	require.Equal(t, model.PoolingCLS, e.ModelConfig().Pooling)
	text := "Hello, World! The quick brown fox jumps."
	none, err := e.Embed(t.Context(), EmbedRequest{Inputs: []string{text}, Pooling: model.PoolingNone, NoNormalize: true})
	require.NoError(t, err)
	toks, err := e.Tokenizer().Encode(text, tokenizer.Options{BOS: true, EOS: true})
	require.NoError(t, err)
	require.Equal(t, 101, toks[0])
	require.Equal(t, 102, toks[len(toks)-1])
	require.Equal(t, len(toks), none.Data[0].Tokens)
	want := refBERT(w, toks)
	for i := range want {
		require.Less(t, maxAbs(none.Data[0].PerToken[i], want[i]), 1e-4, "token %d", i)
	}
	// The model's pooling (cls), normalized, is token 0's row normalized.
	cls, err := e.Embed(t.Context(), EmbedRequest{Inputs: []string{text}})
	require.NoError(t, err)
	require.Equal(t, finishVector(none.Data[0].PerToken[0], 32, true), cls.Data[0].Vector)
	// Generation is refused: an encoder has no logits.
	_, err = e.Generate(t.Context(), Request{Prompt: "hello"})
	require.ErrorIs(t, err, ErrInvalidParams)
	// An input longer than one step's budget (non-causal) is refused.
	_, err = e.Embed(t.Context(), EmbedRequest{Tokens: [][]int{make([]int, 65)}})
	require.ErrorIs(t, err, ErrPromptTooLong)
}

// 16 concurrent inputs of different lengths equal each one alone, for
// each encoder architecture.
func TestEmbedBERTBitIdenticalUnderConcurrency(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec embedtest.BERTSpec
	}{
		{"bert", embedtest.BERTSpec{Pooling: 1, Lower: true}},
		{"nomic-bert", embedtest.BERTSpec{Pooling: 1, Lower: true, Nomic: true}},
		{"modern-bert", embedtest.BERTSpec{Pooling: 1, Lower: true, Modern: true}},
		{"jina-bert-v2", embedtest.BERTSpec{Pooling: 1, Lower: true, Jina: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, _ := embedtest.WriteBERT(t, tc.spec)
			alone := newEmbedEngine(t, path, Config{MaxContext: 64, KVPages: 64})
			busy := newEmbedEngine(t, path, Config{MaxContext: 64, KVPages: 128, MaxBatchTokens: 96})
			inputs := make([]string, 16)
			want := make([][]float32, 16)
			for i := range inputs {
				inputs[i] = fmt.Sprintf("what is the capital of france %c", 'a'+i)
				for range i / 2 {
					inputs[i] += " the dog jumped"
				}
				r, err := alone.Embed(t.Context(), EmbedRequest{Inputs: []string{inputs[i]}})
				require.NoError(t, err)
				want[i] = r.Data[0].Vector
			}
			got := make([][]float32, 16)
			errs := make([]error, 16)
			var wg sync.WaitGroup
			for i := range inputs {
				wg.Go(func() {
					r, err := busy.Embed(t.Context(), EmbedRequest{Inputs: []string{inputs[i]}})
					if errs[i] = err; err == nil {
						got[i] = r.Data[0].Vector
					}
				})
			}
			wg.Wait()
			for i := range inputs {
				require.NoError(t, errs[i])
				require.Equal(t, want[i], got[i], "input %d", i)
			}
		})
	}
}

// Rerank: [CLS] query [SEP] document through the classification head;
// scores equal the float64 reference, sorted best first, top_n applied.
func TestRerankBERT(t *testing.T) {
	path, w := embedtest.WriteBERT(t, embedtest.BERTSpec{Pooling: 4, Rank: true, Lower: true})
	e := newEmbedEngine(t, path, Config{MaxContext: 64, KVPages: 64})
	docs := []string{"Paris is the capital of France.", "The quick brown fox.", "Dogs and cats!", "hello world"}
	res, err := e.Rerank(t.Context(), RerankRequest{Query: "What is the capital of France?", Documents: docs})
	require.NoError(t, err)
	require.Len(t, res.Results, len(docs))
	tok := e.Tokenizer()
	q, err := tok.Encode("What is the capital of France?", tokenizer.Options{})
	require.NoError(t, err)
	want := map[int]float64{}
	total := 0
	for i, d := range docs {
		dt, err := tok.Encode(d, tokenizer.Options{})
		require.NoError(t, err)
		toks := append(append(append([]int{101}, q...), 102), dt...)
		total += len(toks)
		want[i] = refRank(w, refBERT(w, toks)[0])
	}
	require.Equal(t, total, res.PromptTokens)
	for _, r := range res.Results {
		require.InDelta(t, want[r.Index], float64(r.Score), 1e-4, "document %d", r.Index)
	}
	require.True(t, sort.SliceIsSorted(res.Results, func(a, b int) bool { return res.Results[a].Score > res.Results[b].Score }))
	top, err := e.Rerank(t.Context(), RerankRequest{Query: "What is the capital of France?", Documents: docs, TopN: 2})
	require.NoError(t, err)
	require.Equal(t, res.Results[:2], top.Results)

	for _, tc := range []struct {
		name  string
		req   RerankRequest
		field string
		index int
	}{
		{"empty query", RerankRequest{Documents: docs}, "query", -1},
		{"no documents", RerankRequest{Query: "q"}, "documents", -1},
		{"empty document", RerankRequest{Query: "q", Documents: []string{"a", ""}}, "documents", 1},
		{"negative top_n", RerankRequest{Query: "q", Documents: docs, TopN: -1}, "top_n", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Rerank(t.Context(), tc.req)
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tc.field, fe.Field)
			require.Equal(t, tc.index, fe.Index)
		})
	}
	// A model without a classification head cannot rerank.
	plain, _ := embedtest.WriteBERT(t, embedtest.BERTSpec{Pooling: 2, Lower: true})
	pe := newEmbedEngine(t, plain, Config{MaxContext: 64, KVPages: 64})
	_, err = pe.Rerank(t.Context(), RerankRequest{Query: "q", Documents: docs})
	require.ErrorIs(t, err, ErrNoRankHead)
}
