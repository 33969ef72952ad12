package engine

import (
	"errors"
	"fmt"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// Speculative decoding with a draft model (SpecDraft): a second, small
// model with the same vocabulary proposes the draft greedily; the verify
// and rollback path is the n-gram one (spec.go), so the output is the same
// as without speculation whatever the draft model says.
//
// Each speculating sequence keeps its draft KV across steps, in a page
// table of the draft model's own pool (specSeq.dt) owned by an ID of the
// draft pool's own (never reused) and the sequence's tenant: between
// steps it holds exactly the K/V of a prefix of the sequence's context,
// and nothing else. A drafting round, batched over every sequence that
// drafts (one forward pass per drafted position), first feeds the context
// tokens dt has not seen (the accepted drafts it did not compute and the
// model's next token) and takes the first draft from the last row. dt is
// never advanced over a draft: a step writes drafts past its written
// count (model.Seq.Draft), where no later step can read them, and
// PageTable.Rollback, as for the model's drafts, gives back their pages
// and scrubs their slots at the end of the round.
//
// The rest of the chain is made one of two ways, whichever costs fewer
// rows of the draft model:
//   - in a scratch table (fork): a second table of the same sequence and
//     tenant that shares dt's full pages read-only (sealed pages under
//     prefix leases, checksums verified as at a prefix-cache hit),
//     recomputes dt's partial last page (under draftPageSize tokens) and
//     then advances over one draft per step. It is kept until the next
//     round, and when the model accepted every draft in it, it becomes dt
//     (promote): accepted drafts are not computed again.
//   - keeping the last k-1 context tokens tentative in dt with the drafts
//     (short drafts): a step must advance its table over one token
//     (Seq.Draft < len(Tokens)), so step 1 advances all unseen context
//     tokens but k-1, and step j feeds the k-j+1 not advanced yet and the
//     j-1 drafts so far, advancing one: k rows per step, and at most as
//     many drafts as unseen tokens (which the adaptive draft length never
//     exceeds after a partly accepted draft: a accepted leave a+1 unseen).
//
// The draft KV is a cache: whenever it is in doubt (a failed step or
// check, the draft pool full) it is released and recomputed from the
// context later. It is released when its sequence ends (finish, abort,
// failure), is preempted (swap or recompute) and at Close.
type draftModel struct {
	w      *model.Weights
	pool   *kvcache.Pool
	runner *model.Runner
	ids    kvcache.RequestID // the last table ID; IDs are never reused
	verify bool              // KVChecksum=step: re-hash sealed draft pages before each round
	batch  model.Batch
}

// openDraftModel loads the draft model of cfg.Speculative for a main
// model of vocab tokens.
func openDraftModel(cfg Config, vocab int) (*draftModel, error) {
	path := cfg.Speculative.DraftModel
	w, _, err := model.OpenWith(path, "", model.LoadOptions{Mode: draftWeightPages(cfg)})
	if err != nil {
		return nil, fmt.Errorf("engine: draft model %s: %w", path, err)
	}
	if cfg.Logger != nil {
		logPlacement(cfg.Logger, w)
	}
	d := &draftModel{w: w, verify: cfg.KVChecksum == ChecksumStep}
	if err := d.init(cfg, vocab); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// draftPoolPagesForTest, when set, sizes the draft pool (tests of a full
// draft pool).
var draftPoolPagesForTest int

// draftPageSize is the draft pool's page size.
const draftPageSize = 4

func (d *draftModel) init(cfg Config, vocab int) error {
	c := d.w.Config
	if c.Vocab != vocab {
		return badField("Speculative", "draft model %s has a vocabulary of %d tokens, the model %d: a draft model must share the model's tokenizer",
			cfg.Speculative.DraftModel, c.Vocab, vocab)
	}
	const ps = draftPageSize
	// The draft tables hold no more context than the main pool can (a
	// preempted sequence gives its draft table up), plus each running
	// sequence's drafts and partial pages. The main pool shares prefix
	// pages, the draft pool does not: when it is short anyway, sequences
	// outside the round give their draft KV up (draftRoom).
	tokens := min(cfg.KVPages*cfg.PageSize, cfg.MaxSeqs*cfg.MaxContext) + cfg.MaxSeqs*(MaxDraftTokens+2*ps)
	pages := (tokens + ps - 1) / ps
	if draftPoolPagesForTest > 0 {
		pages = draftPoolPagesForTest
	}
	pool, err := kvcache.New(cpu.New(), kvcache.Config{
		Geometry: c.KVGeometry(ps, device.F16),
		Pages:    pages, ZeroOnRelease: cfg.ZeroOnRelease, Poison: cfg.Poison, Logger: cfg.Logger,
	})
	if err != nil {
		return fmt.Errorf("engine: draft model KV pool: %w", err)
	}
	d.pool = pool
	if d.runner, err = model.NewRunnerContext(d.w, pool, cfg.MaxContext+MaxDraftTokens); err != nil {
		return fmt.Errorf("engine: draft model runner: %w", err)
	}
	return nil
}

func (d *draftModel) close() {
	if d == nil {
		return
	}
	if d.pool != nil {
		_ = d.pool.Close()
	}
	_ = d.w.Close()
}

// draftJob is one sequence's share of a drafting round.
type draftJob struct {
	s    *seq
	k    int   // drafts to make
	from int   // the first context token not yet advanced over
	out  []int // the drafts made
	buf  []int
	dead bool // dropped from the round
	// fork: the chain runs in scratch, a table of its own sharing the
	// draft KV's full pages, released at the end of the round.
	fork    bool
	scratch *kvcache.PageTable
}

// dropDraft releases s's draft KV, if any.
func (sc *scheduler) dropDraft(s *seq) {
	if s.spec == nil {
		return
	}
	sc.dropNext(s)
	if s.spec.dt == nil {
		return
	}
	if err := s.spec.dt.Release(); err != nil {
		sc.e.met.bookkeepingError()
		sc.e.log.Error("engine: releasing the draft model's pages", "request", s.id, "err", err)
	}
	s.spec.dt = nil
}

// dropNext releases s's kept scratch table, if any.
func (sc *scheduler) dropNext(s *seq) {
	sp := s.spec
	if sp.next == nil {
		return
	}
	if err := sp.next.Release(); err != nil {
		sc.e.met.bookkeepingError()
		sc.e.log.Error("engine: releasing the draft model's scratch table", "request", s.id, "err", err)
	}
	sp.next = nil
}

// promote makes s's kept scratch table its draft KV when the model
// accepted every draft the scratch table holds (it then holds a prefix of
// s's context, further than dt), else releases it.
func (sc *scheduler) promote(s *seq) {
	sp := s.spec
	if sp.next == nil {
		return
	}
	w := sp.next.Written()
	// A round feeds at least one unseen context token: w must stay short
	// of the context (it always is when the drafts it holds were accepted:
	// the model's own next token follows them).
	if sp.dt == nil || w >= len(s.tokens) || w <= sp.dt.Written() || !equalInts(s.tokens[sp.nextAt:w], sp.chain) {
		sc.dropNext(s)
		return
	}
	// The old table's full pages stay readable through the scratch
	// table's prefix leases until it is released in turn.
	if err := sp.dt.Release(); err != nil {
		sc.e.met.bookkeepingError()
		sc.e.log.Error("engine: releasing the draft model's pages", "request", s.id, "err", err)
	}
	sp.dt, sp.next = sp.next, nil
}

// draftRoom frees draft pool pages for a round: it releases the draft KV
// of sequences that are not in the round. It reports whether it freed any.
func (sc *scheduler) draftRoom(in map[*seq]bool) bool {
	freed := false
	for _, list := range [2][]*seq{sc.queue, sc.run} {
		for _, s := range list {
			if !in[s] && s.spec != nil && s.spec.dt != nil {
				sc.dropDraft(s)
				freed = true
			}
		}
	}
	return freed
}

// draftRound proposes each job's draft: k greedy tokens of the draft model
// (fewer when its draft KV cannot be had), batched over the jobs, one
// forward pass per drafted position. A job left without drafts has
// out empty; its sequence goes on without speculation this step.
func (sc *scheduler) draftRound(jobs []*draftJob) {
	d := sc.e.draft
	in := make(map[*seq]bool, len(jobs))
	for _, j := range jobs {
		in[j.s] = true
	}
	kmax := 0
	for _, j := range jobs {
		if sc.draftStart(j, in) {
			kmax = max(kmax, j.k)
		}
	}
	var members []*draftJob
	b := &d.batch
	v := d.w.Config.Vocab
	for step := 1; step <= kmax; step++ {
		b.Seqs, members = b.Seqs[:0], members[:0]
		for _, j := range jobs {
			if j.dead || step > j.k {
				continue
			}
			if step == 2 && j.fork {
				if sc.draftFork(j, in); j.dead || step > j.k {
					continue // no room: j keeps the one draft it has
				}
			}
			b.Seqs = append(b.Seqs, j.stepSeq(step))
			members = append(members, j)
		}
		stepErr := sc.draftForward(b)
		for i, j := range members {
			err := stepErr
			if err == nil && i < len(b.Failed) && b.Failed[i] != nil {
				err = b.Failed[i]
			}
			if err != nil {
				sc.e.log.Error("engine: draft model step; its KV is dropped", "request", j.s.id, "err", err)
				j.dead, j.out = true, j.out[:0]
				sc.releaseScratch(j)
				sc.dropDraft(j.s)
				continue
			}
			if !j.fork {
				j.from = len(j.s.tokens) - (j.k - step)
			}
			l := b.Logits[i]
			j.out = append(j.out, argmax(l[len(l)-v:]))
		}
	}
	for _, j := range jobs {
		if !j.dead {
			sc.draftEnd(j)
		}
	}
}

// draftStart readies j's draft KV for a round: checked, created if need
// be, with room for the round. It reports whether j drafts.
func (sc *scheduler) draftStart(j *draftJob, in map[*seq]bool) bool {
	d := sc.e.draft
	s, sp := j.s, j.s.spec
	j.out, j.dead, j.scratch = j.out[:0], false, nil
	sc.promote(s)
	if sp.dt != nil {
		var err error
		if d.verify {
			err = d.pool.VerifyTable(sp.dt)
		} else {
			err = d.pool.ValidateTable(sp.dt)
		}
		if err != nil {
			// The draft KV is a cache: drop it and compute it again.
			sc.e.log.Warn("engine: the draft model's KV failed its check; recomputing it", "request", s.id, "err", err)
			sc.dropDraft(s)
		}
	}
	if sp.dt == nil {
		d.ids++
		sp.dt = d.pool.NewTable(d.ids, kvcache.Tenant(s.tenant))
	}
	L := len(s.tokens)
	j.from = sp.dt.Written()
	// The cheaper way to make the draft chain, in rows of the draft
	// model: keeping the last k-1 context tokens tentative costs k-1 more
	// rows per step (and needs k unseen context tokens); a scratch table
	// costs the context's partial last page once, then one row per step,
	// and spares the next round the drafts the model accepts (promote).
	j.fork = j.k >= 2 && L%draftPageSize+j.k-1 <= j.k*(j.k-1)
	if !j.fork {
		j.k = min(j.k, L-j.from)
	}
	need := L + j.k - 1
	if j.fork {
		need = L
	}
	err := sp.dt.Reserve(need)
	if errors.Is(err, kvcache.ErrNoPages) && sc.draftRoom(in) {
		err = sp.dt.Reserve(need)
	}
	if err != nil {
		if !errors.Is(err, kvcache.ErrNoPages) {
			sc.e.log.Error("engine: the draft model's KV", "request", s.id, "err", err)
		}
		// Full: this sequence's draft KV goes too, so that the pool
		// does not stay full of one long context.
		sc.dropDraft(s)
		j.dead = true
		return false
	}
	return true
}

// draftFork starts j's scratch table for the rest of its draft chain: the
// full pages of its draft KV, shared read-only (sealed pages of the same
// tenant, under prefix leases), then room for the partial last page and
// the drafts. Without room j stops at the one draft it has.
func (sc *scheduler) draftFork(j *draftJob, in map[*seq]bool) {
	d := sc.e.draft
	dt := j.s.spec.dt
	L := len(j.s.tokens)
	d.ids++
	t := d.pool.NewTable(d.ids, kvcache.Tenant(j.s.tenant))
	j.scratch = t
	refs := dt.Refs()
	var err error
	for i := range L / draftPageSize {
		if err = t.AppendShared(refs[i]); err != nil {
			break
		}
	}
	if err == nil {
		err = t.Reserve(L + j.k - 1)
		if errors.Is(err, kvcache.ErrNoPages) && sc.draftRoom(in) {
			err = t.Reserve(L + j.k - 1)
		}
	}
	if err != nil {
		if !errors.Is(err, kvcache.ErrNoPages) {
			sc.e.log.Error("engine: the draft model's scratch table", "request", j.s.id, "err", err)
		}
		j.k = len(j.out)
		sc.releaseScratch(j)
	}
}

func (sc *scheduler) releaseScratch(j *draftJob) {
	if j.scratch == nil {
		return
	}
	if err := j.scratch.Release(); err != nil {
		sc.e.met.bookkeepingError()
		sc.e.log.Error("engine: releasing the draft model's scratch table", "request", j.s.id, "err", err)
	}
	j.scratch = nil
}

// stepSeq is j's share of drafting step step (1-based).
func (j *draftJob) stepSeq(step int) model.Seq {
	toks := j.s.tokens
	if step == 1 && j.fork {
		// Every unseen context token, into the draft KV.
		return model.Seq{Tokens: toks[j.from:], Table: j.s.spec.dt, Logits: true}
	}
	if j.fork {
		// The chain, in the scratch table: what it has not seen of the
		// context and the drafts.
		w := j.scratch.Written()
		j.buf = append(j.buf[:0], toks[min(w, len(toks)):]...)
		j.buf = append(j.buf, j.out[max(0, w-len(toks)):]...)
		return model.Seq{Tokens: j.buf, Table: j.scratch, Logits: true}
	}
	// The last k-step context tokens stay tentative with the drafts;
	// those before them are advanced over.
	j.buf = append(append(j.buf[:0], toks[j.from:]...), j.out...)
	adv := len(toks) - j.from - (j.k - step)
	return model.Seq{Tokens: j.buf, Table: j.s.spec.dt, Logits: true, Draft: len(j.buf) - adv}
}

// draftEnd ends j's round: the draft KV is rolled back to the context
// (drafts scrubbed, unused pages returned), and the scratch table, rolled
// back to the drafts it advanced over, is kept for promote.
func (sc *scheduler) draftEnd(j *draftJob) {
	sp := j.s.spec
	if t := j.scratch; t != nil && !j.dead {
		if err := t.Rollback(); err == nil && t.Written() >= len(j.s.tokens) {
			sc.dropNext(j.s)
			sp.next, sp.nextAt, j.scratch = t, len(j.s.tokens), nil
			sp.chain = append(sp.chain[:0], j.out[:t.Written()-len(j.s.tokens)]...)
		}
	}
	sc.releaseScratch(j)
	dt := sp.dt
	if dt == nil {
		return
	}
	if err := dt.Rollback(); err != nil {
		sc.e.log.Error("engine: rolling back the draft model's drafts; its KV is dropped", "request", j.s.id, "err", err)
		sc.dropDraft(j.s)
		return
	}
	if w := dt.Written(); w != len(j.s.tokens) && !j.dead {
		// The round's arithmetic is wrong: a bug, said loudly; the drafts
		// are still only a guess, verified by the model.
		sc.e.met.bookkeepingError()
		sc.e.log.Error("engine: draft model KV out of step with the context", "request", j.s.id, "written", w, "context", len(j.s.tokens))
		sc.dropDraft(j.s)
	}
}

// draftForward runs one step of the draft model over b, each table under
// a step lease.
func (sc *scheduler) draftForward(b *model.Batch) error {
	if len(b.Seqs) == 0 {
		return nil
	}
	d := sc.e.draft
	for _, st := range b.Seqs {
		drop, err := d.pool.LeaseStep(st.Table)
		if err != nil {
			return fmt.Errorf("engine: draft step lease: %w", err)
		}
		defer drop()
	}
	b.Failed = b.Failed[:0]
	if err := d.runner.Forward(b); err != nil {
		return fmt.Errorf("engine: draft model step: %w", err)
	}
	return nil
}

func argmax(l []float32) int {
	best := 0
	for i, x := range l {
		if x > l[best] {
			best = i
		}
	}
	return best
}
