package engine

// ChatTemplateSource returns the text of the chat template that renders
// chats (name "" is the default one; "tool_use" and other names are the
// model file's named templates): Config.ChatTemplate when set, else the
// model's, else ChatML when the file has none (ChatTemplateFallback). It
// returns "" when that template does not parse or does not exist.
// llama-server's /props reports it.
func (e *Engine) ChatTemplateSource(name string) string {
	if e.chat == nil || e.chat.set == nil {
		return ""
	}
	t, err := e.chat.set.Select(name, false)
	if err != nil || t == nil {
		return ""
	}
	return t.Source()
}
