package chat

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/chat/internal/jinja"
)

// eightMiB is a template prefix that binds s to an 8 MiB string by doubling.
var eightMiB = "{% set s = 'ab' %}" + strings.Repeat("{% set s = s ~ s %}", 22)

// HostileExpressions are the templates of issue 25 item 1: each asks for
// gigabytes inside one expression, where no guard call runs. Before the
// engine charged values to a budget, each of them grew the process to
// 1-2 GB and it died with "fatal error: out of memory".
var hostileExpressions = []struct{ name, src string }{
	{"34 nested tojson", "{{ messages" + strings.Repeat("|tojson", 34) + " }}"},
	{"8 MiB string concatenated 400 times", eightMiB + "{{ s" + strings.Repeat(" ~ s", 400) + " }}"},
	{"list concatenation", "{% set l = range(100000)|list %}{{ (l" + strings.Repeat(" + l", 400) + ")|length }}"},
	{"string as a list, concatenated", eightMiB + "{{ (s|list" + strings.Repeat(" + s|list", 400) + ")|length }}"},
	{"8 MiB string with +", eightMiB + "{{ s" + strings.Repeat(" + s", 400) + " }}"},
	{"join of a big list", eightMiB + "{{ [s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s]|join(' ') }}"},
}

// TestHostileExpressionsFailWithinBudget: each hostile template ends with
// ErrLimit (wrapping the engine's ErrBudget) before it allocates past the
// render's budget, and the same Template still renders an ordinary
// conversation afterwards.
func TestHostileExpressionsFailWithinBudget(t *testing.T) {
	lim := Limits{MaxBytes: 64 << 20, Timeout: time.Minute}
	for _, c := range hostileExpressions {
		t.Run(c.name, func(t *testing.T) {
			tm, err := Parse(c.src + "{% if ok %}fine{% endif %}")
			require.NoError(t, err)
			tm.Limits = lim
			out, err := tm.Render(Input{Messages: []Message{{Role: "user", Content: `say "hi"`}}})
			require.ErrorIs(t, err, ErrLimit, "rendered %d bytes", len(out))
			require.ErrorIs(t, err, jinja.ErrBudget)
			require.ErrorIs(t, err, ErrTemplate)
			require.ErrorContains(t, err, "memory budget")
		})
	}
}

// TestManyMessagesRenderInLinearTime: a template that assigns inside its
// loop over the messages renders a long conversation. The guard used to
// walk every variable (all messages included) after each assignment, so
// such a render grew with the square of the conversation: 4,000 messages
// took more than the 2 s default on six of the twelve real templates.
// Now the guard does constant work per step, and the budget is charged
// for values only.
func TestManyMessagesRenderInLinearTime(t *testing.T) {
	tm, err := Parse(`{%- set ns = namespace(last='') -%}
{%- for m in messages -%}
{%- set content = m.content|trim -%}
{%- set ns.last = m.role -%}
<|{{ m.role }}|>{{ content }}
{%- endfor -%}`)
	require.NoError(t, err)
	// Steps, not time, are what a linear render must stay within: 20,000
	// messages take a few steps each. The timeout is generous so that a
	// slow machine cannot fail the test; the quadratic walk needed far
	// more than this on any machine.
	tm.Limits = Limits{Timeout: 20 * time.Second}
	msgs := make([]Message, 20000)
	for i := range msgs {
		msgs[i] = Message{Role: "user", Content: fmt.Sprintf(" message %d ", i)}
	}
	out, err := tm.Render(Input{Messages: msgs})
	require.NoError(t, err)
	require.Equal(t, len(msgs), strings.Count(out, "<|user|>"))
	require.Contains(t, out, "<|user|>message 19999")
}
