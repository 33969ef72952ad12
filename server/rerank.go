package server

import (
	"encoding/json"
	"net/http"

	"github.com/kvwarden/kvwarden/engine"
)

// rerankRequest is POST /v1/rerank in the shape llama-server, Jina and
// Cohere share. documents are strings or {"text": ...} objects.
type rerankRequest struct {
	Model           string            `json:"model"`
	Query           *string           `json:"query"`
	Documents       []json.RawMessage `json:"documents"`
	TopN            *int              `json:"top_n"`
	ReturnDocuments bool              `json:"return_documents"`
	Truncate        bool              `json:"truncate"`
}

type rerankDocument struct {
	Text string `json:"text"`
}

type rerankResult struct {
	Index          int             `json:"index"`
	RelevanceScore float32         `json:"relevance_score"`
	Document       *rerankDocument `json:"document,omitempty"`
}

type rerankResponse struct {
	Model   string         `json:"model"`
	Object  string         `json:"object"`
	Usage   embeddingUsage `json:"usage"`
	Results []rerankResult `json:"results"`
}

// handleRerank is POST /v1/rerank, /rerank, /v1/reranking and /reranking.
func (s *Server) handleRerank(w http.ResponseWriter, r *http.Request) {
	const ep = "rerank"
	var body rerankRequest
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
	res, err := s.eng.Rerank(r.Context(), req)
	if err != nil {
		s.reject(w, ep, embedError(err))
		return
	}
	out := rerankResponse{Model: s.modelID(), Object: "list", Results: make([]rerankResult, len(res.Results)),
		Usage: embeddingUsage{PromptTokens: res.PromptTokens, TotalTokens: res.PromptTokens}}
	for i, sc := range res.Results {
		out.Results[i] = rerankResult{Index: sc.Index, RelevanceScore: sc.Score}
		if body.ReturnDocuments {
			out.Results[i].Document = &rerankDocument{Text: req.Documents[sc.Index]}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (b *rerankRequest) engineRequest() (engine.RerankRequest, *apiError) {
	var req engine.RerankRequest
	if b.Query == nil {
		return req, badRequest("query", "missing_required_parameter", "query is required")
	}
	if *b.Query == "" {
		return req, badRequest("query", "invalid_value", "query must not be empty")
	}
	if len(b.Documents) == 0 {
		return req, badRequest("documents", "invalid_value", "documents must be a non-empty list")
	}
	if len(b.Documents) > MaxEmbeddingInputs {
		return req, badRequest("documents", "invalid_value", "documents has %d entries, at most %d", len(b.Documents), MaxEmbeddingInputs)
	}
	req.Query = *b.Query
	req.Documents = make([]string, len(b.Documents))
	for i, raw := range b.Documents {
		var text string
		if json.Unmarshal(raw, &text) != nil {
			var d rerankDocument
			if json.Unmarshal(raw, &d) != nil {
				return req, badRequest("documents", "invalid_type", "documents[%d] must be a string or an object with text", i)
			}
			text = d.Text
		}
		if text == "" {
			return req, badRequest("documents", "invalid_value", "documents[%d] is empty", i)
		}
		req.Documents[i] = text
	}
	if b.TopN != nil {
		if *b.TopN < 1 {
			return req, badRequest("top_n", "invalid_value", "top_n must be at least 1")
		}
		req.TopN = *b.TopN
	}
	req.Truncate = b.Truncate
	return req, nil
}
