package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// lockedRand is a rand shared by fault hooks on several goroutines.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (l *lockedRand) chance(p float64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64() < p
}

func (l *lockedRand) intn(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

type chaosOpts struct {
	requests int
	corrupt  bool // inject page and copy corruption (KVChecksum=step)
	seed     uint64
}

// TestChaos runs hundreds of concurrent requests from 8 tenants through a
// pool far too small for them, with a host tier, shared prefixes within
// tenants, random aborts (Abort, context cancel, and at every lifecycle
// state), failing and slow copies and failing allocations. The echo model
// makes every output exactly predictable from its own prompt, so:
//   - every successful result equals its oracle (zero contamination);
//   - every aborted result is a prefix of its oracle;
//   - without injected corruption, no request fails at all;
//   - with injected corruption, a corrupted page is never read: its
//     requests fail with ErrIsolation or never read it (recompute, abort);
//   - at the end no page, lease or host-tier byte is leaked.
//
// KVWARDEN_SOAK=1 runs it much longer.
func TestChaos(t *testing.T) {
	n := 800
	rounds := 1
	if os.Getenv("KVWARDEN_SOAK") != "" {
		n, rounds = 3000, 10
	}
	for round := range rounds {
		t.Run(fmt.Sprintf("faults/%d", round), func(t *testing.T) {
			runChaos(t, chaosOpts{requests: n, seed: uint64(round) + 1})
		})
		t.Run(fmt.Sprintf("corruption/%d", round), func(t *testing.T) {
			runChaos(t, chaosOpts{requests: n, corrupt: true, seed: uint64(round) + 100})
		})
	}
}

type chaosReq struct {
	prompt    []int
	tenant    string
	maxTokens int
	overlong  bool
}

func runChaos(t *testing.T, o chaosOpts) {
	const (
		tenants    = 8
		pageSize   = 4
		pages      = 48 // 192 tokens
		maxContext = 64
	)
	rng := &lockedRand{r: rand.New(rand.NewPCG(o.seed, 7))}
	cfg := echoConfig(t, pages, pageSize)
	cfg.MaxContext = maxContext
	cfg.MaxBatchTokens = 40
	cfg.MaxSeqs = 12
	cfg.MaxQueue = 4096
	cfg.HostTierBytes = 24 * 128 // room for 24 of the pool's 48 pages; swaps and prefix spill share it
	cfg.Poison = true
	if o.corrupt {
		cfg.KVChecksum = ChecksumStep
	}

	var (
		e            *Engine
		corruptMu    sync.Mutex
		corruptedReq = map[uint64]bool{}
		corruptRefs  []kvcache.PageRef
		copyCorrupt  atomic.Int64
		spillCorrupt atomic.Int64
		// Handoff-sealed slots corrupted as a request enters decoding
		// (caught at its swap-out, step verification or seal), and cached
		// prefix pages corrupted before they spill (caught at the spill's
		// copy-out or the next hit).
		handoffRefs []kvcache.PageRef
		cachedRefs  []kvcache.PageRef
	)
	// Each quarantined page is lost to the pool for good, so a round's
	// device corruptions are capped (as in the audit: a few per round);
	// otherwise quarantine, not corruption handling, would decide how many
	// requests of a 48-page pool complete.
	const maxCachedCorrupt, maxHandoffCorrupt = 3, 4
	pf := &kvcache.Faults{
		FailCopy: func(ref kvcache.PageRef) error {
			if rng.chance(0.03) {
				return errors.New("injected copy failure")
			}
			return nil
		},
		CopyDelay: func(ref kvcache.PageRef) time.Duration {
			if rng.chance(0.1) {
				return 300 * time.Microsecond
			}
			return 0
		},
		FailAlloc: func() bool { return rng.chance(0.02) },
	}
	if o.corrupt {
		pf.CorruptCopy = func(ref kvcache.PageRef) bool {
			if !rng.chance(0.01) {
				return false
			}
			info, err := e.pool.Info(ref)
			if err != nil {
				return false
			}
			if info.Leases[kvcache.LeasePrefix] != 0 {
				// A prefix page (a spill to the host tier, or a shared page
				// in a swap): whoever hits it next is the victim, so there
				// is no request to record; the oracle check of every
				// successful output still proves it is never served.
				spillCorrupt.Add(1)
				return true
			}
			corruptMu.Lock()
			corruptedReq[uint64(info.Owner)] = true
			corruptMu.Unlock()
			copyCorrupt.Add(1)
			return true
		}
	}
	cfg.th().Faults = &Faults{
		Pool: pf,
		AbortAt: func(id uint64, st State) bool {
			return rng.chance(0.01)
		},
	}
	if o.corrupt {
		cfg.th().Faults.CorruptHandoff = func(id uint64, ref kvcache.PageRef) bool {
			corruptMu.Lock()
			defer corruptMu.Unlock()
			if len(handoffRefs) >= maxHandoffCorrupt || !rng.chance(0.005) {
				return false
			}
			corruptedReq[id] = true
			handoffRefs = append(handoffRefs, ref)
			return true
		}
	}
	cfg.th().NewRunner = func(pool *kvcache.Pool) (Runner, error) {
		r, err := newEchoRunner(pool, true)
		if err != nil || !o.corrupt {
			return r, err
		}
		r.afterStep = func(b *model.Batch) {
			// On the scheduler goroutine: the prefix cache can be read. Its
			// least recently used device entry is the next to spill.
			if c, ok := e.sched.prefix.(*prefixCache); ok && len(cachedRefs) < maxCachedCorrupt && rng.chance(0.002) {
				if el := c.lru.Back(); el != nil {
					ref := el.Value.(*prefixEntry).ref
					if pool.CorruptPage(ref.Index) == nil {
						corruptMu.Lock()
						cachedRefs = append(cachedRefs, ref)
						corruptMu.Unlock()
					}
				}
			}
			if !rng.chance(0.01) {
				return
			}
			// Corrupt a sealed own page of a sequence that is mid-prefill,
			// so its next step reads the page again.
			for _, s := range b.Seqs {
				if s.Logits {
					continue
				}
				tab := s.Table
				for i, ref := range tab.Refs() {
					if tab.Shared(i) || (i+1)*pageSize > tab.Written() {
						continue
					}
					if err := pool.CorruptPage(ref.Index); err == nil {
						corruptMu.Lock()
						corruptedReq[uint64(tab.Request())] = true
						corruptRefs = append(corruptRefs, ref)
						corruptMu.Unlock()
						return
					}
				}
			}
		}
		return r, nil
	}
	e = newEcho(t, cfg)

	// Shared prefixes per tenant: 3 each, of 9 to 20 tokens.
	prefixes := make([][][]int, tenants)
	for ten := range tenants {
		for k := range 3 {
			prefixes[ten] = append(prefixes[ten], tenantPrompt(ten, 10_000+k, 9+rng.intn(12)))
		}
	}
	reqs := make([]chaosReq, o.requests)
	for i := range reqs {
		ten := i % tenants
		var p []int
		if rng.chance(0.6) {
			p = append(p, prefixes[ten][rng.intn(3)]...)
		}
		p = append(p, tenantPrompt(ten, i, 4+rng.intn(16))[1:]...)
		if p[0] != model.SyntheticBOS {
			p = append([]int{model.SyntheticBOS}, p...)
		}
		r := chaosReq{prompt: p, tenant: fmt.Sprintf("tenant-%d", ten), maxTokens: 1 + rng.intn(60)}
		if rng.chance(0.03) {
			r.prompt = tenantPrompt(ten, i, maxContext+rng.intn(20))
			r.overlong = true
		}
		reqs[i] = r
	}

	type outcome struct {
		res      Result
		err      error
		streamed []int
	}
	outs := make([]outcome, len(reqs))
	var wg sync.WaitGroup
	start := time.Now()
	for i, rq := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rng.intn(20_000)) * time.Microsecond)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			st, err := e.Submit(ctx, Request{Tokens: rq.prompt, Tenant: rq.tenant, MaxTokens: rq.maxTokens})
			if err != nil {
				outs[i].err = err
				return
			}
			switch k := rng.intn(10); {
			case k == 0:
				go func() {
					time.Sleep(time.Duration(rng.intn(5000)) * time.Microsecond)
					_ = e.Abort(st.ID())
				}()
			case k == 1:
				go func() {
					time.Sleep(time.Duration(rng.intn(5000)) * time.Microsecond)
					cancel()
				}()
			}
			if i%2 == 0 {
				for ev := range st.Events() {
					if !ev.Done {
						outs[i].streamed = append(outs[i].streamed, ev.Token)
					}
				}
			}
			outs[i].res = st.Wait()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	var ok, aborted, isolation, noPages, rejected int
	for i, rq := range reqs {
		out := outs[i]
		want := echoOracle(rq.prompt, rq.maxTokens, maxContext, true)
		if rq.overlong {
			require.ErrorIs(t, out.err, ErrPromptTooLong, "request %d", i)
			rejected++
			continue
		}
		require.NoError(t, out.err, "request %d admission", i)
		r := out.res
		if i%2 == 0 {
			require.Equal(t, nilIfEmpty(r.Tokens), nilIfEmpty(out.streamed), "request %d: stream and result disagree", i)
		}
		switch {
		case r.Err == nil:
			require.Equal(t, want, nilIfEmpty(r.Tokens), "request %d (id %d, tenant %s): CONTAMINATED output", i, r.ID, rq.tenant)
			ok++
		case errors.Is(r.Err, ErrAborted):
			require.LessOrEqual(t, len(r.Tokens), len(want), "request %d", i)
			require.Equal(t, nilIfEmpty(want[:len(r.Tokens)]), nilIfEmpty(r.Tokens), "request %d: aborted output is not a prefix of its own", i)
			aborted++
		case errors.Is(r.Err, ErrIsolation):
			require.True(t, o.corrupt, "request %d failed an isolation check without injected corruption: %v", i, r.Err)
			isolation++
		case o.corrupt && errors.Is(r.Err, kvcache.ErrNoPages):
			// Quarantine shrank the pool below this request's size: the
			// engine fails it loudly rather than thrash.
			noPages++
		default:
			t.Fatalf("request %d: unexpected error %v", i, r.Err)
		}
	}
	waitPoolIdle(t, e)
	s := e.Stats()
	// Detection: every corrupted device page was caught (quarantined) or
	// left the pool unread (freed, its generation over); every corrupted
	// host copy was caught at its restore or discarded unrestored (no
	// successful output differs from its oracle, checked above).
	corruptMu.Lock()
	var caught, unread int
	injected := len(corruptRefs) + len(handoffRefs) + len(cachedRefs)
	for _, ref := range slices.Concat(corruptRefs, handoffRefs, cachedRefs) {
		info, err := e.pool.Info(ref)
		switch {
		case err == nil && info.State == kvcache.PageQuarantined:
			caught++
		case err != nil || info.State == kvcache.PageFree:
			unread++
		default:
			t.Errorf("corrupted %v is still in use, undetected: %+v", ref, info)
		}
	}
	corruptMu.Unlock()
	if o.corrupt {
		t.Logf("detection: %d device pages corrupted (%d at seal, %d handoff slots, %d cached prefix pages): %d caught, %d left unread; %d host copies corrupted; %d checksum failures; %d requests recomputed, %d failed with ErrIsolation, %d with ErrNoPages (pool shrunk by quarantine): 100%% of corruptions that were read again were detected",
			injected, len(corruptRefs), len(handoffRefs), len(cachedRefs), caught, unread, copyCorrupt.Load()+spillCorrupt.Load(), s.Pool.ChecksumFailures, s.Recoveries, isolation, noPages)
		require.Equal(t, injected, caught+unread)
		// Detect, then recover: corruption is no outage. Under 1% of the
		// requests may fail (bounded retries, a pool shrunk by quarantine).
		require.Less(t, isolation+noPages, len(reqs)/100, "corruption must not fail everyone who touches it")
	}
	t.Logf("%d requests in %v: %d ok, %d aborted, %d isolation failures, %d rejected; steps %d, preemptions %d (swap %d, swap failed %d), restores %d, recomputed %d tokens, prefix hits %d (%d from the host tier), cached tokens %d, spills %d, host evictions %d; pool: %d checksum failures, %d quarantined, %d copy failures; copies corrupted %d (%d prefix pages), pages corrupted %d",
		len(reqs), elapsed, ok, aborted, isolation, rejected, s.Steps, s.Preemptions, s.SwapOuts, s.SwapFails, s.SwapIns,
		s.RecomputedTokens, s.PrefixHits, s.PrefixHostHits, s.CachedTokens, s.PrefixSpills, s.PrefixHostEvictions, s.Pool.ChecksumFailures, s.Pool.Quarantined, s.Pool.CopyFailures,
		copyCorrupt.Load(), spillCorrupt.Load(), len(corruptRefs))
	require.NotZero(t, s.Preemptions, "the pool must be under pressure")
	// Preempted sequences try the host tier. Whether a swap-out succeeds
	// is up to the injected copy failures and the interleaving (a run saw
	// all 9 of its attempts fail), so the attempt is what must happen.
	require.NotZero(t, s.SwapOuts+s.SwapFails, "preemptions must try the host tier")
	require.NotZero(t, s.PrefixHits)
	require.NotZero(t, s.PrefixSpills, "evicted prefix pages spill to the host tier")
	require.Greater(t, ok, len(reqs)/2)

	if o.corrupt {
		corruptMu.Lock()
		for id := range corruptedReq {
			for i, out := range outs {
				if out.res.ID == id && out.res.Err == nil {
					// It succeeded: only possible if it never read the
					// corrupted data, and then its output is exact (checked above).
					require.Equal(t, echoOracle(reqs[i].prompt, reqs[i].maxTokens, maxContext, true), nilIfEmpty(out.res.Tokens))
				}
			}
		}
		// Every corrupted page was either caught (quarantined) or left the
		// pool unread (freed: its generation moved on or it is free).
		for _, ref := range corruptRefs {
			info, err := e.pool.Info(ref)
			if err == nil {
				require.Contains(t, []kvcache.PageState{kvcache.PageQuarantined, kvcache.PageFree, kvcache.PageReleasing}, info.State)
			}
		}
		corruptMu.Unlock()
		if len(corruptRefs) > 0 || copyCorrupt.Load() > 0 {
			require.NotZero(t, s.Pool.ChecksumFailures+uint64(isolation))
		}
	} else {
		require.Zero(t, s.IsolationFailures)
		require.Zero(t, s.Pool.IsolationViolations)
		require.Zero(t, s.Pool.Quarantined)
	}

	require.NoError(t, e.Close())
	p := e.pool.Stats()
	require.Equal(t, p.Pages, p.Free+p.Quarantined, "leaked pages: %+v", p)
	require.Zero(t, p.StepLeases+p.CopyLeases+p.PrefixLeases, "leaked leases: %+v", p)
	require.Zero(t, p.HostTierUsed)
	require.Zero(t, p.HostEntries)
}

func nilIfEmpty(s []int) []int {
	if len(s) == 0 {
		return nil
	}
	return s
}
