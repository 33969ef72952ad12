package audit

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// Echo is a test model (an engine.Runner) that copies its context from the
// KV cache: whatever it emits was read back, through its page table, from
// KV slots. Any read of a page another request wrote therefore shows up
// exactly in its output.
//
// Each token's K and V rows (every layer) hold the token ID in their first
// element. After writing a step's tokens and advancing the table, Echo
// reads the whole context back with PageTable.ReadKV (which validates the
// page's owner, tenant and generation, and refuses unwritten slots) and
// picks the next token by a rule that depends only on that context:
//
//   - P is the position of the first Sep token in the context;
//   - the k-th token after Sep (k = 0, 1, ...) is the context token at
//     position 1 + k mod (P-1), so the output cycles through the prompt
//     between its first token (BOS) and Sep;
//   - with no Sep (or nothing between BOS and Sep) it repeats the last token.
//
// The rule gives the same output whether a sequence ran alone, in a batch,
// after preemption (swap or recompute) or from a shared prefix, so the
// audit knows the exact output each request may produce.
//
// Speculative decoding (model.Seq.Draft): draft tokens are written like
// the others but the table is not advanced over them, so they cannot be
// read back through it; the row of each draft position applies the rule to
// the context read back plus the step's own draft tokens before it, as a
// model's attention reads the K/V its step has just written.
type Echo struct {
	Sep   int // separator token
	vocab atomic.Int64

	pool  *kvcache.Pool
	geo   kvcache.Geometry
	k, v  []float32
	ids   []int
	logit [][]float32

	// fault, when set, makes one request read another tenant's pages (see
	// FaultForeignRead).
	fault   bool
	faulted sync.Once
	victim  atomic.Uint64
	arena   []float32
}

// FaultForeignRead is the fault the audit can inject to prove it can fail:
// the first time a step holds sequences of two tenants, one of them reads
// its context from the other's pages (raw arena reads around the page
// table, as a page-table bug would), so its next token comes from a page it
// did not write.
const FaultForeignRead = "foreign-read"

// NewEcho builds an Echo over pool. SetVocab must be called before the
// first Forward.
func NewEcho(pool *kvcache.Pool, sep int, fault string) (*Echo, error) {
	g := pool.Geometry()
	if g.KVDim() < 2 {
		return nil, fmt.Errorf("audit: the echo model needs a KV width of at least 2, have %d", g.KVDim())
	}
	e := &Echo{Sep: sep, pool: pool, geo: g, k: make([]float32, g.KVDim())}
	if !g.KOnly { // a K-only pool takes no V row
		e.v = make([]float32, g.KVDim())
	}
	switch fault {
	case "":
	case FaultForeignRead:
		fa, ok := pool.Arena().(interface{ Float32s() []float32 })
		if !ok || g.DType != device.F32 {
			return nil, fmt.Errorf("audit: fault %s needs a CPU f32 arena (KVType f32)", fault)
		}
		e.fault, e.arena = true, fa.Float32s()
	default:
		return nil, fmt.Errorf("audit: unknown fault %q (want %s)", fault, FaultForeignRead)
	}
	return e, nil
}

// SetVocab sets the vocabulary size (the length of the logits).
func (e *Echo) SetVocab(n int) { e.vocab.Store(int64(n)) }

// Victim is the request ID the injected fault hit, 0 if none.
func (e *Echo) Victim() uint64 { return e.victim.Load() }

var errNotToken = errors.New("audit echo: KV slot does not hold a token")

// Forward implements engine.Runner.
func (e *Echo) Forward(b *model.Batch) error {
	vocab := int(e.vocab.Load())
	if vocab <= 0 {
		return errors.New("audit echo: vocabulary size not set")
	}
	for i, s := range b.Seqs {
		start := s.Table.Written()
		if start+len(s.Tokens) > s.Table.Reserved() {
			return fmt.Errorf("audit echo: sequence %d needs %d slots, %d reserved", i, start+len(s.Tokens), s.Table.Reserved())
		}
		for j, t := range s.Tokens {
			clear(e.k)
			clear(e.v)
			// The id in two 10-bit halves: exact in every KV type (f16
			// holds integers only up to 2048).
			e.k[0], e.k[1] = float32(t>>10), float32(t&1023)
			if e.v != nil {
				e.v[0], e.v[1] = e.k[0], e.k[1]
			}
			for l := range e.geo.Layers {
				if err := s.Table.WriteKV(start+j, l, e.k, e.v); err != nil {
					return fmt.Errorf("audit echo: write: %w", err)
				}
			}
		}
	}
	for i, s := range b.Seqs {
		if err := s.Table.Advance(len(s.Tokens) - s.Draft); err != nil {
			return fmt.Errorf("audit echo: advance sequence %d: %w", i, err)
		}
	}
	if cap(b.Logits) < len(b.Seqs) {
		b.Logits = make([][]float32, len(b.Seqs))
	}
	b.Logits = b.Logits[:len(b.Seqs)]
	clear(b.Logits)
	for len(e.logit) < len(b.Seqs) {
		e.logit = append(e.logit, nil)
	}
	donor := -1
	victim := -1
	if e.fault {
		victim, donor = e.pickFault(b)
	}
	for i, s := range b.Seqs {
		rows := s.LogitRows()
		if rows == 0 {
			continue
		}
		var err error
		if i == victim {
			err = e.readContext(b.Seqs[donor].Table, true)
			e.faulted.Do(func() { e.victim.Store(uint64(s.Table.Request())) })
		} else {
			err = e.readContext(s.Table, false)
		}
		if err != nil {
			return err
		}
		if cap(e.logit[i]) < rows*vocab {
			e.logit[i] = make([]float32, rows*vocab)
		}
		// One token is certain: every other logit is so low that any
		// temperature, top-k or top-p picks next.
		l := e.logit[i][:rows*vocab]
		for k := range l {
			l[k] = -1e30
		}
		drafts := s.Tokens[len(s.Tokens)-s.Draft:]
		for r := range rows {
			if r > 0 {
				e.ids = append(e.ids, drafts[r-1])
			}
			l[r*vocab+EchoNext(e.ids, e.Sep)] = 0
		}
		b.Logits[i] = l
	}
	return nil
}

// pickFault chooses, once, a victim that asks for logits and a donor of
// another tenant that has written tokens.
func (e *Echo) pickFault(b *model.Batch) (victim, donor int) {
	if e.victim.Load() != 0 {
		return -1, -1
	}
	for i, s := range b.Seqs {
		if !s.Logits || s.Table.Written() < 2 {
			continue
		}
		for j, d := range b.Seqs {
			if j != i && d.Table.Tenant() != s.Table.Tenant() && d.Table.Written() >= 2 {
				return i, j
			}
		}
	}
	return -1, -1
}

// readContext reads table's written context into e.ids. raw reads the
// arena directly (the injected fault), bypassing ReadKV's checks.
func (e *Echo) readContext(t *kvcache.PageTable, raw bool) error {
	n := t.Written()
	e.ids = e.ids[:0]
	pages := t.Pages()
	for pos := range n {
		var hi, lo float32
		if raw {
			off := e.geo.KOffset(pages[pos/e.geo.PageSize], 0, pos%e.geo.PageSize)
			hi, lo = e.arena[off], e.arena[off+1]
		} else {
			if err := t.ReadKV(pos, 0, e.k, e.v); err != nil {
				return fmt.Errorf("audit echo: read: %w", err)
			}
			hi, lo = e.k[0], e.k[1]
		}
		id := int(hi)*1024 + int(lo)
		if math.IsNaN(float64(hi)) || math.IsNaN(float64(lo)) || float32(int(hi)) != hi || float32(int(lo)) != lo ||
			lo < 0 || lo >= 1024 || id < 0 || id >= int(e.vocab.Load()) {
			return fmt.Errorf("%w: request %d position %d holds %v, %v", errNotToken, t.Request(), pos, hi, lo)
		}
		e.ids = append(e.ids, id)
	}
	return nil
}

// EchoNext is the echo rule: the token that follows ctx.
func EchoNext(ctx []int, sep int) int {
	p := -1
	for i, t := range ctx {
		if t == sep {
			p = i
			break
		}
	}
	if p < 2 {
		return ctx[len(ctx)-1]
	}
	k := len(ctx) - p - 1
	return ctx[1+k%(p-1)]
}

// EchoOutput is what Echo generates for prompt with greedy sampling, n
// tokens long, stopping early at one of eos.
func EchoOutput(prompt []int, sep, n int, eos ...int) []int {
	ctx := append([]int(nil), prompt...)
	var out []int
	for range n {
		t := EchoNext(ctx, sep)
		for _, e := range eos {
			if t == e {
				return out
			}
		}
		out = append(out, t)
		ctx = append(ctx, t)
	}
	return out
}
