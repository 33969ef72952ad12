package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/kvwarden/kvwarden/engine"
)

// Crypto-erasure of one tenant's cached KV (docs/ISOLATION.md): operators
// only, since it names a tenant and affects its latency.

func (s *Server) eraseRoutes(mux *http.ServeMux) {
	mux.Handle("DELETE /v1/admin/tenants/{tenant}/kv", s.adminOnly("erase", http.HandlerFunc(s.handleEraseTenantKV)))
}

// eraseResponse is the answer: what was erased.
type eraseResponse struct {
	Object string `json:"object"`
	engine.EraseResult
}

func (s *Server) handleEraseTenantKV(w http.ResponseWriter, r *http.Request) {
	tenant := r.PathValue("tenant")
	res, err := s.eng.EraseTenantKV(r.Context(), tenant)
	switch {
	case err == nil:
	case errors.Is(err, engine.ErrBadTenant):
		writeError(w, badRequest("tenant", "invalid_tenant", "%v", err))
		return
	case errors.Is(err, engine.ErrClosed):
		writeError(w, &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strp("shutting_down"),
			Message: "the engine is shutting down"})
		return
	default:
		// The request's context ended: nothing to answer to.
		writeError(w, &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strp("erase_incomplete"),
			Message: fmt.Sprintf("erasure not confirmed: %v", err)})
		return
	}
	s.log.Info("tenant KV erased", "tenant", tenant, "key_epoch", res.Epoch)
	writeJSON(w, http.StatusOK, eraseResponse{Object: "tenant.kv.erasure", EraseResult: res})
}
