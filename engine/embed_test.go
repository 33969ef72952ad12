package engine

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
	"github.com/kvwarden/kvwarden/internal/embedtest"
)

// refHidden is an independent float64 forward pass of the llama / qwen3
// block over toks: the output-normed hidden state of every token.
func refHidden(w *model.Weights, toks []int, neox bool) [][]float64 {
	c := w.Config
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
	matVec := func(m *ml.Matrix, x []float64) []float64 {
		out := make([]float64, m.Rows)
		for r := range m.Rows {
			for k, v := range row(m, r) {
				out[r] += v * x[k]
			}
		}
		return out
	}
	rms := func(x []float64, wt []float32) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		inv := 1 / math.Sqrt(ss/float64(len(x))+float64(c.NormEps))
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = v * inv * float64(wt[i])
		}
		return out
	}
	rope := func(v []float64, pos int) {
		for h := 0; h < len(v); h += hd {
			for j := range hd / 2 {
				th := float64(pos) * math.Pow(float64(c.RopeTheta), -2*float64(j)/float64(hd))
				a, b := h+2*j, h+2*j+1
				if neox {
					a, b = h+j, h+j+hd/2
				}
				x0, x1 := v[a], v[b]
				v[a] = x0*math.Cos(th) - x1*math.Sin(th)
				v[b] = x0*math.Sin(th) + x1*math.Cos(th)
			}
		}
	}
	n := len(toks)
	x := make([][]float64, n)
	for i, t := range toks {
		x[i] = row(w.Embed, t)
	}
	group := c.Heads / c.KVHeads
	for l := range c.Layers {
		L := &w.Layers[l]
		q, k, v := make([][]float64, n), make([][]float64, n), make([][]float64, n)
		for i := range n {
			xn := rms(x[i], L.AttnNorm)
			q[i], k[i], v[i] = matVec(L.Q, xn), matVec(L.K, xn), matVec(L.V, xn)
			if L.QNorm != nil {
				for h := 0; h < len(q[i]); h += hd {
					copy(q[i][h:h+hd], rms(q[i][h:h+hd], L.QNorm))
				}
				for h := 0; h < len(k[i]); h += hd {
					copy(k[i][h:h+hd], rms(k[i][h:h+hd], L.KNorm))
				}
			}
			rope(q[i], i)
			rope(k[i], i)
		}
		for i := range n {
			last := i
			if c.NonCausal {
				last = n - 1
			}
			att := make([]float64, c.Heads*hd)
			for h := range c.Heads {
				kvh := (h / group) * hd
				s := make([]float64, last+1)
				mx := math.Inf(-1)
				for j := range s {
					for d := range hd {
						s[j] += q[i][h*hd+d] * k[j][kvh+d]
					}
					s[j] /= math.Sqrt(float64(hd))
					mx = math.Max(mx, s[j])
				}
				var sum float64
				for j := range s {
					s[j] = math.Exp(s[j] - mx)
					sum += s[j]
				}
				for j := range s {
					for d := range hd {
						att[h*hd+d] += s[j] / sum * v[j][kvh+d]
					}
				}
			}
			o := matVec(L.O, att)
			for d := range dim {
				x[i][d] += o[d]
			}
		}
		for i := range n {
			xn := rms(x[i], L.FFNNorm)
			g, u := matVec(L.Gate, xn), matVec(L.Up, xn)
			for j := range g {
				g[j] = g[j] / (1 + math.Exp(-g[j])) * u[j]
			}
			d := matVec(L.Down, g)
			for j := range dim {
				x[i][j] += d[j]
			}
		}
	}
	out := make([][]float64, n)
	for i := range n {
		out[i] = rms(x[i], w.Norm)
	}
	return out
}

func newEmbedEngine(t testing.TB, path string, cfg Config) *Engine {
	t.Helper()
	cfg.ModelPath = path
	if cfg.KVType == "" {
		cfg.KVType = "f32"
	}
	if cfg.MaxContext == 0 {
		cfg.MaxContext = 256
	}
	if cfg.KVPages == 0 {
		cfg.KVPages = 256
	}
	e, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	return e
}

func embedTokens(n, salt int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = 3 + (i*37+salt*101)%(embedtest.Vocab-3)
	}
	return out
}

// The engine's per-token hidden states (pooling none, not normalized)
// equal an independent float64 forward pass, for a causal llama, a qwen3
// (NeoX RoPE, Q/K norms) and a non-causal llama, across a chunked input.
func TestEmbedHiddenMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    embedtest.Spec
		neox bool
	}{
		{"llama_mean", embedtest.Spec{Arch: "llama", Pooling: 1}, false},
		{"qwen3_last", embedtest.Spec{Arch: "qwen3", Pooling: 3, AddEOS: true}, true},
		{"llama_noncausal", embedtest.Spec{Arch: "llama", Pooling: 1, NonCausal: true}, false},
		{"qwen3_q8_0", embedtest.Spec{Arch: "qwen3", Pooling: 3, AddEOS: true, Type: ml.Q8_0}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, w := embedtest.Write(t, tc.m)
			e := newEmbedEngine(t, path, Config{MaxBatchTokens: 48})
			require.Equal(t, model.PoolingNone+model.Pooling(tc.m.Pooling), e.ModelConfig().Pooling)
			require.Equal(t, tc.m.NonCausal, e.ModelConfig().NonCausal)
			toks := embedTokens(40, 1)
			res, err := e.Embed(t.Context(), EmbedRequest{Tokens: [][]int{toks}, Pooling: model.PoolingNone, NoNormalize: true})
			require.NoError(t, err)
			got := res.Data[0].PerToken
			require.Len(t, got, len(toks))
			want := refHidden(w, toks, tc.neox)
			worst := 0.0
			for i := range want {
				for d := range want[i] {
					worst = math.Max(worst, math.Abs(float64(got[i][d])-want[i][d]))
				}
			}
			t.Logf("max abs difference from the float64 reference: %.3g", worst)
			limit := 1e-4
			if tc.m.Type != ml.F32 {
				// The reference multiplies the dequantized weights exactly;
				// the Q8_0 kernels also quantize the activations to 8 bits,
				// as llama.cpp's do: measured 0.097 over every token's row
				// (last token: kvwarden 0.045, llama.cpp 0.035 from it).
				limit = 0.15
			}
			require.Less(t, worst, limit, "max abs difference from the float64 reference")
		})
	}
}

// Pooling and normalization equal a float64 oracle over the engine's own
// per-token hidden states, exactly.
func TestEmbedPoolingOracle(t *testing.T) {
	path, _ := embedtest.Write(t, embedtest.Spec{Arch: "llama", Pooling: 1})
	e := newEmbedEngine(t, path, Config{MaxBatchTokens: 16})
	toks := embedTokens(37, 2) // three chunks of 16
	none, err := e.Embed(t.Context(), EmbedRequest{Tokens: [][]int{toks}, Pooling: model.PoolingNone, NoNormalize: true})
	require.NoError(t, err)
	rows := none.Data[0].PerToken
	oracle := func(p model.Pooling, keep int, norm bool) []float32 {
		var v []float32
		switch p {
		case model.PoolingMean:
			sum := make([]float64, len(rows[0]))
			for _, r := range rows {
				for k, x := range r {
					sum[k] += float64(x)
				}
			}
			v = make([]float32, len(sum))
			for k, s := range sum {
				v[k] = float32(s / float64(len(rows)))
			}
		case model.PoolingCLS:
			v = rows[0]
		case model.PoolingLast:
			v = rows[len(rows)-1]
		}
		v = append([]float32(nil), v[:keep]...)
		if norm {
			var ss float64
			for _, x := range v {
				ss += float64(x) * float64(x)
			}
			for k, x := range v {
				v[k] = float32(float64(x) / math.Sqrt(ss))
			}
		}
		return v
	}
	for _, p := range []model.Pooling{model.PoolingMean, model.PoolingCLS, model.PoolingLast} {
		for _, keep := range []int{0, 16} {
			for _, norm := range []bool{true, false} {
				t.Run(fmt.Sprintf("%v/dims%d/norm%v", p, keep, norm), func(t *testing.T) {
					res, err := e.Embed(t.Context(), EmbedRequest{Tokens: [][]int{toks}, Pooling: p, Dimensions: keep, NoNormalize: !norm})
					require.NoError(t, err)
					k := keep
					if k == 0 {
						k = 64
					}
					v := res.Data[0].Vector
					require.Equal(t, oracle(p, k, norm), v)
					if norm {
						var ss float64
						for _, x := range v {
							ss += float64(x) * float64(x)
						}
						require.InDelta(t, 1, ss, 1e-6)
					}
				})
			}
		}
	}
	// The model's own pooling (mean) is the default.
	res, err := e.Embed(t.Context(), EmbedRequest{Tokens: [][]int{toks}})
	require.NoError(t, err)
	require.Equal(t, model.PoolingMean, res.Pooling)
	require.Equal(t, oracle(model.PoolingMean, 64, true), res.Data[0].Vector)
	require.Equal(t, len(toks), res.PromptTokens)
}

// An input's vector is bit-identical whatever else is in the batch: 16
// concurrent Embed calls, mixed with generation requests, on an engine
// whose steps chunk and batch them in whatever way their arrival gives,
// equal each input embedded alone on an idle engine.
func TestEmbedBitIdenticalUnderConcurrency(t *testing.T) {
	for _, m := range []embedtest.Spec{{Arch: "qwen3", Pooling: 3, AddEOS: true}, {Arch: "llama", Pooling: 1}} {
		t.Run(m.Arch, func(t *testing.T) {
			path, _ := embedtest.Write(t, m)
			alone := newEmbedEngine(t, path, Config{})
			busy := newEmbedEngine(t, path, Config{MaxBatchTokens: 64})
			inputs := make([]string, 16)
			want := make([][]float32, len(inputs))
			for i := range inputs {
				inputs[i] = fmt.Sprintf("input %d:", i)
				for range i {
					inputs[i] += " fox jumps"
				}
				r, err := alone.Embed(t.Context(), EmbedRequest{Inputs: []string{inputs[i]}})
				require.NoError(t, err)
				want[i] = r.Data[0].Vector
			}
			var wg sync.WaitGroup
			got := make([][]float32, len(inputs))
			errs := make([]error, len(inputs))
			for i := range inputs {
				wg.Go(func() {
					r, err := busy.Embed(t.Context(), EmbedRequest{Inputs: []string{inputs[i]}})
					if errs[i] = err; err == nil {
						got[i] = r.Data[0].Vector
					}
				})
			}
			for i := range 4 {
				wg.Go(func() {
					_, err := busy.Generate(t.Context(), Request{Tokens: embedTokens(30+i, i), MaxTokens: 8})
					require.NoError(t, err)
				})
			}
			// And all of them in one call: one batch of many inputs.
			var all EmbedResult
			var allErr error
			wg.Go(func() { all, allErr = busy.Embed(t.Context(), EmbedRequest{Inputs: inputs}) })
			wg.Wait()
			require.NoError(t, allErr)
			for i := range inputs {
				require.NoError(t, errs[i])
				require.Equal(t, want[i], got[i], "input %d alone vs concurrent", i)
				require.Equal(t, want[i], all.Data[i].Vector, "input %d alone vs in a list", i)
				require.Equal(t, i, all.Data[i].Index)
			}
		})
	}
}

// Bad input is refused with a typed error naming the field; nothing runs.
func TestEmbedErrors(t *testing.T) {
	path, _ := embedtest.Write(t, embedtest.Spec{Arch: "llama", Pooling: 1})
	e := newEmbedEngine(t, path, Config{MaxContext: 64, KVPages: 64})
	gen, _ := embedtest.Write(t, embedtest.Spec{Arch: "llama", Pooling: -1})
	g := newEmbedEngine(t, gen, Config{})
	for _, tc := range []struct {
		name  string
		e     *Engine
		req   EmbedRequest
		is    error
		field string
		index int
	}{
		{"generative model", g, EmbedRequest{Inputs: []string{"hi"}}, ErrNoPooling, "model", -1},
		{"no inputs", e, EmbedRequest{}, ErrEmptyPrompt, "input", -1},
		{"empty string", e, EmbedRequest{Inputs: []string{"a", ""}}, ErrEmptyPrompt, "input", 1},
		{"empty token array", e, EmbedRequest{Tokens: [][]int{{5}, {}}}, ErrEmptyPrompt, "input", 1},
		{"dimensions too large", e, EmbedRequest{Inputs: []string{"a"}, Dimensions: 65}, ErrDimensions, "dimensions", -1},
		{"negative dimensions", e, EmbedRequest{Inputs: []string{"a"}, Dimensions: -1}, ErrDimensions, "dimensions", -1},
		{"too long", e, EmbedRequest{Tokens: [][]int{{5}, embedTokens(65, 0)}}, ErrPromptTooLong, "input", 1},
		{"token outside the vocabulary", e, EmbedRequest{Tokens: [][]int{{5, embedtest.Vocab}}}, ErrInvalidParams, "input", 0},
		{"rank pooling", e, EmbedRequest{Inputs: []string{"a"}, Pooling: model.PoolingRank}, ErrInvalidParams, "pooling", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.e.Embed(t.Context(), tc.req)
			require.ErrorIs(t, err, tc.is)
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tc.field, fe.Field)
			require.Equal(t, tc.index, fe.Index)
		})
	}

	// Asking for a pooling makes a generative model embed.
	r, err := g.Embed(t.Context(), EmbedRequest{Inputs: []string{"hi"}, Pooling: model.PoolingLast})
	require.NoError(t, err)
	require.Len(t, r.Data[0].Vector, 64)

	// Truncate keeps the first MaxContext tokens.
	long := embedTokens(80, 0)
	r, err = e.Embed(t.Context(), EmbedRequest{Tokens: [][]int{long}, Truncate: true})
	require.NoError(t, err)
	require.Equal(t, 64, r.Data[0].Tokens)
	cut, err := e.Embed(t.Context(), EmbedRequest{Tokens: [][]int{long[:64]}})
	require.NoError(t, err)
	require.Equal(t, cut.Data[0].Vector, r.Data[0].Vector)
}

// Embedding inputs hold pages like any request: all come back when the
// call ends, scrubbed under ZeroOnRelease, and none enters the prefix
// cache, so a later request of the same tenant with the same tokens
// computes its prompt itself.
func TestEmbedReleasesAndScrubsPages(t *testing.T) {
	path, _ := embedtest.Write(t, embedtest.Spec{Arch: "llama", Pooling: 1})
	e := newEmbedEngine(t, path, Config{ZeroOnRelease: true, MaxBatchTokens: 32})
	toks := embedTokens(100, 3)
	_, err := e.Embed(t.Context(), EmbedRequest{Tokens: [][]int{toks, toks[:50]}, Tenant: "acme"})
	require.NoError(t, err)
	st := e.Stats()
	require.Equal(t, st.Pool.Pages, st.Pool.Free+st.Pool.Releasing)
	require.Zero(t, st.PrefixEntries, "embedding pages never enter the prefix cache")
	require.Positive(t, st.Pool.Releases)
	require.Equal(t, st.Pool.Releases, st.Pool.Scrubs, "every released page was scrubbed")
	r, err := e.Generate(t.Context(), Request{Tokens: toks, MaxTokens: 1, Tenant: "acme"})
	require.NoError(t, err)
	require.Zero(t, r.CachedTokens)
}

// A Qwen3-Reranker-style file (pooling rank, cls.output yes/no rows, a
// rerank template): each pair is the template with {query} and {document}
// replaced, special tokens parsed; the score is softmax(cls.output · the
// last token's output-normed state)[0], as llama.cpp computes it.
func TestRerankQwen3(t *testing.T) {
	path, w := embedtest.Write(t, embedtest.Spec{Arch: "qwen3", Pooling: 4, Reranker: true})
	e := newEmbedEngine(t, path, Config{})
	docs := []string{"Paris is the capital.", "a fox", "dogs and cats"}
	res, err := e.Rerank(t.Context(), RerankRequest{Query: "capital?", Documents: docs})
	require.NoError(t, err)
	require.Len(t, res.Results, 3)
	for _, r := range res.Results {
		text := strings.NewReplacer("{query}", "capital?", "{document}", docs[r.Index]).Replace(embedtest.RerankTemplate)
		toks, err := e.Tokenizer().Encode(text, tokenizer.Options{Special: true})
		require.NoError(t, err)
		require.Equal(t, 1, toks[0], "<s> in the template is parsed as BOS")
		h := refHidden(w, toks, true)
		last := h[len(h)-1]
		logits := make([]float64, 2)
		f := make([]float32, w.Config.Dim)
		for k := range logits {
			ml.Dequantize(f, w.Rank.ClsOut, k)
			for d, v := range f {
				logits[k] += float64(v) * last[d]
			}
		}
		want := 1 / (1 + math.Exp(logits[1]-logits[0])) // softmax over two: P(yes)
		require.InDelta(t, want, float64(r.Score), 1e-5, "document %d", r.Index)
	}
	require.True(t, res.Results[0].Score >= res.Results[1].Score && res.Results[1].Score >= res.Results[2].Score)
}

// Each input is a request of the tenant: with a quota of 2, a call of 8
// inputs runs them at most 2 at a time and succeeds; another tenant is
// not held back by it.
func TestEmbedRespectsTenantQuota(t *testing.T) {
	path, _ := embedtest.Write(t, embedtest.Spec{Arch: "llama", Pooling: 1})
	e := newEmbedEngine(t, path, Config{TenantQuota: 2})
	in := make([][]int, 8)
	for i := range in {
		in[i] = embedtest.Tokens(10+i, i)
	}
	res, err := e.Embed(t.Context(), EmbedRequest{Tokens: in, Tenant: "acme"})
	require.NoError(t, err)
	require.Len(t, res.Data, 8)
	one, err := e.Embed(t.Context(), EmbedRequest{Tokens: in[3:4], Tenant: "other"})
	require.NoError(t, err)
	require.Equal(t, res.Data[3].Vector, one.Data[0].Vector)
	require.Zero(t, e.Stats().Pool.Owned+e.Stats().Pool.Sealed, "no page is held after the calls")
}

// A cancelled call ends with ErrAborted and gives every page back.
func TestEmbedCancelled(t *testing.T) {
	path, _ := embedtest.Write(t, embedtest.Spec{Arch: "llama", Pooling: 1})
	e := newEmbedEngine(t, path, Config{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := e.Embed(ctx, EmbedRequest{Tokens: [][]int{embedtest.Tokens(20, 1), embedtest.Tokens(30, 2)}})
	require.ErrorIs(t, err, ErrAborted)
	// The engine still serves, and its pool is whole.
	_, err = e.Embed(t.Context(), EmbedRequest{Tokens: [][]int{embedtest.Tokens(20, 1)}})
	require.NoError(t, err)
	st := e.Stats().Pool
	require.Equal(t, st.Pages, st.Free+st.Releasing)
}
