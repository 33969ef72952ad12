package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// templatesDir is ../shared/templates, skipped (or failed under CI) when absent.
func templatesDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(testmodels.Dir(t), "..", "templates")
	if _, err := os.Stat(d); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("templates not found at %s: %v", d, err)
		}
		t.Skipf("templates not found at %s", d)
	}
	return d
}

type expected struct {
	Messages  []map[string]any `json:"messages"`
	Templates map[string]struct {
		BOS string `json:"bos"`
		EOS string `json:"eos"`
		Out string `json:"out"`
	} `json:"templates"`
}

// pinned is the date the expected renders were made with.
func pinned() time.Time { return time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC) }

func messages(raw []map[string]any) []Message {
	out := make([]Message, len(raw))
	for i, m := range raw {
		out[i] = Message{Role: m["role"].(string), Content: m["content"].(string)}
	}
	return out
}

// TestTemplatesMatchHuggingFace renders the twelve real templates for both
// conversations and compares with what transformers' apply_chat_template
// produced, byte for byte.
func TestTemplatesMatchHuggingFace(t *testing.T) {
	dir := templatesDir(t)
	for _, file := range []string{"expected_with_system.json", "expected_no_system.json"} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		require.NoError(t, err)
		var exp expected
		require.NoError(t, json.Unmarshal(b, &exp))
		require.Len(t, exp.Templates, 12)
		names := make([]string, 0, len(exp.Templates))
		for n := range exp.Templates {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, name := range names {
			want := exp.Templates[name]
			t.Run(strings.TrimSuffix(file, ".json")+"/"+name, func(t *testing.T) {
				src, err := os.ReadFile(filepath.Join(dir, name+".jinja"))
				require.NoError(t, err)
				tmpl, err := Parse(string(src))
				require.NoError(t, err)
				got, err := tmpl.Render(Input{
					Messages: messages(exp.Messages), AddGenerationPrompt: true,
					BOSToken: want.BOS, EOSToken: want.EOS, Now: pinned,
				})
				if msg, ok := strings.CutPrefix(want.Out, "ERROR:"); ok {
					var raised *RaiseError
					require.ErrorAs(t, err, &raised)
					require.ErrorIs(t, err, ErrTemplate)
					// transformers prints the exception class before the message.
					require.Equal(t, strings.TrimPrefix(strings.TrimSpace(msg), "TemplateError: "), raised.Message)
					return
				}
				require.NoError(t, err)
				require.Equal(t, want.Out, got)
			})
		}
	}
}

func TestChatMLFallback(t *testing.T) {
	s, err := NewSet("", nil)
	require.NoError(t, err)
	require.True(t, s.Fallback)
	out, err := s.Default.Render(Input{
		Messages:            []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}},
		AddGenerationPrompt: true,
	})
	require.NoError(t, err)
	require.Equal(t, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", out)
}

func TestSetSelectsNamedTemplates(t *testing.T) {
	s, err := NewSet("default:{{ messages[0].content }}", map[string]string{"tool_use": "tools:{{ tools|length }}"})
	require.NoError(t, err)
	require.False(t, s.Fallback)
	in := Input{Messages: []Message{{Role: "user", Content: "x"}}}

	cases := []struct {
		name      string
		withTools bool
		want      string
	}{
		{"", false, "default:x"},
		{"default", false, "default:x"},
		{"", true, "tools:1"},
		{"tool_use", false, "tools:0"},
	}
	for _, c := range cases {
		tm, err := s.Select(c.name, c.withTools)
		require.NoError(t, err)
		in := in
		if c.withTools {
			in.Tools = []any{map[string]any{"type": "function"}}
		}
		got, err := tm.Render(in)
		require.NoError(t, err)
		require.Equal(t, c.want, got, "name %q tools %v", c.name, c.withTools)
	}
	_, err = s.Select("rag", false)
	require.ErrorIs(t, err, ErrNoTemplate)
	require.ErrorContains(t, err, "tool_use")

	// A broken named template is left out; the default still works.
	s, err = NewSet("ok", map[string]string{"rag": "{% for %}"})
	require.NoError(t, err)
	_, err = s.Select("rag", false)
	require.ErrorIs(t, err, ErrSyntax)
	require.ErrorContains(t, err, "tokenizer.chat_template.rag")
	tm, err := s.Select("", false)
	require.NoError(t, err)
	out, err := tm.Render(Input{})
	require.NoError(t, err)
	require.Equal(t, "ok", out)
	_, err = NewSet("{% for %}", nil)
	require.ErrorIs(t, err, ErrSyntax)
}

func TestRaiseExceptionIsTyped(t *testing.T) {
	tm, err := Parse(`{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}ok`)
	require.NoError(t, err)
	_, err = tm.Render(Input{Messages: []Message{{Role: "system", Content: "s"}}})
	var raised *RaiseError
	require.ErrorAs(t, err, &raised)
	require.Equal(t, "System role not supported", raised.Message)
	require.ErrorIs(t, err, ErrRaised)
	require.ErrorIs(t, err, ErrTemplate)

	out, err := tm.Render(Input{Messages: []Message{{Role: "user", Content: "u"}}})
	require.NoError(t, err)
	require.Equal(t, "ok", out)
}

func TestRenderFeatures(t *testing.T) {
	cases := []struct {
		name, src, want string
		in              Input
	}{
		{"trim_blocks", "{% if true %}\nA{% endif %}\nB", "AB", Input{}},
		{"lstrip_blocks", "  {% if true %}\nA\n  {% endif %}\nB", "A\nB", Input{}},
		{"loop controls", "{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}", "02", Input{}},
		{"loop vars", "{% for m in messages %}{{ loop.index }}{{ m.role }}{% if not loop.last %},{% endif %}{% endfor %}", "1user,2assistant",
			Input{Messages: []Message{{Role: "user"}, {Role: "assistant"}}}},
		{"tojson keeps unicode", "{{ messages[0].content|tojson }}", `"héllo \"q\""`,
			Input{Messages: []Message{{Role: "user", Content: `héllo "q"`}}}},
		{"extra fields", "{{ messages[0].tool_calls[0].name }}", "f",
			Input{Messages: []Message{{Role: "assistant", Extra: map[string]any{"tool_calls": []any{map[string]any{"name": "f"}}}}}}},
		{"bos eos", "{{ bos_token }}x{{ eos_token }}", "<s>x</s>", Input{BOSToken: "<s>", EOSToken: "</s>"}},
		{"no tools is none, as transformers passes it", "{{ tools is defined }} {{ tools is none }} {{ documents is none }}", "True True True", Input{}},
		{"generation prompt", "{% if add_generation_prompt %}G{% endif %}", "G", Input{AddGenerationPrompt: true}},
		{"strftime", "{{ strftime_now('%d %b %Y|%B %d, %Y|%Y-%m-%d|%-d') }}", "02 Dec 2026|December 02, 2026|2026-12-02|2", Input{Now: pinned}},
		{"vars", "{{ enable_thinking }}", "False", Input{Vars: map[string]any{"enable_thinking": false}}},
		{"macro", "{% macro f(x) %}[{{ x }}]{% endmacro %}{{ f(1) }}{{ f(2) }}", "[1][2]", Input{}},
		{"set block", "{% set x %}a{{ 1 }}{% endset %}{{ x }}", "a1", Input{}},
		{"namespace", "{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", "3", Input{}},
		{"append", "{% set l = [] %}{{ l.append(1) }}{{ l.append(2) }}{{ l|join(',') }}", "1,2", Input{}},
		{"raw", "{% raw %}{{ x }}{% endraw %}", "{{ x }}", Input{}},
		{"raw JSON keeps key order", "{{ tools|tojson }}|{{ messages[0].tool_calls[0].function.arguments.b }}",
			`[{"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": [1.5, null, true]}}}]|x`,
			Input{
				Tools: []any{json.RawMessage(`{"type":"function","function":{"name":"f","parameters":{"z":1,"a":[1.5,null,true]}}}`)},
				Messages: []Message{{Role: "assistant", Extra: map[string]any{
					"tool_calls": json.RawMessage(`[{"function":{"name":"f","arguments":{"b":"x"}}}]`)}}},
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tm, err := Parse(c.src)
			require.NoError(t, err)
			got, err := tm.Render(c.in)
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func TestSyntaxError(t *testing.T) {
	_, err := Parse("{% if %}")
	require.ErrorIs(t, err, ErrSyntax)
	_, err = Parse("{{ x ")
	require.ErrorIs(t, err, ErrSyntax)
	require.True(t, errors.Is(err, ErrTemplate))
}

// TestConcurrentRenders: one Template serves many goroutines; each render
// has its own guard (a limit hit by one does not leak into another).
func TestConcurrentRenders(t *testing.T) {
	tm, err := Parse("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if messages|length > 3 %}{{ raise_exception('too long') }}{% endif %}")
	require.NoError(t, err)
	const workers = 8
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := range 50 {
				msgs := make([]Message, 1+(w+i)%5)
				for j := range msgs {
					msgs[j] = Message{Role: "user", Content: strings.Repeat("x", j)}
				}
				out, err := tm.Render(Input{Messages: msgs})
				switch {
				case len(msgs) > 3 && !errors.Is(err, ErrRaised):
					errs <- err
					return
				case len(msgs) <= 3 && (err != nil || strings.Count(out, "<user>") != len(msgs)):
					errs <- errors.Join(err, errors.New(out))
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		require.NoError(t, <-errs)
	}
}
