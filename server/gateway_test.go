package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/audit"
	"github.com/kvwarden/kvwarden/internal/kvcache"
	"github.com/kvwarden/kvwarden/server/internal/metrics"
)

// gatedRunner holds every forward pass until the test lets one through (a
// value on gate) or opens the gate (closes it), so the engine's queue and
// batch stay still while /metrics is scraped.
type gatedRunner struct {
	engine.Runner
	gate chan struct{}
}

func (r gatedRunner) Forward(b *model.Batch) error {
	<-r.gate
	return r.Runner.Forward(b)
}

// TestGatewayInferenceMetrics: the Gateway API Inference Extension's
// model-server metrics (queued requests, running requests, KV-cache
// utilization in [0, 1]) under kvwarden's names and vLLM's, with their
// meanings: one request running, two queued behind MaxSeqs 1.
func TestGatewayInferenceMetrics(t *testing.T) {
	gate := make(chan struct{})
	var echo *audit.Echo
	eng, err := engine.New(engine.Config{KVPages: 32, MaxContext: 128, MaxSeqs: 1},
		engine.WithTestHooks(engine.TestHooks{NewRunner: func(pool *kvcache.Pool) (engine.Runner, error) {
			var err error
			echo, err = audit.NewEcho(pool, sep, "")
			return gatedRunner{echo, gate}, err
		}}))
	require.NoError(t, err)
	echo.SetVocab(model.SyntheticVocab)
	srv := httptest.NewServer(New(Options{Engine: eng, ModelID: "m1"}))
	defer srv.Close()
	defer eng.Close()
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	defer open() // first of the defers: never leave a handler stuck behind the gate

	scrape := func() string {
		resp, err := http.Get(srv.URL + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	idle := scrape()
	for _, line := range []string{
		`kvwarden_queued_requests{model_name="m1"} 0`, `kvwarden_running_requests{model_name="m1"} 0`,
		`kvwarden_kv_cache_utilization{model_name="m1"} 0`,
		`vllm:num_requests_waiting{model_name="m1"} 0`, `vllm:num_requests_running{model_name="m1"} 0`,
		`vllm:gpu_cache_usage_perc{model_name="m1"} 0`, `vllm:kv_cache_usage_perc{model_name="m1"} 0`,
	} {
		require.Contains(t, idle, line+"\n")
	}
	require.Contains(t, idle, "# TYPE vllm:num_requests_waiting gauge")
	require.Contains(t, idle, "# TYPE kvwarden_kv_cache_utilization gauge")

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"prompt":[1,%d,%d,%d,258],"max_tokens":4}`, 100+i, 101+i, 102+i)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/completions", strings.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	// The engine publishes its queue and batch sizes after each step: let
	// steps through one at a time (waiting for each to be counted, not for
	// time) until one request is in the batch and two are admitted behind
	// it; the next step is then held at the gate while /metrics is read.
	deadline := time.Now().Add(20 * time.Second)
	waitFor := func(what string, ok func(engine.Stats) bool) engine.Stats {
		for {
			st := eng.Stats()
			if ok(st) {
				return st
			}
			require.True(t, time.Now().Before(deadline), "%s: %+v", what, st)
			time.Sleep(2 * time.Millisecond)
		}
	}
	waitFor("3 requests admitted", func(st engine.Stats) bool { return st.Admitted == 3 })
	var st engine.Stats
	for k := uint64(1); ; k++ {
		require.LessOrEqual(t, k, uint64(3), "never 1 running + 2 waiting: %+v", st)
		gate <- struct{}{}
		st = waitFor("step counted", func(st engine.Stats) bool { return st.Steps >= k })
		if st.Running == 1 && st.Waiting == 2 {
			break
		}
	}
	busy := scrape()
	require.Equal(t, st.Pool.Free, eng.Stats().Pool.Free, "the held step allocated nothing while scraping")
	used := float64(st.Pool.Pages-st.Pool.Free) / float64(st.Pool.Pages)
	require.Greater(t, used, 0.0)
	require.Less(t, used, 1.0)
	require.Equal(t, metrics.Load{Queued: 2, Running: 1, KVUtilization: used}, metrics.LoadOf(st))
	for _, line := range []string{
		`kvwarden_queued_requests{model_name="m1"} 2`, `vllm:num_requests_waiting{model_name="m1"} 2`,
		`kvwarden_running_requests{model_name="m1"} 1`, `vllm:num_requests_running{model_name="m1"} 1`,
		fmt.Sprintf(`vllm:kv_cache_usage_perc{model_name="m1"} %g`, used),
		fmt.Sprintf(`vllm:gpu_cache_usage_perc{model_name="m1"} %g`, used),
		fmt.Sprintf(`kvwarden_kv_cache_utilization{model_name="m1"} %g`, used),
	} {
		require.Contains(t, busy, line+"\n")
	}
	open()
	wg.Wait()
	cancel()
}

func TestLoadOfCountsSwappedAsQueued(t *testing.T) {
	var st engine.Stats
	st.Waiting, st.Swapped, st.Running = 3, 2, 4
	st.Pool.Pages, st.Pool.Free = 40, 10
	require.Equal(t, metrics.Load{Queued: 5, Running: 4, KVUtilization: 0.75}, metrics.LoadOf(st))
	require.Equal(t, metrics.Load{}, metrics.LoadOf(engine.Stats{}), "an empty pool is 0, not NaN")
}
