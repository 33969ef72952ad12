package server

import (
	"net/http"
	"time"
)

// renderChat renders a chat request's conversation with the model's chat
// template (or the one given to serve with --chat-template-file), tools
// included (tools.go).
func (s *Server) renderChat(body *chatRequest) (string, *apiError) {
	plan, e := s.prepareChat(body)
	if e != nil {
		return "", e
	}
	return plan.prompt, nil
}

// handleApplyTemplate is POST /apply-template, as llama-server has: it
// takes a chat completion body and answers {"prompt": "..."}, the text the
// model would be given, without generating anything.
func (s *Server) handleApplyTemplate(w http.ResponseWriter, r *http.Request) {
	const ep = "apply_template"
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.reject(w, ep, &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
			Reason: "method_not_allowed", Message: r.Method + " " + r.URL.Path + ": use POST"})
		return
	}
	if _, e := s.tenantOf(r); e != nil {
		s.reject(w, ep, e)
		return
	}
	var body chatRequest
	if e := decodeBody(w, r, s.maxBody, &body); e != nil {
		s.reject(w, ep, e)
		return
	}
	if e := s.checkModel(body.Model); e != nil {
		s.reject(w, ep, e)
		return
	}
	start := time.Now()
	text, e := s.renderChat(&body)
	if e != nil {
		s.reject(w, ep, e)
		return
	}
	s.log.Debug("apply-template", "bytes", len(text), "took", time.Since(start))
	writeJSON(w, http.StatusOK, map[string]string{"prompt": text})
}
