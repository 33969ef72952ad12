// Package audit runs kvwarden's isolation audit: the configuration check
// (pool capacity against MaxContext and the model's context) and a canary
// workload in which many tenants, each with its own marker content, run
// concurrent streams under page pressure (preemption, host-tier swaps),
// share prefixes within their tenant, abort mid-stream and send requests
// that must be rejected. It then checks every output against what its own
// tenant alone could have produced and requires the engine's isolation
// counters to stay at zero. "Validate output content, not just response
// codes."
package audit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// Options configure an audit run.
type Options struct {
	// Config is the engine configuration under audit. When it sets no pool
	// size and no MaxContext, the audit picks a small pool that forces
	// preemption (PoolChosen in the report says so).
	Config engine.Config
	// Echo replaces the model's forward pass with the Echo test model.
	Echo bool
	// Fault injects a failure the audit must catch ("" or FaultForeignRead).
	Fault string

	Tenants   int // default 8
	PerTenant int // requests per tenant per round, default 6
	Rounds    int // default 2
	MaxTokens int // tokens per request, default 24
	Seed      uint64

	// Progress, when set, receives one line per phase.
	Progress func(format string, args ...any)
}

// Status of a check.
const (
	Pass = "pass"
	Fail = "fail"
	Warn = "warn"
)

// Check is one line of the report.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// ConfigReport is the configuration part of the report.
type ConfigReport struct {
	Model          string `json:"model"`
	Synthetic      bool   `json:"synthetic"`
	Runner         string `json:"runner"` // "echo" or "model"
	Device         string `json:"device,omitempty"`
	PageSize       int    `json:"page_size"`
	Pages          int    `json:"pages"`
	CapacityTokens int    `json:"pool_capacity_tokens"`
	MaxContext     int    `json:"max_context"`
	ModelContext   int    `json:"model_context"`
	PoolChosen     bool   `json:"pool_chosen_by_audit"`
	HostTierBytes  int64  `json:"host_tier_bytes"`
	KVChecksum     string `json:"kv_checksum"`
	ZeroOnRelease  bool   `json:"zero_on_release"`
	Poison         bool   `json:"poison"`
	StartupError   string `json:"startup_error,omitempty"`
}

// Tried counts what the workload did.
type Tried struct {
	Tenants              int `json:"tenants"`
	Rounds               int `json:"rounds"`
	Requests             int `json:"requests"`
	Completed            int `json:"completed"`
	AbortsRequested      int `json:"aborts_requested"`
	Aborted              int `json:"aborted"`
	OverLength           int `json:"over_length"`
	OverLengthRejected   int `json:"over_length_rejected"`
	OtherRejections      int `json:"other_rejections_tried"`
	OtherRejected        int `json:"other_rejections_rejected"`
	TokensChecked        int `json:"tokens_checked"`
	CrossTenant          int `json:"cross_tenant_contaminated"`
	Mismatched           int `json:"mismatched_outputs"`
	Failed               int `json:"failed_requests"`
	IsolationErrors      int `json:"isolation_errors"`
	PrefixCachedRequests int `json:"requests_with_prefix_hits"`
}

// EngineCounters are engine statistics after the workload.
type EngineCounters struct {
	Preemptions         uint64 `json:"preemptions"`
	SwapOuts            uint64 `json:"swap_outs"`
	SwapIns             uint64 `json:"swap_ins"`
	RecomputedTokens    uint64 `json:"recomputed_tokens"`
	PrefixHits          uint64 `json:"prefix_hits"`
	CachedTokens        uint64 `json:"cached_tokens"`
	BytesOffloaded      int64  `json:"host_bytes_offloaded"`
	DeferredReleases    uint64 `json:"deferred_releases"`
	DeferredFreed       uint64 `json:"deferred_freed"`
	DeferredQuarantined uint64 `json:"deferred_quarantined"`
	IsolationFailures   uint64 `json:"isolation_failures"`
	IsolationViolations uint64 `json:"isolation_violations"`
	ChecksumFailures    uint64 `json:"checksum_failures"`
	StaleCompletions    uint64 `json:"stale_completions"`
	Quarantined         int    `json:"quarantined_pages"`
	LeakedPages         int    `json:"leaked_pages"`
	LeakedLeases        int    `json:"leaked_leases"`
	// Speculative decoding (Config.Speculative): draft tokens verified and
	// accepted.
	DraftTokens    uint64 `json:"draft_tokens,omitempty"`
	AcceptedTokens uint64 `json:"accepted_draft_tokens,omitempty"`
}

// Report is the audit's result.
type Report struct {
	Clean    bool           `json:"clean"`
	Config   ConfigReport   `json:"config"`
	Tried    Tried          `json:"tried"`
	Engine   EngineCounters `json:"engine"`
	Checks   []Check        `json:"checks"`
	Examples []string       `json:"examples,omitempty"` // the first few findings in detail
	Fault    string         `json:"injected_fault,omitempty"`
	Victim   uint64         `json:"fault_victim_request,omitempty"`
	Seconds  float64        `json:"seconds"`
}

func (r *Report) add(name, status, format string, args ...any) {
	r.Checks = append(r.Checks, Check{Name: name, Status: status, Detail: fmt.Sprintf(format, args...)})
	if status == Fail {
		r.Clean = false
	}
}

func (r *Report) example(format string, args ...any) {
	if len(r.Examples) < 10 {
		r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
	}
}

// Audit pool sizing when the configuration leaves it open.
const (
	auditMaxContext = 128
	auditPages      = 3 * auditMaxContext / 16 // three longest requests at page size 16
)

// Run runs the audit. The error is for failures to run at all; findings
// (including an engine that refuses its configuration) are in the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	start := time.Now()
	o.defaults()
	rep := &Report{Clean: true, Fault: o.Fault}
	defer func() { rep.Seconds = float64(time.Since(start).Milliseconds()) / 1000 }()
	progress := o.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}

	cfg := o.Config
	var hooks engine.TestHooks
	if cfg.KVPages == 0 && cfg.KVMemory == 0 && cfg.MaxContext == 0 {
		rep.Config.PoolChosen = true
		ps := cfg.PageSize
		if ps == 0 {
			ps = engine.DefaultPageSize
		}
		cfg.MaxContext = auditMaxContext
		cfg.KVPages = max(3*auditMaxContext/ps, 2*((auditMaxContext+ps-1)/ps))
		if cfg.HostTierBytes == 0 {
			cfg.HostTierBytes = 64 << 20
		}
	}
	var echo *Echo
	sep := -1
	if o.Echo {
		if o.Fault != "" {
			cfg.KVType = "f32" // the injected fault reads the arena as f32
		}
		hooks.NewRunner = func(pool *kvcache.Pool) (engine.Runner, error) {
			e, err := NewEcho(pool, -1, o.Fault)
			echo = e
			return e, err
		}
	} else if o.Fault != "" {
		return nil, fmt.Errorf("audit: fault %q needs the echo runner (--echo)", o.Fault)
	}
	rep.Config.Runner = map[bool]string{true: "echo", false: "model"}[o.Echo]
	rep.Config.Synthetic = (cfg.ModelPath == "" || cfg.ModelPath == model.BuiltinSynthetic) && cfg.Weights == nil
	rep.Config.Model = cfg.ModelPath
	if rep.Config.Synthetic {
		rep.Config.Model = "built-in synthetic"
	}

	progress("starting the engine")
	eng, err := engine.New(cfg, engine.WithTestHooks(hooks))
	if err != nil {
		rep.Config.StartupError = err.Error()
		rep.add("config: engine start", Fail, "the engine refused the configuration: %v", err)
		return rep, nil
	}
	defer eng.Close()

	mc := eng.ModelConfig()
	rc := eng.Config()
	c := &rep.Config
	c.Device = eng.Device()
	c.PageSize = rc.PageSize
	c.Pages = rc.KVPages
	c.CapacityTokens = rc.CapacityTokens()
	c.MaxContext = eng.MaxContext()
	c.ModelContext = mc.MaxContext
	c.HostTierBytes = rc.HostTierBytes
	c.KVChecksum = rc.KVChecksum.String()
	c.ZeroOnRelease = rc.ZeroOnRelease
	c.Poison = rc.Poison
	checkConfig(rep)

	tok := eng.Tokenizer()
	special := map[int]bool{}
	for _, id := range []int{tok.BOS(), tok.EOS(), mc.BOS, mc.EOS, 0} {
		if id >= 0 {
			special[id] = true
		}
	}
	if echo != nil {
		// Sep is the highest non-special token; tenants share the rest.
		sep = mc.Vocab - 1
		for special[sep] {
			sep--
		}
		echo.Sep = sep
		echo.SetVocab(mc.Vocab)
		special[sep] = true
	}

	w := newWorkload(o, eng, rep, special, sep)
	if err := w.build(); err != nil {
		rep.add("workload", Fail, "%v", err)
		return rep, nil
	}
	progress("rejections: over-length and invalid requests")
	w.rejections(ctx)
	for round := range o.Rounds {
		progress("round %d/%d: %d tenants x %d concurrent requests", round+1, o.Rounds, o.Tenants, o.PerTenant)
		w.round(ctx, round)
		if ctx.Err() != nil {
			rep.add("workload", Fail, "interrupted: %v", context.Cause(ctx))
			return rep, nil
		}
	}
	progress("checking counters")
	w.settle(ctx)
	if echo != nil {
		rep.Victim = echo.Victim()
	}
	w.verdict()
	return rep, nil
}

func (o *Options) defaults() {
	if o.Tenants <= 0 {
		o.Tenants = 8
	}
	if o.PerTenant <= 0 {
		o.PerTenant = 6
	}
	if o.Rounds <= 0 {
		o.Rounds = 2
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = 24
	}
	if o.Seed == 0 {
		o.Seed = 0x6b76
	}
}

// checkConfig compares pool capacity, MaxContext and the model's context.
func checkConfig(rep *Report) {
	c := rep.Config
	if c.MaxContext > c.CapacityTokens {
		rep.add("config: max context vs pool", Fail, "MaxContext %d exceeds the pool's %d tokens: one request could need pages the pool does not have", c.MaxContext, c.CapacityTokens)
	} else {
		rep.add("config: max context vs pool", Pass, "MaxContext %d fits the pool's %d tokens (%d pages of %d); %d max-length requests fit at once",
			c.MaxContext, c.CapacityTokens, c.Pages, c.PageSize, c.CapacityTokens/max(c.MaxContext, 1))
	}
	switch {
	case c.ModelContext > c.MaxContext:
		rep.add("config: model context vs max context", Warn, "the model claims %d tokens but requests are held to MaxContext %d: longer prompts are rejected (checked below), never silently truncated",
			c.ModelContext, c.MaxContext)
	case c.ModelContext > 0:
		rep.add("config: model context vs max context", Pass, "the model's %d-token context equals or is below MaxContext %d", c.ModelContext, c.MaxContext)
	}
	if c.ModelContext > c.CapacityTokens {
		rep.add("config: model context vs pool", Warn, "the model's context (%d) exceeds the pool (%d tokens): the configuration of the GLM incident; safe only because MaxContext %d is enforced at startup and admission",
			c.ModelContext, c.CapacityTokens, c.MaxContext)
	}
	if c.KVChecksum == "off" {
		rep.add("config: kv checksum", Warn, "KV checksums are off: handoffs are not verified (benchmarks only)")
	}
}

// job is one workload request and what it may produce.
type job struct {
	tenant  int
	round   int
	prompt  []int  // token prompt (echo mode)
	text    string // text prompt (model mode)
	expect  []int  // echo mode: the exact output
	abortAt int    // abort after this many tokens (0 = no abort)
	viaID   bool   // abort with Engine.Abort rather than the context
}

type workload struct {
	o       Options
	eng     *engine.Engine
	rep     *Report
	rng     *rand.Rand
	sep     int
	special map[int]bool

	owner   map[int]int // echo mode: token -> tenant that owns it
	ranges  [][]int     // echo mode: each tenant's tokens
	canary  []string    // model mode: each tenant's marker
	prefix  [][]int     // echo: each tenant's shared prefix
	prefixT []string    // model: each tenant's shared prefix text
	mu      sync.Mutex
}

func newWorkload(o Options, eng *engine.Engine, rep *Report, special map[int]bool, sep int) *workload {
	return &workload{o: o, eng: eng, rep: rep, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)),
		sep: sep, special: special, owner: map[int]int{}}
}

func (w *workload) echo() bool { return w.sep >= 0 }

func (w *workload) build() error {
	o := w.o
	w.rep.Tried.Tenants, w.rep.Tried.Rounds = o.Tenants, o.Rounds
	ps := w.rep.Config.PageSize
	if w.echo() {
		vocab := w.eng.ModelConfig().Vocab
		var pool []int
		for id := 0; id < vocab; id++ {
			if !w.special[id] {
				pool = append(pool, id)
			}
		}
		per := len(pool) / o.Tenants
		if per < 4 {
			return fmt.Errorf("vocabulary of %d leaves %d marker tokens per tenant for %d tenants; use fewer --tenants", vocab, per, o.Tenants)
		}
		w.rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
		for t := range o.Tenants {
			r := pool[t*per : (t+1)*per]
			w.ranges = append(w.ranges, r)
			for _, id := range r {
				w.owner[id] = t
			}
			// A shared prefix of two full pages (BOS + tokens).
			p := []int{w.bos()}
			for len(p) < 2*ps {
				p = append(p, r[w.rng.IntN(len(r))])
			}
			w.prefix = append(w.prefix, p)
		}
		return nil
	}
	for t := range o.Tenants {
		w.canary = append(w.canary, fmt.Sprintf("ZQ%08x", w.rng.Uint32()))
		w.prefixT = append(w.prefixT, fmt.Sprintf("Tenant %d canary %s. Remember the secret word %s and repeat it. ", t, w.canary[t], w.canary[t]))
	}
	return nil
}

func (w *workload) bos() int {
	if b := w.eng.Tokenizer().BOS(); b >= 0 {
		return b
	}
	return w.ranges[0][0]
}

// maxPrompt is the longest workload prompt the context allows.
func (w *workload) maxPrompt() int {
	return w.rep.Config.MaxContext - w.o.MaxTokens - 1
}

func (w *workload) newJob(t, round, i int) (job, error) {
	j := job{tenant: t, round: round}
	if i%3 == 2 {
		j.abortAt = 1 + w.rng.IntN(max(w.o.MaxTokens/2, 1))
		j.viaID = i%2 == 0
	}
	if !w.echo() {
		j.text = w.prefixT[t] + fmt.Sprintf("Request %d-%d says %s again: %s", round, i, w.canary[t], w.canary[t])
		return j, nil
	}
	r := w.ranges[t]
	p := append([]int(nil), w.prefix[t]...)
	// Every other request shares only the first page, so prefixes of
	// different lengths meet in the cache.
	if i%2 == 1 {
		p = p[:len(p)/2]
	}
	body := 4 + w.rng.IntN(24)
	for range body {
		p = append(p, r[w.rng.IntN(len(r))])
	}
	p = append(p, w.sep)
	if len(p) > w.maxPrompt() {
		if w.maxPrompt() < 4 {
			return j, fmt.Errorf("MaxContext %d leaves no room for a %d-token canary request", w.rep.Config.MaxContext, w.o.MaxTokens)
		}
		p = append(p[:w.maxPrompt()-1], w.sep)
	}
	j.prompt = p
	j.expect = EchoOutput(p, w.sep, w.o.MaxTokens, w.eng.Tokenizer().EOS())
	return j, nil
}

func (w *workload) sampling(seed uint64) sample.Params {
	// Greedy: the echo rule and the real-model checks need deterministic output.
	return sample.Params{TopP: 1, RepeatPenalty: 1, Seed: seed, HasSeed: true}
}

func (w *workload) request(j job) engine.Request {
	r := engine.Request{Tenant: fmt.Sprintf("tenant-%02d", j.tenant), MaxTokens: w.o.MaxTokens, Sampling: w.sampling(0)}
	if w.echo() {
		r.Tokens = j.prompt
	} else {
		r.Prompt = j.text
	}
	return r
}

// rejections sends requests that admission must refuse, while the engine
// is idle, and checks that no page was allocated for them.
func (w *workload) rejections(ctx context.Context) {
	rep := w.rep
	limit := rep.Config.MaxContext
	fill := 3
	if w.echo() {
		fill = w.ranges[0][0]
	}
	before := w.eng.Stats().Pool.Allocs
	for i, n := range []int{limit, limit + 1, limit + 57, 2 * limit} {
		rep.Tried.OverLength++
		toks := make([]int, n)
		for k := range toks {
			toks[k] = fill
		}
		req := engine.Request{Tokens: toks, Tenant: fmt.Sprintf("tenant-%02d", i%w.o.Tenants), MaxTokens: 8, Sampling: w.sampling(0)}
		st, err := w.eng.Submit(ctx, req)
		var tl *engine.PromptTooLongError
		switch {
		case err == nil:
			res := st.Wait()
			rep.add("rejection: over-length prompt", Fail, "a %d-token prompt with MaxContext %d was admitted (finish %q, %d tokens)", n, limit, res.FinishReason, len(res.Tokens))
			continue
		case !errors.As(err, &tl) || !errors.Is(err, engine.ErrPromptTooLong):
			rep.add("rejection: over-length prompt", Fail, "a %d-token prompt was refused with the wrong error: %v", n, err)
			continue
		case tl.Limit != limit || tl.Prompt != n:
			rep.add("rejection: over-length prompt", Fail, "error names limit %d and prompt %d, want %d and %d", tl.Limit, tl.Prompt, limit, n)
			continue
		}
		rep.Tried.OverLengthRejected++
	}
	// Other admission rejections.
	bad := []struct {
		name string
		req  engine.Request
		want error
	}{
		{"empty prompt", engine.Request{Tenant: "tenant-00", Sampling: w.sampling(0)}, engine.ErrEmptyPrompt},
		{"negative max tokens", engine.Request{Tokens: []int{fill}, Tenant: "tenant-00", MaxTokens: -2, Sampling: w.sampling(0)}, engine.ErrInvalidParams},
		{"token outside the vocabulary", engine.Request{Tokens: []int{w.eng.ModelConfig().Vocab}, Tenant: "tenant-00", Sampling: w.sampling(0)}, engine.ErrInvalidParams},
	}
	for _, b := range bad {
		rep.Tried.OtherRejections++
		st, err := w.eng.Submit(ctx, b.req)
		if err == nil {
			st.Wait()
			rep.add("rejection: "+b.name, Fail, "admitted")
			continue
		}
		if !errors.Is(err, b.want) {
			rep.add("rejection: "+b.name, Fail, "refused with %v, want %v", err, b.want)
			continue
		}
		rep.Tried.OtherRejected++
	}
	after := w.eng.Stats().Pool.Allocs
	if rep.Tried.OverLengthRejected == rep.Tried.OverLength {
		rep.add("rejection: over-length prompts", Pass, "%d of %d over-length prompts (%d..%d tokens, MaxContext %d) rejected with ErrPromptTooLong naming both numbers",
			rep.Tried.OverLengthRejected, rep.Tried.OverLength, limit, 2*limit, limit)
	}
	if rep.Tried.OtherRejected == rep.Tried.OtherRejections {
		rep.add("rejection: invalid requests", Pass, "%d of %d invalid requests (empty prompt, bad parameters) rejected with their error", rep.Tried.OtherRejected, rep.Tried.OtherRejections)
	}
	if after != before {
		rep.add("rejection: no allocation", Fail, "rejected requests allocated %d pages", after-before)
	} else {
		rep.add("rejection: no allocation", Pass, "rejected requests allocated no page")
	}
}

// round runs every tenant's requests concurrently.
func (w *workload) round(ctx context.Context, round int) {
	var jobs []job
	for i := range w.o.PerTenant {
		for t := range w.o.Tenants {
			j, err := w.newJob(t, round, i)
			if err != nil {
				w.rep.add("workload", Fail, "%v", err)
				return
			}
			jobs = append(jobs, j)
		}
	}
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(ctx, j)
		}()
	}
	wg.Wait()
}

func (w *workload) run(ctx context.Context, j job) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := w.eng.Submit(rctx, w.request(j))
	w.mu.Lock()
	w.rep.Tried.Requests++
	if j.abortAt > 0 {
		w.rep.Tried.AbortsRequested++
	}
	w.mu.Unlock()
	if err != nil {
		w.finding(j, nil, "submit failed: %v", err)
		return
	}
	var got []int
	for ev := range st.Events() {
		if ev.Done {
			break
		}
		got = append(got, ev.Token)
		if j.abortAt > 0 && len(got) == j.abortAt {
			if j.viaID {
				_ = w.eng.Abort(st.ID())
			} else {
				cancel()
			}
		}
	}
	res := st.Wait()
	w.check(j, st.ID(), got, &res)
}

func (w *workload) finding(j job, res *engine.Result, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rep.Tried.Failed++
	if res != nil && errors.Is(res.Err, engine.ErrIsolation) {
		w.rep.Tried.IsolationErrors++
	}
	w.rep.example("tenant-%02d round %d: "+format, append([]any{j.tenant, j.round}, args...)...)
}

// check verifies one result: the tokens streamed equal the result's, no
// token or marker of another tenant appears, and in echo mode the output is
// exactly (a prefix of, when aborted) what the request's own prompt gives.
func (w *workload) check(j job, id uint64, streamed []int, res *engine.Result) {
	aborted := res.FinishReason == "abort" || errors.Is(res.Err, engine.ErrAborted)
	if res.Err != nil && !aborted {
		w.finding(j, res, "request %d failed: %v", id, res.Err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	t := &w.rep.Tried
	if aborted {
		t.Aborted++
	} else {
		t.Completed++
	}
	if res.CachedTokens > 0 {
		t.PrefixCachedRequests++
	}
	t.TokensChecked += len(res.Tokens)
	if !slices.Equal(streamed, res.Tokens) && !(aborted && isPrefix(streamed, res.Tokens)) {
		t.Mismatched++
		w.rep.example("request %d (tenant-%02d): streamed %d tokens differ from the result's %d", id, j.tenant, len(streamed), len(res.Tokens))
	}
	if w.echo() {
		for pos, tok := range res.Tokens {
			if o, ok := w.owner[tok]; ok && o != j.tenant {
				t.CrossTenant++
				w.rep.example("request %d (tenant-%02d) output token %d at %d belongs to tenant-%02d: cross-tenant contamination", id, j.tenant, tok, pos, o)
				break
			}
		}
		want := j.expect
		if aborted {
			if len(res.Tokens) > len(want) || !slices.Equal(res.Tokens, want[:len(res.Tokens)]) {
				t.Mismatched++
				w.rep.example("request %d (tenant-%02d, aborted): output %v is not a prefix of %v", id, j.tenant, head(res.Tokens), head(want))
			}
		} else if !slices.Equal(res.Tokens, want) {
			t.Mismatched++
			w.rep.example("request %d (tenant-%02d): output %v, its own context gives %v", id, j.tenant, head(res.Tokens), head(want))
		}
		return
	}
	for o, c := range w.canary {
		if o != j.tenant && strings.Contains(res.Text, c) {
			t.CrossTenant++
			w.rep.example("request %d (tenant-%02d) output holds tenant-%02d's canary %s", id, j.tenant, o, c)
		}
	}
}

func isPrefix(a, b []int) bool { return len(a) <= len(b) && slices.Equal(a, b[:len(a)]) }

func head(s []int) []int {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// settle waits for deferred releases to finish, then reads the counters.
func (w *workload) settle(ctx context.Context) {
	deadline := time.Now().Add(10 * time.Second)
	var st engine.Stats
	for {
		st = w.eng.Stats()
		p := st.Pool
		if (p.Owned == 0 && p.Releasing <= p.PrefixLeases && p.StepLeases == 0 && p.CopyLeases == 0 && st.Running == 0 && st.Waiting == 0 && st.Swapped == 0) ||
			time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	p := st.Pool
	w.rep.Engine = EngineCounters{
		Preemptions: st.Preemptions, SwapOuts: st.SwapOuts, SwapIns: st.SwapIns, RecomputedTokens: st.RecomputedTokens,
		PrefixHits: st.PrefixHits, CachedTokens: st.CachedTokens, BytesOffloaded: p.BytesOffloaded,
		DeferredReleases: p.DeferredReleases, DeferredFreed: p.DeferredFreed, DeferredQuarantined: p.DeferredQuarantined,
		IsolationFailures: st.IsolationFailures, IsolationViolations: p.IsolationViolations,
		ChecksumFailures: p.ChecksumFailures, StaleCompletions: p.StaleCompletions,
		Quarantined: p.Quarantined, LeakedPages: p.Owned + max(p.Releasing-p.PrefixLeases, 0), LeakedLeases: p.StepLeases + p.CopyLeases,
		DraftTokens: st.Spec.Drafted, AcceptedTokens: st.Spec.Accepted,
	}
}

func (w *workload) verdict() {
	rep := w.rep
	t := rep.Tried
	e := rep.Engine
	check := func(name string, bad int, ok, fail string) {
		if bad == 0 {
			rep.add(name, Pass, "%s", ok)
		} else {
			rep.add(name, Fail, "%s", fail)
		}
	}
	mode := "canary markers in the text"
	if w.echo() {
		mode = "per-tenant marker tokens, echoed from KV"
	}
	check("isolation: cross-tenant content", t.CrossTenant,
		fmt.Sprintf("%d outputs (%d tokens) checked (%s): none holds material of another tenant", t.Completed+t.Aborted, t.TokensChecked, mode),
		fmt.Sprintf("%d outputs hold material only another tenant could have produced", t.CrossTenant))
	if w.echo() {
		check("isolation: exact echo oracle", t.Mismatched,
			"every output equals what its own context gives (aborted ones: a prefix of it)",
			fmt.Sprintf("%d outputs differ from what their own context gives", t.Mismatched))
	} else if t.Mismatched > 0 {
		rep.add("stream consistency", Fail, "%d streams differ from their results", t.Mismatched)
	}
	check("requests: failures", t.Failed,
		fmt.Sprintf("%d requests, none failed (%d completed, %d aborted mid-stream of %d aborts sent)", t.Requests, t.Completed, t.Aborted, t.AbortsRequested),
		fmt.Sprintf("%d of %d requests failed (%d with an isolation error)", t.Failed, t.Requests, t.IsolationErrors))
	iso := e.IsolationFailures + e.IsolationViolations + e.ChecksumFailures
	check("engine: isolation counters", int(iso),
		"isolation failures, violations and checksum failures all 0",
		fmt.Sprintf("%d isolation events (failures %d, violations %d, checksum failures %d)", iso, e.IsolationFailures, e.IsolationViolations, e.ChecksumFailures))
	check("engine: quarantined pages", e.Quarantined, "no page quarantined", fmt.Sprintf("%d pages quarantined", e.Quarantined))
	check("engine: page and lease leaks", e.LeakedPages+e.LeakedLeases,
		fmt.Sprintf("every page and lease came back (%d deferred releases, %d freed)", e.DeferredReleases, e.DeferredFreed),
		fmt.Sprintf("%d pages and %d leases still held after the workload", e.LeakedPages, e.LeakedLeases))
	if e.Preemptions > 0 {
		rep.add("pressure: preemption", Pass, "%d preemptions (%d swapped out, %d swapped in, %d tokens recomputed, %d host bytes offloaded)",
			e.Preemptions, e.SwapOuts, e.SwapIns, e.RecomputedTokens, e.BytesOffloaded)
	} else {
		rep.add("pressure: preemption", Warn, "the pool never ran out, so preemption and host offload were not exercised; use a smaller --kv-pages")
	}
	if e.PrefixHits > 0 {
		rep.add("prefix sharing within tenants", Pass, "%d prefix-cache page hits, %d cached prompt tokens, in %d requests", e.PrefixHits, e.CachedTokens, t.PrefixCachedRequests)
	} else {
		rep.add("prefix sharing within tenants", Warn, "no prefix-cache hit happened (cache disabled, or pages evicted before reuse)")
	}
	if t.AbortsRequested > 0 && t.Aborted == 0 {
		rep.add("aborts mid-stream", Warn, "%d aborts sent, none took effect before the request finished", t.AbortsRequested)
	}
}
