package server

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/internal/embedtest"
)

func embedServer(t *testing.T, spec embedtest.Spec) *testServer {
	path, _ := embedtest.Write(t, spec)
	return start(t, setup{cfg: engine.Config{ModelPath: path, KVType: "f32"}})
}

type embeddingsOut struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// /v1/embeddings takes every input shape OpenAI's API does and answers
// the engine's vectors, as floats or base64, with usage.
func TestEmbeddingsEndpoint(t *testing.T) {
	ts := embedServer(t, embedtest.Spec{Arch: "qwen3", Pooling: 3, AddEOS: true})
	want, err := ts.eng.Embed(t.Context(), engine.EmbedRequest{Inputs: []string{"hello world", "second input"}})
	require.NoError(t, err)
	wantTok, err := ts.eng.Embed(t.Context(), engine.EmbedRequest{Tokens: [][]int{{5, 6, 7}, {8, 9}}})
	require.NoError(t, err)

	floats := func(raw json.RawMessage) []float32 {
		var v []float32
		require.NoError(t, json.Unmarshal(raw, &v))
		return v
	}
	for _, tc := range []struct {
		name  string
		input any
		want  [][]float32
		usage int
	}{
		{"string", "hello world", [][]float32{want.Data[0].Vector}, want.Data[0].Tokens},
		{"strings", []string{"hello world", "second input"}, [][]float32{want.Data[0].Vector, want.Data[1].Vector}, want.PromptTokens},
		{"tokens", []int{5, 6, 7}, [][]float32{wantTok.Data[0].Vector}, 3},
		{"token lists", [][]int{{5, 6, 7}, {8, 9}}, [][]float32{wantTok.Data[0].Vector, wantTok.Data[1].Vector}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, format := range []string{"float", "base64"} {
				resp, raw := ts.post(t, "/v1/embeddings", "", map[string]any{"input": tc.input, "model": "m", "encoding_format": format})
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
				var out embeddingsOut
				require.NoError(t, json.Unmarshal(raw, &out))
				require.Equal(t, "list", out.Object)
				require.Len(t, out.Data, len(tc.want))
				for i, d := range out.Data {
					require.Equal(t, "embedding", d.Object)
					require.Equal(t, i, d.Index)
					got := []float32(nil)
					if format == "float" {
						got = floats(d.Embedding)
					} else {
						var s string
						require.NoError(t, json.Unmarshal(d.Embedding, &s))
						b, err := base64.StdEncoding.DecodeString(s)
						require.NoError(t, err)
						for j := 0; j+4 <= len(b); j += 4 {
							got = append(got, math.Float32frombits(binary.LittleEndian.Uint32(b[j:])))
						}
					}
					require.Equal(t, tc.want[i], got)
				}
				require.Equal(t, tc.usage, out.Usage.PromptTokens)
				require.Equal(t, tc.usage, out.Usage.TotalTokens)
			}
		})
	}

	// dimensions: Matryoshka truncation, renormalized.
	resp, raw := ts.post(t, "/v1/embeddings", "", map[string]any{"input": "hello world", "dimensions": 8})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	var out embeddingsOut
	require.NoError(t, json.Unmarshal(raw, &out))
	v := floats(out.Data[0].Embedding)
	require.Len(t, v, 8)
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	require.InDelta(t, 1, ss, 1e-6)

	// llama-server's /embeddings with content.
	resp, raw = ts.post(t, "/embeddings", "", map[string]any{"content": "hello world"})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
}

// Bad input is a 400 whose param names the field.
func TestEmbeddingsBadInput(t *testing.T) {
	ts := embedServer(t, embedtest.Spec{Arch: "llama", Pooling: 1})
	gen := embedServer(t, embedtest.Spec{Arch: "llama", Pooling: -1})
	long := make([]int, 300)
	for i := range long {
		long[i] = 5
	}
	for _, tc := range []struct {
		name  string
		ts    *testServer
		body  any
		param string
	}{
		{"missing input", ts, map[string]any{}, "input"},
		{"empty list", ts, map[string]any{"input": []string{}}, "input"},
		{"empty string", ts, map[string]any{"input": ""}, "input"},
		{"empty string in a list", ts, map[string]any{"input": []string{"a", ""}}, "input"},
		{"wrong type", ts, map[string]any{"input": 3}, "input"},
		{"too long", ts, map[string]any{"input": long}, "input"},
		{"dimensions too large", ts, map[string]any{"input": "a", "dimensions": 65}, "dimensions"},
		{"dimensions zero", ts, map[string]any{"input": "a", "dimensions": 0}, "dimensions"},
		{"encoding_format", ts, map[string]any{"input": "a", "encoding_format": "int8"}, "encoding_format"},
		{"pooling", ts, map[string]any{"input": "a", "pooling": "max"}, "pooling"},
		{"generation-only model", gen, map[string]any{"input": "a"}, "model"},
		{"token outside the vocabulary", ts, map[string]any{"input": []int{1, 100000}}, "input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, raw := tc.ts.post(t, "/v1/embeddings", "", tc.body)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", raw)
			var e struct {
				Error struct {
					Param   string `json:"param"`
					Message string `json:"message"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(raw, &e))
			require.Equal(t, tc.param, e.Error.Param, "%s", raw)
			require.NotEmpty(t, e.Error.Message)
		})
	}
	// Truncate makes the long input fit.
	resp, raw := ts.post(t, "/v1/embeddings", "", map[string]any{"input": long, "truncate": true})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	// A generative model embeds when the request names a pooling.
	resp, raw = gen.post(t, "/v1/embeddings", "", map[string]any{"input": "a", "pooling": "last"})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
}

// /v1/rerank (and llama-server's aliases): results sorted by relevance,
// equal to Engine.Rerank, top_n and return_documents applied; bad input
// is a 400 naming the field.
func TestRerankEndpoint(t *testing.T) {
	path, _ := embedtest.WriteBERT(t, embedtest.BERTSpec{Pooling: 4, Rank: true, Lower: true})
	ts := start(t, setup{cfg: engine.Config{ModelPath: path, KVType: "f32", MaxContext: 64}})
	docs := []string{"Paris is the capital of France.", "The quick brown fox.", "hello world"}
	want, err := ts.eng.Rerank(t.Context(), engine.RerankRequest{Query: "capital of france", Documents: docs})
	require.NoError(t, err)
	for _, path := range []string{"/v1/rerank", "/rerank", "/v1/reranking", "/reranking"} {
		resp, raw := ts.post(t, path, "", map[string]any{"query": "capital of france", "documents": []any{docs[0], map[string]string{"text": docs[1]}, docs[2]},
			"top_n": 2, "return_documents": true})
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
		var out struct {
			Object  string `json:"object"`
			Results []struct {
				Index          int     `json:"index"`
				RelevanceScore float32 `json:"relevance_score"`
				Document       struct {
					Text string `json:"text"`
				} `json:"document"`
			} `json:"results"`
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		require.NoError(t, json.Unmarshal(raw, &out))
		require.Equal(t, "list", out.Object)
		require.Len(t, out.Results, 2)
		for i, r := range out.Results {
			require.Equal(t, want.Results[i].Index, r.Index)
			require.Equal(t, want.Results[i].Score, r.RelevanceScore)
			require.Equal(t, docs[r.Index], r.Document.Text)
		}
		require.Equal(t, want.PromptTokens, out.Usage.PromptTokens)
	}
	for _, tc := range []struct {
		name  string
		body  any
		param string
	}{
		{"no query", map[string]any{"documents": docs}, "query"},
		{"empty query", map[string]any{"query": "", "documents": docs}, "query"},
		{"no documents", map[string]any{"query": "q"}, "documents"},
		{"empty document", map[string]any{"query": "q", "documents": []string{"a", ""}}, "documents"},
		{"bad document", map[string]any{"query": "q", "documents": []any{3}}, "documents"},
		{"top_n zero", map[string]any{"query": "q", "documents": docs, "top_n": 0}, "top_n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, raw := ts.post(t, "/v1/rerank", "", tc.body)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", raw)
			var e struct {
				Error struct {
					Param string `json:"param"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(raw, &e))
			require.Equal(t, tc.param, e.Error.Param)
		})
	}
	// An embedding model without a classification head: 400 on model.
	emb := embedServer(t, embedtest.Spec{Arch: "llama", Pooling: 1})
	resp, raw := emb.post(t, "/v1/rerank", "", map[string]any{"query": "q", "documents": docs})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", raw)
	require.Contains(t, string(raw), `"param":"model"`)
}

// TestOpenAINodeEmbeddings runs the official openai npm client against
// /v1/embeddings: its default base64 encoding decodes to the engine's
// float32 values exactly, float too; dimensions; an empty list is a 400
// naming input.
func TestOpenAINodeEmbeddings(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFail(t, "%s not found: the openai npm client test needs Node.js and npm", tool)
		}
	}
	dir := npmDir(t)
	script, err := os.ReadFile(filepath.Join("testdata", "openai_embeddings.mjs"))
	require.NoError(t, err)
	scriptPath := filepath.Join(dir, "openai_embeddings.mjs")
	require.NoError(t, os.WriteFile(scriptPath, script, 0o644))

	ts := embedServer(t, embedtest.Spec{Arch: "qwen3", Pooling: 3, AddEOS: true})
	want, err := ts.eng.Embed(t.Context(), engine.EmbedRequest{Inputs: []string{"hello world", "second"}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", scriptPath, ts.url+"/v1", "none", "test-model")
	cmd.Dir = dir
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "node client failed:\n%s\n%s", out, stderr)
	var res struct {
		Default [][]float64
		Index   []int
		Float   []float64
		Dims    int
		Usage   struct {
			PromptTokens int `json:"prompt_tokens"`
		}
		Bad struct {
			Status int
			Param  string
		}
	}
	require.NoError(t, json.Unmarshal(out, &res), "%s", out)
	f32 := func(v []float64) []float32 {
		o := make([]float32, len(v))
		for i, x := range v {
			o[i] = float32(x)
		}
		return o
	}
	require.Equal(t, []int{0, 1}, res.Index)
	require.Equal(t, want.Data[0].Vector, f32(res.Default[0]))
	require.Equal(t, want.Data[1].Vector, f32(res.Default[1]))
	require.Equal(t, want.Data[0].Vector, f32(res.Float))
	require.Equal(t, 8, res.Dims)
	require.Equal(t, want.PromptTokens, res.Usage.PromptTokens)
	require.Equal(t, http.StatusBadRequest, res.Bad.Status)
	require.Equal(t, "input", res.Bad.Param)
}
