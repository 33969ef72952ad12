// Package metrics exports kvwarden's Prometheus metrics: what the HTTP
// server observes per request (outcomes, rejections by reason, tokens, time
// to first token, inter-token time) and, on every scrape, a snapshot of the
// engine's own counters (pool pages by state, leases, deferred release
// duration and outcome, checksum failures, isolation violations, host-tier
// bytes, preemptions, prefix cache).
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvwarden/kvwarden/engine"
)

const ns = "kvwarden"

// Metrics is one server's metric set, on its own registry.
type Metrics struct {
	Registry *prometheus.Registry

	// Requests counts finished completion requests by endpoint and outcome:
	// stop, length, abort (client gone or shutdown), error, isolation,
	// rejected.
	Requests *prometheus.CounterVec
	// Rejections counts requests refused before generation, by reason
	// (prompt_too_long, empty_prompt, invalid_params, quota_exceeded,
	// overloaded, closed, bad_request, body_too_large, unauthorized,
	// model_not_found, method_not_allowed).
	Rejections *prometheus.CounterVec
	// PromptTokens and CompletionTokens count tokens of served requests.
	PromptTokens     prometheus.Counter
	CompletionTokens prometheus.Counter
	CachedTokens     prometheus.Counter
	// TTFT is request arrival to first token, as the client sees it.
	TTFT prometheus.Histogram
	// InterToken is the time between consecutive tokens of a stream.
	InterToken prometheus.Histogram
	// Duration is request arrival to the end of the response.
	Duration *prometheus.HistogramVec
	InFlight prometheus.Gauge
}

// LatencyBuckets (seconds) for TTFT, inter-token and request duration.
var LatencyBuckets = []float64{.001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10, 30, 60}

// New builds the metric set. stats, when not nil, is read on every scrape;
// model labels the Gateway API Inference Extension metrics (gateway.go).
func New(stats func() engine.Stats, model string) *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "requests_total",
			Help: "Completion requests by endpoint and outcome (stop, length, abort, error, isolation, rejected).",
		}, []string{"endpoint", "outcome"}),
		Rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "rejections_total",
			Help: "Requests refused before any generation, by reason.",
		}, []string{"reason"}),
		PromptTokens: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "prompt_tokens_total", Help: "Prompt tokens of served requests.",
		}),
		CompletionTokens: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "completion_tokens_total", Help: "Tokens generated for served requests.",
		}),
		CachedTokens: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Name: "prompt_cached_tokens_total", Help: "Prompt tokens served from the tenant-scoped prefix cache.",
		}),
		TTFT: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Name: "time_to_first_token_seconds",
			Help: "Request arrival to first generated token.", Buckets: LatencyBuckets,
		}),
		InterToken: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Name: "inter_token_seconds",
			Help: "Time between consecutive tokens of one request.", Buckets: LatencyBuckets,
		}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "request_duration_seconds",
			Help: "Request arrival to the end of the response.", Buckets: LatencyBuckets,
		}, []string{"endpoint"}),
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Name: "inflight_requests", Help: "Completion requests being served now.",
		}),
	}
	r.MustRegister(m.Requests, m.Rejections, m.PromptTokens, m.CompletionTokens, m.CachedTokens,
		m.TTFT, m.InterToken, m.Duration, m.InFlight,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if stats != nil {
		r.MustRegister(&engineCollector{stats: stats}, &gatewayCollector{stats: stats, model: model})
	}
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(ns+"_"+name, help, labels, nil)
}

var (
	dPages          = desc("kv_pages", "KV pool pages by state.", "state")
	dPagesTotal     = desc("kv_pages_capacity", "KV pool size in pages.")
	dLeases         = desc("kv_leases", "Outstanding page leases by kind.", "kind")
	dAllocs         = desc("kv_page_allocations_total", "Pages allocated.")
	dReleases       = desc("kv_page_releases_total", "Pages released by their owner.")
	dScrubs         = desc("kv_page_scrubs_total", "Pages zeroed or poisoned on the way to the free list.")
	dDeferred       = desc("kv_deferred_releases_total", "Releases deferred because leases were held, by outcome (started, freed, quarantined).", "outcome")
	dDeferredDur    = desc("kv_deferred_release_duration_seconds", "Time from a deferred release to its outcome.")
	dChecksum       = desc("kv_checksum_failures_total", "Sealed KV pages whose checksum did not verify.")
	dIsolation      = desc("kv_isolation_violations_total", "Isolation checks that failed in the KV pool (any non-zero value is an incident).")
	dIsoRequests    = desc("isolation_failures_total", "Requests ended with an isolation error (any non-zero value is an incident).")
	dStale          = desc("kv_stale_completions_total", "Asynchronous completions refused because their page generation was stale.")
	dCopyFail       = desc("kv_copy_failures_total", "Host-tier copies that failed.")
	dScrubFail      = desc("kv_scrub_failures_total", "Page scrubs that failed.")
	dSealFail       = desc("kv_seal_failures_total", "Host-tier copies that failed their authentication tag (damaged, or their tenant erased): each a miss, recomputed.")
	dErasures       = desc("kv_tenant_erasures_total", "Tenant KV crypto-erasures served.")
	dDiskBytes      = desc("disk_tier_bytes", "Disk tier bytes (used, budget).", "kind")
	dDiskFiles      = desc("disk_tier_files", "Page files in the disk tier.")
	dDiskEvents     = desc("disk_tier_pages_total", "Disk tier pages by event: written, hit (read back and served), seal_failure (failed its tag or malformed: deleted, a miss), evicted (budget), erased, skipped, write_error.", "event")
	dHostBytes      = desc("host_tier_bytes", "Host tier bytes (used, capacity).", "kind")
	dHostEntries    = desc("host_tier_entries", "Pages held in the host tier.")
	dHostMoved      = desc("host_tier_transferred_bytes_total", "Raw page bytes moved between device and host tier, by direction (offload, restore), and host bytes stored after compression (stored).", "direction")
	dSeqs           = desc("sequences", "Engine requests by scheduling state (waiting, running, swapped).", "state")
	dEngineRejected = desc("engine_rejections_total", "Requests the engine rejected at admission, by reason.", "reason")
	dEngineFinished = desc("engine_finished_total", "Requests the engine finished, by finish reason.", "reason")
	dSteps          = desc("engine_steps_total", "Scheduler steps.")
	dPreempt        = desc("engine_preemptions_total", "Sequences preempted under page pressure.")
	dSwaps          = desc("engine_swaps_total", "Preemption swaps by direction (out, in, failed).", "direction")
	dRecompute      = desc("engine_recomputed_tokens_total", "Tokens prefilled again after a preemption without host tier.")
	dPrefix         = desc("prefix_cache_lookups_total", "Prefix cache page lookups by result (hit, miss).", "result")
	dPrefixEntries  = desc("prefix_cache_entries", "Pages indexed in the tenant-scoped prefix cache.")
	dPrefixEvict    = desc("prefix_cache_evictions_total", "Prefix cache entries evicted.")
	dPrefixHost     = desc("prefix_cache_host_entries", "Prefix cache pages spilled to the host tier and still indexed there.")
	dPrefixSpills   = desc("prefix_cache_spills_total", "Evicted prefix cache pages copied to the host tier.")
	dPrefixHostHits = desc("prefix_cache_host_hits_total", "Prefix cache pages restored from the host tier (checksum verified) and served.")
	dPrefixHostEvic = desc("prefix_cache_host_evictions_total", "Host-tier prefix cache entries dropped.")
	dStepTime       = desc("engine_step_seconds", "Duration of one scheduler step, forward pass included.")
	dQueueTime      = desc("engine_queue_seconds", "Submit to first scheduled.")
)

// engineCollector reads engine.Stats on every scrape.
type engineCollector struct{ stats func() engine.Stats }

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dPages, dPagesTotal, dLeases, dAllocs, dReleases, dScrubs, dDeferred, dDeferredDur,
		dChecksum, dIsolation, dIsoRequests, dStale, dCopyFail, dScrubFail, dHostBytes, dHostEntries, dHostMoved, dSeqs,
		dEngineRejected, dEngineFinished, dSteps, dPreempt, dSwaps, dRecompute, dPrefix, dPrefixEntries, dPrefixEvict,
		dPrefixHost, dPrefixSpills, dPrefixHostHits, dPrefixHostEvic, dStepTime, dQueueTime, dSealFail, dErasures,
		dDiskBytes, dDiskFiles, dDiskEvents} {
		ch <- d
	}
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	p := s.Pool
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	counter := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, l...)
	}
	gauge(dPages, float64(p.Free), "free")
	gauge(dPages, float64(p.Owned), "owned")
	gauge(dPages, float64(p.Sealed), "sealed")
	gauge(dPages, float64(p.Releasing), "releasing")
	gauge(dPages, float64(p.Quarantined), "quarantined")
	gauge(dPagesTotal, float64(p.Pages))
	gauge(dLeases, float64(p.StepLeases), "step")
	gauge(dLeases, float64(p.CopyLeases), "copy")
	gauge(dLeases, float64(p.PrefixLeases), "prefix")
	counter(dAllocs, float64(p.Allocs))
	counter(dReleases, float64(p.Releases))
	counter(dScrubs, float64(p.Scrubs))
	counter(dDeferred, float64(p.DeferredReleases), "started")
	counter(dDeferred, float64(p.DeferredFreed), "freed")
	counter(dDeferred, float64(p.DeferredQuarantined), "quarantined")
	ch <- constHistogram(dDeferredDur, p.DeferredDuration)
	counter(dChecksum, float64(p.ChecksumFailures))
	counter(dIsolation, float64(p.IsolationViolations))
	counter(dIsoRequests, float64(s.IsolationFailures))
	counter(dStale, float64(p.StaleCompletions))
	counter(dCopyFail, float64(p.CopyFailures))
	counter(dScrubFail, float64(p.ScrubFailures))
	counter(dSealFail, float64(p.SealFailures))
	counter(dErasures, float64(s.TenantErasures))
	if d := s.Disk; d.Budget > 0 {
		gauge(dDiskBytes, float64(d.Used), "used")
		gauge(dDiskBytes, float64(d.Budget), "budget")
		gauge(dDiskFiles, float64(d.Files))
		for _, ev := range []struct {
			name string
			n    uint64
		}{{"written", d.Writes}, {"hit", d.Hits}, {"seal_failure", d.SealFailures}, {"evicted", d.Evictions},
			{"erased", d.Erased}, {"skipped", d.Skipped}, {"dropped", d.Dropped}, {"write_error", d.WriteErrors}} {
			counter(dDiskEvents, float64(ev.n), ev.name)
		}
	}
	gauge(dHostBytes, float64(p.HostTierUsed), "used")
	gauge(dHostBytes, float64(p.HostTierCapacity), "capacity")
	gauge(dHostEntries, float64(p.HostEntries))
	counter(dHostMoved, float64(p.BytesOffloaded), "offload")
	counter(dHostMoved, float64(p.BytesRestored), "restore")
	counter(dHostMoved, float64(p.BytesStored), "stored")
	gauge(dSeqs, float64(s.Waiting), "waiting")
	gauge(dSeqs, float64(s.Running), "running")
	gauge(dSeqs, float64(s.Swapped), "swapped")
	for reason, n := range s.Rejected {
		counter(dEngineRejected, float64(n), reason)
	}
	for reason, n := range s.Finished {
		counter(dEngineFinished, float64(n), reason)
	}
	counter(dSteps, float64(s.Steps))
	counter(dPreempt, float64(s.Preemptions))
	counter(dSwaps, float64(s.SwapOuts), "out")
	counter(dSwaps, float64(s.SwapIns), "in")
	counter(dSwaps, float64(s.SwapFails), "failed")
	counter(dRecompute, float64(s.RecomputedTokens))
	counter(dPrefix, float64(s.PrefixHits), "hit")
	counter(dPrefix, float64(s.PrefixMisses), "miss")
	gauge(dPrefixEntries, float64(s.PrefixEntries))
	counter(dPrefixEvict, float64(s.PrefixEvictions))
	gauge(dPrefixHost, float64(s.PrefixHostEntries))
	counter(dPrefixSpills, float64(s.PrefixSpills))
	counter(dPrefixHostHits, float64(s.PrefixHostHits))
	counter(dPrefixHostEvic, float64(s.PrefixHostEvictions))
	ch <- constHistogram(dStepTime, s.StepTime)
	ch <- constHistogram(dQueueTime, s.QueueTime)
}

// constHistogram converts per-bucket counts (the last one above every
// bound) to Prometheus's cumulative buckets.
func constHistogram(d *prometheus.Desc, h engine.Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, b := range h.Bounds {
		if i < len(h.Counts) {
			cum += h.Counts[i]
		}
		buckets[b.Seconds()] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum.Seconds(), buckets)
}
