package server

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/model"
)

// MaxEmbeddingInputs bounds the inputs of one /v1/embeddings request
// (OpenAI's limit is 2048).
const MaxEmbeddingInputs = 2048

// embeddingRoutes registers the embedding and rerank endpoints.
func (s *Server) embeddingRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/v1/embeddings", s.handleEmbeddings)
	mux.HandleFunc("/embeddings", s.handleEmbeddings)
	for _, p := range []string{"/v1/rerank", "/rerank", "/v1/reranking", "/reranking"} {
		mux.HandleFunc(p, s.handleRerank)
	}
}

// embeddingRequest is POST /v1/embeddings: OpenAI's fields, plus
// llama-server's embd_normalize (2, L2, the default; -1, none) and
// pooling override, and truncate (as TEI and Jina spell it).
type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	Content        json.RawMessage `json:"content"` // llama-server's /embeddings name for input
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
	Normalize      *int            `json:"embd_normalize"`
	Pooling        string          `json:"pooling"`
	Truncate       bool            `json:"truncate"`
}

type embeddingData struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, [][]float32 (pooling none) or a base64 string
}

type embeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

type embeddingResponse struct {
	Object string          `json:"object"`
	Data   []embeddingData `json:"data"`
	Model  string          `json:"model"`
	Usage  embeddingUsage  `json:"usage"`
}

// parseEmbeddingInput reads input: a string, a list of strings, a token
// array, or a list of token arrays.
func parseEmbeddingInput(raw json.RawMessage, field string) ([]string, [][]int, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return nil, nil, badRequest(field, "missing_required_parameter", "%s is required", field)
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, nil, badRequest(field, "invalid_value", "%s must not be an empty string", field)
		}
		return []string{one}, nil, nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil {
		if len(texts) == 0 {
			return nil, nil, badRequest(field, "invalid_value", "%s must not be an empty list", field)
		}
		return texts, nil, nil
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil {
		if len(ids) == 0 {
			return nil, nil, badRequest(field, "invalid_value", "%s must not be an empty list", field)
		}
		return nil, [][]int{ids}, nil
	}
	var lists [][]int
	if json.Unmarshal(raw, &lists) == nil {
		if len(lists) == 0 {
			return nil, nil, badRequest(field, "invalid_value", "%s must not be an empty list", field)
		}
		return nil, lists, nil
	}
	return nil, nil, badRequest(field, "invalid_type", "%s must be a string, a list of strings, a token array or a list of token arrays", field)
}

// openPost does what the embedding and rerank endpoints do first: checks
// the method, finds the caller's tenant, refuses while draining and decodes
// the body into v. When it returns ok false it has answered the client.
func (s *Server) openPost(w http.ResponseWriter, r *http.Request, ep string, v any) (tenant string, ok bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.reject(w, ep, &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Reason: "method_not_allowed",
			Message: r.Method + " " + r.URL.Path + ": use POST"})
		return "", false
	}
	tenant, e := s.tenantOf(r)
	if e != nil {
		s.reject(w, ep, e)
		return "", false
	}
	if s.draining.Load() {
		s.reject(w, ep, shuttingDown())
		return "", false
	}
	if e := decodeBody(w, r, s.maxBody, v); e != nil {
		s.reject(w, ep, e)
		return "", false
	}
	return tenant, true
}

// handleEmbeddings is POST /v1/embeddings (and llama-server's /embeddings).
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	const ep = "embeddings"
	var body embeddingRequest
	tenant, ok := s.openPost(w, r, ep, &body)
	if !ok {
		return
	}
	if e := s.checkModel(body.Model); e != nil {
		s.reject(w, ep, e)
		return
	}
	req, e := body.engineRequest()
	if e != nil {
		s.reject(w, ep, e)
		return
	}
	req.Tenant = tenant
	res, err := s.eng.Embed(r.Context(), req)
	if err != nil {
		s.reject(w, ep, embedError(err))
		return
	}
	out := embeddingResponse{Object: "list", Model: s.modelID(), Data: make([]embeddingData, len(res.Data)),
		Usage: embeddingUsage{PromptTokens: res.PromptTokens, TotalTokens: res.PromptTokens}}
	for i, d := range res.Data {
		var v any = d.Vector
		if d.PerToken != nil {
			v = d.PerToken
		}
		if body.EncodingFormat == "base64" {
			v = embeddingBase64(d)
		}
		out.Data[i] = embeddingData{Object: "embedding", Index: d.Index, Embedding: v}
	}
	writeJSON(w, http.StatusOK, out)
}

// engineRequest checks the body and builds the engine's request.
func (b *embeddingRequest) engineRequest() (engine.EmbedRequest, *apiError) {
	var req engine.EmbedRequest
	field, raw := "input", b.Input
	if len(bytes.TrimSpace(raw)) == 0 && len(b.Content) > 0 {
		field, raw = "content", b.Content
	}
	texts, ids, e := parseEmbeddingInput(raw, field)
	if e != nil {
		return req, e
	}
	if n := max(len(texts), len(ids)); n > MaxEmbeddingInputs {
		return req, badRequest(field, "invalid_value", "%s has %d inputs, at most %d", field, n, MaxEmbeddingInputs)
	}
	req.Inputs, req.Tokens = texts, ids
	switch b.EncodingFormat {
	case "", "float", "base64":
	default:
		return req, badRequest("encoding_format", "invalid_value", "encoding_format must be float or base64")
	}
	if b.Dimensions != nil {
		if *b.Dimensions < 1 {
			return req, badRequest("dimensions", "invalid_value", "dimensions must be at least 1")
		}
		req.Dimensions = *b.Dimensions
	}
	if b.Normalize != nil {
		switch *b.Normalize {
		case 2:
		case -1:
			req.NoNormalize = true
		default:
			return req, badRequest("embd_normalize", "unsupported_value", "embd_normalize must be 2 (L2, the default) or -1 (none)")
		}
	}
	if b.Pooling != "" {
		p, err := model.ParsePooling(b.Pooling)
		if err != nil {
			return req, badRequest("pooling", "invalid_value", "%v", err)
		}
		req.Pooling = p
	}
	req.Truncate = b.Truncate
	return req, nil
}

// embedError maps an error of Engine.Embed / Rerank to its HTTP answer,
// naming the field the engine blamed.
func embedError(err error) *apiError {
	e := engineError(err, "input")
	var fe *engine.FieldError
	if errors.As(err, &fe) && e.Status == http.StatusBadRequest {
		e.Param = strp(fe.Field)
		if errors.Is(err, engine.ErrNoPooling) {
			e.Code = strp("model_not_embedding")
		}
	}
	return e
}

// embeddingBase64 is OpenAI's base64 encoding: the little-endian float32
// values (of every token's vector, one after another, with pooling none).
func embeddingBase64(d engine.Embedding) string {
	var buf []byte
	put := func(v []float32) {
		for _, x := range v {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
		}
	}
	put(d.Vector)
	for _, v := range d.PerToken {
		put(v)
	}
	return base64.StdEncoding.EncodeToString(buf)
}
