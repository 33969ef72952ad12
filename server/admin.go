package server

import (
	"net/http"
	"strings"
)

// Operator access. /metrics (and any admin endpoint, wrapped in
// adminOnly) aggregates every tenant's traffic, so a tenant key does not
// open it:
//
//   - Options.PublicMetrics: /metrics needs no key at all.
//   - Options.AdminKeys set: an operator key is needed; a tenant key gets
//     403, a missing or unknown key 401.
//   - Keys set, AdminKeys not: nobody may read it (403 for tenant keys,
//     401 otherwise); configure AdminKeys or PublicMetrics.
//   - neither (an open server, every request is tenant "default"): open,
//     as the API is.

// bearer is the key of r's Authorization header ("" when none). The
// scheme is case-insensitive (RFC 9110 11.1): "bearer" works too.
func bearer(r *http.Request) string {
	scheme, key, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(key)
}

func missingKey() *apiError {
	return &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: strp("invalid_api_key"),
		Reason: "unauthorized", Message: "missing API key: send Authorization: Bearer <key>"}
}

func wrongKey() *apiError {
	return &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: strp("invalid_api_key"),
		Reason: "unauthorized", Message: "Incorrect API key provided"}
}

// authenticate checks r's key with check, under the per-address limit on
// failures: an address over it gets 429 before its key is looked at.
func (s *Server) authenticate(r *http.Request, check func(key string) *apiError) *apiError {
	client := clientKey(r.RemoteAddr)
	if d := s.authLim.wait(client); d > 0 {
		e := tooManyFailures(d)
		e.closeConn = true
		return e
	}
	key := bearer(r)
	var e *apiError
	if key == "" {
		e = missingKey()
	} else {
		e = check(key)
	}
	if e != nil && e.Status == http.StatusUnauthorized {
		s.authLim.fail(client)
	}
	if e != nil && e.Status != http.StatusForbidden {
		// A client without a valid key has no use for the connection,
		// and its refusal must not wait for a body nobody will read.
		e.closeConn = true
	}
	return e
}

// adminAuth authorizes an operator request (see the package's rules
// above); nil: allowed.
func (s *Server) adminAuth(r *http.Request) *apiError {
	if s.admin == nil && s.keys == nil {
		return nil // an open server
	}
	return s.authenticate(r, func(key string) *apiError {
		if s.admin != nil {
			if _, ok := s.admin.Tenant(key); ok {
				return nil
			}
		}
		if s.keys != nil {
			if _, ok := s.keys.Tenant(key); ok {
				msg := "this endpoint needs an operator key (--admin-keys); tenant keys may not read it"
				if s.admin == nil {
					msg = "this endpoint needs an operator key, and the server has none configured (--admin-keys)"
				}
				return &apiError{Status: http.StatusForbidden, Type: "invalid_request_error", Code: strp("forbidden"),
					Reason: "forbidden", Message: msg}
			}
		}
		return wrongKey()
	})
}

// adminOnly serves h to operators only.
func (s *Server) adminOnly(endpoint string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e := s.adminAuth(r); e != nil {
			s.reject(w, endpoint, e)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// metricsHandler serves h to operators, or to anyone with PublicMetrics.
func (s *Server) metricsHandler(h http.Handler) http.Handler {
	if s.pubMet {
		return h
	}
	return s.adminOnly("metrics", h)
}
