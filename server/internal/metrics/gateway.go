package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvwarden/kvwarden/engine"
)

// The model-server protocol of the Kubernetes Gateway API Inference
// Extension (and llm-d on top of it): its endpoint picker scrapes each
// replica's queue depth, running requests and KV-cache utilization to route
// requests. The protocol fixes the types and meanings, not the names; its
// reference picker reads vLLM's names by default, so kvwarden exports them
// under those names (with vLLM's model_name label) as well as its own:
//
//	protocol metric      kvwarden                        vLLM name (also exported)
//	TotalQueuedRequests  kvwarden_queued_requests        vllm:num_requests_waiting
//	TotalRunningRequests kvwarden_running_requests       vllm:num_requests_running
//	KVCacheUtilization   kvwarden_kv_cache_utilization   vllm:gpu_cache_usage_perc, vllm:kv_cache_usage_perc
//
// Queued counts admitted requests not running now: waiting ones and those
// preempted to the host tier (they wait to be resumed). Running counts
// requests holding pages in the batch. KV-cache utilization is the share of
// the pool's pages that are not free, in [0, 1]: pages of running requests,
// pages the prefix cache holds, pages on their way back (releasing), and
// quarantined pages (which the pool can no longer hand out).
var (
	gwQueued  = desc("queued_requests", "Requests admitted and waiting to run (Gateway API Inference Extension TotalQueuedRequests).", "model_name")
	gwRunning = desc("running_requests", "Requests running in the batch (TotalRunningRequests).", "model_name")
	gwKV      = desc("kv_cache_utilization", "Share of KV pool pages in use, 0 to 1 (KVCacheUtilization).", "model_name")

	vllmWaiting = prometheus.NewDesc("vllm:num_requests_waiting", "Number of requests waiting to be processed (kvwarden: kvwarden_queued_requests).", []string{"model_name"}, nil)
	vllmRunning = prometheus.NewDesc("vllm:num_requests_running", "Number of requests currently running (kvwarden: kvwarden_running_requests).", []string{"model_name"}, nil)
	vllmGPUKV   = prometheus.NewDesc("vllm:gpu_cache_usage_perc", "KV-cache usage; 1 means 100 percent (kvwarden: kvwarden_kv_cache_utilization).", []string{"model_name"}, nil)
	vllmKV      = prometheus.NewDesc("vllm:kv_cache_usage_perc", "KV-cache usage; 1 means 100 percent (kvwarden: kvwarden_kv_cache_utilization).", []string{"model_name"}, nil)
)

// Load is the protocol's view of one engine snapshot.
type Load struct {
	Queued, Running int
	KVUtilization   float64
}

// LoadOf computes the protocol metrics from engine statistics.
func LoadOf(s engine.Stats) Load {
	l := Load{Queued: s.Waiting + s.Swapped, Running: s.Running}
	if p := s.Pool; p.Pages > 0 {
		l.KVUtilization = float64(p.Pages-p.Free) / float64(p.Pages)
	}
	return l
}

type gatewayCollector struct {
	stats func() engine.Stats
	model string
}

func (c *gatewayCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{gwQueued, gwRunning, gwKV, vllmWaiting, vllmRunning, vllmGPUKV, vllmKV} {
		ch <- d
	}
}

func (c *gatewayCollector) Collect(ch chan<- prometheus.Metric) {
	l := LoadOf(c.stats())
	for _, g := range []struct {
		d *prometheus.Desc
		v float64
	}{
		{gwQueued, float64(l.Queued)}, {vllmWaiting, float64(l.Queued)},
		{gwRunning, float64(l.Running)}, {vllmRunning, float64(l.Running)},
		{gwKV, l.KVUtilization}, {vllmGPUKV, l.KVUtilization}, {vllmKV, l.KVUtilization},
	} {
		ch <- prometheus.MustNewConstMetric(g.d, prometheus.GaugeValue, g.v, c.model)
	}
}
