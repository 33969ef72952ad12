package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/sample"
)

// MaxChoices bounds n (OpenAI's limit).
const MaxChoices = 128

// choices are the request options generateChoices serves: several
// choices, log-probabilities, echo, and the OpenAI penalties and bias
// (which the plain path passes on too).
type choices struct {
	n           int // choices; 1 unless given
	presence    float32
	frequency   float32
	logitBias   map[int]float32
	logprobs    bool // per-token log-probabilities in the response
	topLogprobs int  // alternatives per token
	echo        bool // completions: the prompt prepended (with logprobs: its tokens' too)
}

// multi reports whether the request needs generateChoices.
func (p params) multi() bool { return p.n > 1 || p.logprobs || p.echo }

// choiceParams reads n, presence_penalty, frequency_penalty and
// logit_bias (OpenAI's ranges).
func (s *sampling) choiceParams(p *params) *apiError {
	p.n = 1
	if s.N != nil {
		if *s.N < 1 || *s.N > MaxChoices {
			return badRequest("n", "invalid_value", "n must be in [1, %d], got %d", MaxChoices, *s.N)
		}
		p.n = int(*s.N)
	}
	for _, f := range []struct {
		name string
		v    *float64
		dst  *float32
	}{{"presence_penalty", s.PresencePenalty, &p.presence}, {"frequency_penalty", s.FrequencyPenalty, &p.frequency}} {
		if f.v == nil {
			continue
		}
		if v := *f.v; math.IsNaN(v) || v < -sample.MaxPenalty || v > sample.MaxPenalty {
			return badRequest(f.name, "invalid_value", "%s must be in [-2, 2], got %v", f.name, v)
		}
		*f.dst = float32(*f.v)
	}
	if len(s.LogitBias) > sample.MaxLogitBiasEntries {
		return badRequest("logit_bias", "invalid_value", "logit_bias has %d entries, at most %d", len(s.LogitBias), sample.MaxLogitBiasEntries)
	}
	for k, v := range s.LogitBias {
		id, err := strconv.Atoi(strings.TrimSpace(k))
		if err != nil || id < 0 {
			return badRequest("logit_bias", "invalid_value", "logit_bias: key %q is not a token ID (a non-negative integer)", k)
		}
		b, ok := v.(float64)
		if !ok || math.IsNaN(b) || b < -sample.MaxLogitBias || b > sample.MaxLogitBias {
			return badRequest("logit_bias", "invalid_value", "logit_bias[%q] must be a number in [-100, 100], got %v", k, jsonText(v))
		}
		if p.logitBias == nil {
			p.logitBias = map[int]float32{}
		}
		p.logitBias[id] = float32(b)
	}
	return nil
}

// checkBiasVocab refuses logit_bias entries outside the vocabulary with a
// 400 that names the parameter (the engine would refuse them too).
func (s *Server) checkBiasVocab(p params) *apiError {
	vocab := s.eng.ModelConfig().Vocab
	for id := range p.logitBias {
		if id >= vocab {
			return badRequest("logit_bias", "invalid_value", "logit_bias: token %d is outside the model's vocabulary of %d", id, vocab)
		}
	}
	return nil
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// logprobParams reads the completions endpoint's logprobs (an integer:
// how many alternatives, 0 to MaxTopLogprobs; null or false: none) and
// echo.
func (r *completionRequest) logprobParams(p *params) *apiError {
	p.echo = r.Echo
	if !isNull(r.TopLogprobs) && strings.TrimSpace(string(r.TopLogprobs)) != "0" {
		return badRequest("top_logprobs", "invalid_value", "top_logprobs is a chat completions parameter; /v1/completions takes logprobs: N")
	}
	if isNull(r.Logprobs) || string(r.Logprobs) == "false" {
		return nil
	}
	var n jsonInt
	if err := json.Unmarshal(r.Logprobs, &n); err != nil || n < 0 || n > engine.MaxTopLogprobs {
		return badRequest("logprobs", "invalid_value", "logprobs must be an integer in [0, %d] (alternatives per token), got %s",
			engine.MaxTopLogprobs, strings.TrimSpace(string(r.Logprobs)))
	}
	p.logprobs, p.topLogprobs = true, int(n)
	return nil
}

// logprobParams reads the chat endpoint's logprobs (a boolean) and
// top_logprobs (0 to MaxTopLogprobs, which needs logprobs: true).
func (r *chatRequest) logprobParams(p *params) *apiError {
	p.logprobs = r.Logprobs != nil && *r.Logprobs
	if isNull(r.TopLogprobs) {
		return nil
	}
	var n jsonInt
	if err := json.Unmarshal(r.TopLogprobs, &n); err != nil || n < 0 || n > engine.MaxTopLogprobs {
		return badRequest("top_logprobs", "invalid_value", "top_logprobs must be an integer in [0, %d], got %s",
			engine.MaxTopLogprobs, strings.TrimSpace(string(r.TopLogprobs)))
	}
	if n > 0 && !p.logprobs {
		return badRequest("top_logprobs", "invalid_value", "top_logprobs needs logprobs: true")
	}
	p.topLogprobs = int(n)
	return nil
}

// choiceEvent is an event of choice i.
type choiceEvent struct {
	i  int
	ev engine.Event
}

// choice is the state of one choice while it streams.
type choice struct {
	st      *engine.Stream
	prev    int            // the token before the next one (for its text)
	pending []engine.Event // tokens whose text has not been sent yet
	lp      tokenLogprobs  // every token's, for a non-streamed answer
	res     engine.Result  // once its Done event arrived
	opened  bool           // its first chunk was sent
	runes   int            // code points sent so far (text_offset)
	// post parses this choice's chat output into reasoning_content,
	// content and tool_calls (tools.go); nil: text as it is.
	post *chatPost
	// lpHeld are token records not sent yet: their text is markup the
	// parser holds back; they go with the choice's next chunk.
	lpHeld tokenLogprobs
}

// generateChoices serves what generate leaves to it: n > 1 choices from
// one prompt, log-probabilities, echo; and a completions batch (prompt 0
// in req, the others in more) that asks for any of them. Choice j of
// prompt g has index g*n + j, as OpenAI numbers them. Each prompt's choice
// 0 is submitted first; its other choices only once it has produced its
// first token (or ended), so that they find the prompt's full pages in the
// prefix cache, which is scoped to the request's own tenant: the choices
// share the prompt's KV, never another tenant's (ISOLATION.md, invariant
// 9). Choice j has a seed of its own: the request's seed plus j when it
// gives one (so a prompt's choices do not depend on the batch around it).
//
// A stream sends one chunk per token (per complete UTF-8 character when a
// token ends inside one), each naming its choice's index; each choice ends
// with its own finish_reason chunk.
func (s *Server) generateChoices(w http.ResponseWriter, r *http.Request, start time.Time, ep, tenant string, req engine.Request, more []promptIn,
	p params, sh shaper) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	prompts := append([]engine.Request{req}, make([]engine.Request, len(more))...)
	for g, pr := range more {
		prompts[g+1] = req
		prompts[g+1].Prompt, prompts[g+1].Tokens = pr.text, pr.ids
	}
	if s.refuseOverQuota(w, ep, tenant, len(prompts)) {
		return
	}
	promptParam := func(g int) string {
		switch {
		case sh.chat:
			return "messages"
		case len(prompts) > 1:
			return fmt.Sprintf("prompt[%d]", g)
		}
		return "prompt"
	}
	echo := make([]string, len(prompts)) // per prompt
	if p.echo {
		for g, pr := range prompts {
			if echo[g] = pr.Prompt; echo[g] == "" {
				echo[g] = s.decode(-1, pr.Tokens)
			}
		}
	}
	reqFor := func(k int) engine.Request {
		ri := prompts[k/p.n]
		ri.Logprobs, ri.TopLogprobs = p.logprobs, p.topLogprobs
		// A prompt's logprobs are the same for each of its choices: its
		// choice 0 computes them.
		ri.PromptLogprobs = k%p.n == 0 && p.echo && p.logprobs
		if p.seed != nil {
			ri.Sampling.Seed = *p.seed + uint64(k%p.n)
		}
		return ri
	}

	cs := make([]*choice, len(prompts)*p.n)
	merged := make(chan choiceEvent)
	live := 0
	// submit starts choice k; a nil error with gone set means the client
	// went away meanwhile (nobody to answer).
	submit := func(k int) (e *apiError, gone bool) {
		st, err := s.eng.Submit(ctx, reqFor(k))
		if err != nil {
			if errors.Is(err, engine.ErrAborted) {
				return nil, true
			}
			e := engineError(err, promptParam(k/p.n))
			if e.Code != nil && *e.Code == "internal_error" {
				s.log.Error("request failed at submission", "tenant", tenant, "endpoint", ep, "choice", k, "err", err)
			}
			return e, false
		}
		pt := st.PromptTokens()
		c := &choice{st: st, prev: -1, post: sh.post.again()}
		if len(pt) > 0 {
			c.prev = pt[len(pt)-1]
		}
		cs[k] = c
		live++
		go func() {
			ended := false
			for ev := range st.Events() {
				ended = ended || ev.Done
				merged <- choiceEvent{k, ev}
			}
			if !ended { // delivery gave up (see Stream.Events); the result is final
				merged <- choiceEvent{k, engine.Event{Token: -1, Done: true}}
			}
		}()
		return nil, false
	}
	// drain ends every submitted choice and waits for them.
	drain := func(cause error) {
		cancel(cause)
		for live > 0 {
			if ce := <-merged; ce.ev.Done {
				live--
			}
		}
	}
	// startAll submits the choices [from, to); on failure it ends those
	// already running and answers.
	startAll := func(from, to int) bool {
		for k := from; k < to; k++ {
			e, gone := submit(k)
			if e == nil && !gone {
				continue
			}
			drain(fmt.Errorf("%w: choice %d could not start", engine.ErrAborted, k))
			if gone {
				s.finish(ep, "abort", start, nil)
				s.answerAbort(w, r.Context(), false)
			} else {
				s.reject(w, ep, e)
			}
			return false
		}
		return true
	}
	// Every prompt's first choice at once (a batch is all or none).
	for g := range prompts {
		if !startAll(g*p.n, g*p.n+1) {
			return
		}
	}
	s.met.InFlight.Inc()
	defer s.met.InFlight.Dec()
	sh.id = responseID(sh.chat)
	sh.created = start.Unix()
	log := s.log.With("id", sh.id, "request", cs[0].st.ID(), "tenant", tenant, "endpoint", ep, "n", p.n, "prompts", len(prompts))

	out := &sseWriter{w: w}
	out.flusher, _ = w.(http.Flusher)
	var first, last time.Time
	promptLP := make([][]engine.TokenLogprobs, len(prompts)) // echo with logprobs: from each prompt's choice 0
	rest := make([]bool, len(prompts))                       // each prompt's other choices were started
	for live > 0 {
		ce := <-merged
		c := cs[ce.i]
		g, j := ce.i/p.n, ce.i%p.n
		if ce.ev.Done {
			live--
			if ce.ev.Result != nil {
				c.res = *ce.ev.Result
			} else {
				c.res = c.st.Wait()
			}
		}
		if j == 0 && !rest[g] && (!ce.ev.Done || c.res.Err == nil) {
			// This prompt's pages are in the prefix cache now.
			rest[g] = true
			if !startAll(ce.i+1, ce.i+p.n) {
				return
			}
		}
		if !ce.ev.Done {
			now := time.Now()
			if first.IsZero() {
				first = now
				s.met.TTFT.Observe(now.Sub(start).Seconds())
			} else if ce.i == 0 {
				s.met.InterToken.Observe(now.Sub(last).Seconds())
			}
			if ce.i == 0 {
				last = now
			}
		}
		if j == 0 && promptLP[g] == nil {
			if promptLP[g] = ce.ev.PromptLogprobs; promptLP[g] == nil && ce.ev.Done {
				promptLP[g] = c.res.PromptLogprobs
			}
		}
		if ce.ev.Done && c.res.Err != nil {
			drain(c.res.Err)
			s.choiceFailed(w, out, ep, start, c.res, log, sh, r.Context())
			return
		}
		if !p.stream {
			c.collect(s, ce.ev)
			continue
		}
		if !c.opened {
			s.openChoice(out, sh, ce.i, c, echo[g], promptLP[g], p)
		}
		s.streamEvent(out, sh, ce.i, c, ce.ev, p)
	}

	// Every choice finished cleanly. The usage counts each prompt once.
	var total engine.Result
	for k, c := range cs {
		if k%p.n == 0 {
			total.PromptTokens = append(total.PromptTokens, c.res.PromptTokens...)
			total.CachedTokens += c.res.CachedTokens
		}
		total.Tokens = append(total.Tokens, c.res.Tokens...)
	}
	s.finish(ep, cs[0].res.FinishReason, start, &total)
	log.Debug("request done", "prompt_tokens", len(total.PromptTokens), "tokens", len(total.Tokens), "duration", time.Since(start))
	u := usageOf(&total)
	if !p.stream {
		writeJSON(w, http.StatusOK, s.fullChoices(sh, cs, echo, promptLP, p, u))
		return
	}
	if p.includeUsage {
		out.send(sh.usageChunk(u))
	}
	out.done()
}

// choiceFailed answers a request one of whose choices failed, as generate
// answers a failed request.
func (s *Server) choiceFailed(w http.ResponseWriter, out *sseWriter, ep string, start time.Time, res engine.Result, log *slog.Logger,
	sh shaper, ctx context.Context) {
	outcome := "error"
	switch {
	case errors.Is(res.Err, engine.ErrIsolation):
		outcome = "isolation"
		log.Error("request failed an isolation check", "err", res.Err)
	case errors.Is(res.Err, engine.ErrAborted):
		outcome = "abort"
	default:
		log.Error("request failed", "err", res.Err)
	}
	s.finish(ep, outcome, start, &res)
	if outcome == "abort" {
		s.answerAbort(w, ctx, out.head)
		return
	}
	e := resultError(res.Err, sh.id)
	if !out.head {
		writeError(w, e)
		return
	}
	out.send(map[string]any{"error": e})
}

// sseWriter writes server-sent events; the header goes out with the first.
type sseWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
	head    bool
	err     error
}

func (o *sseWriter) send(v any) {
	if !o.head {
		o.head = true
		h := o.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		o.w.WriteHeader(http.StatusOK)
	}
	if o.err != nil {
		return
	}
	b, _ := json.Marshal(v)
	if _, o.err = fmt.Fprintf(o.w, "data: %s\n\n", b); o.err == nil && o.flusher != nil {
		o.flusher.Flush()
	}
}

func (o *sseWriter) done() {
	if o.err == nil {
		_, _ = io.WriteString(o.w, "data: [DONE]\n\n")
		if o.flusher != nil {
			o.flusher.Flush()
		}
	}
}

// openChoice sends choice i's first chunk: the chat role, or with echo
// the prompt's text (and, with logprobs, its tokens' log-probabilities).
func (s *Server) openChoice(o *sseWriter, sh shaper, i int, c *choice, echo string, prompt []engine.TokenLogprobs, p params) {
	c.opened = true
	if sh.chat {
		empty := ""
		o.send(chatResponse{ID: sh.id, Object: "chat.completion.chunk", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp,
			Choices: []chatChoice{{Index: i, Delta: &chatOut{Role: "assistant", Content: &empty}}}})
		return
	}
	if !p.echo {
		return
	}
	var lp any
	if p.logprobs {
		lp = s.promptLegacy(c.st.PromptTokens(), prompt, p.topLogprobs)
	}
	c.runes += runeCount(echo)
	o.send(completionResponse{ID: sh.id, Object: "text_completion", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp,
		Choices: []completionChoice{{Index: i, Text: echo, Logprobs: lp}}})
}

// streamEvent sends what ev completes: one chunk per token (a token that
// ends inside a UTF-8 character waits for the one that completes it, and
// shares its chunk), and at Done the held tail and the finish_reason.
func (s *Server) streamEvent(o *sseWriter, sh shaper, i int, c *choice, ev engine.Event, p params) {
	if !ev.Done {
		c.pending = append(c.pending, ev)
		if ev.Text == "" {
			return
		}
		s.sendPiece(o, sh, i, c, ev.Text, p)
		return
	}
	if ev.Text != "" || len(c.pending) > 0 {
		s.sendPiece(o, sh, i, c, ev.Text, p)
	}
	finish := c.res.FinishReason
	if sh.chat {
		var lp any
		if c.post != nil {
			ds, _ := c.post.stream.Finish()
			s.sendShaped(o, sh, i, c, c.post.deltaOuts(ds))
			if c.post.called && finish == "stop" {
				finish = "tool_calls"
			}
			if len(c.lpHeld) > 0 { // tokens whose text never showed (markup)
				lp, c.lpHeld = c.lpHeld.chat(), nil
			}
		}
		o.send(chatResponse{ID: sh.id, Object: "chat.completion.chunk", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp,
			Choices: []chatChoice{{Index: i, Delta: &chatOut{}, Logprobs: lp, FinishReason: &finish}}})
		return
	}
	o.send(completionResponse{ID: sh.id, Object: "text_completion", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp,
		Choices: []completionChoice{{Index: i, Text: "", FinishReason: &finish}}})
}

// sendPiece sends text with the log-probabilities of the pending tokens.
func (s *Server) sendPiece(o *sseWriter, sh shaper, i int, c *choice, text string, p params) {
	var lp any
	if p.logprobs {
		tl := s.tokenLogprobs(c, c.pending)
		switch {
		case c.post != nil:
			c.lpHeld = append(c.lpHeld, tl...)
		case sh.chat:
			lp = tl.chat()
		default:
			lp = tl.legacy(c.runes)
		}
	} else {
		for _, ev := range c.pending {
			c.prev = ev.Token
		}
	}
	c.pending = c.pending[:0]
	if c.post != nil {
		s.sendShaped(o, sh, i, c, c.post.deltaOuts(c.post.stream.Feed(text)))
		return
	}
	c.runes += runeCount(text)
	if sh.chat {
		t := text
		o.send(chatResponse{ID: sh.id, Object: "chat.completion.chunk", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp,
			Choices: []chatChoice{{Index: i, Delta: &chatOut{Content: &t}, Logprobs: lp}}})
		return
	}
	o.send(completionResponse{ID: sh.id, Object: "text_completion", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp,
		Choices: []completionChoice{{Index: i, Text: text, Logprobs: lp}}})
}

// sendShaped sends a choice's parsed deltas (reasoning_content, content,
// tool_calls), the first with the token records held so far: the
// records of the tokens behind a chunk go with it, or, while the parser
// holds their text back, with the next one.
func (s *Server) sendShaped(o *sseWriter, sh shaper, i int, c *choice, outs []chatOut) {
	for k := range outs {
		var lp any
		if len(c.lpHeld) > 0 {
			lp, c.lpHeld = c.lpHeld.chat(), nil
		}
		o.send(chatResponse{ID: sh.id, Object: "chat.completion.chunk", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp,
			Choices: []chatChoice{{Index: i, Delta: &outs[k], Logprobs: lp}}})
	}
}

// collect records ev for a non-streamed answer.
func (c *choice) collect(s *Server, ev engine.Event) {
	if ev.Done {
		return
	}
	c.lp.add(s, c, ev)
}

// fullChoices is the non-streamed answer.
func (s *Server) fullChoices(sh shaper, cs []*choice, echo []string, promptLP [][]engine.TokenLogprobs, p params, u usage) any {
	if sh.chat {
		resp := chatResponse{ID: sh.id, Object: "chat.completion", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp, Usage: &u}
		for i, c := range cs {
			text, finish := c.res.Text, c.res.FinishReason
			msg := &chatOut{Role: "assistant", Content: &text}
			if c.post != nil {
				msg, finish = c.post.message(text, finish)
			}
			ch := chatChoice{Index: i, Message: msg, FinishReason: &finish}
			if p.logprobs {
				ch.Logprobs = c.lp.chat()
			}
			resp.Choices = append(resp.Choices, ch)
		}
		return resp
	}
	resp := completionResponse{ID: sh.id, Object: "text_completion", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp, Usage: &u}
	for i, c := range cs {
		finish := c.res.FinishReason
		g := i / p.n
		ch := completionChoice{Index: i, Text: echo[g] + c.res.Text, FinishReason: &finish}
		if p.logprobs {
			off := runeCount(echo[g])
			lp := newLegacy()
			if p.echo {
				lp = s.promptLegacy(c.st.PromptTokens(), promptLP[g], p.topLogprobs)
			}
			lp.append(c.lp.legacy(off))
			ch.Logprobs = lp
		}
		resp.Choices = append(resp.Choices, ch)
	}
	return resp
}
