// Package server is kvwarden's OpenAI-compatible HTTP server: POST
// /v1/completions and /v1/chat/completions (streaming as server-sent events
// ending with "data: [DONE]"), POST /apply-template (llama-server's: the
// chat template's render of a conversation), GET /v1/models, /healthz and
// /metrics.
//
// A Server is an http.Handler over one engine.Engine: the kvwarden command
// serves it with Serve (graceful shutdown included), and an application can
// mount it in its own mux instead, e.g.
//
//	srv := server.New(server.Options{Engine: eng, ModelID: "stories"})
//	mux.Handle("/llm/", http.StripPrefix("/llm", srv))
//
// Isolation rules it keeps (see docs/ISOLATION.md): the tenant of a
// request comes only from its authenticated API key (invariant 9);
// /metrics needs an operator key (Options.AdminKeys; a tenant key gets 403;
// see admin.go) unless Options.PublicMetrics opens it; response ids are
// random, so they reveal nothing about other tenants' traffic; internal
// errors reach the client as generic text (the details, which may name
// other requests, go to the log under the response id); a client
// disconnect cancels the request's context, which aborts it in the engine
// (invariant 8); and a request that fails is never answered with a 200
// carrying a partial body.
// Against hostile clients it bounds the time to send a request body
// (Options.BodyTimeout), the open connections, in all and per client
// address (Options.MaxConns, MaxConnsPerIP, in Serve), and repeated failed
// authentications per address (429; Options.AuthFailBurst); see limits.go
// and authlimit.go.
// Non-streaming responses are written only after the engine finished the
// request cleanly; streaming responses send their header only with the
// first text, so an admission or early failure gets a proper 4xx/5xx, and a
// failure after that ends the stream with an OpenAI error event and without
// "data: [DONE]", which OpenAI clients raise as an error.
package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/server/internal/metrics"
)

// ErrShuttingDown is the cancellation cause of requests aborted because the
// drain timeout of a graceful shutdown ran out.
var ErrShuttingDown = errors.New("server shutting down")

// DefaultMaxBody is the request body limit when Options.MaxBodyBytes is 0.
const DefaultMaxBody = 1 << 20

// DefaultCompletionMaxTokens is max_tokens for /v1/completions when the
// request gives none (OpenAI's default). Chat requests default to the rest
// of the context.
const DefaultCompletionMaxTokens = 16

// Options configure a Server.
type Options struct {
	// Engine serves the requests. nil: the server answers 503 "Loading
	// model" (llama-server's answer) until SetEngine, so that it can
	// listen while the model loads (see health.go).
	Engine  *engine.Engine
	ModelID string // the model name /v1/models reports
	Keys    *Keys  // nil: no authentication, every request is tenant "default"
	// MaxBodyBytes limits request bodies (default DefaultMaxBody).
	MaxBodyBytes int64
	Logger       *slog.Logger // nil: discard
	// PublicMetrics serves /metrics without a key even when Keys is set.
	// The metrics aggregate every tenant's traffic, so by default they
	// need a valid key like the API.
	PublicMetrics bool
	// CORSOrigins are the origins browsers may call the API from ("*":
	// any). Empty: no CORS headers, so browsers refuse cross-origin calls.
	CORSOrigins []string
	// AdminKeys are the operator keys: /metrics (unless PublicMetrics)
	// and admin endpoints need one, and tenant keys get 403 there. With
	// Keys but no AdminKeys nobody reads them; with neither (an open
	// server) they are open. See admin.go.
	AdminKeys *Keys
	// BodyTimeout is how long a client may take to send a request body
	// after its headers (0: DefaultBodyTimeout; negative: no limit).
	// Responses are not limited: a stream runs as long as it generates.
	// It applies wherever the Server is mounted (a read deadline set
	// through http.ResponseController).
	BodyTimeout time.Duration
	// MaxConns and MaxConnsPerIP cap the connections Serve keeps open, in
	// all and per client address (an IPv6 client: its /64); one over a
	// cap gets a bare 503 and is closed (0: DefaultMaxConns,
	// DefaultMaxConnsPerIP; negative: no cap). They apply to Serve only:
	// an application mounting the Server limits its own listener.
	MaxConns, MaxConnsPerIP int
	// AuthFailBurst failed authentications (401) in a row from one client
	// address make its later requests get 429 with Retry-After, until one
	// more is allowed every AuthFailEvery (0: DefaultAuthFailBurst,
	// DefaultAuthFailEvery; a negative burst: no limit).
	AuthFailBurst int
	AuthFailEvery time.Duration
	// StrictModelID answers 404 model_not_found to a request whose model
	// is not ModelID. Off by default: the one model served answers any
	// id ("gpt-3.5-turbo" hard-coded in an app), as llama-server does.
	StrictModelID bool
	// ModelPath is the model file /props reports as model_path.
	ModelPath string
	// ReasoningFormat is where <think> blocks go: ReasoningDeepSeek ("":
	// the default) into reasoning_content, ReasoningNone inline in the
	// content. A request's reasoning_format overrides it (tools.go).
	ReasoningFormat string
}

// Server serves the HTTP API over one engine.
type Server struct {
	eng      *engine.Engine
	model    string
	strict   bool        // Options.StrictModelID
	ready    atomic.Bool // eng is set (health.go)
	path     string      // Options.ModelPath
	keys     *Keys
	admin    *Keys
	pubMet   bool
	maxBody  int64
	log      *slog.Logger
	met      *metrics.Metrics
	created  int64
	draining atomic.Bool
	mux      *http.ServeMux
	cors     map[string]bool
	// limits (limits.go, authlimit.go)
	bodyTimeout   time.Duration
	maxConns      int
	maxConnsPerIP int
	authLim       *authLimiter
	conns         atomic.Pointer[connLimiter] // set by Serve
	// fingerprint is the system_fingerprint of every response: a digest
	// of what determines outputs besides the request (build, model shape,
	// device), so clients can tell when that changed.
	fingerprint string
	grammars    grammarCache // compiled response formats and grammars (grammar.go)
	// tool calls and reasoning (tools.go)
	reasoningFormat string
	toolFormats     sync.Map // *chat.Template -> toolcall.Format
}

// New builds a Server over o.Engine; with a nil Engine it answers 503
// "Loading model" until SetEngine. The caller keeps ownership of the
// engine and closes it after the server stopped.
func New(o Options) *Server {
	s := &Server{eng: o.Engine, model: o.ModelID, strict: o.StrictModelID, path: o.ModelPath, keys: o.Keys, admin: o.AdminKeys, pubMet: o.PublicMetrics, maxBody: o.MaxBodyBytes,
		log: o.Logger, created: time.Now().Unix(), bodyTimeout: o.bodyTimeout(),
		authLim: newAuthLimiter(o.AuthFailBurst, o.AuthFailEvery)}
	s.maxConns, s.maxConnsPerIP = o.maxConns()
	if s.reasoningFormat = o.ReasoningFormat; s.reasoningFormat == "" {
		s.reasoningFormat = ReasoningDeepSeek
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBody
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s.met = metrics.New(s.engineStats, s.modelID())
	if s.eng != nil {
		s.fingerprint = fingerprint(s.eng)
	}
	if len(o.CORSOrigins) > 0 {
		s.cors = map[string]bool{}
		for _, origin := range o.CORSOrigins {
			s.cors[strings.TrimRight(origin, "/")] = true
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/completions", s.handleCompletions)
	mux.HandleFunc("/v1/chat/completions", s.handleChat)
	mux.HandleFunc("/apply-template", s.handleApplyTemplate)
	mux.HandleFunc("/v1/models", s.handleModels)
	mux.HandleFunc("/v1/models/{id}", s.handleModel)
	mux.HandleFunc("/healthz", s.handleHealth)
	s.llamaRoutes(mux)
	s.eraseRoutes(mux) // erase.go
	s.embeddingRoutes(mux)
	mux.Handle("GET /metrics", s.metricsHandler(s.met.Handler()))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: strp("not_found"),
			Message: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)})
	})
	s.mux = mux
	s.ready.Store(s.eng != nil)
	return s
}

// ServeHTTP serves the API; it is safe for concurrent use.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.allowCORS(w, r) {
		return // a preflight, answered
	}
	if !s.ready.Load() {
		s.answerLoading(w, r)
		return
	}
	r, finish := s.guardBody(w, r)
	defer finish()
	s.mux.ServeHTTP(w, r)
}

// allowCORS adds the CORS headers for an allowed Origin and answers a
// preflight request (OPTIONS with Access-Control-Request-Method) itself,
// before authentication: browsers send preflights without credentials.
func (s *Server) allowCORS(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if s.cors == nil || origin == "" {
		return false
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	switch {
	case s.cors["*"]:
		h.Set("Access-Control-Allow-Origin", "*")
	case s.cors[origin]:
		h.Set("Access-Control-Allow-Origin", origin)
	default:
		return false
	}
	h.Set("Access-Control-Expose-Headers", "Retry-After")
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
	allow := r.Header.Get("Access-Control-Request-Headers")
	if allow == "" {
		allow = "Authorization, Content-Type"
	}
	h.Set("Access-Control-Allow-Headers", allow)
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// fingerprint digests the build, the model's shape and the device.
func fingerprint(eng *engine.Engine) string {
	h := sha256.New()
	version := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
		for _, st := range bi.Settings {
			if st.Key == "vcs.revision" || st.Key == "vcs.modified" {
				version += " " + st.Value
			}
		}
	}
	fmt.Fprintf(h, "kvwarden %s\n%+v\n%s\n", version, eng.ModelConfig(), eng.Device())
	return fmt.Sprintf("fp_%x", h.Sum(nil)[:5])
}

// Serve serves on ln until ctx is done, then shuts down gracefully: it
// stops accepting connections, answers new requests on open connections
// with 503, and lets requests in flight finish for up to drain. When drain
// runs out it cancels the rest (the engine aborts them at the next step
// boundary; streams end with an error event, other requests get 503) and
// waits for their handlers. The caller closes the engine afterwards.
func (s *Server) Serve(ctx context.Context, ln net.Listener, drain time.Duration) error {
	base, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	cl := newConnLimiter(ln, s.maxConns, s.maxConnsPerIP, s.log, func(why string) {
		s.met.Rejections.WithLabelValues(why).Inc()
	})
	s.conns.Store(cl)
	ln = cl
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: DefaultHeaderTimeout,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
		ConnState:         cl.connState,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.log.Info("shutting down: draining requests in flight", "timeout", drain)
	dctx, dcancel := context.WithTimeout(context.Background(), drain)
	err := hs.Shutdown(dctx)
	dcancel()
	if err != nil {
		s.log.Warn("drain timeout: aborting the requests still in flight")
		cancel(ErrShuttingDown)
		actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = hs.Shutdown(actx)
		acancel()
		if err != nil {
			_ = hs.Close()
			err = fmt.Errorf("shutdown: handlers did not finish after abort: %w", err)
		}
	}
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	s.log.Info("server stopped")
	return err
}

// responseID is a response's id: the endpoint's prefix and 26 random
// characters, so that ids say nothing about how many requests (of other
// tenants) came before. The log maps it to the engine's request ID.
func responseID(chat bool) string {
	if chat {
		return "chatcmpl-" + rand.Text()
	}
	return "cmpl-" + rand.Text()
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// MaxModelLen is the MaxContext requests are held to (as vLLM reports it).
	MaxModelLen int `json:"max_model_len"`
}

func (s *Server) modelObj() modelObject {
	return modelObject{ID: s.modelID(), Object: "model", Created: s.created, OwnedBy: "kvwarden", MaxModelLen: s.eng.MaxContext()}
}

func (s *Server) modelID() string {
	if s.model == "" {
		return "kvwarden"
	}
	return s.model
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	if e := s.preflight(w, r, http.MethodGet); e != nil {
		s.reject(w, "models", e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []modelObject{s.modelObj()}})
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	if e := s.preflight(w, r, http.MethodGet); e != nil {
		s.reject(w, "models", e)
		return
	}
	if id := r.PathValue("id"); id != s.modelID() {
		s.reject(w, "models", modelNotFound(id))
		return
	}
	writeJSON(w, http.StatusOK, s.modelObj())
}

func modelNotFound(id string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: strp("model"), Code: strp("model_not_found"),
		Reason: "model_not_found", Message: fmt.Sprintf("The model %q does not exist", id)}
}

// preflight checks the method and the API key and stores nothing; it
// returns the tenant through tenantOf.
func (s *Server) preflight(w http.ResponseWriter, r *http.Request, method string) *apiError {
	if r.Method != method {
		w.Header().Set("Allow", method)
		return &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Reason: "method_not_allowed",
			Message: fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, method)}
	}
	_, e := s.tenantOf(r)
	return e
}

// tenantOf authenticates r. The tenant comes only from the key.
func (s *Server) tenantOf(r *http.Request) (string, *apiError) {
	if s.keys == nil {
		return "default", nil
	}
	var tenant string
	e := s.authenticate(r, func(key string) *apiError {
		t, ok := s.keys.Tenant(key)
		if !ok {
			return wrongKey()
		}
		tenant = t
		return nil
	})
	return tenant, e
}

// reject answers a request refused before generation and counts it.
func (s *Server) reject(w http.ResponseWriter, endpoint string, e *apiError) {
	reason := e.Reason
	if reason == "" {
		reason = "bad_request"
	}
	s.met.Rejections.WithLabelValues(reason).Inc()
	if endpoint == "completions" || endpoint == "chat" {
		s.met.Requests.WithLabelValues(endpoint, "rejected").Inc()
	}
	writeError(w, e)
}

// engineError maps an error of engine.Submit to its HTTP answer.
func engineError(err error, promptParam string) *apiError {
	var tl *engine.PromptTooLongError
	switch {
	case errors.As(err, &tl):
		at := "" // a long prompt is tokenized only until it cannot fit
		if tl.AtLeast {
			at = "at least "
		}
		return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: strp(promptParam),
			Code: strp("context_length_exceeded"), Reason: engine.RejectPromptTooLong,
			Message: fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %s%d tokens (%s%d in the prompt). Please reduce the length of the prompt.", tl.Limit, at, tl.Requested, at, tl.Prompt)}
	case errors.Is(err, engine.ErrPromptTooLong):
		return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: strp(promptParam),
			Code: strp("context_length_exceeded"), Reason: engine.RejectPromptTooLong, Message: err.Error()}
	case errors.Is(err, engine.ErrEmptyPrompt):
		return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: strp(promptParam),
			Code: strp("empty_prompt"), Reason: engine.RejectEmptyPrompt, Message: err.Error()}
	case errors.Is(err, engine.ErrInvalidParams):
		return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: strp("invalid_value"),
			Reason: engine.RejectInvalidParams, Message: err.Error()}
	case errors.Is(err, engine.ErrQuotaExceeded):
		return &apiError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: strp("tenant_quota_exceeded"),
			Reason: engine.RejectQuota, RetryAfter: 1, Message: err.Error()}
	case errors.Is(err, engine.ErrOverloaded):
		return &apiError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: strp("server_overloaded"),
			Reason: engine.RejectOverloaded, RetryAfter: 1, Message: err.Error()}
	case errors.Is(err, engine.ErrClosed), errors.Is(err, ErrShuttingDown):
		return shuttingDown()
	}
	return internalError("")
}

// internalError is the generic answer to an unexpected failure: its cause
// may name other requests or tenants, so it goes only to the log (under id,
// when there is one), never to the client.
func internalError(id string) *apiError {
	msg := "internal server error; the details are in the server log"
	if id != "" {
		msg += " under id " + id
	}
	return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Code: strp("internal_error"),
		Reason: "error", Message: msg}
}

func shuttingDown() *apiError {
	return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strp("server_shutting_down"),
		Reason: engine.RejectClosed, RetryAfter: 5, Message: "the server is shutting down; retry on another instance"}
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	const ep = "completions"
	start := time.Now()
	var more []promptIn // a batch's prompts after the first (batch.go)
	tenant, req, p, e := parse(s, w, r, func(body *completionRequest) (engine.Request, params, *apiError) {
		p, e := body.validate(DefaultCompletionMaxTokens)
		if e != nil {
			return engine.Request{}, p, e
		}
		switch {
		case body.BestOf != nil && *body.BestOf != 1:
			return engine.Request{}, p, badRequest("best_of", "unsupported_value", "best_of must be 1")
		case body.Suffix != nil && *body.Suffix != "":
			return engine.Request{}, p, badRequest("suffix", "unsupported_value", "suffix is not supported")
		}
		if e := body.logprobParams(&p); e != nil {
			return engine.Request{}, p, e
		}
		prompts, e := parsePrompts(body.Prompt)
		if e != nil {
			return engine.Request{}, p, e
		}
		more = prompts[1:]
		return engine.Request{Prompt: prompts[0].text, Tokens: prompts[0].ids, ParseSpecial: body.ParseSpecial, MaxTokens: p.maxTokens, Stop: p.stop}, p, nil
	})
	if e != nil {
		s.reject(w, ep, e)
		return
	}
	if len(more) > 0 && p.multi() {
		s.generateChoices(w, r, start, ep, tenant, req, more, p, shaper{chat: false, model: s.modelID(), fp: s.fingerprint})
		return
	}
	if len(more) > 0 {
		s.generateBatch(w, r, start, tenant, req, more, p, shaper{chat: false, model: s.modelID(), fp: s.fingerprint})
		return
	}
	s.generate(w, r, start, ep, tenant, req, p, shaper{chat: false, model: s.modelID(), fp: s.fingerprint})
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	const ep = "chat"
	start := time.Now()
	var plan *chatPlan
	tenant, req, p, e := parse(s, w, r, func(body *chatRequest) (engine.Request, params, *apiError) {
		body.takeTools()
		p, e := body.validate(0)
		if e != nil {
			return engine.Request{}, p, e
		}
		if body.MaxCompletionTokens != nil {
			if *body.MaxCompletionTokens < 1 || *body.MaxCompletionTokens > math.MaxInt32 {
				return engine.Request{}, p, badRequest("max_completion_tokens", "invalid_value", "max_completion_tokens must be in [1, %d]", math.MaxInt32)
			}
			p.maxTokens = int(*body.MaxCompletionTokens)
		}
		if e := body.logprobParams(&p); e != nil {
			return engine.Request{}, p, e
		}
		pl, e := s.prepareChat(body)
		if e != nil {
			return engine.Request{}, p, e
		}
		plan = pl
		if p.maxTokens == 0 {
			p.maxTokens = s.eng.MaxContext() // the engine clamps to what the context has left
		}
		// The render holds the template's special tokens as text; they
		// must become tokens. (Message text inside it is parsed too, as
		// llama-server and transformers do.)
		req := engine.Request{Prompt: pl.prompt, ParseSpecial: true, MaxTokens: p.maxTokens, Stop: p.stop}
		pl.apply(&req)
		return req, p, nil
	})
	if e == nil {
		e = plan.constrain(s, tenant, &req)
	}
	if e != nil {
		s.reject(w, ep, e)
		return
	}
	s.generate(w, r, start, ep, tenant, req, p, shaper{chat: true, model: s.modelID(), fp: s.fingerprint, post: plan.post()})
}

// requestBody is a request body type that names the model it asks for.
type requestBody[B any] interface {
	*B
	requestedModel() string
	constraint() *sampling
}

// parse runs the checks every completion request goes through, in order:
// method, API key, draining, body, model, then build (the endpoint's own
// validation of its body type B).
func parse[B any, PB requestBody[B]](s *Server, w http.ResponseWriter, r *http.Request, build func(PB) (engine.Request, params, *apiError)) (string, engine.Request, params, *apiError) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return "", engine.Request{}, params{}, &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
			Reason: "method_not_allowed", Message: fmt.Sprintf("%s %s: use POST", r.Method, r.URL.Path)}
	}
	tenant, e := s.tenantOf(r)
	if e != nil {
		return "", engine.Request{}, params{}, e
	}
	if s.draining.Load() {
		return "", engine.Request{}, params{}, shuttingDown()
	}
	var body B
	if e := decodeBody(w, r, s.maxBody, &body); e != nil {
		return "", engine.Request{}, params{}, e
	}
	if e := s.checkModel(PB(&body).requestedModel()); e != nil {
		return "", engine.Request{}, params{}, e
	}
	req, p, e := build(&body)
	if e != nil {
		return "", req, p, e
	}
	req.Tenant = tenant
	req.Sampling = samplingParams(p)
	if e := s.constrain(&req, PB(&body).constraint()); e != nil {
		return "", req, p, e
	}
	return tenant, req, p, nil
}

func (s *Server) checkModel(m string) *apiError {
	if m == "" || s.model == "" || m == s.model || !s.strict {
		return nil
	}
	return modelNotFound(m)
}

// shaper renders the two endpoints' response shapes.
type shaper struct {
	chat    bool
	id      string
	created int64
	model   string
	fp      string    // system_fingerprint
	post    *chatPost // chat output parsing (tools.go); nil: text as it is
}

func (sh shaper) chunk(text string) any {
	if sh.chat {
		return chatResponse{ID: sh.id, Object: "chat.completion.chunk", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp,
			Choices: []chatChoice{{Delta: &chatOut{Content: &text}}}}
	}
	return completionResponse{ID: sh.id, Object: "text_completion", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp,
		Choices: []completionChoice{{Text: text}}}
}

// opening is the chat stream's first chunk, announcing the role.
func (sh shaper) opening() any {
	if !sh.chat {
		return nil
	}
	empty := ""
	return chatResponse{ID: sh.id, Object: "chat.completion.chunk", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp,
		Choices: []chatChoice{{Delta: &chatOut{Role: "assistant", Content: &empty}}}}
}

func (sh shaper) final(finish string) any {
	if sh.chat {
		return chatResponse{ID: sh.id, Object: "chat.completion.chunk", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp,
			Choices: []chatChoice{{Delta: &chatOut{}, FinishReason: &finish}}}
	}
	return completionResponse{ID: sh.id, Object: "text_completion", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp,
		Choices: []completionChoice{{Text: "", FinishReason: &finish}}}
}

func (sh shaper) usageChunk(u usage) any {
	if sh.chat {
		return chatResponse{ID: sh.id, Object: "chat.completion.chunk", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp,
			Choices: []chatChoice{}, Usage: &u}
	}
	return completionResponse{ID: sh.id, Object: "text_completion", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp,
		Choices: []completionChoice{}, Usage: &u}
}

func (sh shaper) full(text, finish string, u usage) any {
	if sh.post != nil {
		return sh.post.full(sh, text, finish, u)
	}
	if sh.chat {
		return chatResponse{ID: sh.id, Object: "chat.completion", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp,
			Choices: []chatChoice{{Message: &chatOut{Role: "assistant", Content: &text}, FinishReason: &finish}}, Usage: &u}
	}
	return completionResponse{ID: sh.id, Object: "text_completion", Created: sh.created, Model: sh.model, SystemFingerprint: sh.fp,
		Choices: []completionChoice{{Text: text, FinishReason: &finish}}, Usage: &u}
}

func usageOf(res *engine.Result) usage {
	u := usage{PromptTokens: len(res.PromptTokens), CompletionTokens: len(res.Tokens)}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.PromptTokensDetails = &tokenDetails{CachedTokens: res.CachedTokens}
	return u
}

// generate submits req and writes the response.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, start time.Time, ep, tenant string, req engine.Request, p params, sh shaper) {
	if e := s.checkBiasVocab(p); e != nil {
		s.reject(w, ep, e)
		return
	}
	if p.multi() {
		s.generateChoices(w, r, start, ep, tenant, req, nil, p, sh) // choices.go: n > 1, logprobs, echo
		return
	}
	ctx := r.Context()
	st, err := s.eng.Submit(ctx, req)
	if err != nil {
		if errors.Is(err, engine.ErrAborted) {
			s.finish(ep, "abort", start, nil)
			s.answerAbort(w, ctx, false)
			return
		}
		e := engineError(err, map[bool]string{true: "messages", false: "prompt"}[sh.chat])
		if e.Code != nil && *e.Code == "internal_error" {
			s.log.Error("request failed at submission", "tenant", tenant, "endpoint", ep, "err", err)
		}
		s.reject(w, ep, e)
		return
	}
	s.met.InFlight.Inc()
	defer s.met.InFlight.Dec()
	sh.id = responseID(sh.chat)
	sh.created = start.Unix()
	log := s.log.With("id", sh.id, "request", st.ID(), "tenant", tenant, "endpoint", ep)

	var (
		last       time.Time
		doneText   string
		wroteHead  bool
		writeErr   error
		flusher, _ = w.(http.Flusher)
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
		if o := sh.opening(); o != nil {
			send(o)
		}
	}
	for ev := range st.Events() {
		if ev.Done {
			doneText = ev.Text
			break
		}
		now := time.Now()
		if last.IsZero() {
			s.met.TTFT.Observe(now.Sub(start).Seconds())
		} else {
			s.met.InterToken.Observe(now.Sub(last).Seconds())
		}
		last = now
		if p.stream && ev.Text != "" {
			head()
			for _, c := range sh.chunks(ev.Text) {
				send(c)
			}
		}
	}
	res := st.Wait()
	outcome := res.FinishReason
	if res.Err != nil {
		outcome = "error"
		if errors.Is(res.Err, engine.ErrIsolation) {
			outcome = "isolation"
			log.Error("request failed an isolation check", "err", res.Err)
		} else if errors.Is(res.Err, engine.ErrAborted) {
			outcome = "abort"
		} else {
			log.Error("request failed", "err", res.Err)
		}
	}
	s.finish(ep, outcome, start, &res)
	log.Debug("request done", "outcome", outcome, "prompt_tokens", len(res.PromptTokens), "tokens", len(res.Tokens),
		"cached_tokens", res.CachedTokens, "duration", time.Since(start))

	if res.Err != nil {
		if outcome == "abort" {
			s.answerAbort(w, ctx, wroteHead)
			return
		}
		e := resultError(res.Err, sh.id)
		if !wroteHead {
			writeError(w, e)
			return
		}
		send(map[string]any{"error": e})
		return
	}
	u := usageOf(&res)
	if !p.stream {
		writeJSON(w, http.StatusOK, sh.full(res.Text, res.FinishReason, u))
		return
	}
	head()
	if doneText != "" {
		for _, c := range sh.chunks(doneText) {
			send(c)
		}
	}
	for _, c := range sh.flush() {
		send(c)
	}
	send(sh.final(sh.finishReason(res.FinishReason)))
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

// answerAbort answers a request the engine aborted: nothing when the client
// is gone, 503 (or a stream error event) when the shutdown aborted it.
func (s *Server) answerAbort(w http.ResponseWriter, ctx context.Context, streaming bool) {
	if !errors.Is(context.Cause(ctx), ErrShuttingDown) {
		return // the client went away; there is nobody to answer
	}
	e := shuttingDown()
	if !streaming {
		writeError(w, e)
		return
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
}

// resultError maps a failed request's error; id is its response id.
func resultError(err error, id string) *apiError {
	if errors.Is(err, engine.ErrIsolation) {
		return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Code: strp("kv_isolation_error"),
			Message: "the request failed a KV isolation check and was stopped; no output is returned"}
	}
	if errors.Is(err, engine.ErrClosed) {
		return shuttingDown()
	}
	return internalError(id)
}

func (s *Server) finish(ep, outcome string, start time.Time, res *engine.Result) {
	s.met.Requests.WithLabelValues(ep, outcome).Inc()
	s.met.Duration.WithLabelValues(ep).Observe(time.Since(start).Seconds())
	if res != nil {
		s.met.PromptTokens.Add(float64(len(res.PromptTokens)))
		s.met.CompletionTokens.Add(float64(len(res.Tokens)))
		s.met.CachedTokens.Add(float64(res.CachedTokens))
	}
}

// samplingParams builds the engine's sampling parameters from a validated
// request. Temperature 0 is greedy.
func samplingParams(p params) sample.Params {
	// Zero fields mean "not set" to the sampler (top_p 0 is off): no
	// patching here; the engine validates at admission.
	sp := sample.Params{
		Temperature:   float32(p.temperature),
		TopK:          p.topK,
		TopP:          float32(p.topP),
		MinP:          float32(p.minP),
		RepeatPenalty: float32(p.repeatPenalty),
	}
	if p.seed != nil { // absent: the engine picks one; any given seed, 0 included, is fixed
		sp.Seed, sp.HasSeed = *p.seed, true
	}
	sp.PresencePenalty, sp.FrequencyPenalty, sp.LogitBias = p.presence, p.frequency, p.logitBias
	if sp.RepeatPenalty != 1 {
		sp.RepeatLastN = p.repeatLastN
	}
	return sp
}
