package model

import (
	"encoding/binary"
	"math"
	"os"
	"testing"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/internal/kvcache"
	"github.com/kvwarden/kvwarden/internal/testmodels"
	"github.com/stretchr/testify/require"
)

// gldCase is one case of a golden_run output file
// (../shared/golden/arch/tools/golden_run.cpp): the prompt, the greedy
// continuation and the logits after the prompt (step 0) and after feeding
// each generated token.
type gldCase struct {
	prompt, generated []int
	logits            [][]float32
}

func readGLD(t *testing.T, path string) []gldCase {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	off := 0
	i32 := func() int {
		v := int32(binary.LittleEndian.Uint32(b[off:]))
		off += 4
		return int(v)
	}
	ints := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i32()
		}
		return out
	}
	require.Equal(t, 0x474c4431, i32(), "magic")
	nv, nc := i32(), i32()
	cases := make([]gldCase, nc)
	for c := range cases {
		cases[c].prompt = ints(i32())
		ng := i32()
		cases[c].generated = ints(ng)
		off += 8 * ng // margins and end-of-generation flags
		for range i32() {
			row := make([]float32, nv)
			for j := range row {
				row[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[off:]))
				off += 4
			}
			cases[c].logits = append(cases[c].logits, row)
		}
	}
	require.Equal(t, len(b), off, "trailing bytes")
	return cases
}

// TestBF16MatchesLlamaCpp runs stories260K with every matrix converted to
// BF16 (as llama-quantize's BF16 does: round to nearest even) against
// llama.cpp b10472's run of that file on an AVX512_BF16 CPU
// (testdata/stories260K-bf16.gld: golden_run -t 1 -n 40 -k 9 on two
// prompts). BF16 products round the activations to bf16 and accumulate as
// VDPBF16PS, so the logits agree to float rounding (2e-6 measured; exact
// f32 products differ by 0.056), on every CPU and path.
func TestBF16MatchesLlamaCpp(t *testing.T) {
	w, _, err := LoadGGUF(testmodels.Path(t, "stories260K.gguf"))
	require.NoError(t, err)
	toBF16 := func(m *ml.Matrix) {
		if m == nil {
			return
		}
		require.Equal(t, ml.F32, m.Type)
		q, err := ml.Quantize(ml.BF16, m.Rows, m.Cols, ml.BytesF32(m.Data))
		require.NoError(t, err)
		*m = *q
	}
	toBF16(w.Embed)
	if w.Output != w.Embed {
		toBF16(w.Output)
	}
	for i := range w.Layers {
		for _, m := range w.Layers[i].Matrices() {
			toBF16(m)
		}
	}
	pool := newTestPool(t, w.Config, 64)
	r, err := NewRunner(w, pool)
	require.NoError(t, err)
	cases := readGLD(t, "testdata/stories260K-bf16.gld")
	require.Len(t, cases, 2)
	for ci, c := range cases {
		got, afterPrompt, after8 := greedy(t, r, pool, kvcache.RequestID(ci+1), c.prompt, len(c.generated), 0)
		require.Equal(t, c.generated, got, "case %d greedy", ci)
		for step, l := range map[int][]float32{0: afterPrompt, 8: after8} {
			d := 0.0
			for j := range l {
				d = math.Max(d, math.Abs(float64(l[j]-c.logits[step][j])))
			}
			t.Logf("case %d step %d: max |dlogit| %.3g", ci, step, d)
			require.LessOrEqual(t, d, 1e-4, "case %d step %d", ci, step)
		}
	}
}
