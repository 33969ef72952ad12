package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

// Embedding errors. Each wraps ErrInvalidParams (a 400 at the server), and
// a *FieldError names the request field at fault.
var (
	// ErrNoPooling: the model declares no pooling type (a generative
	// model) and the request did not ask for one. Such a model's hidden
	// states are not trained as embeddings; a caller who wants them anyway
	// says how to pool them.
	ErrNoPooling = fmt.Errorf("%w: the model declares no pooling type (a generative model); ask for a pooling explicitly to embed with it", ErrInvalidParams)
	// ErrDimensions: EmbedRequest.Dimensions is larger than the model's
	// embedding width (or negative).
	ErrDimensions = fmt.Errorf("%w: dimensions", ErrInvalidParams)
	// ErrNoRankHead: rerank needs a model with a classification head
	// (pooling rank); the request's model has none.
	ErrNoRankHead = fmt.Errorf("%w: the model has no classification head (pooling rank) to rerank with", ErrInvalidParams)
)

// FieldError names the request field (as the HTTP API spells it: "input",
// "dimensions", "pooling", "documents", "query") and, for a list, the
// element an error is about (Index -1 when not a list element).
type FieldError struct {
	Field string
	Index int
	Err   error
}

func (e *FieldError) Error() string {
	if e.Index >= 0 {
		return fmt.Sprintf("%s[%d]: %v", e.Field, e.Index, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Field, e.Err)
}

func (e *FieldError) Unwrap() error { return e.Err }

// EmbedRequest asks for the embeddings of one or more inputs. Each input
// is one request of the engine: it goes through admission (tenant quota,
// queue), the scheduler's batches and the page pool like a generation
// request, and its pages are released (and scrubbed under ZeroOnRelease)
// when it ends. Its pages are never taken from or given to the prefix
// cache: every token's hidden state is computed, by the same kernels
// whatever else shares the step, so an input's vector does not depend on
// the batch it ran in.
type EmbedRequest struct {
	Inputs []string // texts (BOS and EOS as the vocabulary wants them); or
	Tokens [][]int  // token arrays, used as given
	// Tenant scopes quotas (see Request.Tenant).
	Tenant string
	// Pooling overrides the model's <arch>.pooling_type; PoolingUnset
	// (the zero value) takes the model's. A model without one is refused
	// (ErrNoPooling) unless Pooling is set.
	Pooling model.Pooling
	// NoNormalize returns the pooled vectors as they are; by default they
	// are scaled to unit L2 norm, as llama-server does.
	NoNormalize bool
	// Dimensions, when not 0, keeps the first Dimensions values of each
	// vector (Matryoshka truncation), then normalizes (unless
	// NoNormalize). More than the model's width is ErrDimensions.
	Dimensions int
	// Truncate cuts an input longer than the engine takes (MaxContext, or
	// for a non-causal model MaxBatchTokens) to its first tokens, keeping
	// the vocabulary's EOS at the end; without it such an input is refused
	// with ErrPromptTooLong.
	Truncate bool
}

// Embedding is the result of one input.
type Embedding struct {
	Index int // position in EmbedRequest.Inputs / Tokens
	// Vector is the pooled embedding; with PoolingNone it is nil and
	// PerToken has one vector per token.
	Vector   []float32
	PerToken [][]float32
	Tokens   int // tokens the input was (after truncation)
}

// EmbedResult holds one Embedding per input, in input order.
type EmbedResult struct {
	Data         []Embedding
	Pooling      model.Pooling // the pooling applied
	PromptTokens int           // all inputs' tokens
}

// embedJob is one input's embedding work: built by Embed, filled by the
// scheduler (take and done, on its goroutine), read by Embed once the
// request's stream has finished.
type embedJob struct {
	text     string
	tokens   []int
	truncate bool
	pooling  model.Pooling
	dim      int // model width
	keep     int // dimensions kept
	norm     bool
	whole    bool // non-causal: the input must run in one step
	// head is the classification head of pooling rank (RankScores);
	// rankLast pools the last token for it (Qwen3), else the first.
	head     func([]float32) ([]float32, error)
	rankLast bool

	n        int
	sum      []float64 // mean: rows summed so far, in token order
	vec      []float32 // cls, last: the chosen row
	perToken []float32 // none: every row
	out      Embedding
}

// Embed computes the embeddings of req's inputs. The inputs are submitted
// as separate requests (at most TenantQuota at once when a quota is set),
// batched by the scheduler with whatever else runs; the first error ends
// the call and aborts the inputs still running.
func (e *Engine) Embed(ctx context.Context, req EmbedRequest) (EmbedResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	jobs, pool, err := e.embedJobs(req)
	if err != nil {
		return EmbedResult{}, err
	}
	n := len(jobs)
	if err := e.runJobs(ctx, req.Tenant, jobs, "input"); err != nil {
		return EmbedResult{}, err
	}
	res := EmbedResult{Data: make([]Embedding, n), Pooling: pool}
	for i, j := range jobs {
		res.Data[i] = j.out
		res.Data[i].Index = i
		res.PromptTokens += j.out.Tokens
	}
	return res, nil
}

// embedJobs validates req and makes one job per input.
func (e *Engine) embedJobs(req EmbedRequest) ([]*embedJob, model.Pooling, error) {
	pool, err := e.embedPooling(req.Pooling)
	if err != nil {
		return nil, 0, err
	}
	if pool == model.PoolingRank {
		return nil, 0, &FieldError{Field: "pooling", Index: -1, Err: fmt.Errorf("%w: pooling rank scores query/document pairs; use Rerank", ErrInvalidParams)}
	}
	dim := e.mcfg.Dim
	keep := dim
	switch {
	case req.Dimensions < 0:
		return nil, 0, &FieldError{Field: "dimensions", Index: -1, Err: fmt.Errorf("%w: %d is negative", ErrDimensions, req.Dimensions)}
	case req.Dimensions > dim:
		return nil, 0, &FieldError{Field: "dimensions", Index: -1, Err: fmt.Errorf("%w: %d is more than the model's %d", ErrDimensions, req.Dimensions, dim)}
	case req.Dimensions > 0:
		keep = req.Dimensions
	}
	if len(req.Inputs) > 0 && len(req.Tokens) > 0 {
		return nil, 0, &FieldError{Field: "input", Index: -1, Err: fmt.Errorf("%w: give texts or token arrays, not both", ErrInvalidParams)}
	}
	n := max(len(req.Inputs), len(req.Tokens))
	if n == 0 {
		return nil, 0, &FieldError{Field: "input", Index: -1, Err: fmt.Errorf("%w: no inputs", ErrEmptyPrompt)}
	}
	jobs := make([]*embedJob, n)
	for i := range jobs {
		j := &embedJob{truncate: req.Truncate, pooling: pool, dim: dim, keep: keep, norm: !req.NoNormalize, whole: e.mcfg.NonCausal}
		if len(req.Inputs) > 0 {
			if req.Inputs[i] == "" {
				return nil, 0, &FieldError{Field: "input", Index: i, Err: fmt.Errorf("%w: empty string", ErrEmptyPrompt)}
			}
			j.text = req.Inputs[i]
		} else {
			if len(req.Tokens[i]) == 0 {
				return nil, 0, &FieldError{Field: "input", Index: i, Err: fmt.Errorf("%w: empty token array", ErrEmptyPrompt)}
			}
			j.tokens = req.Tokens[i]
		}
		jobs[i] = j
	}
	return jobs, pool, nil
}

// runJobs submits one request per job (at most TenantQuota at once when a
// quota is set) and waits for all; the first error (an input's own, before
// the aborts it causes) is returned, a *FieldError on field.
func (e *Engine) runJobs(ctx context.Context, tenant string, jobs []*embedJob, field string) error {
	n := len(jobs)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	window := n
	if q := e.cfg.TenantQuota; q > 0 {
		window = min(n, q)
	}
	sem := make(chan struct{}, window)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = fmt.Errorf("%w: %w", ErrAborted, context.Cause(ctx))
				return
			}
			defer func() { <-sem }()
			if err := e.runEmbed(ctx, tenant, jobs[i]); err != nil {
				var fe *FieldError
				if !errors.As(err, &fe) && !errors.Is(err, ErrAborted) {
					err = &FieldError{Field: field, Index: i, Err: err}
				}
				errs[i] = err
				cancel() // the others end with ErrAborted
			}
		})
	}
	wg.Wait()
	// The error to report is the first that is not an abort this call
	// caused (an input's own failure), else the abort.
	var first error
	for _, err := range errs {
		if err != nil && !errors.Is(err, ErrAborted) {
			first = err
			break
		}
	}
	if first == nil {
		for _, err := range errs {
			if err != nil {
				first = err
				break
			}
		}
	}
	if first != nil {
		return first
	}
	return nil
}

// embedPooling resolves the pooling of a request: its own, else the
// model's, else ErrNoPooling.
func (e *Engine) embedPooling(p model.Pooling) (model.Pooling, error) {
	if p < model.PoolingUnset || p > model.PoolingRank {
		return 0, &FieldError{Field: "pooling", Index: -1, Err: fmt.Errorf("%w: unknown pooling %d", ErrInvalidParams, int(p))}
	}
	if p != model.PoolingUnset {
		return p, nil
	}
	if e.mcfg.Pooling == model.PoolingUnset {
		return 0, &FieldError{Field: "model", Index: -1, Err: ErrNoPooling}
	}
	return e.mcfg.Pooling, nil
}

// runEmbed runs one input through Submit and waits for it.
func (e *Engine) runEmbed(ctx context.Context, tenant string, j *embedJob) error {
	// &Speculative{} keeps speculation off: an input is prefilled, never decoded.
	st, err := e.Submit(ctx, Request{Tenant: tenant, embed: j, Speculative: &Speculative{}})
	if err != nil {
		return err
	}
	r := st.Wait()
	return r.Err
}

// buildEmbed is build for an embedding input: no tokens are generated, so
// the input may fill MaxContext (for a non-causal model, one step:
// MaxBatchTokens); EOS is appended when the vocabulary wants it (as
// llama.cpp's tokenizer does with add_special), and an input too long is
// refused unless the request asked to truncate it.
func (e *Engine) buildEmbed(ctx context.Context, req Request) (*seq, string, error) {
	j := req.embed
	prompt, reject, err := e.embedPrompt(ctx, j)
	if err != nil {
		return nil, reject, err
	}
	s := &seq{tenant: req.Tenant, prompt: prompt, state: StateWaiting, submitted: time.Now(), emb: j}
	s.tokens = append([]int(nil), prompt...)
	j.n = len(prompt)
	return s, "", nil
}

// embedPrompt is an input's tokens as buildEmbed runs them (a rejection's
// reason with the error).
func (e *Engine) embedPrompt(ctx context.Context, j *embedJob) ([]int, string, error) {
	limit := e.cfg.MaxContext
	if j.whole {
		limit = min(limit, e.cfg.MaxBatchTokens)
	}
	tooLong := func(n int, atLeast bool) ([]int, string, error) {
		return nil, RejectPromptTooLong, &PromptTooLongError{Requested: n, Limit: limit, Prompt: n, AtLeast: atLeast}
	}
	// The token that ends an input: BERT's separator [SEP], else EOS when
	// the vocabulary adds it (Qwen3-Embedding's <|endoftext|>).
	eos := -1
	if sp, ok := e.tok.(interface{ Sep() int }); ok && sp.Sep() >= 0 {
		eos = sp.Sep()
	} else if e.tok.AddEOS() {
		eos = e.tok.EOS()
	}
	var prompt []int
	if j.tokens != nil {
		for i, t := range j.tokens {
			if t < 0 || t >= e.mcfg.Vocab {
				return nil, RejectInvalidParams, fmt.Errorf("%w: token %d at position %d is outside the vocabulary of %d", ErrInvalidParams, t, i, e.mcfg.Vocab)
			}
		}
		prompt = append([]int(nil), j.tokens...)
	} else {
		if n := tokenizer.MinTokens(e.tok, j.text); n > limit && !j.truncate {
			return tooLong(n, true)
		}
		release, err := e.tokGateFor(len(j.text)).acquire(ctx, int64(len(j.text)))
		if err != nil {
			return nil, "", fmt.Errorf("%w: while waiting to tokenize the input: %w", ErrAborted, err)
		}
		tokLimit := -1
		if !j.truncate {
			tokLimit = limit
		}
		ids, err := e.encodePromptLimit(j.text, true, false, tokLimit)
		release()
		if le := (*tokenizer.LimitError)(nil); errors.As(err, &le) {
			return tooLong(le.AtLeast, true)
		}
		if err != nil {
			return nil, RejectInvalidParams, fmt.Errorf("%w: tokenizing the input: %w", ErrInvalidParams, err)
		}
		if eos >= 0 && (len(ids) == 0 || ids[len(ids)-1] != eos) {
			ids = append(ids, eos)
		}
		prompt = ids
	}
	if len(prompt) == 0 {
		return nil, RejectEmptyPrompt, fmt.Errorf("%w: the input tokenizes to nothing", ErrEmptyPrompt)
	}
	if len(prompt) > limit {
		if !j.truncate {
			return tooLong(len(prompt), false)
		}
		end := prompt[len(prompt)-1]
		prompt = prompt[:limit]
		if j.text != "" && end == eos {
			prompt[limit-1] = eos
		}
	}
	return prompt, "", nil
}

// take records the hidden states of the rows a step computed for s,
// positions before..before+len(rows)/dim. A recomputed input starts again
// at position 0 and overwrites what it had.
func (j *embedJob) take(before int, rows []float32) error {
	if len(rows)%j.dim != 0 {
		return fmt.Errorf("engine: hidden states of %d values are not rows of %d", len(rows), j.dim)
	}
	m := len(rows) / j.dim
	switch j.pooling {
	case model.PoolingNone:
		if j.perToken == nil {
			j.perToken = make([]float32, j.n*j.dim)
		}
		copy(j.perToken[before*j.dim:], rows)
	case model.PoolingMean:
		if before == 0 || j.sum == nil {
			j.sum = make([]float64, j.dim)
		}
		// Row by row in token order: the same additions whatever the
		// chunking of the input into steps.
		for r := range m {
			for k, v := range rows[r*j.dim : (r+1)*j.dim] {
				j.sum[k] += float64(v)
			}
		}
	case model.PoolingCLS, model.PoolingRank:
		if j.pooling == model.PoolingRank && j.rankLast {
			if before+m == j.n {
				j.vec = append(j.vec[:0], rows[(m-1)*j.dim:]...)
			}
		} else if before == 0 {
			j.vec = append(j.vec[:0], rows[:j.dim]...)
		}
	case model.PoolingLast:
		if before+m == j.n {
			j.vec = append(j.vec[:0], rows[(m-1)*j.dim:]...)
		}
	default:
		return fmt.Errorf("engine: pooling %v is not an embedding pooling", j.pooling)
	}
	return nil
}

// done pools what take recorded into j.out.
func (j *embedJob) done() error {
	j.out.Tokens = j.n
	switch j.pooling {
	case model.PoolingNone:
		if len(j.perToken) != j.n*j.dim {
			return fmt.Errorf("engine: embedding has %d of %d token rows", len(j.perToken)/j.dim, j.n)
		}
		j.out.PerToken = make([][]float32, j.n)
		for t := range j.n {
			j.out.PerToken[t] = finishVector(j.perToken[t*j.dim:(t+1)*j.dim], j.keep, j.norm)
		}
		return nil
	case model.PoolingMean:
		if j.sum == nil {
			return errors.New("engine: mean pooling saw no rows")
		}
		v := make([]float32, j.dim)
		for k, s := range j.sum {
			v[k] = float32(s / float64(j.n))
		}
		j.out.Vector = finishVector(v, j.keep, j.norm)
	case model.PoolingRank:
		if len(j.vec) != j.dim || j.head == nil {
			return errors.New("engine: rank pooling saw no row")
		}
		scores, err := j.head(j.vec)
		if err != nil {
			return err
		}
		j.out.Vector = scores
	default:
		if len(j.vec) != j.dim {
			return fmt.Errorf("engine: %v pooling saw no row", j.pooling)
		}
		j.out.Vector = finishVector(j.vec, j.keep, j.norm)
	}
	return nil
}

// finishVector keeps the first keep values of v (Matryoshka truncation)
// and scales them to unit L2 norm when norm is set, accumulating in
// float64. A zero vector stays zero.
func finishVector(v []float32, keep int, norm bool) []float32 {
	out := append([]float32(nil), v[:keep]...)
	if !norm {
		return out
	}
	var ss float64
	for _, x := range out {
		ss += float64(x) * float64(x)
	}
	if ss == 0 {
		return out
	}
	inv := 1 / math.Sqrt(ss)
	for k, x := range out {
		out[k] = float32(float64(x) * inv)
	}
	return out
}

// takeHidden hands the hidden states step b computed for member i (s) to
// its embedding job.
func (sc *scheduler) takeHidden(s *seq, b *model.Batch, i, before int) error {
	if i >= len(b.Hidden) || b.Hidden[i] == nil {
		return fmt.Errorf("%w: the %s forward pass does not produce hidden states for embeddings", ErrUnsupported, sc.e.backend)
	}
	return s.emb.take(before, b.Hidden[i])
}

// finishEmbed pools s's embedding once its whole input has been computed,
// and finishes it ("stop") or fails it.
func (sc *scheduler) finishEmbed(s *seq, now time.Time) {
	if err := s.emb.done(); err != nil {
		sc.fail(s, err)
		return
	}
	s.firstTok, s.lastTok = now, now
	sc.finish(s, "stop")
}

// RerankRequest scores documents against a query with a cross-encoder
// (a model with pooling rank and a classification head), each
// query/document pair one request of the engine as in Embed.
type RerankRequest struct {
	Query     string
	Documents []string
	Tenant    string
	// TopN keeps the best TopN results (0: all).
	TopN int
	// Truncate cuts a pair longer than the engine takes (see
	// EmbedRequest.Truncate) instead of refusing it.
	Truncate bool
}

// RerankScore is one document's relevance: the classification head's
// first output (a logit, as llama-server reports it).
type RerankScore struct {
	Index int // position in RerankRequest.Documents
	Score float32
}

// RerankResult holds the scores, best first (ties by index).
type RerankResult struct {
	Results      []RerankScore
	PromptTokens int
}

// Rerank scores each document against the query. The pair is tokenized as
// llama-server does: with the file's rerank template
// (tokenizer.chat_template.rerank, Qwen3-Reranker) its text with {query}
// and {document} replaced, special tokens parsed and no BOS added; else
// [BOS] query [EOS] [SEP] document [EOS], with BOS, EOS and SEP where the
// vocabulary adds them (BERT: [CLS] query [SEP] document).
func (e *Engine) Rerank(ctx context.Context, req RerankRequest) (RerankResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if e.mcfg.Pooling != model.PoolingRank || e.weights.Rank == nil {
		return RerankResult{}, &FieldError{Field: "model", Index: -1, Err: ErrNoRankHead}
	}
	if req.Query == "" {
		return RerankResult{}, &FieldError{Field: "query", Index: -1, Err: fmt.Errorf("%w: empty query", ErrEmptyPrompt)}
	}
	if len(req.Documents) == 0 {
		return RerankResult{}, &FieldError{Field: "documents", Index: -1, Err: fmt.Errorf("%w: no documents", ErrEmptyPrompt)}
	}
	if req.TopN < 0 {
		return RerankResult{}, &FieldError{Field: "top_n", Index: -1, Err: fmt.Errorf("%w: top_n %d is negative", ErrInvalidParams, req.TopN)}
	}
	q, err := e.encodePrompt(req.Query, false, false)
	if err != nil {
		return RerankResult{}, &FieldError{Field: "query", Index: -1, Err: fmt.Errorf("%w: tokenizing: %w", ErrInvalidParams, err)}
	}
	sep := -1
	if sp, ok := e.tok.(interface{ Sep() int }); ok {
		sep = sp.Sep()
	}
	eos := -1
	if e.tok.AddEOS() {
		eos = e.tok.EOS()
	}
	tmpl, hasTmpl := e.weights.ChatTemplates["rerank"]
	jobs := make([]*embedJob, len(req.Documents))
	for i, doc := range req.Documents {
		if doc == "" {
			return RerankResult{}, &FieldError{Field: "documents", Index: i, Err: fmt.Errorf("%w: empty document", ErrEmptyPrompt)}
		}
		job := &embedJob{truncate: req.Truncate, pooling: model.PoolingRank, dim: e.mcfg.Dim, keep: e.mcfg.Dim,
			whole: e.mcfg.NonCausal, head: e.weights.RankScores, rankLast: e.weights.Rank.Last}
		jobs[i] = job
		if hasTmpl {
			text := strings.NewReplacer("{query}", req.Query, "{document}", doc).Replace(tmpl)
			if job.tokens, err = e.encodePrompt(text, false, true); err != nil {
				return RerankResult{}, &FieldError{Field: "documents", Index: i, Err: fmt.Errorf("%w: tokenizing: %w", ErrInvalidParams, err)}
			}
			continue
		}
		d, err := e.encodePrompt(doc, false, false)
		if err != nil {
			return RerankResult{}, &FieldError{Field: "documents", Index: i, Err: fmt.Errorf("%w: tokenizing: %w", ErrInvalidParams, err)}
		}
		var toks []int
		if b := e.tok.BOS(); b >= 0 && e.tok.AddBOS() {
			toks = append(toks, b)
		}
		toks = append(toks, q...)
		if eos >= 0 {
			toks = append(toks, eos)
		}
		if sep >= 0 {
			toks = append(toks, sep)
		}
		toks = append(toks, d...)
		if eos >= 0 {
			toks = append(toks, eos)
		}
		job.tokens = toks
	}
	if err := e.runJobs(ctx, req.Tenant, jobs, "documents"); err != nil {
		return RerankResult{}, err
	}
	res := RerankResult{Results: make([]RerankScore, len(jobs))}
	for i, j := range jobs {
		res.Results[i] = RerankScore{Index: i, Score: j.out.Vector[0]}
		res.PromptTokens += j.out.Tokens
	}
	slices.SortStableFunc(res.Results, func(a, b RerankScore) int { return cmp.Compare(b.Score, a.Score) })
	if req.TopN > 0 && req.TopN < len(res.Results) {
		res.Results = res.Results[:req.TopN]
	}
	return res, nil
}
