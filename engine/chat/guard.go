package chat

import (
	"fmt"
	"reflect"
	"regexp"
	"runtime/metrics"
	"strings"
	"time"

	"github.com/kvwarden/kvwarden/engine/chat/internal/jinja"
)

// A template from a model file is untrusted input: a recursive macro
// overflows the Go stack (a fatal error, not a panic), a loop can run for
// hours, and one expression can ask for terabytes. Four layers bound it:
//
//  1. The vendored Jinja engine (internal/jinja) charges every value it
//     builds (strings, lists, dicts, JSON encodings, output) to the render's
//     memory budget, Limits.MaxBytes, before allocating it, and bounds the
//     depth of any value it prints, encodes or compares (a value that
//     contains itself is infinitely deep). This is what holds inside a
//     single expression, where no guard call can run.
//  2. instrument rewrites the source before compiling: it adds a call to a
//     guard function at the start of every loop body, around every macro
//     body, after every assignment and after every output tag. The guard
//     counts steps and macro depth and checks the clock and the heap. It
//     also refuses over-deep block and bracket nesting, which the parser
//     handles by recursion. The guard does no work in proportion to the
//     template's data, so a render stays linear in the conversation.
//  3. checkAmplifiers reads the compiled syntax tree and refuses, up front,
//     operations whose output can be far larger than their input (string
//     repetition, replace, indent, join, format, tojson's indent) unless the
//     amplifying operand is a small literal: no real template needs them,
//     and refusing at parse time gives a clearer error than the budget.
//  4. Render recovers panics of the engine and returns the guard's error in
//     preference to whatever the engine wrapped it in.
//
// The inserted tags copy the whitespace-control markers of the tags they
// sit beside, so trim_blocks, lstrip_blocks and {%- -%} give the same text.

const (
	reserved      = "__kvw_"
	maxNesting    = 64 // open blocks, and brackets within one tag
	maxFactor     = 32 // product of amplification factors along one expression
	maxLiteralAmp = 32 // largest literal multiplier, indent width, separator length
	// maxValueDepth bounds the nesting of a value the engine prints,
	// encodes or compares (raw JSON handed in may nest maxJSONDepth deep).
	maxValueDepth = maxJSONDepth
)

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// segment is one piece of template source as the Jinja scanner sees it.
type segment struct {
	kind                byte   // 't' text, '{' expression, '%' statement, '#' comment
	src                 string // the whole piece, delimiters included
	body                string // between the delimiters and trim markers
	trimLeft, trimRight bool
}

// scan splits source the way the Jinja engine's scanner does: tags end at
// the first closing delimiter outside a quoted string (comments ignore
// quotes), and a '-' right inside a delimiter is a trim marker.
func scan(src string) ([]segment, error) {
	var segs []segment
	text := 0
	for i := 0; i+1 < len(src); {
		if src[i] != '{' || (src[i+1] != '{' && src[i+1] != '%' && src[i+1] != '#') {
			i++
			continue
		}
		if i > text {
			segs = append(segs, segment{kind: 't', src: src[text:i]})
		}
		kind := src[i+1]
		closer := map[byte]string{'{': "}}", '%': "%}", '#': "#}"}[kind]
		start := i
		j := i + 2
		s := segment{kind: kind}
		if j < len(src) && src[j] == '-' {
			s.trimLeft = true
			j++
		}
		bodyStart := j
		found := false
		for j < len(src) {
			c := src[j]
			if kind != '#' && (c == '\'' || c == '"') {
				j++
				for j < len(src) && src[j] != c {
					if src[j] == '\\' && j+1 < len(src) {
						j++
					}
					j++
				}
				j++
				continue
			}
			if c == '-' && strings.HasPrefix(src[j+1:], closer) {
				s.trimRight, s.body, j, found = true, src[bodyStart:j], j+3, true
				break
			}
			if strings.HasPrefix(src[j:], closer) {
				s.body, j, found = src[bodyStart:j], j+2, true
				break
			}
			j++
		}
		if !found {
			return nil, fmt.Errorf("%w: unclosed tag at byte %d", ErrSyntax, start)
		}
		s.src = src[start:min(j, len(src))]
		segs = append(segs, s)
		i, text = j, j
	}
	if text < len(src) {
		segs = append(segs, segment{kind: 't', src: src[text:]})
	}
	return segs, nil
}

// keyword is the first word of a statement.
func keyword(body string) string {
	f := strings.Fields(body)
	if len(f) == 0 {
		return ""
	}
	k := f[0]
	if i := strings.IndexAny(k, "(=."); i >= 0 {
		k = k[:i]
	}
	return k
}

// bracketDepth is the deepest bracket nesting of a tag, outside strings.
func bracketDepth(body string) int {
	depth, deepest := 0, 0
	for i := 0; i < len(body); i++ {
		switch c := body[i]; c {
		case '\'', '"':
			for i++; i < len(body) && body[i] != c; i++ {
				if body[i] == '\\' {
					i++
				}
			}
		case '(', '[', '{':
			depth++
			deepest = max(deepest, depth)
		case ')', ']', '}':
			depth--
		}
	}
	return deepest
}

// hasAssign reports an '=' outside strings that is not part of ==, !=, <=, >=.
func hasAssign(body string) bool {
	for i := 0; i < len(body); i++ {
		switch c := body[i]; c {
		case '\'', '"':
			for i++; i < len(body) && body[i] != c; i++ {
				if body[i] == '\\' {
					i++
				}
			}
		case '=':
			prev := byte(' ')
			if i > 0 {
				prev = body[i-1]
			}
			if strings.IndexByte("=!<>", prev) < 0 && (i+1 >= len(body) || body[i+1] != '=') {
				return true
			}
		}
	}
	return false
}

var opens = map[string]bool{"for": true, "if": true, "macro": true, "call": true, "filter": true, "generation": true}

// instrument returns source with the guard calls inserted (see the comment
// at the top of this file), or refuses it.
func instrument(source string) (string, error) {
	if strings.Contains(source, reserved) {
		return "", fmt.Errorf("%w: names starting with %s are reserved", ErrSyntax, reserved)
	}
	segs, err := scan(source)
	if err != nil {
		return "", err
	}
	tick := reserved + "tick()"
	var b strings.Builder
	b.Grow(len(source) * 2)
	right := func(trim bool) string {
		if trim {
			return "-%}"
		}
		return "%}"
	}
	block := func(call string, trimLeft, trimRight bool) {
		if trimLeft {
			b.WriteString("{%- if ")
		} else {
			b.WriteString("{% if ")
		}
		b.WriteString(call + " %}{% endif " + right(trimRight))
	}
	depth, inRaw := 0, false
	for _, s := range segs {
		if inRaw {
			b.WriteString(s.src)
			if s.kind == '%' && keyword(s.body) == "endraw" {
				inRaw = false
			}
			continue
		}
		switch s.kind {
		case 't', '#':
			b.WriteString(s.src)
		case '{':
			if d := bracketDepth(s.body); d > maxNesting {
				return "", fmt.Errorf("%w: brackets nested %d deep, at most %d", ErrLimit, d, maxNesting)
			}
			b.WriteString(s.src)
			b.WriteString("{{ " + tick + " " + strings.TrimSuffix(right(s.trimRight), "%}") + "}}")
		case '%':
			if d := bracketDepth(s.body); d > maxNesting {
				return "", fmt.Errorf("%w: brackets nested %d deep, at most %d", ErrLimit, d, maxNesting)
			}
			kw := keyword(s.body)
			switch {
			case kw == "raw":
				inRaw = true
			case opens[kw], kw == "set" && !hasAssign(s.body):
				if depth++; depth > maxNesting {
					return "", fmt.Errorf("%w: blocks nested %d deep, at most %d", ErrLimit, depth, maxNesting)
				}
			case strings.HasPrefix(kw, "end"):
				depth--
			}
			if kw == "endmacro" {
				block(reserved+"leave()", s.trimLeft, false)
			}
			b.WriteString(s.src)
			switch {
			case kw == "for" || kw == "call":
				block(tick, false, s.trimRight)
			case kw == "macro":
				block(reserved+"enter()", false, s.trimRight)
			case kw == "set" && hasAssign(s.body), kw == "endset":
				block(tick, false, s.trimRight)
			}
		}
	}
	return b.String(), nil
}

// guard is the state of one render; the template calls its functions.
type guard struct {
	lim      Limits
	steps    int
	depth    int
	deadline time.Time
	heap0    uint64
	sample   []metrics.Sample
	err      error // the first limit hit or exception raised
}

const heapMetric = "/memory/classes/heap/objects:bytes"

func newGuard(lim Limits) *guard {
	g := &guard{lim: lim, deadline: time.Now().Add(lim.Timeout), sample: []metrics.Sample{{Name: heapMetric}}}
	g.heap0 = g.heap()
	return g
}

func (g *guard) heap() uint64 {
	metrics.Read(g.sample)
	if g.sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return g.sample[0].Value.Uint64()
}

func (g *guard) fail(err error) (jinja.Value, error) {
	if g.err == nil {
		g.err = err
	}
	return jinja.Undefined(), g.err
}

var empty = jinja.NewString("")

func (g *guard) step() (jinja.Value, error) {
	if g.err != nil {
		return jinja.Undefined(), g.err
	}
	if g.steps++; g.steps > g.lim.MaxSteps {
		return g.fail(fmt.Errorf("%w: more than %d steps", ErrLimit, g.lim.MaxSteps))
	}
	if time.Now().After(g.deadline) {
		return g.fail(fmt.Errorf("%w: rendering took longer than %v", ErrLimit, g.lim.Timeout))
	}
	if h := g.heap(); h > g.heap0 && h-g.heap0 > g.lim.MaxHeapGrowth {
		return g.fail(fmt.Errorf("%w: the heap grew by %d MiB while rendering, at most %d MiB", ErrLimit, (h-g.heap0)>>20, g.lim.MaxHeapGrowth>>20))
	}
	return empty, nil
}

// install adds the guard's functions and the safe builtins to vals.
func (g *guard) install(vals map[string]jinja.Value, now func() time.Time) {
	fn := func(name string, f func(args []jinja.Value, kw map[string]jinja.Value) (jinja.Value, error)) {
		vals[name] = jinja.NewCallable(name, f)
	}
	fn(reserved+"tick", func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) { return g.step() })
	fn(reserved+"enter", func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) {
		if g.depth++; g.depth > g.lim.MaxDepth {
			return g.fail(fmt.Errorf("%w: macros nested more than %d deep", ErrLimit, g.lim.MaxDepth))
		}
		return g.step()
	})
	fn(reserved+"leave", func([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) {
		g.depth--
		return empty, nil
	})
	fn("raise_exception", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		msg := "raise_exception called"
		if len(args) > 0 {
			msg = text(args[0])
		}
		return g.fail(&RaiseError{Message: msg})
	})
	fn("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		format := "%Y-%m-%d"
		if len(args) > 0 {
			format = text(args[0])
		}
		if len(format) > 256 {
			return g.fail(fmt.Errorf("%w: strftime format longer than 256 bytes", ErrLimit))
		}
		return jinja.NewString(strftime(now(), format)), nil
	})
	fn("range", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		var start, stop, step int64 = 0, 0, 1
		ints := make([]int64, len(args))
		for i, a := range args {
			if !a.IsInt() {
				return g.fail(fmt.Errorf("%w: range() takes integers", ErrRender))
			}
			ints[i] = a.AsInt()
		}
		switch len(ints) {
		case 1:
			stop = ints[0]
		case 2:
			start, stop = ints[0], ints[1]
		case 3:
			start, stop, step = ints[0], ints[1], ints[2]
		default:
			return g.fail(fmt.Errorf("%w: range() takes 1 to 3 arguments, got %d", ErrRender, len(ints)))
		}
		if step == 0 {
			return g.fail(fmt.Errorf("%w: range() step must not be zero", ErrRender))
		}
		var n int64
		if step > 0 && stop > start {
			n = (stop-start-1)/step + 1
		} else if step < 0 && start > stop {
			n = (start-stop-1)/(-step) + 1
		}
		if n > int64(g.lim.MaxSteps) {
			return g.fail(fmt.Errorf("%w: range() of %d items, at most %d", ErrLimit, n, g.lim.MaxSteps))
		}
		items := make([]jinja.Value, n)
		for i := range items {
			items[i] = jinja.NewInt(start + int64(i)*step)
		}
		return jinja.NewList(items), nil
	})
}

// checkAmplifiers walks the compiled syntax tree (through reflection: the
// engine keeps it private) and refuses the constructs described at the top
// of this file.
func checkAmplifiers(t *jinja.Template) error {
	a := amp{}
	a.node(reflect.ValueOf(t).Elem().FieldByName("nodes"), 1)
	return a.err
}

type amp struct{ err error }

func (a *amp) refuse(format string, args ...any) {
	if a.err == nil {
		a.err = fmt.Errorf("%w: "+format, append([]any{ErrLimit}, args...)...)
	}
}

// node visits v with the amplification product of its ancestors.
func (a *amp) node(v reflect.Value, factor int) {
	if a.err != nil || !v.IsValid() {
		return
	}
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if !v.IsNil() {
			a.node(v.Elem(), factor)
		}
		return
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			a.node(v.Index(i), factor)
		}
		return
	case reflect.Struct:
	default:
		return
	}
	f := 1
	switch v.Type().Name() {
	case "Value":
		return
	case "outputNode":
		a.node(v.FieldByName("expression"), factor)
		return
	case "setNode":
		a.node(v.FieldByName("value"), factor)
		return
	case "forNode":
		if v.FieldByName("recursive").Bool() {
			a.refuse("recursive for loops are not supported")
		}
	case "binExpr":
		if v.FieldByName("op").String() == "*" {
			f = a.repeatFactor(v.FieldByName("left"), v.FieldByName("right"))
		}
	case "filterExpr":
		f = a.filterFactor(v.FieldByName("name").String(), v.FieldByName("args"), v.FieldByName("kwargs"))
	case "callExpr":
		f = a.callFactor(v)
	}
	if factor *= f; factor > maxFactor {
		a.refuse("an expression that can grow its input more than %d times", maxFactor)
		return
	}
	for i := 0; i < v.NumField(); i++ {
		a.node(v.Field(i), factor)
	}
}

// literal returns the value of a literal expression.
func literal(e reflect.Value) (any, bool) {
	for e.Kind() == reflect.Interface || e.Kind() == reflect.Pointer {
		if e.IsNil() {
			return nil, false
		}
		e = e.Elem()
	}
	if e.Kind() != reflect.Struct || e.Type().Name() != "litExpr" {
		return nil, false
	}
	val := e.FieldByName("val")
	inner := val.FieldByName("v")
	if inner.Kind() == reflect.Interface && !inner.IsNil() {
		inner = inner.Elem()
	}
	switch jinja.Kind(val.FieldByName("kind").Int()) {
	case jinja.KindString:
		return inner.String(), true
	case jinja.KindInt:
		return inner.Int(), true
	case jinja.KindFloat:
		return inner.Float(), true
	case jinja.KindBool:
		return inner.Bool(), true
	}
	return nil, true
}

func smallString(e reflect.Value) (int, bool) {
	if v, ok := literal(e); ok {
		if s, ok := v.(string); ok && len(s) <= maxLiteralAmp {
			return len(s), true
		}
	}
	return 0, false
}

func smallInt(e reflect.Value) (int, bool) {
	if v, ok := literal(e); ok {
		if n, ok := v.(int64); ok && n >= 0 && n <= maxLiteralAmp {
			return int(n), true
		}
	}
	return 0, false
}

// repeatFactor: the engine repeats a string only for string * int, so the
// right operand must be a small literal unless the left is a number.
func (a *amp) repeatFactor(left, right reflect.Value) int {
	if v, ok := literal(left); ok {
		if _, isStr := v.(string); !isStr {
			return 1
		}
	}
	if v, ok := literal(right); ok {
		switch n := v.(type) {
		case int64:
			if n >= 0 && n <= maxLiteralAmp {
				return max(1, int(n))
			}
		case float64, bool, nil:
			return 1
		}
	}
	a.refuse("string repetition ('*') needs a literal count of at most %d on the right", maxLiteralAmp)
	return 1
}

func kwarg(kwargs reflect.Value, name string) (reflect.Value, bool) {
	for i := 0; i < kwargs.Len(); i++ {
		if kwargs.Index(i).FieldByName("name").String() == name {
			return kwargs.Index(i).FieldByName("value"), true
		}
	}
	return reflect.Value{}, false
}

// replaceFactor bounds s.replace(old, new): each byte of s can gain at most
// len(new) bytes (old may be empty at run time unless it is a literal).
func (a *amp) replaceFactor(args reflect.Value, first int) int {
	if args.Len() < first+2 {
		return 1
	}
	n, ok := smallString(args.Index(first + 1))
	if !ok {
		a.refuse("replace() needs a literal replacement of at most %d bytes", maxLiteralAmp)
		return 1
	}
	if v, ok := literal(args.Index(first)); ok {
		if old, ok := v.(string); ok && old != "" {
			return max(1, (n+len(old)-1)/len(old))
		}
	}
	return n + 1
}

func (a *amp) filterFactor(name string, args, kwargs reflect.Value) int {
	switch name {
	case "replace":
		return a.replaceFactor(args, 0)
	case "indent":
		w := reflect.Value{}
		if args.Len() > 0 {
			w = args.Index(0)
		}
		if kw, ok := kwarg(kwargs, "width"); ok {
			w = kw
		}
		if !w.IsValid() {
			return 5
		}
		n, ok := smallInt(w)
		if !ok {
			a.refuse("indent() needs a literal width of at most %d", maxLiteralAmp)
		}
		return n + 1
	case "join":
		if args.Len() == 0 {
			return 1
		}
		n, ok := smallString(args.Index(0))
		if !ok {
			a.refuse("join() needs a literal separator of at most %d bytes", maxLiteralAmp)
		}
		return n + 1
	case "tojson":
		if kw, ok := kwarg(kwargs, "indent"); ok {
			if v, _ := literal(kw); v != nil {
				if _, ok := smallInt(kw); !ok {
					a.refuse("tojson() needs a literal indent of at most %d", maxLiteralAmp)
				}
			}
		}
		if kw, ok := kwarg(kwargs, "separators"); ok {
			ok = false
			for kw.Kind() == reflect.Interface || kw.Kind() == reflect.Pointer {
				kw = kw.Elem()
			}
			if kw.Kind() == reflect.Struct && kw.Type().Name() == "listExpr" {
				items := kw.FieldByName("items")
				ok = items.Len() == 2
				for i := 0; ok && i < 2; i++ {
					_, ok = smallString(items.Index(i))
				}
			}
			if !ok {
				a.refuse("tojson() separators must be two literal strings of at most %d bytes", maxLiteralAmp)
			}
		}
	}
	return 1
}

func (a *amp) callFactor(v reflect.Value) int {
	fn := v.FieldByName("fn")
	for fn.Kind() == reflect.Interface || fn.Kind() == reflect.Pointer {
		if fn.IsNil() {
			return 1
		}
		fn = fn.Elem()
	}
	if fn.Kind() != reflect.Struct || fn.Type().Name() != "attrExpr" {
		return 1
	}
	args := v.FieldByName("args")
	switch fn.FieldByName("attr").String() {
	case "replace":
		return a.replaceFactor(args, 0)
	case "format":
		recv, ok := literal(fn.FieldByName("obj"))
		s, isStr := recv.(string)
		if !ok || !isStr {
			a.refuse("str.format() needs a literal format string")
			return 1
		}
		return strings.Count(s, "{") + 1
	}
	return 1
}

// text is what printing v would show: a string without quotes.
func text(v jinja.Value) string {
	if v.IsString() {
		return v.AsString()
	}
	return v.String()
}
