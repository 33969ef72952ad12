package model

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
	"github.com/kvwarden/kvwarden/internal/kvcache"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

type goldenCase struct {
	Prompt            string        `json:"prompt"`
	PromptTokenIDs    []int         `json:"prompt_token_ids"`
	GeneratedTokenIDs []int         `json:"generated_token_ids"`
	LogitsAfterPrompt *goldenLogits `json:"logits_after_prompt"`
	LogitsAfter8      *goldenLogits `json:"logits_after_8_generated"`
}

type goldenLogits struct {
	FedToken int       `json:"fed_token_id"`
	Pos      int       `json:"pos"`
	Values   []float32 `json:"values"`
}

func loadGolden(t *testing.T) []goldenCase {
	t.Helper()
	data, err := os.ReadFile(testmodels.Golden(t, "stories260K_greedy.json"))
	require.NoError(t, err)
	var g struct {
		Cases []goldenCase `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(data, &g))
	require.NotEmpty(t, g.Cases)
	return g.Cases
}

func newTestPool(t testing.TB, c Config, pages int) *kvcache.Pool {
	t.Helper()
	p, err := kvcache.New(cpu.New(), kvcache.Config{
		Geometry: c.KVGeometry(16, device.F32),
		Pages:    pages,
		Poison:   true, // any read of an unwritten slot turns into NaN logits
	})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

func maxAbsDiff(a, b []float32) float64 {
	m := 0.0
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i]-b[i])))
	}
	return m
}

// greedy runs one request through r: the prompt in chunks of chunk tokens
// (0 = all at once), then n greedy tokens. It returns the generated tokens
// and the logits seen after the prompt and after 8 generated tokens.
func greedy(t testing.TB, r *Runner, pool *kvcache.Pool, id kvcache.RequestID, prompt []int, n, chunk int) (out []int, afterPrompt, after8 []float32) {
	tab := pool.NewTable(id, "golden")
	defer func() { require.NoError(t, tab.Release()) }()
	require.NoError(t, tab.Reserve(len(prompt)+n))
	if chunk <= 0 {
		chunk = len(prompt)
	}
	var logits []float32
	for i := 0; i < len(prompt); i += chunk {
		end := min(i+chunk, len(prompt))
		b := &Batch{Seqs: []Seq{{Tokens: prompt[i:end], Table: tab, Logits: end == len(prompt)}}}
		require.NoError(t, r.Forward(b))
		logits = b.Logits[0]
	}
	afterPrompt = append([]float32(nil), logits...)
	for k := range n {
		tok := sample.Argmax(logits)
		out = append(out, tok)
		if k == n-1 {
			break
		}
		b := &Batch{Seqs: []Seq{{Tokens: []int{tok}, Table: tab, Logits: true}}}
		require.NoError(t, r.Forward(b))
		logits = b.Logits[0]
		if k == 7 {
			after8 = append([]float32(nil), logits...)
		}
	}
	return out, afterPrompt, after8
}

// TestGoldenLlama2C reproduces llama2.c run.c on stories260K: the 64 greedy
// tokens of every golden prompt exactly, and the logits within 1e-4
// absolute. The prompt is prefilled both in one chunk and token by token
// (as run.c does).
func TestGoldenLlama2C(t *testing.T) {
	w, err := LoadLlama2C(testmodels.Path(t, "stories260K.bin"))
	require.NoError(t, err)
	defer w.Close()
	pool := newTestPool(t, w.Config, 64)
	r, err := NewRunner(w, pool)
	require.NoError(t, err)

	id := kvcache.RequestID(1)
	for _, gc := range loadGolden(t) {
		for _, chunk := range []int{0, 1} {
			t.Run(fmt.Sprintf("%s/chunk%d", gc.Prompt, chunk), func(t *testing.T) {
				got, afterPrompt, after8 := greedy(t, r, pool, id, gc.PromptTokenIDs, len(gc.GeneratedTokenIDs), chunk)
				id++
				require.Equal(t, gc.GeneratedTokenIDs, got)
				if gc.LogitsAfterPrompt != nil {
					require.LessOrEqual(t, maxAbsDiff(afterPrompt, gc.LogitsAfterPrompt.Values), 1e-4)
					require.LessOrEqual(t, maxAbsDiff(after8, gc.LogitsAfter8.Values), 1e-4)
				}
			})
		}
	}
	require.Equal(t, pool.Pages(), pool.FreePages(), "every page returns to the pool")
}

// TestGoldenGGUF runs the llama.cpp conversion of the same model: same tokens.
func TestGoldenGGUF(t *testing.T) {
	w, f, err := LoadGGUF(testmodels.Path(t, "stories260K.gguf"))
	require.NoError(t, err)
	defer f.Close()
	pool := newTestPool(t, w.Config, 64)
	r, err := NewRunner(w, pool)
	require.NoError(t, err)
	for i, gc := range loadGolden(t) {
		got, afterPrompt, _ := greedy(t, r, pool, kvcache.RequestID(i+1), gc.PromptTokenIDs, len(gc.GeneratedTokenIDs), 0)
		require.Equal(t, gc.GeneratedTokenIDs, got, gc.Prompt)
		if gc.LogitsAfterPrompt != nil {
			require.LessOrEqual(t, maxAbsDiff(afterPrompt, gc.LogitsAfterPrompt.Values), 1e-4)
		}
	}
}

// TestBatchInvariance: a request produces the same tokens alone, batched
// with 31 others of different lengths, and with any prefill chunk size.
func TestBatchInvariance(t *testing.T) {
	w, err := LoadLlama2C(testmodels.Path(t, "stories260K.bin"))
	require.NoError(t, err)
	defer w.Close()
	pool := newTestPool(t, w.Config, 32*8+8)
	r, err := NewRunner(w, pool)
	require.NoError(t, err)
	cases := loadGolden(t)
	target := cases[0]
	const gen = 24

	alone, _, _ := greedy(t, r, pool, 1, target.PromptTokenIDs, gen, 0)
	require.Equal(t, target.GeneratedTokenIDs[:gen], alone)
	for _, chunk := range []int{1, 2, 3, 7} {
		got, _, _ := greedy(t, r, pool, kvcache.RequestID(10+chunk), target.PromptTokenIDs, gen, chunk)
		require.Equal(t, alone, got, "chunk %d", chunk)
	}

	// 32 sequences: the target plus 31 others whose prompts have different
	// lengths, prefilled in chunks of different sizes so prefill and decode
	// rows mix in the same step.
	type seq struct {
		prompt []int
		chunk  int
		tab    *kvcache.PageTable
		fed    int
		out    []int
		next   int
	}
	seqs := make([]*seq, 32)
	for i := range seqs {
		p := target.PromptTokenIDs
		if i > 0 {
			src := cases[i%len(cases)].PromptTokenIDs
			p = append(append([]int(nil), src...), cases[0].GeneratedTokenIDs[:i%13]...)
		}
		s := &seq{prompt: p, chunk: 1 + i%5, tab: pool.NewTable(kvcache.RequestID(100+i), "batch")}
		require.NoError(t, s.tab.Reserve(len(p)+gen))
		seqs[i] = s
	}
	for {
		b := &Batch{}
		var members []*seq
		for _, s := range seqs {
			if len(s.out) >= gen {
				continue
			}
			if s.fed < len(s.prompt) {
				end := min(s.fed+s.chunk, len(s.prompt))
				b.Seqs = append(b.Seqs, Seq{Tokens: s.prompt[s.fed:end], Table: s.tab, Logits: end == len(s.prompt)})
				s.fed = end
			} else {
				b.Seqs = append(b.Seqs, Seq{Tokens: []int{s.next}, Table: s.tab, Logits: true})
			}
			members = append(members, s)
		}
		if len(members) == 0 {
			break
		}
		require.NoError(t, r.Forward(b))
		for i, s := range members {
			if b.Logits[i] != nil {
				s.next = sample.Argmax(b.Logits[i])
				s.out = append(s.out, s.next)
			}
		}
	}
	require.Equal(t, alone, seqs[0].out, "batched with 31 others")
	for _, s := range seqs {
		require.NoError(t, s.tab.Release())
	}
}

// TestQuantizedTolerance measures how far Q8_0 and F16 weights move the
// logits of stories260K, and their top-1 agreement with F32 over the golden
// continuations (teacher-forced, so one early flip does not cascade).
func TestQuantizedTolerance(t *testing.T) {
	w, err := LoadLlama2C(testmodels.Path(t, "stories260K.bin"))
	require.NoError(t, err)
	defer w.Close()
	for _, tc := range []struct {
		typ      ml.Type
		maxDiff  float64 // documented tolerance on logits (max |logit| is about 18)
		minAgree float64 // top-1 agreement with F32
	}{
		{ml.F16, 0.05, 0.99},
		{ml.Q8_0, 0.5, 0.97},
	} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			qw, err := Requantize(w, tc.typ)
			require.NoError(t, err)
			pool := newTestPool(t, w.Config, 64)
			ref, err := NewRunner(w, pool)
			require.NoError(t, err)
			q, err := NewRunner(qw, pool)
			require.NoError(t, err)
			agree, total, worst := 0, 0, 0.0
			for i, gc := range loadGolden(t) {
				seq := append(append([]int(nil), gc.PromptTokenIDs...), gc.GeneratedTokenIDs...)
				a := teacherForced(t, ref, pool, kvcache.RequestID(2*i+1), seq)
				b := teacherForced(t, q, pool, kvcache.RequestID(2*i+2), seq)
				for j := len(gc.PromptTokenIDs) - 1; j < len(seq)-1; j++ {
					worst = math.Max(worst, maxAbsDiff(a[j], b[j]))
					if sample.Argmax(a[j]) == sample.Argmax(b[j]) {
						agree++
					}
					total++
				}
			}
			frac := float64(agree) / float64(total)
			t.Logf("%v: max |logit diff| %.4g, top-1 agreement %d/%d (%.3f)", tc.typ, worst, agree, total, frac)
			require.LessOrEqual(t, worst, tc.maxDiff)
			require.GreaterOrEqual(t, frac, tc.minAgree)
		})
	}
}

// teacherForced feeds seq one token at a time and returns the logits after each.
func teacherForced(t testing.TB, r *Runner, pool *kvcache.Pool, id kvcache.RequestID, seq []int) [][]float32 {
	tab := pool.NewTable(id, "q")
	defer func() { require.NoError(t, tab.Release()) }()
	require.NoError(t, tab.Reserve(len(seq)))
	out := make([][]float32, len(seq))
	for i, tok := range seq {
		b := &Batch{Seqs: []Seq{{Tokens: []int{tok}, Table: tab, Logits: true}}}
		require.NoError(t, r.Forward(b))
		out[i] = append([]float32(nil), b.Logits[0]...)
	}
	return out
}
