package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/kvwarden/kvwarden/engine/tokenizer"
	"github.com/kvwarden/kvwarden/internal/version"
)

// llama-server's endpoints besides the OpenAI ones, in its shapes, for the
// tools and scripts written against it: GET /health (health.go), POST
// /tokenize and /detokenize, GET /props.

func (s *Server) llamaRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /health", s.handleLlamaHealth)
	mux.HandleFunc("GET /v1/health", s.handleLlamaHealth)
	mux.HandleFunc("/tokenize", s.handleTokenize)
	mux.HandleFunc("/detokenize", s.handleDetokenize)
	mux.HandleFunc("/props", s.handleProps)
}

// tokenizeRequest is POST /tokenize.
type tokenizeRequest struct {
	Content json.RawMessage `json:"content"`
	// AddSpecial adds BOS (and EOS) as the vocabulary wants them for a
	// prompt (default false, as llama-server).
	AddSpecial bool `json:"add_special"`
	// ParseSpecial turns special-token text ("<|im_start|>") into the
	// special token (default true, as llama-server).
	ParseSpecial *bool `json:"parse_special"`
	WithPieces   bool  `json:"with_pieces"`
}

type tokenPiece struct {
	ID int `json:"id"`
	// Piece is the token's text, or its bytes as an array of numbers
	// when they are not valid UTF-8 (part of a character).
	Piece any `json:"piece"`
}

func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	var body tokenizeRequest
	if e := s.llamaBody(w, r, &body); e != nil {
		s.reject(w, "tokenize", e)
		return
	}
	var content string
	if !isNull(body.Content) {
		if err := json.Unmarshal(body.Content, &content); err != nil {
			s.reject(w, "tokenize", badRequest("content", "invalid_type", "content must be a string"))
			return
		}
	}
	tok := s.eng.Tokenizer()
	opt := tokenizer.Options{Special: body.ParseSpecial == nil || *body.ParseSpecial}
	if body.AddSpecial {
		opt.BOS, opt.EOS = tok.AddBOS(), tok.AddEOS()
	}
	ids := []int{}
	if content != "" || opt.BOS || opt.EOS {
		var err error
		if ids, err = tok.Encode(content, opt); err != nil {
			s.reject(w, "tokenize", badRequest("content", "invalid_value", "tokenizing the content: %v", err))
			return
		}
	}
	if !body.WithPieces {
		writeJSON(w, http.StatusOK, map[string]any{"tokens": ids})
		return
	}
	pieces := make([]tokenPiece, len(ids))
	for i, id := range ids {
		b := piece(tok, id)
		pieces[i] = tokenPiece{ID: id, Piece: string(b)}
		if !utf8.Valid(b) {
			n := make([]int, len(b))
			for j, c := range b {
				n[j] = int(c)
			}
			pieces[i].Piece = n
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": pieces})
}

// piece is the text token id stands for, as llama.cpp's token_to_piece
// with special tokens rendered: a word's leading space is kept (decoded
// as if it followed an ordinary token, not at the start of a text), and a
// control token, which decodes to nothing in generated text, is its
// vocabulary text ("<s>", "<|im_end|>").
func piece(tok tokenizer.Tokenizer, id int) []byte {
	if b := tok.Decode(id, id); len(b) > 0 {
		return b
	}
	return []byte(tok.Piece(id))
}

func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Tokens []int `json:"tokens"`
	}
	if e := s.llamaBody(w, r, &body); e != nil {
		s.reject(w, "detokenize", e)
		return
	}
	tok := s.eng.Tokenizer()
	n := tok.VocabSize()
	var out []byte
	for i, id := range body.Tokens {
		if id < 0 || id >= n {
			s.reject(w, "detokenize", badRequest(fmt.Sprintf("tokens[%d]", i), "invalid_value", "tokens[%d] = %d is outside the vocabulary of %d", i, id, n))
			return
		}
		out = append(out, piece(tok, id)...)
	}
	// Bytes that are not valid UTF-8 (a character cut in two) become
	// U+FFFD in the JSON string.
	writeJSON(w, http.StatusOK, map[string]string{"content": string(out)})
}

// llamaBody runs preflight (method POST, API key) and decodes the body.
func (s *Server) llamaBody(w http.ResponseWriter, r *http.Request, v any) *apiError {
	if e := s.preflight(w, r, http.MethodPost); e != nil {
		return e
	}
	return decodeBody(w, r, s.maxBody, v)
}

// handleProps is GET /props: the server's settings in llama-server's
// shape (the fields that mean something here; POST /props, which changes
// them in llama-server, is refused).
func (s *Server) handleProps(w http.ResponseWriter, r *http.Request) {
	if e := s.preflight(w, r, http.MethodGet); e != nil {
		s.reject(w, "props", e)
		return
	}
	eng := s.eng
	tok := eng.Tokenizer()
	tokText := func(id int) string {
		if id < 0 {
			return ""
		}
		return tok.Piece(id)
	}
	props := map[string]any{
		"default_generation_settings": map[string]any{
			"n_ctx": eng.MaxContext(),
			// What /v1/completions does with a request that sets nothing
			// (chat requests default max_tokens to the rest of the
			// context); a seed of 4294967295 is llama.cpp's "random".
			"params": map[string]any{
				"n_predict":         DefaultCompletionMaxTokens,
				"max_tokens":        DefaultCompletionMaxTokens,
				"seed":              uint32(0xFFFFFFFF),
				"temperature":       1.0,
				"top_k":             0,
				"top_p":             1.0,
				"min_p":             0.0,
				"repeat_last_n":     DefaultRepeatLastN,
				"repeat_penalty":    1.0,
				"presence_penalty":  0.0,
				"frequency_penalty": 0.0,
				"stop":              []string{},
				"stream":            false,
				"n_probs":           0,
			},
		},
		"total_slots":        eng.Config().MaxSeqs,
		"model_alias":        s.modelID(),
		"model_path":         s.path,
		"modalities":         map[string]bool{"vision": false, "video": false, "audio": false},
		"chat_template":      eng.ChatTemplateSource(""),
		"chat_template_caps": map[string]any{},
		"bos_token":          tokText(tok.BOS()),
		"eos_token":          tokText(tok.EOS()),
		"build_info":         version.Get().BuildInfo(),
		"is_sleeping":        false,
	}
	if t := eng.ChatTemplateSource("tool_use"); t != "" {
		props["chat_template_tool_use"] = t
	}
	writeJSON(w, http.StatusOK, props)
}
