package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/model"
)

// hostileTemplate picks, by the user's message, one of the expressions of
// issue 25 item 1 that allocate gigabytes in one step; any other message
// renders normally. Before the Jinja engine charged its values to a budget,
// the first such request killed the server ("fatal error: out of memory",
// then connection refused).
var hostileTemplate = `{%- set m = messages[0].content -%}
{%- set s = 'ab' -%}` + strings.Repeat("{%- set s = s ~ s -%}", 22) + `
{%- if m == 'tojson' -%}{{ messages` + strings.Repeat("|tojson", 34) + ` }}
{%- elif m == 'concat' -%}{{ s` + strings.Repeat(" ~ s", 400) + ` }}
{%- elif m == 'lists' -%}{% set l = range(1000000)|list %}{{ (l` + strings.Repeat(" + l", 400) + `)|length }}
{%- elif m == 'strlist' -%}{{ (s|list` + strings.Repeat(" + s|list", 400) + `)|length }}
{%- else -%}{% for x in messages %}<{{ x.role }}>{{ x.content }}{% endfor %}
{%- endif -%}`

// TestHostileTemplateIsABadRequest: each hostile render is answered 400
// (chat_template_error, naming the memory budget) on both endpoints that
// render, and the server keeps answering: the next ordinary request works.
func TestHostileTemplateIsABadRequest(t *testing.T) {
	ts := chatServer(t, engine.Config{ChatTemplate: hostileTemplate}, sep, model.SyntheticVocab)
	for _, attack := range []string{"tojson", "concat", "lists", "strlist"} {
		for _, ep := range []string{"/apply-template", "/v1/chat/completions"} {
			code, raw := postJSON(t, ts.URL+ep, map[string]any{"messages": []map[string]any{{"role": "user", "content": attack}}, "max_tokens": 1})
			require.Equal(t, http.StatusBadRequest, code, "%s %s: %s", attack, ep, raw)
			require.Contains(t, string(raw), "chat_template_error")
			require.Contains(t, string(raw), "memory budget")
		}
		code, raw := postJSON(t, ts.URL+"/apply-template", map[string]any{"messages": []map[string]any{{"role": "user", "content": "hello"}}})
		require.Equal(t, http.StatusOK, code, "after %s: %s", attack, raw)
		require.JSONEq(t, `{"prompt": "<user>hello"}`, string(raw))
	}
}
