package jinja

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// doubled is a template prefix that builds s, a string of 2<<n bytes, by
// doubling: cheap in the source, large in memory.
func doubled(n int) string {
	return "{% set s = 'ab' %}" + strings.Repeat("{% set s = s ~ s %}", n)
}

// TestMeterRefusesBeforeAllocating: each expression asks for far more than
// the budget in one step (on the engine as it was, each of them allocated
// until the process died). Each must fail with ErrBudget, and the bytes
// the process really allocated must stay within the budget plus a little
// slack: the charge comes before the allocation, never after.
func TestMeterRefusesBeforeAllocating(t *testing.T) {
	const budget = 8 << 20
	d := NewDict()
	for i := range 20000 {
		d.AsDict().Set(strconv.Itoa(i), NewInt(int64(i)))
	}
	cases := []struct{ name, src string }{
		{"nested tojson", "{{ x" + strings.Repeat("|tojson", 34) + " }}"},
		{"concatenation with ~", doubled(18) + "{{ s" + strings.Repeat(" ~ s", 400) + " }}"},
		{"string +", doubled(18) + "{{ s" + strings.Repeat(" + s", 400) + " }}"},
		{"list +", "{% set l = range(100000) %}{{ (l" + strings.Repeat(" + l", 400) + ")|length }}"},
		{"string to list +", doubled(16) + "{{ (s|list" + strings.Repeat(" + s|list", 400) + ")|length }}"},
		{"repetition", doubled(10) + "{{ s * 1000000 }}"},
		{"join", "{% set l = range(100000) %}{{ l|join(x" + strings.Repeat(" ~ x", 100) + ") }}"},
		{"replace", doubled(18) + "{{ s|replace('a', s) }}"},
		{"replace method", doubled(18) + "{{ s.replace('', s) }}"},
		{"format", doubled(18) + "{{ '{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}'.format(s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s) }}"},
		{"indent", doubled(16) + "{{ s|replace('a', '\\n')|indent(1000) }}"},
		{"tojson indent", "{{ range(10000)|tojson(indent=1000) }}"},
		{"range", "{{ range(1000000000)|length }}"},
		{"range with a step", "{{ range(0, 10000000000, 2)|length }}"},
		{"append growth", "{% set l = [] %}{% for i in range(1000000) %}{{ l.append(i) }}{% endfor %}"},
		{"output", doubled(18) + "{% for i in range(100) %}{{ s }}{% endfor %}"},
		{"macro output", doubled(18) + "{% macro f() %}{{ s }}{{ s }}{% endmacro %}{{ f() ~ f() ~ f() ~ f() ~ f() }}"},
		{"upper", doubled(21) + "{{ s|upper }}"},
		{"split", doubled(20) + "{{ s.split('')|length }}"},
		{"slice", "{% set l = range(100000) %}{{ (l[:] + l[:] + l[::2] + l[::-1] + l[:] + l[:])|length }}"},
		{"dict items", "{{ (d.items()" + strings.Repeat(" + d.items()", 100) + ")|length }}"},
		{"dict keys and values", "{{ (d.keys()" + strings.Repeat(" + d.values()", 100) + ")|length }}"},
		{"dictsort", "{{ (d|dictsort" + strings.Repeat(" + d|dictsort", 100) + ")|length }}"},
		{"dict update", "{% set e = {} %}{% for i in range(100) %}{{ e.update(d) }}{% set e = {} %}{% endfor %}"},
		{"for over a string", doubled(20) + "{% for c in s %}{% endfor %}"},
		{"fromjson", "{% set j = '[' ~ '0,' * 0 ~ '0]' %}" + doubled(16) + "{{ (('[' ~ s|replace('a', '0,')|replace('b', '0,') ~ '0]')|fromjson)|length }}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tm, err := Compile(c.src)
			require.NoError(t, err)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			out, used, err := tm.RenderLimited(map[string]Value{"x": NewString(`a"b\c`), "d": d}, Limits{MaxBytes: budget})
			runtime.ReadMemStats(&after)
			require.ErrorIs(t, err, ErrBudget, "rendered %d bytes", len(out))
			require.LessOrEqual(t, used, int64(budget))
			require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(budget+(4<<20)), "allocated beyond the budget")
		})
	}
}

// TestMeterKeepsResults: under the budget, the metered operations give
// what the engine gave before.
func TestMeterKeepsResults(t *testing.T) {
	cases := []struct{ src, want string }{
		{"{{ 'ab' ~ 1 ~ none }}", "ab1"},
		{"{{ 'ab' + 'c' }}|{{ [1] + [2, 3] }}|{{ 'ab' * 3 }}|{{ 'ab' * -1 }}", "abc|[1, 2, 3]|ababab|"},
		{"{{ {'a': [1, 'x', none, true]} }}", "{'a': [1, 'x', None, True]}"},
		{"{{ {'b': 1, 'a': {'c': [1.5, 'x<y'] } }|tojson }}", `{"b": 1, "a": {"c": [1.5, "x<y"]}}`},
		{"{{ {'b': 1, 'a': {'c': [1.5, 'x<y'] } }|tojson(indent=2) }}", "{\n  \"a\": {\n    \"c\": [\n      1.5,\n      \"x\\u003cy\"\n    ]\n  },\n  \"b\": 1\n}"},
		{"{{ [[], {}]|tojson(indent=2) }}", "[\n  [],\n  {}\n]"},
		{"{{ x|tojson }}", `"q\"\\\n\t\u2028\u0001é\ufffd"`},
		{"{{ [1, 2]|tojson(separators=(',', ':')) }}", "[1,2]"},
		{"{{ 'a-b-c'.split('-')|join('+') }}|{{ ' a  b '.split()|length }}|{{ 'ab'.split('') }}", "a+b+c|2|['a', 'b']"},
		{"{{ 'aXbX'.replace('X', '--') }}|{{ 'aXbX'|replace('X', '', 1) }}|{{ 'ab'.replace('', '.') }}", "a--b--|abX|.a.b."},
		{"{{ '{} {}'.format(1, 'x') }}|{{ '{0}{0}'.format('y') }}", "1 x|yy"},
		{"{{ 'é' ~ 'abc'[1] ~ 'héllo'[1] ~ 'héllo'[-1] }}|{{ 'héllo'[9] is undefined }}", "ébéo|True"},
		{"{{ 'hello'[::-1] }}|{{ 'héllo'[::-1] }}|{{ [1, 2, 3, 4][::2] }}|{{ [1, 2, 3][1:100] }}|{{ [1, 2][0:10000000000:3] }}", "olleh|olléh|[1, 3]|[2, 3]|[1]"},
		{"{{ 'a\\nb\\n\\nc'|indent(2) }}", "a\n  b\n\n  c"},
		{"{{ '<&>'|escape }}|{{ 'AbC'|lower }}{{ 'x'|upper }}|{{ 'ab cd'|title }}|{{ 'aB'|capitalize }}", "&lt;&amp;&gt;|abcX|Ab Cd|Ab"},
		{"{{ [3, 1, 2]|sort }}{{ [1, 1, 2]|unique|list }}{{ 'ab'|list }}{{ [1, 2]|reverse }}{{ 'ab'|reverse }}", "[1, 2, 3][1, 2]['a', 'b'][2, 1]ba"},
		{"{{ {'b': 1, 'a': 2}|dictsort }}|{{ {'a': 1}|items|list }}|{{ range(5)|batch(2)|list }}", "[['a', 2], ['b', 1]]|[['a', 1]]|[[0, 1], [2, 3], [4]]"},
		{"{% set l = [] %}{% for i in range(10) %}{{ l.append(i) }}{% endfor %}{{ l.insert(0, 'x') }}{{ l|length }}{{ l[0] }}{{ l[10] }}", "11x9"},
		{"{% set d = {'a': 1} %}{{ d.update({'b': 2}) }}{{ d.keys()|list }}{{ d.values()|list }}{{ d.items()|list }}", "['a', 'b'][1, 2][['a', 1], ['b', 2]]"},
		{"{{ [1, [2]] == [1, [2]] }}{{ [2] in [1, [2]] }}{{ {'a': [1]} == {'a': [1]} }}{{ [1] is eq([1]) }}", "TrueTrueTrueTrue"},
		{"{{ 'a b  c'|wordcount }}{{ 'héllo'|length }}{{ '[1, {\"a\": 2}]'|fromjson }}", "35[1, {'a': 2}]"},
		{"{% for c in 'hé' %}{{ c }}.{% endfor %}{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}", "h.é.ab"},
	}
	for _, c := range cases {
		tm, err := Compile(c.src)
		require.NoError(t, err, c.src)
		got, used, err := tm.RenderLimited(map[string]Value{"x": NewString("q\"\\\n\t\u2028\x01é\xff")}, Limits{})
		require.NoError(t, err, c.src)
		require.Equal(t, c.want, got, c.src)
		require.Positive(t, used, c.src)
	}
}

// TestSelfContainingValues: a list or dict that contains itself is fine to
// hold, and an error (not a stack overflow) to print, encode or compare.
func TestSelfContainingValues(t *testing.T) {
	for _, src := range []string{
		"{% set l = [] %}{{ l.append(l) }}{{ l }}",
		"{% set l = [] %}{{ l.append(l) }}{{ l|tojson }}",
		"{% set l = [] %}{% set m = [] %}{{ l.append(l) }}{{ m.append(m) }}{{ l == m }}",
		"{% set ns = namespace(a=1) %}{% set ns.a = ns %}{{ ns|tojson(indent=1) }}",
		"{% set l = [] %}{% set m = [] %}{{ l.append(l) }}{{ m.append(m) }}{{ [l] in [[m]] }}",
		"{% set d = {} %}{{ d.update({'d': d}) }}{{ {d: 1} }}",
	} {
		tm, err := Compile(src)
		require.NoError(t, err, src)
		_, _, err = tm.RenderLimited(nil, Limits{})
		require.ErrorIs(t, err, ErrDepth, src)
	}
	// Holding one, or printing it with the public String, is harmless.
	l := &List{}
	l.Items = append(l.Items, Value{kind: KindList, v: l})
	v := Value{kind: KindList, v: l}
	require.True(t, strings.HasSuffix(v.String(), "..."))
	other := &List{}
	other.Items = append(other.Items, Value{kind: KindList, v: other})
	require.False(t, v.Equals(Value{kind: KindList, v: other}))
}

// TestComparisonWorkIsBounded: two values that share their sub-values are
// exponentially large to walk though small in memory; comparing them ends
// with ErrWork instead of running for ages.
func TestComparisonWorkIsBounded(t *testing.T) {
	src := "{% set ns = namespace(a=[1], b=[1]) %}{% for i in range(60) %}{% set ns.a = [ns.a, ns.a] %}{% set ns.b = [ns.b, ns.b] %}{% endfor %}{{ ns.a == ns.b }}"
	tm, err := Compile(src)
	require.NoError(t, err)
	_, _, err = tm.RenderLimited(nil, Limits{MaxOps: 1 << 16})
	require.ErrorIs(t, err, ErrWork)
}
