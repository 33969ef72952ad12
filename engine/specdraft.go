package engine

import (
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
// The draft model keeps no KV between steps. To draft for a sequence it
// computes the last draftWindow tokens of the sequence's context in a page
// table of its own pool, made for that sequence and that step (owned by a
// fresh ID, the sequence's tenant), then decodes the draft one token at a
// time in it, and releases the table at once: released pages go through
// the pool's deferred release and are scrubbed under ZeroOnRelease or
// poisoned under Poison, like the main pool's. No draft KV outlives the
// step, so preemption, abort and the end of a request need nothing more.
// RoPE makes attention depend on relative positions only, so computing
// the window from position 0 gives the draft model the same view as at
// the window's true positions. The window bounds the draft model's cost
// per step (a prefill of draftWindow tokens of the small model).
type draftModel struct {
	w      *model.Weights
	pool   *kvcache.Pool
	runner *model.Runner
	ids    kvcache.RequestID // the last table ID; IDs are never reused
}

// draftWindow is the most context tokens the draft model sees.
const draftWindow = 256

// openDraftModel loads the draft model of cfg.Speculative for a main
// model of vocab tokens.
func openDraftModel(cfg Config, vocab int) (*draftModel, error) {
	path := cfg.Speculative.DraftModel
	w, _, err := model.Open(path, "")
	if err != nil {
		return nil, fmt.Errorf("engine: draft model %s: %w", path, err)
	}
	d := &draftModel{w: w}
	if err := d.init(cfg, vocab); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

func (d *draftModel) init(cfg Config, vocab int) error {
	c := d.w.Config
	if c.Vocab != vocab {
		return badField("Speculative", "draft model %s has a vocabulary of %d tokens, the model %d: a draft model must share the model's tokenizer",
			cfg.Speculative.DraftModel, c.Vocab, vocab)
	}
	const ps = 16
	tokens := draftWindow + MaxDraftTokens + 1
	pool, err := kvcache.New(cpu.New(), kvcache.Config{
		Geometry: kvcache.Geometry{PageSize: ps, Layers: c.Layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim, DType: device.F32},
		Pages:    (tokens+ps-1)/ps + 1, ZeroOnRelease: cfg.ZeroOnRelease, Poison: cfg.Poison, Logger: cfg.Logger,
	})
	if err != nil {
		return fmt.Errorf("engine: draft model KV pool: %w", err)
	}
	d.pool = pool
	if d.runner, err = model.NewRunnerContext(d.w, pool, tokens); err != nil {
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

// propose is the draft model's greedy continuation of ctx, k tokens.
func (d *draftModel) propose(tenant string, ctx []int, k int) (out []int, err error) {
	win := ctx[max(0, len(ctx)-draftWindow):]
	d.ids++
	t := d.pool.NewTable(d.ids, kvcache.Tenant(tenant))
	defer func() {
		if rerr := t.Release(); err == nil && rerr != nil {
			err = fmt.Errorf("engine: releasing the draft model's table: %w", rerr)
		}
	}()
	if err := t.Reserve(len(win) + k); err != nil {
		return nil, fmt.Errorf("engine: draft model KV: %w", err)
	}
	toks := win
	for len(out) < k {
		b := &model.Batch{Seqs: []model.Seq{{Tokens: toks, Table: t, Logits: true}}}
		if err := d.runner.Forward(b); err != nil {
			return nil, fmt.Errorf("engine: draft model step: %w", err)
		}
		if len(b.Failed) > 0 && b.Failed[0] != nil {
			return nil, fmt.Errorf("engine: draft model step: %w", b.Failed[0])
		}
		l := b.Logits[0]
		v := d.w.Config.Vocab
		l = l[len(l)-v:]
		best := 0
		for i, x := range l {
			if x > l[best] {
				best = i
			}
		}
		out = append(out, best)
		toks = out[len(out)-1:]
	}
	return out, nil
}
