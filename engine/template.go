package engine

import (
	"fmt"
	"log/slog"

	"github.com/kvwarden/kvwarden/engine/chat"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
)

// chatTemplates is the engine's parsed chat templates. A model file whose
// template does not parse still serves completions; chat requests then get
// the parse error.
type chatTemplates struct {
	set *chat.Set
	err error
}

func newChatTemplates(c Config, w *model.Weights, log *slog.Logger) (*chatTemplates, error) {
	def, named := w.ChatTemplates[""], map[string]string{}
	for k, v := range w.ChatTemplates {
		if k != "" {
			named[k] = v
		}
	}
	if c.ChatTemplate != "" {
		set, err := chat.NewSet(c.ChatTemplate, named)
		if err != nil {
			return nil, fmt.Errorf("%w: ChatTemplate: %w", ErrInvalidParams, err)
		}
		log.Info("engine: chat template given by the caller replaces the model's")
		return &chatTemplates{set: set}, nil
	}
	set, err := chat.NewSet(def, named)
	if err != nil {
		log.Warn("engine: the model's chat template is unusable; chat requests will fail", "err", err)
		return &chatTemplates{err: err}, nil
	}
	for name, err := range set.Broken {
		log.Warn("engine: a named chat template of the model is unusable", "name", name, "err", err)
	}
	if set.Fallback {
		log.Warn("engine: the model file has no chat template (tokenizer.chat_template); using ChatML")
	}
	return &chatTemplates{set: set}, nil
}

// ChatOptions controls ApplyChatTemplate.
type ChatOptions struct {
	// AddGenerationPrompt ends the render with the assistant's turn header,
	// so the model answers (what a chat request wants).
	AddGenerationPrompt bool
	// Template names a template of the file (tokenizer.chat_template.<name>,
	// e.g. "tool_use"); "" is the default one, or tool_use when Tools are
	// given and the file has it.
	Template string
	// Tools are OpenAI tool definitions (decoded JSON) for templates that
	// print them.
	Tools []any
	// Vars are extra template variables (e.g. enable_thinking).
	Vars map[string]any
}

// ChatTemplateFallback reports whether the engine renders chats with ChatML
// because the model file has no template of its own.
func (e *Engine) ChatTemplateFallback() bool {
	return e.chat.set != nil && e.chat.set.Fallback && e.cfg.ChatTemplate == ""
}

// ApplyChatTemplate renders a conversation into prompt text with the
// model's chat template (or Config.ChatTemplate). Errors wrap
// chat.ErrTemplate; a template that raises gives a *chat.RaiseError with
// its message. The text holds special-token text (<|im_start|>, ...): submit
// it with Request.ParseSpecial set, or tokenize it with ChatTokens.
func (e *Engine) ApplyChatTemplate(msgs []chat.Message, opt ChatOptions) (string, error) {
	if e.chat.err != nil {
		return "", e.chat.err
	}
	t, err := e.chat.set.Select(opt.Template, len(opt.Tools) > 0)
	if err != nil {
		return "", err
	}
	return t.Render(chat.Input{
		Messages: msgs, AddGenerationPrompt: opt.AddGenerationPrompt, Tools: opt.Tools, Vars: opt.Vars,
		BOSToken: e.piece(e.tok.BOS()), EOSToken: e.piece(e.tok.EOS()),
	})
}

// ChatTokens renders a conversation and tokenizes it the way a chat
// request's prompt is: special tokens recognised, BOS added only when the
// vocabulary wants it and the render does not already start with it.
func (e *Engine) ChatTokens(msgs []chat.Message, opt ChatOptions) ([]int, error) {
	text, err := e.ApplyChatTemplate(msgs, opt)
	if err != nil {
		return nil, err
	}
	return e.encodePrompt(text, true, true)
}

func (e *Engine) piece(id int) string {
	if id < 0 {
		return ""
	}
	return e.tok.Piece(id)
}

// encodePrompt tokenizes prompt text. bos asks for BOS, which is added only
// when the vocabulary wants one (add_bos_token) and the text did not
// already produce it (a chat render that starts with "<|begin_of_text|>").
func (e *Engine) encodePrompt(text string, bos, special bool) ([]int, error) {
	return e.encodePromptLimit(text, bos, special, -1)
}

// encodePromptLimit is encodePrompt that stops, with a
// *tokenizer.LimitError, once the tokenizer's result is known to exceed
// limit tokens (limit < 0: no limit). BOS may add one token to a result
// within limit.
func (e *Engine) encodePromptLimit(text string, bos, special bool, limit int) ([]int, error) {
	opt := tokenizer.Options{Special: special}
	var ids []int
	var err error
	if limit < 0 {
		ids, err = e.tok.Encode(text, opt)
	} else {
		ids, err = tokenizer.EncodeLimit(e.tok, text, opt, limit)
	}
	if err != nil {
		return nil, err
	}
	b := e.tok.BOS()
	if bos && b >= 0 && e.tok.AddBOS() && (len(ids) == 0 || ids[0] != b) {
		ids = append([]int{b}, ids...)
	}
	return ids, nil
}
