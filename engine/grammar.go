package engine

import (
	"fmt"
	"slices"
	"sync"

	"github.com/kvwarden/kvwarden/engine/grammar"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

// Errors of grammar compilation, re-exported from engine/grammar so that
// an embedding application needs only this package. Every error
// CompileGrammar, CompileJSONSchema and Submit return for a grammar wraps
// ErrInvalidParams and one of these; the concrete error is a
// *grammar.SyntaxError (line and column) or a *grammar.SchemaError (the
// schema path and keyword).
var (
	ErrInvalidGrammar    = grammar.ErrInvalidGrammar
	ErrInvalidSchema     = grammar.ErrInvalidSchema
	ErrUnsupportedSchema = grammar.ErrUnsupportedSchema
	// ErrGrammarDeadEnd ends a request whose grammar allows no token of
	// the vocabulary and cannot end where the output stands: the
	// vocabulary cannot spell what the grammar needs next.
	ErrGrammarDeadEnd = grammar.ErrDeadEnd
)

// Grammar is a compiled output constraint for Request.Grammar. It is
// immutable and may serve many requests at once: each request follows it
// with a matcher of its own. Masks already computed for a grammar state
// are cached in the Grammar, so reusing one Grammar for requests of one
// tenant makes later requests cheaper; do not share one between tenants
// if the timing of that cache must not cross them.
type Grammar struct {
	g *grammar.Grammar
}

// String returns the grammar's GBNF text.
func (g *Grammar) String() string { return g.g.String() }

// CompileGrammar compiles a GBNF grammar (llama.cpp's format) for
// Request.Grammar. An invalid grammar is an error wrapping ErrInvalidParams
// and ErrInvalidGrammar that gives the line and column.
func (e *Engine) CompileGrammar(gbnf string) (*Grammar, error) {
	g, err := grammar.Parse(gbnf)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidParams, err)
	}
	// Token references (<|python_tag|>, <[id]>) must name tokens of this
	// model's vocabulary: a 400 now rather than a failed request later.
	if v, err := e.grammarVocab(); err == nil {
		if err := g.CheckVocab(v); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidParams, err)
		}
	}
	return &Grammar{g: g}, nil
}

// CompileJSONSchema compiles a JSON Schema (the subset of docs/GRAMMAR.md,
// as OpenAI's strict mode uses) into a Grammar whose outputs are JSON
// documents the schema accepts. Errors wrap ErrInvalidParams and
// ErrInvalidSchema or ErrUnsupportedSchema, and name the schema path and
// keyword at fault.
func (e *Engine) CompileJSONSchema(schema []byte) (*Grammar, error) {
	g, err := grammar.FromJSONSchema(schema)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidParams, err)
	}
	return &Grammar{g: g}, nil
}

// JSONObjectGrammar is the grammar of OpenAI's json_object response
// format: any JSON object.
func (e *Engine) JSONObjectGrammar() *Grammar {
	g, err := grammar.Parse(grammar.JSONObjectGBNF())
	if err != nil {
		// The text is the package's own: it always parses.
		panic(fmt.Sprintf("engine: the json_object grammar does not parse: %v", err))
	}
	return &Grammar{g: g}
}

// grammarVocab is the model's vocabulary as the matcher sees it, built on
// first use (a trie over every token: a few ms at 32k tokens) and
// immutable afterwards.
func (e *Engine) grammarVocab() (*grammar.Vocab, error) {
	e.gvOnce.Do(func() {
		n := e.mcfg.Vocab
		pieces := make([][]byte, n)
		special := make([]bool, n)
		names := make([]string, n)
		for id := range n {
			pieces[id], special[id] = tokenizer.TokenBytes(e.tok, id)
			if id < e.tok.VocabSize() {
				names[id] = e.tok.Piece(id)
			}
		}
		var eog []int
		for _, id := range e.eos {
			if id < n {
				eog = append(eog, id)
			}
		}
		e.gv, e.gvErr = grammar.NewVocab(pieces, special, eog...)
		if e.gvErr == nil {
			// Token references by text (<|python_tag|>) find their tokens.
			e.gv, e.gvErr = e.gv.WithNames(names)
		}
	})
	return e.gv, e.gvErr
}

// grammarState is one request's progress through its grammar. Once the
// request is admitted only the scheduler goroutine touches it (and, during
// a forward pass, one startMasks goroutine the scheduler waits for); it is
// never shared between requests.
type grammarState struct {
	m    *grammar.Matcher
	mask []uint64 // the tokens allowed next, valid while fresh
	// eogOnly marks the end-of-generation tokens: a mask equal to it means
	// the grammar is complete and nothing may follow.
	eogOnly []uint64
	fresh   bool
	err     error // Allowed's error (a dead end): the request fails with it
}

// newGrammarState starts a request's matcher (admission).
func (e *Engine) newGrammarState(g *Grammar) (*grammarState, error) {
	if g == nil || g.g == nil {
		return nil, fmt.Errorf("%w: request grammar is empty (build it with CompileGrammar or CompileJSONSchema)", ErrInvalidParams)
	}
	v, err := e.grammarVocab()
	if err != nil {
		return nil, fmt.Errorf("engine: grammar vocabulary: %w", err)
	}
	if err := g.g.CheckVocab(v); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidParams, err)
	}
	gs := &grammarState{m: grammar.NewMatcher(g.g, v), mask: make([]uint64, v.MaskWords()), eogOnly: make([]uint64, v.MaskWords())}
	for _, id := range e.eos {
		if id < v.Size() {
			gs.eogOnly[id>>6] |= 1 << (id & 63)
		}
	}
	return gs, nil
}

// grammarMask makes s's mask current before its next token is sampled. A
// dead end is the request's error.
func (sc *scheduler) grammarMask(s *seq) error {
	gs := s.grammar
	if gs == nil {
		return nil
	}
	if !gs.fresh && gs.err == nil {
		gs.compute()
	}
	if gs.err != nil {
		return fmt.Errorf("engine: request %d: %w after %d generated tokens", s.id, gs.err, s.generated)
	}
	return nil
}

func (gs *grammarState) compute() {
	gs.err = gs.m.Allowed(gs.mask)
	if gs.err == nil && !slices.ContainsFunc(gs.mask, func(w uint64) bool { return w != 0 }) {
		// The grammar may end here, but the vocabulary has no
		// end-of-generation token to end it with.
		gs.err = grammar.ErrDeadEnd
	}
	gs.fresh = gs.err == nil
}

// startMasks computes, while the forward pass runs, the masks of the
// step's members that will sample from it: a mask depends only on the
// tokens accepted so far, so it need not wait for the logits, and a batch
// does not wait for its members' masks one after another. Each goroutine
// touches only its own sequence's matcher (the grammar's mask cache has
// its own lock); the scheduler reads them only after the returned wait.
func startMasks(members []*seq, seqs []model.Seq) (wait func()) {
	var wg sync.WaitGroup
	for i, s := range members {
		gs := s.grammar
		if gs == nil || gs.fresh || gs.err != nil || !seqs[i].Logits {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			gs.compute()
		}()
	}
	return wg.Wait
}

// draw samples s's next token from logits (scratch), restricted to what
// its grammar allows.
func (s *seq) draw(logits []float32) int {
	gs := s.grammar
	if gs == nil {
		return s.sampler.Sample(logits, s.tokens)
	}
	// Not ready means grammarMask failed and s is failing: its token is
	// never emitted.
	if !gs.fresh {
		return 0
	}
	tok, err := s.sampler.SampleMasked(logits, s.tokens, gs.mask)
	if err != nil {
		// compute never leaves a mask empty without an error.
		return 0
	}
	return tok
}

// grammarAccept moves s's matcher past a generated (non end-of-generation)
// token and reports whether the grammar is complete with nothing allowed
// after it but end-of-generation, so that s can stop now rather than
// spend a step on the end token.
func (sc *scheduler) grammarAccept(s *seq, tok int) (complete bool, err error) {
	gs := s.grammar
	if gs == nil {
		return false, nil
	}
	gs.fresh = false
	if err := gs.m.Accept(tok); err != nil {
		return false, fmt.Errorf("engine: request %d: %w", s.id, err)
	}
	if !gs.m.CanEnd() {
		return false, nil
	}
	// Complete when only end-of-generation may follow (or nothing at all).
	if err := gs.m.Allowed(gs.mask); err != nil {
		return false, fmt.Errorf("engine: request %d: %w", s.id, err)
	}
	gs.fresh = true
	return slices.Equal(gs.mask, gs.eogOnly), nil
}
