package engine

import (
	"fmt"
	"time"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// Speculative decoding by n-gram lookup (prompt lookup decoding, as
// llama-server's --spec-type ngram-simple and vLLM's "ngram"): a decoding
// sequence whose last tokens also occur earlier in its own prompt or
// output proposes the tokens that followed that earlier occurrence as a
// draft. The step feeds the last sampled token and the draft together, so
// one forward pass computes the logits of every draft position; the
// tokens are then sampled one position at a time exactly as without
// speculation, and the draft is accepted up to the first position whose
// sampled token differs from it.
//
// Why the output is the same: each position's logits are those the
// sequence would have had decoding one token at a time (same tokens
// before it, same K/V), and each token is drawn by the request's own
// sampler from them (grammar mask, penalties, logprobs, stop strings
// included, one generator draw per position). Greedy output is therefore
// identical, and a seeded request gives the same tokens with or without
// speculation. For a deterministic draft this is the standard
// speculative-sampling rule: the draft token t is accepted with
// probability p(t), and on rejection the token drawn follows p
// renormalised without t (sample.Sampler.Verify).
//
// Isolation: a draft's K/V goes only into slots the sequence reserved in
// its own table, past its written count, and the forward pass does not
// advance the table over them (model.Seq.Draft): no other step can read
// them. Accepted tokens are then advanced over (sealing full pages as
// usual); PageTable.Rollback releases pages that hold only rejected
// drafts (scrubbed under ZeroOnRelease) and scrubs the rejected tail of
// the last page. The prefix cache is offered only the verified tokens
// (s.fed). Drafts never evict the prefix cache or preempt another
// sequence: they take what the step leaves (addDrafts).

// Spec types of Speculative.Type.
const (
	SpecNone  = "none"
	SpecNgram = "ngram"
	// SpecDraft: a second, small model with the same vocabulary
	// (Speculative.DraftModel) proposes the draft (specdraft.go).
	SpecDraft = "draft"
)

// Defaults and bounds of Speculative.
const (
	DefaultDraftMax = 8
	MaxDraftTokens  = 64
	DefaultNgramMin = 2
	DefaultNgramMax = 4
	MaxNgram        = 16
)

// Speculative configures speculative decoding (Config.Speculative for
// every request, Request.Speculative for one).
type Speculative struct {
	// Type is "" or SpecNone (off) or SpecNgram (n-gram lookup in the
	// sequence's own prompt and output; no second model).
	Type string
	// DraftMax is the most draft tokens verified per step (default 8, at
	// most MaxDraftTokens). Each costs a row of compute whether accepted
	// or not.
	DraftMax int
	// NgramMin and NgramMax bound the length of the suffix looked up: the
	// longest one that occurs earlier wins (defaults 2 and 4, at most
	// MaxNgram).
	NgramMin, NgramMax int
	// DraftModel is the draft model's file (or a built-in model name) for
	// SpecDraft, set on the engine (Config.Speculative); a request may ask
	// for SpecDraft without it when the engine has one. Empty for the
	// other types.
	DraftModel string
}

// SpecStats counts speculative decoding work (Stats.Spec).
type SpecStats struct {
	Steps    uint64 // sequence steps that verified a draft
	Drafted  uint64 // draft tokens fed
	Accepted uint64 // draft tokens accepted
	// DraftTime is the time the draft model spent proposing drafts
	// (SpecDraft), all sequences of a round together.
	DraftTime time.Duration
}

// resolve validates sp and fills in its defaults; field names the
// Config or Request field for errors. A nil result means off.
func (sp Speculative) resolve(field string) (*Speculative, error) {
	switch sp.Type {
	case "", SpecNone:
		return nil, nil
	case SpecNgram:
		if sp.DraftModel != "" {
			return nil, badField(field, "a draft model (%q) is only for speculative type %q", sp.DraftModel, SpecDraft)
		}
	case SpecDraft:
		switch {
		case field == "Speculative" && sp.DraftModel == "":
			return nil, badField(field, "speculative type %q needs a draft model (DraftModel)", sp.Type)
		case field != "Speculative" && sp.DraftModel != "":
			return nil, badField(field, "a request cannot load a draft model (%q): set it on the engine", sp.DraftModel)
		}
	default:
		return nil, badField(field, "speculative type %q (want none, ngram or draft)", sp.Type)
	}
	if sp.DraftMax == 0 {
		sp.DraftMax = DefaultDraftMax
	}
	if sp.NgramMin == 0 {
		sp.NgramMin = min(DefaultNgramMin, max(sp.NgramMax, 1))
	}
	if sp.NgramMax == 0 {
		sp.NgramMax = max(DefaultNgramMax, sp.NgramMin)
	}
	switch {
	case sp.DraftMax < 1 || sp.DraftMax > MaxDraftTokens:
		return nil, badField(field, "draft max %d (want 1..%d)", sp.DraftMax, MaxDraftTokens)
	case sp.NgramMin < 1 || sp.NgramMax > MaxNgram || sp.NgramMin > sp.NgramMax:
		return nil, badField(field, "n-gram sizes %d..%d (want 1 <= min <= max <= %d)", sp.NgramMin, sp.NgramMax, MaxNgram)
	}
	return &sp, nil
}

// specFor is the speculation a request runs with: its own setting, else
// the engine's.
func (e *Engine) specFor(req Request) (*Speculative, error) {
	if req.Speculative != nil {
		sp, err := req.Speculative.resolve("Request.Speculative")
		if err == nil && sp != nil && sp.Type == SpecDraft && e.draft == nil {
			return nil, badField("Request.Speculative", "speculative type %q needs the engine's draft model (Config.Speculative.DraftModel)", SpecDraft)
		}
		return sp, err
	}
	return e.spec, nil
}

// specSeq is a sequence's speculation state. The draft length adapts to
// what the sequence's drafts achieve, since each draft token costs a row
// of compute whether accepted or not: a fully accepted draft doubles the
// next one (up to DraftMax), a partly accepted one sets it to what was
// accepted plus one, and a fully rejected one-token draft makes the
// sequence stop drafting for a while (1, 2, 4 ... up to maxSpecSkip
// steps, reset by any acceptance), so text without repetition costs
// little. None of this changes the output, only how fast it comes.
type specSeq struct {
	cfg     *Speculative
	n       int // draft length of the next draft
	skip    int // steps left without drafting
	backoff int // the next skip after a rejected one-token draft
	buf     []int

	// SpecDraft (specdraft.go): the sequence's draft KV in the draft
	// model's pool (nil when there is none now) and its share of the
	// drafting round.
	dt  *kvcache.PageTable
	job draftJob
	// next is the last round's scratch table, kept until the next round:
	// it holds the K/V of tokens[:nextAt] and then of chain, the drafts
	// it advanced over. When the model accepted all of chain it becomes
	// dt, so accepted drafts are not computed again.
	next   *kvcache.PageTable
	nextAt int
	chain  []int
}

// maxSpecSkip bounds the steps a sequence goes without drafting after
// its drafts kept failing.
const maxSpecSkip = 16

func newSpecSeq(cfg *Speculative) *specSeq {
	if cfg == nil {
		return nil
	}
	return &specSeq{cfg: cfg, n: cfg.DraftMax, backoff: 1}
}

// verified updates the draft length after a draft of drafted tokens of
// which accepted were.
func (sp *specSeq) verified(drafted, accepted int) {
	switch {
	case accepted == drafted:
		sp.n = min(sp.cfg.DraftMax, 2*max(sp.n, drafted))
	case accepted > 0:
		sp.n = accepted + 1
	case drafted > 1:
		sp.n = 1
	default:
		sp.skip = sp.backoff
		sp.backoff = min(2*sp.backoff, maxSpecSkip)
		return
	}
	sp.backoff = 1
}

// ngramDraft proposes up to k tokens for the context toks: the tokens that
// followed an earlier occurrence of its longest suffix of nmin..nmax
// tokens that occurs earlier, or nil. The occurrence is the most recent
// one followed by k tokens or more, else the one followed by the most (the
// earliest): in a loop the most recent occurrence is right behind the
// suffix and would propose a single token.
func ngramDraft(toks []int, nmin, nmax, k int) []int {
	n := len(toks)
	for g := min(nmax, n-1); g >= nmin; g-- {
		suffix := toks[n-g:]
		best := -1
		// j is where an earlier occurrence starts; it must be followed by
		// at least one token, and not be the suffix itself.
		for j := n - g - 1; j >= 0; j-- {
			if toks[j] != suffix[0] || !equalInts(toks[j:j+g], suffix) {
				continue
			}
			if from := j + g; n-from >= k {
				return toks[from : from+k]
			}
			best = j
		}
		if best >= 0 {
			return toks[best+g:]
		}
	}
	return nil
}

func equalInts(a, b []int) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// addDrafts gives each decoding sequence of the step being built that
// speculates a draft, within budget, and returns the budget used. It runs
// once the step is otherwise complete (decode tokens, prefill chunks,
// placements), so drafts take only the budget and free pages the step
// leaves: a draft never makes another sequence wait, evict or preempt. Its
// pages come back after the step (Rollback) unless they hold accepted
// tokens.
func (sc *scheduler) addDrafts(budget int) int {
	used := 0
	var jobs []*draftJob
	for _, s := range sc.order {
		s.draft = s.draft[:0]
		sp := s.spec
		if sp == nil || budget-used <= 0 || !s.runnable() || s.state != StateDecoding || s.fed != len(s.tokens)-1 {
			continue
		}
		if sp.skip > 0 {
			sp.skip--
			continue
		}
		// The last draft token's successor is the last token s may
		// generate: drafts past MaxTokens (and so MaxContext) are useless.
		k := min(sp.n, budget-used, s.maxTokens-s.generated-1)
		if k <= 0 {
			continue
		}
		if sp.cfg.Type == SpecDraft {
			// Proposed below, for every such sequence at once.
			sp.job.s, sp.job.k = s, k
			jobs = append(jobs, &sp.job)
			used += k
			continue
		}
		used += sc.takeDraft(s, ngramDraft(s.tokens, sp.cfg.NgramMin, sp.cfg.NgramMax, k))
	}
	if len(jobs) > 0 {
		start := time.Now()
		sc.draftRound(jobs)
		d := time.Since(start)
		sc.e.met.update(func(m *metrics) { m.spec.DraftTime += d })
		for _, j := range jobs {
			used += sc.takeDraft(j.s, j.out) - j.k
		}
	}
	return used
}

// takeDraft makes d s's draft this step, as far as s's table can hold it,
// and returns the draft tokens taken.
func (sc *scheduler) takeDraft(s *seq, d []int) int {
	if len(d) == 0 {
		return 0
	}
	if err := s.table.Reserve(s.fed + 1 + len(d)); err != nil {
		// Only what is reserved already.
		d = d[:min(len(d), s.table.Reserved()-s.fed-1)]
	}
	if len(d) == 0 {
		return 0
	}
	s.draft = append(s.draft, d...)
	sc.inStep[s] += len(d)
	return len(d)
}

// stepSeq is s's share of the batch: n tokens from s.fed, the last
// len(s.draft) of them its draft.
func (s *seq) stepSeq(n int) model.Seq {
	if len(s.draft) == 0 {
		return model.Seq{Tokens: s.tokens[s.fed : s.fed+n], Table: s.table, Logits: s.wantLogits(s.fed + n)}
	}
	sp := s.spec
	sp.buf = append(append(sp.buf[:0], s.tokens[s.fed]), s.draft...)
	return model.Seq{Tokens: sp.buf, Table: s.table, Logits: true, Draft: len(s.draft)}
}

// consume samples s's tokens from the step's logits: one, or with a draft
// one per position until the draft and the sampled token differ, then
// advances s's table over the accepted draft tokens and rolls the rest
// back.
func (sc *scheduler) consume(s *seq, logits []float32, now time.Time) {
	draft := s.draft
	s.draft = s.draft[:0]
	if len(draft) == 0 {
		if err := sc.grammarMask(s); err != nil {
			sc.fail(s, err)
			return
		}
		sc.emit(s, sc.sample(s, logits), now)
		return
	}
	v := sc.e.mcfg.Vocab
	if len(logits) != (len(draft)+1)*v {
		sc.fail(s, fmt.Errorf("engine: request %d: the runner returned %d logits for %d rows of %d; speculative decoding needs a runner that honours model.Seq.Draft",
			s.id, len(logits), len(draft)+1, v))
		return
	}
	accepted := 0
	for i := 0; i <= len(draft); i++ {
		if err := sc.grammarMask(s); err != nil {
			sc.fail(s, err)
			break
		}
		tok := sc.sample(s, logits[i*v:(i+1)*v])
		sc.emit(s, tok, now)
		// Accept draft token i only when s goes on with it as its context:
		// sampled the same, and not ended by it (EOS is never part of the
		// context, nor is anything after a stop).
		if i == len(draft) || tok != draft[i] || !s.runnable() {
			break
		}
		accepted++
	}
	s.spec.verified(len(draft), accepted)
	sc.e.met.update(func(m *metrics) {
		m.spec.Steps++
		m.spec.Drafted += uint64(len(draft))
		m.spec.Accepted += uint64(accepted)
	})
	if s.table == nil {
		return
	}
	if err := s.table.Advance(accepted); err != nil {
		sc.fail(s, fmt.Errorf("engine: advancing over %d accepted draft tokens: %w", accepted, err))
		return
	}
	s.fed += accepted
	if err := s.table.Rollback(); err != nil {
		sc.fail(s, fmt.Errorf("engine: rolling back %d rejected draft tokens: %w", len(draft)-accepted, err))
		return
	}
	if accepted > 0 {
		sc.prefix.offer(s)
	}
}
