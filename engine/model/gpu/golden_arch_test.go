package gpu

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/kvcache"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// gpuTeacherForce feeds prompt + generated[:k-1] in chunks (0: whole) and
// returns the logits at the last prompt position and after each fed
// generated token.
func gpuTeacherForce(t *testing.T, r *Runner, pool *kvcache.Pool, id kvcache.RequestID, c testmodels.ArchCase, k, chunk int) [][]float32 {
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
		if i <= first && end > first+1 {
			end = first + 1
		}
		if i > first {
			end = i + 1
		}
		b := &model.Batch{Seqs: []model.Seq{{Tokens: seq[i:end], Table: tab, Logits: end-1 >= first}}}
		require.NoError(t, r.Forward(b))
		if end-1 >= first {
			out = append(out, append([]float32(nil), b.Logits[0]...))
		}
		i = end
	}
	return out
}

// gpuGreedy generates n tokens after prompt with ForwardArgmax.
func gpuGreedy(t *testing.T, r *Runner, pool *kvcache.Pool, id kvcache.RequestID, prompt []int, n int) []int {
	tab := pool.NewTable(id, "golden")
	defer func() { require.NoError(t, tab.Release()) }()
	require.NoError(t, tab.Reserve(len(prompt)+n))
	out := make([]int, 1)
	b := &model.Batch{Seqs: []model.Seq{{Tokens: prompt, Table: tab, Logits: true}}}
	require.NoError(t, r.ForwardArgmax(b, out))
	got := []int{out[0]}
	for len(got) < n {
		b := &model.Batch{Seqs: []model.Seq{{Tokens: got[len(got)-1:], Table: tab, Logits: true}}}
		require.NoError(t, r.ForwardArgmax(b, out))
		got = append(got, out[0])
	}
	return got
}

// TestGPUGoldenArch runs every file of ../shared/golden/arch on the GPU
// with f32 weights and KV: F32 files give llama.cpp's 32 greedy tokens and
// its teacher-forced logits within the README's tolerance (prompt whole
// and in chunks of 1 and 7); quantized files, dequantized to f32 on upload,
// agree with llama.cpp on the exactly dequantized weights within 1e-3
// (plus the F32 tolerance's reasoning: the same math). A batch of all
// cases at once gives the same greedy tokens as each alone.
func TestGPUGoldenArch(t *testing.T) {
	d := gpuOrSkip(t)
	type file struct {
		name string
		tol  float64
	}
	var files []file
	for _, m := range testmodels.ArchF32 {
		files = append(files, file{m.Name, m.Tol})
	}
	for _, q := range testmodels.ArchQuantFiles() {
		files = append(files, file{q.Name, 1e-3})
	}
	// KVWARDEN_GOLDEN_ARCH=name,name,... runs only those files (the GPU
	// machine gets the subset bench/gpu/build.sh can carry).
	if only := os.Getenv("KVWARDEN_GOLDEN_ARCH"); only != "" {
		keep := files[:0]
		for _, fl := range files {
			if slices.Contains(strings.Split(only, ","), fl.name) {
				keep = append(keep, fl)
			}
		}
		require.NotEmpty(t, keep, "KVWARDEN_GOLDEN_ARCH=%s names no golden file", only)
		files = keep
	}
	for _, fl := range files {
		t.Run(fl.name, func(t *testing.T) {
			g := testmodels.LoadArchGolden(t, fl.name)
			cases := g.Cases
			if g.Dequant != nil {
				cases = g.Dequant.Cases
			}
			w, f, err := model.LoadGGUF(g.Model)
			require.NoError(t, err)
			defer f.Close()
			pool := gpuPool(t, d, w.Config, device.F32, 64)
			r, err := New(d, w, pool, Options{Weights: device.F32})
			require.NoError(t, err)
			defer r.Close()
			id := kvcache.RequestID(1)
			alone := make([][]int, len(cases))
			for ci, c := range cases {
				for _, chunk := range []int{0, 1, 7} {
					d, err := c.MaxAbsDiff(gpuTeacherForce(t, r, pool, id, c, len(c.Logits64), chunk))
					require.NoError(t, err)
					id++
					t.Logf("case %d chunk %d: max |dlogit| %.3g", ci, chunk, d)
					kernelOut(t).LessOrEqual(d, fl.tol, "case %d chunk %d", ci, chunk)
				}
				alone[ci] = gpuGreedy(t, r, pool, id, c.Prompt, len(c.Generated))
				id++
				kernelOut(t).Equal(c.Generated, alone[ci], "case %d greedy", ci)
			}
			// All cases in one batch, decoding together.
			tabs := make([]*kvcache.PageTable, len(cases))
			next := make([][]int, len(cases))
			got := make([][]int, len(cases))
			for i, c := range cases {
				tabs[i] = pool.NewTable(id, "batch")
				id++
				require.NoError(t, tabs[i].Reserve(len(c.Prompt)+len(c.Generated)))
				next[i] = c.Prompt
			}
			for len(got[0]) < len(cases[0].Generated) {
				b := &model.Batch{}
				for i := range cases {
					b.Seqs = append(b.Seqs, model.Seq{Tokens: next[i], Table: tabs[i], Logits: true})
				}
				require.NoError(t, r.Forward(b))
				for i := range cases {
					tok := sample.Argmax(b.Logits[i])
					got[i] = append(got[i], tok)
					next[i] = []int{tok}
				}
			}
			for i := range cases {
				kernelOut(t).Equal(alone[i], got[i], "case %d batched", i)
				require.NoError(t, tabs[i].Release())
			}
		})
	}
}
