package main

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/embedtest"
)

// `kvwarden embed` prints the engine's vectors exactly (float32 text),
// one line per input from the arguments or stdin, or JSON; with --query
// it reranks.
func TestEmbedCommand(t *testing.T) {
	path, _ := embedtest.Write(t, embedtest.Spec{Arch: "qwen3", Pooling: 3, AddEOS: true})
	eng, err := engine.New(engine.Config{ModelPath: path, Device: "cpu"})
	require.NoError(t, err)
	want, err := eng.Embed(t.Context(), engine.EmbedRequest{Inputs: []string{"hello world", "second"}})
	require.NoError(t, err)
	require.NoError(t, eng.Close())

	parse := func(out string) [][]float32 {
		var vs [][]float32
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var v []float32
			for _, f := range strings.Fields(line) {
				x, err := strconv.ParseFloat(f, 32)
				require.NoError(t, err)
				v = append(v, float32(x))
			}
			vs = append(vs, v)
		}
		return vs
	}
	r := runCmd(t, "", "embed", "--model", path, "--device", "cpu", "hello world", "second")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, [][]float32{want.Data[0].Vector, want.Data[1].Vector}, parse(r.stdout))
	r = runCmd(t, "hello world\n\nsecond\n", "embed", "--model", path, "--device", "cpu")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, [][]float32{want.Data[0].Vector, want.Data[1].Vector}, parse(r.stdout))

	r = runCmd(t, "", "embed", "--model", path, "--device", "cpu", "--json", "--dimensions", "8", "hello world")
	require.Equal(t, 0, r.code, r.stderr)
	var out struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Len(t, out.Data[0].Embedding, 8)
	var ss float64
	for _, x := range out.Data[0].Embedding {
		ss += float64(x) * float64(x)
	}
	require.InDelta(t, 1, math.Sqrt(ss), 1e-6)
	require.Equal(t, want.Data[0].Tokens, out.Usage.PromptTokens)

	// Pooling none: one line per token, an empty line after each input;
	// in JSON a list of per-token vectors.
	none, err := func() (engine.EmbedResult, error) {
		eng, err := engine.New(engine.Config{ModelPath: path, Device: "cpu"})
		require.NoError(t, err)
		defer eng.Close()
		return eng.Embed(t.Context(), engine.EmbedRequest{Inputs: []string{"hello world", "second"}, Pooling: model.PoolingNone})
	}()
	require.NoError(t, err)
	r = runCmd(t, "", "embed", "--model", path, "--device", "cpu", "--pooling", "none", "hello world", "second")
	require.Equal(t, 0, r.code, r.stderr)
	inputs := strings.Split(strings.TrimSuffix(r.stdout, "\n\n"), "\n\n")
	require.Len(t, inputs, 2)
	for i, in := range inputs {
		require.Equal(t, none.Data[i].PerToken, parse(in), "input %d", i)
	}
	r = runCmd(t, "", "embed", "--model", path, "--device", "cpu", "--pooling", "none", "--json", "second")
	require.Equal(t, 0, r.code, r.stderr)
	var perTok struct {
		Data []struct {
			Embedding [][]float32 `json:"embedding"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &perTok))
	require.Equal(t, none.Data[1].PerToken, perTok.Data[0].Embedding)

	for _, bad := range [][]string{{"--pooling", "max", "x"}, {"--pooling", "rank", "x"}, {"--dimensions", "-1", "x"}, {}} {
		r = runCmd(t, "", append([]string{"embed", "--model", path, "--device", "cpu"}, bad...)...)
		require.NotEqual(t, 0, r.code, "%v", bad)
	}
	// A model generation-only: a clear error naming pooling.
	r = runCmd(t, "", "embed", "--model", "builtin:synthetic", "hello")
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "pooling")

	rank, _ := embedtest.WriteBERT(t, embedtest.BERTSpec{Pooling: 4, Rank: true, Lower: true})
	r = runCmd(t, "", "embed", "--model", rank, "--query", "capital of france", "Paris is the capital of France.", "hello world")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2)
}
