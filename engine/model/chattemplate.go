package model

import (
	"strings"

	"github.com/kvwarden/kvwarden/engine/model/gguf"
)

// ChatTemplates reads a GGUF file's chat templates: tokenizer.chat_template
// under "" and each tokenizer.chat_template.<name> (e.g. tool_use) under
// <name>. It returns nil when there are none. The text is copied out, so it
// outlives the file mapping.
func ChatTemplates(f *gguf.File) map[string]string {
	const key = "tokenizer.chat_template"
	var out map[string]string
	for _, kv := range f.Metadata {
		name, ok := strings.CutPrefix(kv.Key, key)
		if !ok || (name != "" && !strings.HasPrefix(name, ".")) {
			continue
		}
		s, ok := kv.Value.(string)
		if !ok {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[strings.TrimPrefix(name, ".")] = strings.Clone(s)
	}
	return out
}
