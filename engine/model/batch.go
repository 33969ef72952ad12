package model

import (
	"fmt"

	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// Seq is one sequence's share of a batch: the tokens it feeds this step (a
// prefill chunk or a single decode token), starting at position
// Table.Written(). Forward writes their K/V through Table and then advances
// its written count; attention reads only positions the table has written.
type Seq struct {
	Tokens []int
	Table  *kvcache.PageTable
	Logits bool // compute logits for the last token of Tokens
	// Draft is how many trailing Tokens are tentative (speculative
	// decoding): their K/V is written to the table's reserved slots and
	// attention within the step reads it, but the table is not advanced
	// over them, so no later step can read them unless the caller advances
	// over those it accepted (PageTable.Advance) and rolls the rest back
	// (PageTable.Rollback). With Draft > 0, Logits must be set and
	// Batch.Logits[i] holds Draft+1 rows of logits, one per position of
	// the last Draft+1 tokens, back to back.
	Draft int

	// Hidden asks for the final-normed hidden state of every token of
	// Tokens (Batch.Hidden): what embeddings are pooled from.
	Hidden bool
}

// Batch is the input of one forward step. Forward fills Logits[i] for every
// Seqs[i] that asked for them, and Failed[i] for every sequence whose step
// completed but whose table could not be advanced; the slices stay valid
// until the next Forward on the same Runner.
type Batch struct {
	Seqs   []Seq
	Logits [][]float32
	// Hidden[i], for every Seqs[i] that asked, holds len(Tokens) rows of
	// Config.Dim values, row j the output-normed hidden state of token j.
	Hidden [][]float32
	// Failed[i] is the per-sequence outcome: non-nil when sequence i's
	// pages failed as its table advanced (a page sealed this step did not
	// match the checksum taken at an earlier handoff: its own page was
	// corrupted). Only that sequence failed; the others' results are good.
	// An error returned by Forward instead means the whole step failed.
	Failed []error
}

// Check validates the batch before any compute, the same for every runner:
// each sequence has a page table of its own, tokens in the vocabulary, and
// KV slots reserved for them. It returns the number of rows (tokens).
func (b *Batch) Check(vocab int) (int, error) {
	seen := make(map[*kvcache.PageTable]bool, len(b.Seqs))
	n := 0
	for i, s := range b.Seqs {
		if s.Table == nil {
			return 0, fmt.Errorf("model: batch sequence %d has no page table", i)
		}
		if seen[s.Table] {
			return 0, fmt.Errorf("model: page table of sequence %d appears twice in one batch", i)
		}
		seen[s.Table] = true
		if len(s.Tokens) == 0 {
			return 0, fmt.Errorf("model: batch sequence %d has no tokens", i)
		}
		if s.Draft < 0 || s.Draft >= len(s.Tokens) || (s.Draft > 0 && !s.Logits) {
			return 0, fmt.Errorf("model: batch sequence %d: %d draft tokens of %d (want 0..%d, with logits)", i, s.Draft, len(s.Tokens), len(s.Tokens)-1)
		}
		if end := s.Table.Written() + len(s.Tokens); end > s.Table.Reserved() {
			return 0, fmt.Errorf("model: sequence %d needs %d KV slots, %d reserved", i, end, s.Table.Reserved())
		}
		for _, t := range s.Tokens {
			if t < 0 || t >= vocab {
				return 0, fmt.Errorf("model: token %d outside the vocabulary of %d", t, vocab)
			}
		}
		n += len(s.Tokens)
	}
	if cap(b.Failed) < len(b.Seqs) {
		b.Failed = make([]error, len(b.Seqs))
	}
	b.Failed = b.Failed[:len(b.Seqs)]
	clear(b.Failed)
	return n, nil
}

// Advance marks every sequence's tokens written once the step is complete
// on the device, sealing the pages that filled; draft tokens stay
// unwritten (Seq.Draft). A sequence whose table fails to advance is
// recorded in Failed; it does not stop the others.
func (b *Batch) Advance() {
	for i, s := range b.Seqs {
		if err := s.Table.Advance(len(s.Tokens) - s.Draft); err != nil {
			b.Failed[i] = fmt.Errorf("model: advance: %w", err)
		}
	}
}

// LogitRows is how many rows of logits sequence s gets: 0 without Logits,
// else 1 plus its draft tokens.
func (s Seq) LogitRows() int {
	if !s.Logits {
		return 0
	}
	return 1 + s.Draft
}
