package model

import (
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

// teacherForce feeds prompt+generated[:k-1] in chunks of chunk tokens (0:
// all at once) and returns the logits at the last k positions.
func teacherForce(t testing.TB, r *Runner, pool *kvcache.Pool, id kvcache.RequestID, c testmodels.ArchCase, k, chunk int) [][]float32 {
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

func maxDiff(t testing.TB, got [][]float32, c testmodels.ArchCase) float64 {
	d, err := c.MaxAbsDiff(got)
	require.NoError(t, err)
	return d
}

// TestGoldenArchF32 checks every F32 golden file: 32 greedy tokens equal
// llama.cpp's, and the teacher-forced logits are within the README's
// tolerance, with the prompt prefilled whole and in chunks of 1 and 7.
func TestGoldenArchF32(t *testing.T) {
	for _, m := range testmodels.ArchF32 {
		t.Run(m.Name, func(t *testing.T) {
			g := testmodels.LoadArchGolden(t, m.Name)
			w, f, err := LoadGGUF(g.Model)
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
					d := maxDiff(t, teacherForce(t, r, pool, id, c, len(c.Logits64), chunk), c)
					id++
					t.Logf("case %d chunk %d: max |dlogit| %.3g", ci, chunk, d)
					require.LessOrEqual(t, d, m.Tol, "case %d chunk %d", ci, chunk)
				}
			}
			require.Equal(t, pool.Pages(), pool.FreePages())
		})
	}
}
