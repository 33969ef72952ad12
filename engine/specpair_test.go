package engine

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// quantizedCopy writes a copy of the GGUF file src to dir with every F32
// matrix whose rows are a whole number of blocks re-encoded as t (the
// vectors, and stories260K's 172-column ffn_down, stay F32): the draft
// model of a "quantized copy" pair, the same weights at fewer bits.
func quantizedCopy(t *testing.T, src string, typ ml.Type, dir string) string {
	t.Helper()
	f, err := gguf.Open(src)
	require.NoError(t, err)
	defer f.Close()
	b := gguf.NewBuilder()
	b.Version = f.Version
	for _, kv := range f.Metadata {
		b.Set(kv.Key, kv.Value)
	}
	quantized := 0
	for _, ti := range f.Tensors {
		if ti.Type != ml.F32 || len(ti.Dims) != 2 || ti.Dims[0]%uint64(typ.BlockSize()) != 0 {
			b.AddTensor(ti.Name, ti.Type, ti.Dims, append([]byte(nil), ti.Data...))
			continue
		}
		rows, cols := int(ti.Dims[1]), int(ti.Dims[0])
		m, err := ml.Quantize(typ, rows, cols, append([]float32(nil), ml.BytesF32(ti.Data)...))
		require.NoError(t, err)
		b.AddTensor(ti.Name, typ, ti.Dims, m.Data)
		quantized++
	}
	require.NotZero(t, quantized)
	out := filepath.Join(dir, "draft-"+typ.String()+".gguf")
	require.NoError(t, b.WriteFile(out))
	return out
}

// TestSpecQuantizedCopyDraft: stories260K drafted for by a Q8_0 and a
// Q4_0 copy of its own weights (the pairing of a full-precision model
// with a low-bit copy of itself as the draft model). Greedy output is
// identical to decoding without speculation, alone and batched, and the
// copy's drafts are mostly accepted: the acceptance floor of each pair is
// set below what it measures (Q8_0 0.96, Q4_0 0.63 of the draft tokens
// on these prompts, alone and batched), far above what an unrelated draft model
// gets (TestSpecDraftModelRejects: almost none), so a draft path that
// proposed the wrong tokens or lost its KV would fail it.
func TestSpecQuantizedCopyDraft(t *testing.T) {
	target := testmodels.Path(t, "stories260K.gguf")
	dir := t.TempDir()
	var reqs []Request
	for _, p := range specPrompts {
		reqs = append(reqs, Request{Prompt: p, MaxTokens: 60, Sampling: sample.Greedy()})
	}
	mk := func(sp Speculative) *Engine {
		e, err := New(Config{ModelPath: target, KVPages: 256, MaxSeqs: 16, ZeroOnRelease: true, Speculative: sp})
		require.NoError(t, err)
		t.Cleanup(func() { closeClean(t, e) })
		return e
	}
	want := runAll(t, mk(Speculative{}), reqs)
	for _, tc := range []struct {
		typ   ml.Type
		floor float64 // accepted / drafted
	}{
		{ml.Q8_0, 0.85},
		{ml.Q4_0, 0.45},
	} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			e := mk(Speculative{Type: SpecDraft, DraftModel: quantizedCopy(t, target, tc.typ, dir), DraftMax: 6})
			for j, r := range reqs {
				got, err := e.Generate(t.Context(), r)
				require.NoError(t, err)
				require.Equal(t, want[j].Tokens, got.Tokens, "request %d alone", j)
			}
			for j, got := range runAll(t, e, reqs) {
				require.NoError(t, got.Err)
				require.Equal(t, want[j].Tokens, got.Tokens, "request %d in the batch", j)
			}
			st := e.Stats()
			rate := float64(st.Spec.Accepted) / float64(st.Spec.Drafted)
			t.Logf("%v copy: %+v, acceptance %.3f, %.2f accepted per verifying step", tc.typ, st.Spec, rate,
				float64(st.Spec.Accepted)/float64(st.Spec.Steps))
			require.NotZero(t, st.Spec.Drafted)
			require.Greater(t, rate, tc.floor, "a quantized copy of the model drafts what the model says")
			require.Zero(t, st.IsolationFailures)
			draftPoolClean(t, e)
		})
	}
}
