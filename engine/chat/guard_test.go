package chat

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tight keeps hostile renders small and fast; the checks are the same as
// with the defaults, only the numbers differ.
var tight = Limits{MaxSteps: 20_000, MaxDepth: 32, MaxHeapGrowth: 64 << 20, Timeout: 5 * time.Second, MaxOutput: 1 << 20}

func render(t *testing.T, src string, lim Limits) (string, error) {
	t.Helper()
	tm, err := Parse(src)
	if err != nil {
		return "", err
	}
	tm.Limits = lim
	return tm.Render(Input{Messages: []Message{{Role: "user", Content: "hi"}}, AddGenerationPrompt: true})
}

// TestHostileTemplates: each template tries to run forever, recurse without
// end, or build an enormous value. Each must end with an ErrLimit (at parse
// or render time), never a panic, a crash or a hang.
func TestHostileTemplates(t *testing.T) {
	cases := []struct{ name, src string }{
		{"nested loops", "{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}x{% endfor %}{% endfor %}{% endfor %}"},
		{"huge range", "{% for a in range(10000000000) %}x{% endfor %}"},
		{"macro recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"},
		{"mutual recursion", "{% macro f() %}{{ g() }}{% endmacro %}{% macro g() %}{{ f() }}{% endmacro %}{{ f() }}"},
		{"self-containing list", "{% set l = [] %}{{ l.append(l) }}{{ l }}"},
		{"self-containing list, blank before the call", "{% set l = [] %}{{ l.append (l) }}{{ l }}"},
		{"self-containing list, stray byte before the call", "{% set l = [] %}{{ l.append\xcb(l) }}{{ l }}"},
		{"insert with a blank", "{% set l = [] %}{{ l.insert (0, l) }}{{ l }}"},
		{"self-containing namespace", "{% set ns = namespace(a=1) %}{% set ns.a = ns %}{{ ns }}"},
		{"cycle through a loop variable", "{% for l in [[]] %}{{ l.append(l) }}{{ l }}{% endfor %}"},
		{"cycle through a dict", "{% set l = [] %}{{ l.append({'x': l}) }}{{ l|tojson }}"},
		{"mutation inside an expression", "{% set l = [] %}{{ l.append(l) or l }}"},
		{"deep value", "{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}"},
		{"string doubling", "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}"},
		{"unrolled doubling", "{% set s = 'abcdefgh' %}" + strings.Repeat("{% set s = s ~ s %}", 48) + "{{ s|length }}"},
		{"shared doubling", "{% set ns = namespace(x=['a']) %}{% for i in range(64) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}{{ ns.x }}"},
		{"output flood", "{% set ns = namespace(s='x') %}{% for i in range(22) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{% for i in range(10000) %}{{ ns.s }}{% endfor %}"},
		{"string repetition", "{{ 'a' * 100000000000 }}"},
		{"repetition by a variable", "{% set n = 100000000000 %}{{ 'a' * n }}"},
		{"nested repetition", "{{ ('a' * 30) * 30 }}"},
		{"replace with empty pattern", "{% set s = 'abc' %}{{ s|replace('', s ~ s ~ s) }}"},
		{"replace method", "{% set s = 'abc' %}{{ s.replace('', s) }}"},
		{"indent width", "{{ 'a\nb'|indent(1000000000) }}"},
		{"join separator", "{% set s = 'x' %}{{ range(10)|join(s) }}"},
		{"format", "{% set f = '{}' %}{{ f.format('x') }}"},
		{"tojson indent", "{{ [1]|tojson(indent=100000000) }}"},
		{"recursive loop", "{% for x in [[1]] recursive %}{{ loop(x) }}{% endfor %}"},
		{"deep brackets", "{{ " + strings.Repeat("(", 200) + "1" + strings.Repeat(")", 200) + " }}"},
		{"deep blocks", strings.Repeat("{% if true %}", 200) + "x" + strings.Repeat("{% endif %}", 200)},
		{"oversized source", "{# " + strings.Repeat("x", MaxSource) + " #}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := render(t, c.src, tight)
			require.ErrorIs(t, err, ErrLimit, "rendered %d bytes", len(out))
			require.ErrorIs(t, err, ErrTemplate)
		})
	}
}

// TestReservedNames: a template cannot reach the guard's own functions.
func TestReservedNames(t *testing.T) {
	_, err := Parse("{% macro f() %}{{ __kvw_leave() }}{{ f() }}{% endmacro %}{{ f() }}")
	require.ErrorIs(t, err, ErrSyntax)
}

// TestGuardKeepsOrdinaryConstructs: the amplification rules let through
// what real templates write.
func TestGuardKeepsOrdinaryConstructs(t *testing.T) {
	cases := []struct{ src, want string }{
		{"{{ '-' * 3 }}", "---"},
		{"{{ 2 * 3 }}", "6"},
		{"{{ messages[0].content|replace('h', 'H') }}", "Hi"},
		{"{{ messages[0].content.replace('\\n', '\\\\n') }}", "hi"},
		{"{{ 'a\nb'|indent(2) }}", "a\n  b"},
		{"{{ ['a', 'b']|join(', ') }}", "a, b"},
		{"{{ '{} and {}'.format('x', 'y') }}", "x and y"},
		{"{{ {'a': 1}|tojson(indent=2) }}", "{\n  \"a\": 1\n}"},
	}
	for _, c := range cases {
		out, err := render(t, c.src, Limits{})
		require.NoError(t, err, c.src)
		require.Equal(t, c.want, out, c.src)
	}
}

// FuzzRender feeds arbitrary template text to Parse and Render: whatever
// it is, the result is an output or an error wrapping ErrTemplate, within
// the limits, and never a panic. The seeds are hostile templates; run
// `go test -fuzz FuzzRender ./engine/chat/` to explore beyond them.
func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"{% for a in range(100) %}{% for b in range(100) %}{{ a }}{% endfor %}{% endfor %}",
		"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
		"{% set l = [] %}{{ l.append(l) }}{{ l }}",
		"{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
		"{{ 'a' * 100000000000 }}",
		"{{ raise_exception('no') }}",
		"{% for m in messages %}{{ m.role }}{{ m.content|tojson }}{% endfor %}{% if add_generation_prompt %}A{% endif %}",
		"{{ x.y.z() }}{{ 1 / 0 }}{{ 'a' - 1 }}{{ [1][5] }}{{ {}|first }}{{ none.x }}",
		"{% if %}", "{{", "{% for %}{% endfor %}", "{% endfor %}", "{% macro %}",
		"{{ 'a'|indent(-1) }}{{ 'a' * -1 }}{{ range(1, 10, -1) }}{{ [1,2,3][::0] }}",
		"{% set a, b = 1 %}{{ a }}{% set x.y = 1 %}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		tm, err := Parse(src)
		if err != nil {
			require.ErrorIs(t, err, ErrTemplate)
			return
		}
		tm.Limits = tight
		out, err := tm.Render(Input{Messages: []Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "yo"}}})
		if err != nil {
			require.ErrorIs(t, err, ErrTemplate)
			return
		}
		require.LessOrEqual(t, len(out), tight.MaxOutput)
	})
}
