package engine

import "github.com/kvwarden/kvwarden/engine/chat"

// ChatTemplate returns the template ApplyChatTemplate renders with for the
// given ChatOptions.Template name, with or without tools (a "tool_use"
// template is picked for tools where the file has one). Callers read its
// source to learn the model's tool-call and reasoning format.
func (e *Engine) ChatTemplate(name string, withTools bool) (*chat.Template, error) {
	if e.chat.err != nil {
		return nil, e.chat.err
	}
	return e.chat.set.Select(name, withTools)
}
