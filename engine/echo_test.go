package engine

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// The echo model is the chaos test's exact oracle. It implements Runner
// over the real page pool and page tables:
//
//   - For the token at position pos it reads the chain value h[pos-1] back
//     from its own KV slot pos-1, computes h[pos] = mix(h[pos-1], token,
//     pos) and writes (h[pos], pos, token) into the slot that
//     Table.Location gives.
//   - For logits it reads every slot 0..pos back through Table.Pages()
//     (bounded by positions, as the real attention kernel) and folds all
//     it read into a digest; the next token is a function of the digest
//     alone.
//
// So the output depends only on what the sequence read from its KV, and
// h[pos] is a hash of every token up to pos (prompts start with a
// per-request, per-tenant marker): any read of a page written by another
// request or tenant, of an unwritten slot (Poison makes it NaN), of a
// stale page or of a corrupted page changes the output, and echoOracle
// predicts the only correct output from the prompt alone.

const (
	echoVocab = model.SyntheticVocab
	echoEOS   = model.SyntheticEOS
)

func echoModelConfig() model.Config {
	return model.Config{
		Dim: 8, Hidden: 8, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 4,
		Vocab: echoVocab, MaxContext: 1 << 16, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 4,
		BOS: model.SyntheticBOS, EOS: echoEOS,
	}
}

func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

const echoSeed = 0x1234567887654321

func echoChain(prev uint64, tok, pos int) uint64 {
	return mix64(prev ^ mix64(uint64(tok)<<20^uint64(pos)))
}

func echoFold(d, h uint64, tok, pos int) uint64 {
	return mix64(d ^ h ^ uint64(tok)*0x9E3779B97F4A7C15 ^ uint64(pos)<<40)
}

// echoNext maps a digest to a token: EOS now and then, else a byte token.
func echoNext(d uint64, eos bool) int {
	if eos && d%53 == 0 {
		return echoEOS
	}
	return model.SyntheticByteOffset + int((d>>8)%256)
}

// echoOracle is the only correct output for prompt: the tokens the echo
// model generates when every read returns what this request wrote.
func echoOracle(prompt []int, maxTokens, maxContext int, eos bool) []int {
	maxTokens = min(maxTokens, maxContext-len(prompt))
	ctx := append([]int(nil), prompt...)
	hs := make([]uint64, 0, len(prompt)+maxTokens)
	h := uint64(echoSeed)
	for pos, t := range ctx {
		h = echoChain(h, t, pos)
		hs = append(hs, h)
	}
	var out []int
	for len(out) < maxTokens {
		d := uint64(0)
		for pos := range ctx {
			d = echoFold(d, hs[pos], ctx[pos], pos)
		}
		next := echoNext(d, eos)
		if next == echoEOS {
			break
		}
		out = append(out, next)
		ctx = append(ctx, next)
		h = echoChain(h, next, len(ctx)-1)
		hs = append(hs, h)
	}
	return out
}

type echoRunner struct {
	pool   *kvcache.Pool
	geo    kvcache.Geometry
	kv     []float32
	eos    bool
	logits [][]float32
	// afterStep, if set, runs at the end of each successful Forward (on
	// the scheduler goroutine): the chaos test injects page corruption here.
	afterStep func(b *model.Batch)
	steps     int
	// hold, when armed, blocks the next Forward until released, so a test
	// can line up requests while a step is known to be in progress.
	hold atomic.Pointer[stepHold]
}

type stepHold struct{ entered, release chan struct{} }

// holdNextStep arms e's echo runner: its next Forward blocks. entered is
// closed once that step has started; release lets it finish.
func holdNextStep(t testing.TB, e *Engine) (entered <-chan struct{}, release func()) {
	r, ok := e.runner.(*echoRunner)
	require.True(t, ok, "holdNextStep needs the echo runner")
	h := &stepHold{entered: make(chan struct{}), release: make(chan struct{})}
	r.hold.Store(h)
	var once sync.Once
	return h.entered, func() { once.Do(func() { close(h.release) }) }
}

func newEchoRunner(pool *kvcache.Pool, eos bool) (*echoRunner, error) {
	fa, ok := pool.Arena().(interface{ Float32s() []float32 })
	if !ok {
		return nil, fmt.Errorf("echo: needs a CPU arena")
	}
	g := pool.Geometry()
	if g.DType != device.F32 {
		return nil, fmt.Errorf("echo: needs an f32 KV pool, got %v", g.DType)
	}
	if g.KVDim() < 4 || g.Layers < 1 {
		return nil, fmt.Errorf("echo: needs kv dim >= 4")
	}
	return &echoRunner{pool: pool, geo: g, kv: fa.Float32s(), eos: eos}, nil
}

// Slot layout (layer 0): K = [h bits 0-23, h bits 24-47, pos, tok],
// V = [h bits 48-63, tok, pos+1, 7]. Every value is an integer below 2^24,
// exact in float32.
func (r *echoRunner) write(page uint32, slot int, h uint64, tok, pos int) {
	ko, vo := r.geo.KOffset(page, 0, slot), r.geo.VOffset(page, 0, slot)
	r.kv[ko+0] = float32(h & 0xFFFFFF)
	r.kv[ko+1] = float32((h >> 24) & 0xFFFFFF)
	r.kv[ko+2] = float32(pos)
	r.kv[ko+3] = float32(tok)
	r.kv[vo+0] = float32(h >> 48)
	r.kv[vo+1] = float32(tok)
	r.kv[vo+2] = float32(pos + 1)
	r.kv[vo+3] = 7
}

func f2u(f float32) uint64 {
	if math.IsNaN(float64(f)) || f < 0 || f >= 1<<24 {
		return 0xDEAD // poison or garbage: still a deterministic, wrong value
	}
	return uint64(f)
}

// read returns what slot holds: the chain value, and a fold of all fields
// (so a mismatch in any field changes the output).
func (r *echoRunner) read(page uint32, slot int) (h uint64, tok, pos int, extra uint64) {
	ko, vo := r.geo.KOffset(page, 0, slot), r.geo.VOffset(page, 0, slot)
	h = f2u(r.kv[ko]) | f2u(r.kv[ko+1])<<24 | f2u(r.kv[vo])<<48
	pos, tok = int(f2u(r.kv[ko+2])), int(f2u(r.kv[ko+3]))
	extra = f2u(r.kv[vo+1])<<32 ^ f2u(r.kv[vo+2])<<8 ^ f2u(r.kv[vo+3])
	return
}

func (r *echoRunner) Forward(b *model.Batch) error {
	if h := r.hold.Swap(nil); h != nil {
		close(h.entered)
		<-h.release
	}
	r.steps++
	if _, err := b.Check(echoVocab); err != nil {
		return err
	}
	ps := r.geo.PageSize
	if cap(b.Logits) < len(b.Seqs) {
		b.Logits = make([][]float32, len(b.Seqs))
	}
	b.Logits = b.Logits[:len(b.Seqs)]
	for len(r.logits) < len(b.Seqs) {
		r.logits = append(r.logits, make([]float32, echoVocab))
	}
	for i, s := range b.Seqs {
		b.Logits[i] = nil
		t := s.Table
		start := t.Written()
		if start+len(s.Tokens) > t.Reserved() {
			return fmt.Errorf("echo: %d slots needed, %d reserved", start+len(s.Tokens), t.Reserved())
		}
		pages := t.Pages()
		for j, tok := range s.Tokens {
			pos := start + j
			prev := uint64(echoSeed)
			if pos > 0 {
				p := pos - 1
				prev, _, _, _ = r.read(pages[p/ps], p%ps)
			}
			page, slot, err := t.Location(pos)
			if err != nil {
				return fmt.Errorf("echo: locate: %w", err)
			}
			r.write(page, slot, echoChain(prev, tok, pos), tok, pos)
		}
		if s.Logits {
			end := start + len(s.Tokens)
			d := uint64(0)
			for p := range end {
				h, tok, pos, extra := r.read(pages[p/ps], p%ps)
				if extra != uint64(tok)<<32^uint64(pos+1)<<8^7 {
					h ^= extra // a mismatched field spoils the digest
				}
				d = echoFold(d, h, tok, pos)
			}
			l := r.logits[i]
			clear(l)
			l[echoNext(d, r.eos)] = 1
			b.Logits[i] = l
		}
	}
	b.Advance()
	if r.afterStep != nil {
		r.afterStep(b)
	}
	return nil
}

// echoConfig is an engine Config over the echo model with a small pool.
func echoConfig(t testing.TB, pages, pageSize int) Config {
	w, err := model.Synthetic(echoModelConfig(), 1, ml.F32)
	require.NoError(t, err)
	return Config{
		Weights: w, Tokenizer: tokenizer.NewBytes(),
		PageSize: pageSize, KVPages: pages,
		KVType: "f32", // the echo model stores 24-bit integers in its KV
		hooks:  &TestHooks{NewRunner: func(pool *kvcache.Pool) (Runner, error) { return newEchoRunner(pool, true) }},
	}
}

// noEOS makes the echo model never emit EOS (for long-running requests).
func noEOS(cfg Config) Config {
	cfg.th().NewRunner = func(pool *kvcache.Pool) (Runner, error) { return newEchoRunner(pool, false) }
	return cfg
}

func newEcho(t testing.TB, cfg Config) *Engine {
	t.Helper()
	e, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { closeClean(t, e) })
	return e
}

// parallel runs f(0), ..., f(n-1) on n goroutines and then, on the test's
// own goroutine, fails t with every error they returned: require and
// t.Fatal must not be called from other goroutines.
func parallel(t testing.TB, n int, f func(i int) error) {
	t.Helper()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- f(i)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// sameTokens is nil when got equals want, else an error saying so.
func sameTokens(what string, want, got []int) error {
	if slices.Equal(want, got) {
		return nil
	}
	return fmt.Errorf("%s: tokens %v, want %v", what, got, want)
}

// closeClean closes e and fails the test on any bookkeeping error the
// engine counted during its life (a failed page-table release or lease
// drop: the engine's page accounting disagreeing with the pool's).
func closeClean(t testing.TB, e *Engine) {
	t.Helper()
	_ = e.Close()
	s := e.Stats()
	require.Zero(t, s.BookkeepingErrors, "the engine counted bookkeeping errors (see its log)")
	// Only quarantined pages (and the empty tenant) still hold tenants.
	require.LessOrEqual(t, s.Pool.Tenants, 1+s.Pool.Quarantined, "the pool's tenant table leaks")
}

// tenantPrompt builds a prompt that starts with a marker unique to
// (tenant, request), so the echo chain differs between any two requests
// unless they deliberately share a prefix.
func tenantPrompt(tenant, req, n int) []int {
	p := []int{model.SyntheticBOS, 3 + tenant, 3 + req%256, 3 + (req/256)%256}
	for i := len(p); i < n; i++ {
		p = append(p, 3+int(mix64(uint64(tenant*1_000_003+req*7919+i))%256))
	}
	return p[:n]
}

func TestEchoOracleMatchesRunner(t *testing.T) {
	e := newEcho(t, echoConfig(t, 64, 4))
	for i := range 5 {
		p := tenantPrompt(1, i, 5+i*3)
		r, err := e.Generate(t.Context(), Request{Tokens: p, MaxTokens: 40})
		require.NoError(t, err)
		require.Equal(t, echoOracle(p, 40, e.MaxContext(), true), r.Tokens)
	}
}
