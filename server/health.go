package server

import (
	"errors"
	"net/http"

	"github.com/kvwarden/kvwarden/engine"
)

// Listening before the model is loaded: kvwarden serve binds its address
// first (a busy port fails at once, not after minutes of loading), serves
// a Server built without an engine, and hands it the engine when it is
// loaded (SetEngine). Until then every endpoint answers 503 with
// llama-server's body, {"error":{"message":"Loading model","type":
// "unavailable_error","code":503}}, which load balancers and llama-server
// clients treat as "not ready yet".

// ErrEngineSet is SetEngine's error when the server has an engine already.
var ErrEngineSet = errors.New("server: the engine is already set")

// SetEngine gives a Server built without an engine (Options.Engine nil)
// its engine; from then on it serves requests. It may be called once.
func (s *Server) SetEngine(eng *engine.Engine) error {
	if eng == nil {
		return errors.New("server: SetEngine: nil engine")
	}
	if s.eng != nil || s.ready.Load() {
		return ErrEngineSet
	}
	s.eng = eng
	s.fingerprint = fingerprint(eng)
	// The store publishes eng and fingerprint to the handlers, which read
	// them only after they saw ready.
	s.ready.Store(true)
	return nil
}

// Ready reports whether the server has its engine.
func (s *Server) Ready() bool { return s.ready.Load() }

// engineStats feeds the metrics; an engine still loading has none.
func (s *Server) engineStats() engine.Stats {
	if !s.ready.Load() {
		return engine.Stats{}
	}
	return s.eng.Stats()
}

// unavailable is llama-server's 503 body: its code is the HTTP status, a
// number, unlike the OpenAI errors' string codes.
type unavailable struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    int    `json:"code"`
	} `json:"error"`
}

func writeUnavailable(w http.ResponseWriter, msg string, retryAfter string) {
	var u unavailable
	u.Error.Message, u.Error.Type, u.Error.Code = msg, "unavailable_error", http.StatusServiceUnavailable
	w.Header().Set("Retry-After", retryAfter)
	writeJSON(w, http.StatusServiceUnavailable, u)
}

// answerLoading answers any request while the model loads.
func (s *Server) answerLoading(w http.ResponseWriter, r *http.Request) {
	writeUnavailable(w, "Loading model", "1")
}

// handleLlamaHealth is GET /health and /v1/health, llama-server's probe:
// 200 {"status":"ok"} when ready, 503 while loading (answerLoading) or
// draining for a shutdown. Like llama-server's, it needs no API key.
func (s *Server) handleLlamaHealth(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeUnavailable(w, "Server is shutting down", "5")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
