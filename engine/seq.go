package engine

import (
	"time"

	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// seq is one admitted request inside the scheduler. Only the scheduler
// goroutine touches it after admission (the fields set by admit are
// read-only afterwards).
type seq struct {
	id        uint64
	tenant    string
	prompt    []int
	maxTokens int // clamped to MaxContext - len(prompt)
	params    sample.Params
	stops     []string
	keep      map[int][]byte // Request.KeepTokens: id -> its text
	submitted time.Time

	state State
	// tokens is the whole context: prompt, then generated tokens. The K/V
	// of tokens[:fed] is in table; the next step feeds tokens[fed:] (a
	// prefill chunk, or in decode the one token sampled last).
	tokens []int
	fed    int
	table  *kvcache.PageTable
	// swapped holds the K/V while preempted to the host tier.
	swapped *kvcache.Swapped
	// swapping is the swap-out in flight: it holds the device pages (each
	// under a copy lease) until every copy has completed; the scheduler
	// finishes it (pollSwaps) on a later step, and only then is swapped set.
	swapping *kvcache.PendingSwap
	// restoring is the swap-in in flight, into restoreTable, which gets
	// the pages only once every copy completed and was verified.
	restoring    *kvcache.PendingRestore
	restoreTable *kvcache.PageTable

	abortErr error  // abort requested (the cause): set once, takes effect at a step boundary
	err      error  // failed
	reason   string // finish reason once finished

	sampler *sample.Sampler
	text    *textStream
	stream  *Stream

	// Log-probabilities and logits (logprobs.go): what the request asked
	// for, the raw logits of the step being sampled, the record of the
	// token sampled last until emit takes it, and what the Result reports.
	lp         logprobOpts
	lpRaw      []float32
	lpPending  TokenLogprobs
	logprobs   []TokenLogprobs
	lastLogits []float32
	// promptLP[i-1] is the record of prompt token i (Request.PromptLogprobs);
	// promptNext is the next prompt position to record.
	promptLP   []TokenLogprobs
	promptNext int

	// grammar constrains the tokens s may generate (Request.Grammar).
	grammar *grammarState

	// Speculative decoding (spec.go): its state (nil = off) and the draft
	// fed this step.
	spec  *specSeq
	draft []int

	// emb makes s an embedding input (embed.go): prefill only, never
	// given or offered prefix-cache pages.
	emb *embedJob

	everScheduled bool
	recomputes    int // times recomputed after meeting corrupted K/V
	cached        int // prompt tokens served from the prefix cache at first admission
	generated     int

	// redo is how many leading tokens had K/V that forget dropped: those
	// computed again count as recomputed (RecomputedTokens), those the
	// prefix cache gives back do not.
	redo int

	// Prefix cache bookkeeping: hashes[i] is the chain hash of ctx up to
	// the end of page i; pages below offered were already considered.
	hashes  []uint64
	offered int
	// prefixTail is the prefix-cache entry of page offered-1, holding
	// exactly s's tokens (nil before the first page; brokenChain once a
	// page could not be cached): the parent of the next page offered.
	prefixTail *prefixEntry
	// prefixWaits counts the steps in a row s waited to be placed for a
	// spill copy on the way to its prefix (maxPrefixWaits).
	prefixWaits     int
	hostHitsWaiting int // host hits of the attempts that waited
	// diskRead is the disk tier read its prefix lookup waits for
	// (prefix_disk.go), or nil.
	diskRead *diskRead

	firstSched, firstTok, lastTok time.Time
}

// runnable is THE predicate (invariant 2): every queue asks it before a
// sequence may be scheduled, restored, prefilled or decoded, and nothing
// re-implements it. A request that was rejected never becomes a seq; one
// that is aborted, failed or finished is not runnable, whatever queue
// still lists it.
func (s *seq) runnable() bool {
	switch s.state {
	case StateWaiting, StatePrefilling, StateDecoding, StateSwapped:
	default:
		return false
	}
	return s.abortErr == nil && s.err == nil
}

// generatedTokens is the tokens sampled so far.
func (s *seq) generatedTokens() []int {
	return s.tokens[len(s.prompt):]
}
