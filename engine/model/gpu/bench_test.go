package gpu

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cuda"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// BenchResult is one row of the GPU benchmark table.
type BenchResult struct {
	Phase       string  `json:"phase"` // decode or prefill
	Batch       int     `json:"batch"`
	Context     int     `json:"context"` // tokens already in the cache per sequence
	TokensPerS  float64 `json:"tokens_per_s"`
	StepMs      float64 `json:"step_ms"`
	BytesPerStp int64   `json:"bytes_per_step,omitempty"`
	HBMEff      float64 `json:"hbm_efficiency,omitempty"`
}

// copyBandwidth measures device-to-device copy bandwidth in bytes/s,
// counting read plus write (2 bytes moved per byte copied).
func copyBandwidth(t *testing.T, d *cuda.Device) float64 {
	const n = 1 << 30
	src, err := d.Alloc(n)
	require.NoError(t, err)
	defer d.Free(src)
	dst, err := d.Alloc(n)
	require.NoError(t, err)
	defer d.Free(dst)
	var ms float32
	require.NoError(t, d.Run(func(q *cuda.Queue) error {
		for range 2 {
			if err := q.CopyDtoD(dst.Ptr, src.Ptr, n); err != nil {
				return err
			}
		}
		tm, err := q.StartTimer()
		if err != nil {
			return err
		}
		for range 10 {
			if err := q.CopyDtoD(dst.Ptr, src.Ptr, n); err != nil {
				return err
			}
		}
		ms, err = q.StopTimer(tm)
		return err
	}))
	return 2 * 10 * n / (float64(ms) / 1e3)
}

// TestGPUBenchLlama1B measures the Llama-3.2-1B-shaped synthetic model
// (f16 weights generated on the device, f16 KV, page size 16): decode
// tokens/s at batch 1, 16, 64 and 256 after a 128-token prompt, HBM
// efficiency at each batch (weights + KV bytes read per step / step time /
// measured copy bandwidth), and prefill tokens/s. It runs only with
// KVWARDEN_GPU_BENCH=1 and writes gpu-bench.md and gpu-bench.json to
// $KVWARDEN_BENCH_OUT (default: the test's temp dir).
func TestGPUBenchLlama1B(t *testing.T) {
	if os.Getenv("KVWARDEN_GPU_BENCH") == "" {
		t.Skip("set KVWARDEN_GPU_BENCH=1 to run the GPU benchmark")
	}
	d := gpuOrSkip(t)
	outDir := os.Getenv("KVWARDEN_BENCH_OUT")
	if outDir == "" {
		outDir = t.TempDir()
	}
	bw := copyBandwidth(t, d)
	t.Logf("device-to-device copy bandwidth: %.0f GB/s (read+write)", bw/1e9)

	c := Llama32_1B()
	const prompt, decodeSteps, warm = 128, 24, 3
	batches := []int{1, 16, 64, 256}
	maxB := 256
	ctx := prompt + decodeSteps + warm + 1
	pagesPer := (ctx + 15) / 16
	pool, err := kvcache.New(cuda.BackendFor(d), kvcache.Config{
		Geometry: kvcache.Geometry{PageSize: 16, Layers: c.Layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim, DType: device.F16},
		Pages:    maxB*pagesPer + 256,
	})
	require.NoError(t, err)
	defer pool.Close()
	start := time.Now()
	r, err := NewSynthetic(d, c, 1, pool, DefaultOptions())
	require.NoError(t, err)
	defer r.Close()
	t.Logf("synthetic %s-shaped model on %s: %.2f GB of f16 weights in %v (half activations: %v)",
		"Llama-3.2-1B", d.Name(), float64(r.WeightBytes())/1e9, time.Since(start), r.half)
	kvTokBytes := int64(2 * c.Layers * c.KVDim() * 2)

	// Each row is written as soon as it is measured, so a run cut short by
	// bench/gpu/check.sh's deadline keeps what it measured.
	blas, berr := d.BLAS()
	md, err := os.Create(filepath.Join(outDir, "gpu-bench.md"))
	require.NoError(t, err)
	defer md.Close()
	fmt.Fprintf(md, "# GPU benchmark: synthetic Llama-3.2-1B shape\n\n")
	fmt.Fprintf(md, "%s, %d SMs; f16 weights (%.2f GB), f16 KV, page size 16; cuBLAS: %s %v; half activations: %v\n\n",
		d.Name(), d.SMs(), float64(r.WeightBytes())/1e9, blas, berr, r.half)
	fmt.Fprintf(md, "Device-to-device copy bandwidth (read+write): %.0f GB/s\n\n", bw/1e9)
	fmt.Fprintf(md, "HBM efficiency = (weight bytes + KV bytes read per step) / step time / copy bandwidth; target >= 0.6 at batch 1.\n\n")
	fmt.Fprintf(md, "| phase | batch | context | tokens/s | step ms | bytes/step | HBM efficiency |\n|---|---|---|---|---|---|---|\n")
	var results []BenchResult
	emit := func(x BenchResult) {
		results = append(results, x)
		eff, by := "", ""
		if x.HBMEff > 0 {
			eff, by = fmt.Sprintf("%.2f", x.HBMEff), fmt.Sprintf("%.2f GB", float64(x.BytesPerStp)/1e9)
		}
		row := fmt.Sprintf("| %s | %d | %d | %.0f | %.2f | %s | %s |\n", x.Phase, x.Batch, x.Context, x.TokensPerS, x.StepMs, by, eff)
		t.Log(row)
		_, err := md.WriteString(row)
		require.NoError(t, err)
		js, _ := json.MarshalIndent(map[string]any{"device": d.Name(), "copy_bandwidth_Bps": bw, "results": results}, "", "  ")
		require.NoError(t, os.WriteFile(filepath.Join(outDir, "gpu-bench.json"), js, 0o644))
	}
	id := kvcache.RequestID(1)
	for _, B := range batches {
		tabs := make([]*kvcache.PageTable, B)
		for i := range tabs {
			tabs[i] = pool.NewTable(id, "bench")
			id++
			require.NoError(t, tabs[i].Reserve(ctx))
		}
		// Prefill in steps of at most 4096 tokens.
		toks := make([]int, prompt)
		for i := range toks {
			toks[i] = (i*7919 + 13) % c.Vocab
		}
		per := max(1, 4096/prompt)
		pstart := time.Now()
		out := make([]int, B)
		for i := 0; i < B; i += per {
			var b model.Batch
			for j := i; j < min(B, i+per); j++ {
				b.Seqs = append(b.Seqs, model.Seq{Tokens: toks, Table: tabs[j], Logits: true})
			}
			require.NoError(t, r.ForwardArgmax(&b, out[i:]))
		}
		pel := time.Since(pstart)
		if B == 16 || B == 64 {
			emit(BenchResult{Phase: "prefill", Batch: B, Context: 0,
				TokensPerS: float64(B*prompt) / pel.Seconds(), StepMs: float64(pel.Microseconds()) / 1e3 / float64((B+per-1)/per)})
		}
		step := func() {
			var b model.Batch
			for j := range B {
				b.Seqs = append(b.Seqs, model.Seq{Tokens: []int{out[j] % c.Vocab}, Table: tabs[j], Logits: true})
			}
			require.NoError(t, r.ForwardArgmax(&b, out))
		}
		for range warm {
			step()
		}
		ctxNow := tabs[0].Written()
		s := time.Now()
		for range decodeSteps {
			step()
		}
		el := time.Since(s)
		stepS := el.Seconds() / decodeSteps
		avgCtx := int64(ctxNow + decodeSteps/2)
		bytes := r.WeightBytes() + int64(B)*avgCtx*kvTokBytes
		emit(BenchResult{Phase: "decode", Batch: B, Context: ctxNow,
			TokensPerS: float64(B) / stepS, StepMs: stepS * 1e3, BytesPerStp: bytes, HBMEff: float64(bytes) / stepS / bw})
		for _, tb := range tabs {
			require.NoError(t, tb.Release())
		}
	}
	// A long single prefill.
	{
		tab := pool.NewTable(id, "bench")
		require.NoError(t, tab.Reserve(2048))
		toks := make([]int, 2048)
		for i := range toks {
			toks[i] = (i*31 + 7) % c.Vocab
		}
		out := make([]int, 1)
		s := time.Now()
		require.NoError(t, r.ForwardArgmax(&model.Batch{Seqs: []model.Seq{{Tokens: toks, Table: tab, Logits: true}}}, out))
		el := time.Since(s)
		emit(BenchResult{Phase: "prefill", Batch: 1, Context: 0, TokensPerS: 2048 / el.Seconds(), StepMs: el.Seconds() * 1e3})
		require.NoError(t, tab.Release())
	}

	require.NoError(t, md.Close())
}
