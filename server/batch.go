package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/kvwarden/kvwarden/engine"
)

// MaxBatchPrompts bounds the prompts of one /v1/completions request. Each
// is a request of its own in the engine (and counts against the tenant's
// quota and the queue), so a batch larger than those is refused there
// with 429 whatever this bound.
const MaxBatchPrompts = 128

// errBatchPeer aborts the other prompts of a batch when one fails: the
// answer is an error, so nobody would read their output.
var errBatchPeer = errors.New("another prompt of the batch failed")

// promptIn is one prompt of a completions request: text, or token IDs
// used as given (no BOS added).
type promptIn struct {
	text string
	ids  []int
}

// parsePrompts reads the completions prompt as OpenAI and llama-server
// accept it: a string, an array of token IDs, or an array of several
// strings or token arrays (a batch: one choice per prompt).
func parsePrompts(raw json.RawMessage) ([]promptIn, *apiError) {
	if isNull(raw) {
		return nil, badRequest("prompt", "missing_required_parameter", "prompt is required")
	}
	var out []promptIn
	var one string
	var ids []int
	var ss []string
	var idss [][]int
	switch {
	case json.Unmarshal(raw, &one) == nil:
		out = []promptIn{{text: one}}
	case json.Unmarshal(raw, &ids) == nil && len(ids) > 0:
		out = []promptIn{{ids: ids}}
	case json.Unmarshal(raw, &ss) == nil:
		for _, s := range ss {
			out = append(out, promptIn{text: s})
		}
	case json.Unmarshal(raw, &idss) == nil:
		for _, ids := range idss {
			out = append(out, promptIn{ids: ids})
		}
	default:
		return nil, badRequest("prompt", "invalid_type", "prompt must be a string, an array of token IDs, or an array of strings or of token ID arrays (a batch)")
	}
	switch {
	case len(out) == 0:
		return nil, badRequest("prompt", "empty_prompt", "prompt is an empty array")
	case len(out) > MaxBatchPrompts:
		return nil, badRequest("prompt", "invalid_value", "prompt holds %d prompts, at most %d", len(out), MaxBatchPrompts)
	}
	for i, p := range out {
		if p.text == "" && len(p.ids) == 0 {
			if len(out) == 1 {
				return nil, badRequest("prompt", "empty_prompt", "prompt is empty")
			}
			return nil, badRequest(fmt.Sprintf("prompt[%d]", i), "empty_prompt", "prompt[%d] is empty", i)
		}
	}
	return out, nil
}

// refuseOverQuota answers 429 and reports true when a batch of n prompts
// is larger than the tenant quota. A batch runs all its prompts at once,
// so such a batch can never be admitted whole: it is refused up front
// rather than depending on whether its first prompts end before its last
// are submitted.
func (s *Server) refuseOverQuota(w http.ResponseWriter, ep, tenant string, n int) bool {
	q := s.eng.Config().TenantQuota
	if q <= 0 || n <= q {
		return false
	}
	err := fmt.Errorf("%w: a batch of %d prompts needs %d requests in flight for tenant %q, quota is %d", engine.ErrQuotaExceeded, n, n, tenant, q)
	s.reject(w, ep, engineError(err, "prompt"))
	return true
}

// batchEvent is an event of prompt i's stream.
type batchEvent struct {
	i  int
	ev engine.Event
}

// generateBatch serves a completions request with several prompts: each
// is submitted as a request of its own (all or none: an admission failure
// of one aborts those already submitted), and the answer holds one choice
// per prompt, index i for prompt i, as OpenAI numbers them. Streamed, the
// choices' chunks interleave as their tokens come, each choice ends with
// its own finish_reason chunk, and usage (summed over the prompts) and
// "data: [DONE]" come after the last. first is the request of prompt 0
// (its tenant and sampling apply to all); more are the others.
func (s *Server) generateBatch(w http.ResponseWriter, r *http.Request, start time.Time, tenant string, first engine.Request, more []promptIn, p params, sh shaper) {
	const ep = "completions"
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	reqs := []engine.Request{first}
	for _, pr := range more {
		req := first
		req.Prompt, req.Tokens = pr.text, pr.ids
		reqs = append(reqs, req)
	}
	if s.refuseOverQuota(w, ep, tenant, len(reqs)) {
		return
	}
	streams := make([]*engine.Stream, 0, len(reqs))
	for i, req := range reqs {
		st, err := s.eng.Submit(ctx, req)
		if err == nil {
			streams = append(streams, st)
			continue
		}
		// All or none: the ones submitted are aborted (their context).
		cancel(errBatchPeer)
		for _, st := range streams {
			res := st.Wait()
			s.finish(ep, "abort", start, &res)
		}
		if errors.Is(err, engine.ErrAborted) {
			s.finish(ep, "abort", start, nil)
			s.answerAbort(w, r.Context(), false)
			return
		}
		e := engineError(err, fmt.Sprintf("prompt[%d]", i))
		if e.Code != nil && *e.Code == "internal_error" {
			s.log.Error("request failed at submission", "tenant", tenant, "endpoint", ep, "err", err)
		}
		s.reject(w, ep, e)
		return
	}
	s.met.InFlight.Inc()
	defer s.met.InFlight.Dec()
	sh.id = responseID(false)
	sh.created = start.Unix()
	log := s.log.With("id", sh.id, "tenant", tenant, "endpoint", ep, "prompts", len(streams))

	// One goroutine per stream feeds events; each ends when its stream
	// does, and evs is drained to the end, so none outlives the handler.
	evs := make(chan batchEvent, 16)
	for i, st := range streams {
		go func() {
			ended := false
			for ev := range st.Events() {
				ended = ended || ev.Done
				evs <- batchEvent{i, ev}
			}
			if !ended { // delivery gave up (see Stream.Events); the result is final
				evs <- batchEvent{i, engine.Event{Done: true}}
			}
		}()
	}
	var (
		wroteHead  bool
		writeErr   error
		flusher, _ = w.(http.Flusher)
		last       time.Time
		results    = make([]engine.Result, len(streams))
		failed     error
	)
	send := func(v any) {
		if writeErr != nil {
			return
		}
		b, _ := json.Marshal(v)
		if _, writeErr = fmt.Fprintf(w, "data: %s\n\n", b); writeErr == nil && flusher != nil {
			flusher.Flush()
		}
	}
	head := func() {
		if wroteHead {
			return
		}
		wroteHead = true
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
	}
	chunk := func(i int, text string, finish *string) any {
		return completionResponse{ID: sh.id, Object: "text_completion", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp,
			Choices: []completionChoice{{Text: text, Index: i, FinishReason: finish}}}
	}
	for left := len(streams); left > 0; {
		be := <-evs
		if !be.ev.Done {
			now := time.Now()
			if last.IsZero() {
				s.met.TTFT.Observe(now.Sub(start).Seconds())
			}
			last = now
			if p.stream && be.ev.Text != "" && failed == nil {
				head()
				send(chunk(be.i, be.ev.Text, nil))
			}
			continue
		}
		left--
		res := streams[be.i].Wait()
		results[be.i] = res
		outcome := res.FinishReason
		if res.Err != nil {
			outcome = "error"
			switch {
			case errors.Is(res.Err, engine.ErrIsolation):
				outcome = "isolation"
				log.Error("request failed an isolation check", "request", res.ID, "err", res.Err)
			case errors.Is(res.Err, engine.ErrAborted):
				outcome = "abort"
			default:
				log.Error("request failed", "request", res.ID, "err", res.Err)
			}
			if failed == nil {
				failed = res.Err
				cancel(errBatchPeer)
			}
		}
		s.finish(ep, outcome, start, &res)
		if p.stream && failed == nil {
			head()
			if be.ev.Text != "" {
				send(chunk(be.i, be.ev.Text, nil))
			}
			send(chunk(be.i, "", &res.FinishReason))
		}
	}
	log.Debug("batch done", "duration", time.Since(start))

	if failed != nil {
		if errors.Is(failed, engine.ErrAborted) {
			// Aborted from outside (the first failure cannot be a peer's
			// abort): the client left or the shutdown ran out.
			s.answerAbort(w, r.Context(), wroteHead)
			return
		}
		e := resultError(failed, sh.id)
		if !wroteHead {
			writeError(w, e)
			return
		}
		send(map[string]any{"error": e})
		return
	}
	var u usage
	u.PromptTokensDetails = &tokenDetails{}
	choices := make([]completionChoice, len(results))
	for i := range results {
		ru := usageOf(&results[i])
		u.PromptTokens += ru.PromptTokens
		u.CompletionTokens += ru.CompletionTokens
		u.PromptTokensDetails.CachedTokens += ru.PromptTokensDetails.CachedTokens
		choices[i] = completionChoice{Text: results[i].Text, Index: i, FinishReason: &results[i].FinishReason}
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	if !p.stream {
		writeJSON(w, http.StatusOK, completionResponse{ID: sh.id, Object: "text_completion", Created: sh.created, Model: sh.model,
			SystemFingerprint: sh.fp, Choices: choices, Usage: &u})
		return
	}
	head()
	if p.includeUsage {
		send(sh.usageChunk(u))
	}
	if writeErr == nil {
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
		if flusher != nil {
			flusher.Flush()
		}
	}
}
