package model

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/kvcache"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// Golden data of ../shared/golden/arch (README there): small random-weight
// GGUF files of every supported architecture, with llama.cpp b9821's greedy
// continuations and logits. All logit comparisons are teacher-forced: the
// prompt plus the first 4 generated tokens are fed, and the logits at the
// last prompt position and after each of those tokens are compared.

type archCase struct {
	Prompt    []int     `json:"prompt_token_ids"`
	Generated []int     `json:"generated_token_ids"`
	Logits    []string  `json:"logits"` // base64 of n_vocab little-endian float32
	Margins   []float64 `json:"greedy_margins"`
}

type archGolden struct {
	File      string     `json:"model_file"`
	Arch      string     `json:"arch"`
	QuantType string     `json:"quant_type"`
	Cases     []archCase `json:"cases"`
	Dequant   *struct {
		Cases []archCase `json:"cases"`
	} `json:"reference_dequantized_f32"`
	TensorChecks map[string]struct {
		Type   string `json:"type"`
		SHA256 string `json:"sha256_f32le"`
	} `json:"dequantized_tensor_checks"`
}

func (c archCase) logits(t testing.TB, i int) []float32 {
	b, err := base64.StdEncoding.DecodeString(c.Logits[i])
	require.NoError(t, err)
	out := make([]float32, len(b)/4)
	for j := range out {
		out[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
	}
	return out
}

func loadArchGolden(t testing.TB, name string) (string, *archGolden) {
	t.Helper()
	js := testmodels.Golden(t, "arch/"+name+".json")
	data, err := os.ReadFile(js)
	require.NoError(t, err)
	var g archGolden
	require.NoError(t, json.Unmarshal(data, &g))
	require.NotEmpty(t, g.Cases)
	return strings.TrimSuffix(js, ".json") + ".gguf", &g
}

// archF32 lists the F32 files with their logit tolerance (README: 0.001,
// Gemma 0.03 because llama.cpp evaluates GELU through an fp16 table).
var archF32 = []struct {
	name string
	tol  float64
}{
	{"llama32", 1e-3}, {"mistral", 1e-3}, {"qwen2", 1e-3}, {"qwen3", 1e-3}, {"phi3", 1e-3},
	{"gemma2", 0.03}, {"gemma3", 0.03},
}

// teacherForce feeds prompt+generated[:k-1] in chunks of chunk tokens (0:
// all at once) and returns the logits at the last k positions.
func teacherForce(t testing.TB, r *Runner, pool *kvcache.Pool, id kvcache.RequestID, c archCase, k, chunk int) [][]float32 {
	seq := append(append([]int(nil), c.Prompt...), c.Generated[:k-1]...)
	tab := pool.NewTable(id, "golden")
	defer func() { require.NoError(t, tab.Release()) }()
	require.NoError(t, tab.Reserve(len(seq)))
	if chunk <= 0 {
		chunk = len(seq)
	}
	first := len(c.Prompt) - 1
	var out [][]float32
	for i := 0; i < len(seq); {
		end := min(i+chunk, len(seq))
		// Ask for logits at every wanted position: split the chunk there.
		if i <= first && end > first+1 {
			end = first + 1
		}
		if i > first {
			end = i + 1
		}
		b := &Batch{Seqs: []Seq{{Tokens: seq[i:end], Table: tab, Logits: end-1 >= first}}}
		require.NoError(t, r.Forward(b))
		if end-1 >= first {
			out = append(out, append([]float32(nil), b.Logits[0]...))
		}
		i = end
	}
	require.Len(t, out, k)
	return out
}

func maxDiff(t testing.TB, got [][]float32, c archCase) float64 {
	worst := 0.0
	for i := range got {
		worst = math.Max(worst, maxAbsDiff(got[i], c.logits(t, i)))
	}
	return worst
}

// TestGoldenArchF32 checks every F32 golden file: 32 greedy tokens equal
// llama.cpp's, and the teacher-forced logits are within the README's
// tolerance, with the prompt prefilled whole and in chunks of 1 and 7.
func TestGoldenArchF32(t *testing.T) {
	for _, m := range archF32 {
		t.Run(m.name, func(t *testing.T) {
			path, g := loadArchGolden(t, m.name)
			w, f, err := LoadGGUF(path)
			require.NoError(t, err)
			defer f.Close()
			require.Equal(t, g.Arch, w.Config.Arch)
			pool := newTestPool(t, w.Config, 64)
			r, err := NewRunner(w, pool)
			require.NoError(t, err)
			id := kvcache.RequestID(1)
			for ci, c := range g.Cases {
				got, _, _ := greedy(t, r, pool, id, c.Prompt, len(c.Generated), 0)
				id++
				require.Equal(t, c.Generated, got, "case %d greedy", ci)
				for _, chunk := range []int{0, 1, 7} {
					d := maxDiff(t, teacherForce(t, r, pool, id, c, len(c.Logits), chunk), c)
					id++
					t.Logf("case %d chunk %d: max |dlogit| %.3g", ci, chunk, d)
					require.LessOrEqual(t, d, m.tol, "case %d chunk %d", ci, chunk)
				}
			}
			require.Equal(t, pool.Pages(), pool.FreePages())
		})
	}
}

var _ = fmt.Sprint
