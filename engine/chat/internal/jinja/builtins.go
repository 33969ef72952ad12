package jinja

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// cachedBuiltins is a read-only scope populated once with the built-in
// globals that allocate nothing in proportion to their input. It is shared
// across every render; globalScope puts the metered ones on top.
var cachedBuiltins = func() *scope {
	s := newScope(nil)
	registerGlobals(s)
	return s
}()

// globalScope is the per-render scope of the globals that need the
// render's meter.
func globalScope(m *meter) *scope {
	s := newScope(cachedBuiltins)
	s.set("range", NewCallable("range", func(args []Value, kwargs map[string]Value) (Value, error) {
		return builtinRange(m, args, kwargs)
	}))
	return s
}

// =============================================================================
// Global functions
// =============================================================================

func registerGlobals(s *scope) {
	s.set("namespace", NewCallable("namespace", builtinNamespace))
	s.set("raise_exception", NewCallable("raise_exception", builtinRaiseException))
	s.set("joiner", NewCallable("joiner", builtinJoiner))
	s.set("dict", NewCallable("dict", builtinDict))
	s.set("cycler", NewCallable("cycler", builtinCycler))
	s.set("strftime_now", NewCallable("strftime_now", builtinStrftimeNow))
}

func builtinNamespace(args []Value, kwargs map[string]Value) (Value, error) {
	d := NewDict()
	dict := d.AsDict()
	for k, v := range kwargs {
		dict.Set(k, v)
	}
	return d, nil
}

func builtinRaiseException(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return Undefined(), fmt.Errorf("raise_exception: missing message")
	}
	return Undefined(), fmt.Errorf("%s", printValue(args[0]))
}

func builtinRange(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	var start, stop, step int64
	switch len(args) {
	case 1:
		start = 0
		stop = toInt64(args[0])
		step = 1
	case 2:
		start = toInt64(args[0])
		stop = toInt64(args[1])
		step = 1
	case 3:
		start = toInt64(args[0])
		stop = toInt64(args[1])
		step = toInt64(args[2])
	default:
		return Undefined(), fmt.Errorf("range: expected 1-3 arguments, got %d", len(args))
	}

	if step == 0 {
		return Undefined(), fmt.Errorf("range: step must not be zero")
	}

	// Count first (without overflowing) and charge the list before
	// making it: range(10**12) must be refused, not attempted.
	var n uint64
	if step > 0 && stop > start {
		n = (uint64(stop)-uint64(start)-1)/uint64(step) + 1
	} else if step < 0 && start > stop {
		n = (uint64(start)-uint64(stop)-1)/(uint64(-step)) + 1
	}
	if n > math.MaxInt32 || !m.chargeNew(int(n)) {
		m.charge(-1)
		return Undefined(), m.err
	}
	items := make([]Value, 0, n)
	if step > 0 {
		for i := start; i < stop; i += step {
			items = append(items, NewInt(i))
		}
	} else {
		for i := start; i > stop; i += step {
			items = append(items, NewInt(i))
		}
	}

	return NewList(items), nil
}

func builtinJoiner(args []Value, kwargs map[string]Value) (Value, error) {
	sep := ""
	if len(args) > 0 {
		sep = printValue(args[0])
	}

	first := true
	return NewCallable("joiner", func(args []Value, kwargs map[string]Value) (Value, error) {
		if first {
			first = false
			return NewString(""), nil
		}
		return NewString(sep), nil
	}), nil
}

func builtinDict(args []Value, kwargs map[string]Value) (Value, error) {
	d := NewDict()
	dict := d.AsDict()
	for k, v := range kwargs {
		dict.Set(k, v)
	}
	return d, nil
}

func builtinStrftimeNow(args []Value, kwargs map[string]Value) (Value, error) {
	format := "%Y-%m-%d"
	if len(args) > 0 {
		format = printValue(args[0])
	}

	// Convert Python strftime format to Go time format.
	now := time.Now()
	goFmt := strftimeToGo(format)
	return NewString(now.Format(goFmt)), nil
}

// strftimeToGo converts a Python strftime format string to a Go time format.
func strftimeToGo(format string) string {
	r := strings.NewReplacer(
		"%Y", "2006",
		"%m", "01",
		"%d", "02",
		"%H", "15",
		"%M", "04",
		"%S", "05",
		"%B", "January",
		"%b", "Jan",
		"%A", "Monday",
		"%a", "Mon",
		"%p", "PM",
		"%I", "03",
		"%Z", "MST",
		"%%", "%",
	)
	return r.Replace(format)
}

func builtinCycler(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return Undefined(), fmt.Errorf("cycler: expected at least one argument")
	}

	idx := 0
	items := make([]Value, len(args))
	copy(items, args)

	d := NewDict()
	dict := d.AsDict()
	dict.Set("current", items[0])
	dict.Set("next", NewCallable("cycler.next", func(a []Value, kw map[string]Value) (Value, error) {
		v := items[idx]
		idx = (idx + 1) % len(items)
		dict.Set("current", items[idx])
		return v, nil
	}))
	dict.Set("reset", NewCallable("cycler.reset", func(a []Value, kw map[string]Value) (Value, error) {
		idx = 0
		dict.Set("current", items[0])
		return None(), nil
	}))

	return d, nil
}

// =============================================================================
// Filter functions
// =============================================================================

func registerFilters() map[string]filterFunc {
	filters := map[string]filterFunc{
		"tojson":     filterTojson,
		"from_json":  filterFromjson,
		"fromjson":   filterFromjson,
		"items":      filterItems,
		"join":       filterJoin,
		"default":    filterDefault,
		"d":          filterDefault,
		"trim":       filterTrim,
		"lower":      filterLower,
		"upper":      filterUpper,
		"title":      filterTitle,
		"capitalize": filterCapitalize,
		"first":      filterFirst,
		"last":       filterLast,
		"length":     filterLength,
		"count":      filterLength,
		"reverse":    filterReverse,
		"sort":       filterSort,
		"unique":     filterUnique,
		"list":       filterList,
		"int":        filterInt,
		"float":      filterFloatConv,
		"string":     filterString,
		"safe":       filterSafe,
		"replace":    filterReplace,
		"round":      filterRound,
		"abs":        filterAbs,
		"map":        filterMap,
		"select":     filterSelect,
		"reject":     filterReject,
		"selectattr": filterSelectattr,
		"rejectattr": filterRejectattr,
		"indent":     filterIndent,
		"wordcount":  filterWordcount,
		"escape":     filterEscape,
		"e":          filterEscape,
		"dictsort":   filterDictsort,
		"max":        filterMax,
		"min":        filterMin,
		"sum":        filterSum,
		"batch":      filterBatch,
	}

	return filters
}

// filterFunc is a built-in filter: the render's meter, the filtered value
// and the arguments.
type filterFunc func(m *meter, args []Value, kwargs map[string]Value) (Value, error)

// filters are the built-in filters, looked up by name before the scope.
var filters = registerFilters()

// =============================================================================
// Test evaluation
// =============================================================================

func evalTest(m *meter, name string, val Value, args []Value) (bool, error) {
	switch name {
	case "defined":
		return !val.IsUndefined(), nil
	case "undefined":
		return val.IsUndefined(), nil
	case "none":
		return val.IsNone(), nil
	case "boolean":
		return val.IsBool(), nil
	case "integer":
		return val.IsInt(), nil
	case "float":
		return val.IsFloat(), nil
	case "number":
		return val.IsNumber(), nil
	case "string":
		return val.IsString(), nil
	case "mapping":
		return val.IsDict(), nil
	case "iterable":
		return val.IsList() || val.IsDict() || val.IsString(), nil
	case "sequence":
		return val.IsList(), nil
	case "callable":
		return val.IsCallable(), nil
	case "true":
		return val.IsBool() && val.AsBool(), nil
	case "false":
		return val.IsBool() && !val.AsBool(), nil
	case "eq", "equalto", "==":
		if len(args) < 1 {
			return false, fmt.Errorf("test %q requires an argument", name)
		}
		return m.equal(val, args[0], 0), nil
	case "ne", "!=":
		if len(args) < 1 {
			return false, fmt.Errorf("test %q requires an argument", name)
		}
		return !m.equal(val, args[0], 0), nil
	case "gt", "greaterthan", ">":
		if len(args) < 1 {
			return false, nil
		}
		return compareValues(val, args[0]) > 0, nil
	case "ge", ">=":
		if len(args) < 1 {
			return false, nil
		}
		return compareValues(val, args[0]) >= 0, nil
	case "lt", "lessthan", "<":
		if len(args) < 1 {
			return false, nil
		}
		return compareValues(val, args[0]) < 0, nil
	case "le", "<=":
		if len(args) < 1 {
			return false, nil
		}
		return compareValues(val, args[0]) <= 0, nil
	case "in":
		if len(args) < 1 {
			return false, nil
		}
		return m.contains(args[0], val), nil
	case "odd":
		if val.IsInt() {
			return val.AsInt()%2 != 0, nil
		}
		return false, nil
	case "even":
		if val.IsInt() {
			return val.AsInt()%2 == 0, nil
		}
		return false, nil
	case "upper":
		if val.IsString() {
			s := val.AsString()
			return s == strings.ToUpper(s), nil
		}
		return false, nil
	case "lower":
		if val.IsString() {
			s := val.AsString()
			return s == strings.ToLower(s), nil
		}
		return false, nil
	case "sameas":
		if len(args) < 1 {
			return false, nil
		}
		return m.equal(val, args[0], 0), nil
	}

	return false, fmt.Errorf("unknown test %q", name)
}

// =============================================================================
// Filter implementations
// =============================================================================

func filterTojson(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}

	itemSeparator := ", "
	keySeparator := ": "
	if separators, ok := kwargs["separators"]; ok {
		if !separators.IsList() || separators.AsList().Len() != 2 {
			return Undefined(), fmt.Errorf("tojson: separators must contain two strings")
		}

		items := separators.AsList().Items
		if !items[0].IsString() || !items[1].IsString() {
			return Undefined(), fmt.Errorf("tojson: separators must contain two strings")
		}
		itemSeparator = items[0].AsString()
		keySeparator = items[1].AsString()
	}

	indent, indented := kwargs["indent"]
	indented = indented && !indent.IsNone() && !indent.IsUndefined()
	n := 0
	if indented {
		n = int(max(min(toInt64(indent), math.MaxInt32), 0))
	}
	out, ok := m.tojson(args[0], itemSeparator, keySeparator, n, indented)
	if !ok {
		// A float JSON cannot hold encodes as "", as before; a refused
		// allocation surfaces through the meter.
		return NewString(""), m.err
	}
	return NewString(out), nil
}

func filterFromjson(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 || !args[0].IsString() {
		return Undefined(), nil
	}

	// Decoding costs far more than the text: a two-byte element becomes
	// an interface, a boxed number and a Value. 64 bytes a byte bounds it.
	if !m.chargeMul(int64(len(args[0].AsString())), 64) {
		return Undefined(), m.err
	}
	var result any
	if err := json.Unmarshal([]byte(args[0].AsString()), &result); err != nil {
		return Undefined(), fmt.Errorf("fromjson: %w", err)
	}

	return FromGoValue(result), nil
}

func filterItems(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 || args[0].IsUndefined() {
		return NewList(nil), nil
	}

	// Python jinja2's |items filter raises TemplateError when applied to
	// anything that isn't a mapping, and several chat templates rely on
	// that error to bail out of an unsupported branch (e.g. when a
	// tool_call's `arguments` is a JSON string instead of an object).
	// Silently returning an empty list here let those templates render
	// invalid prompts. The wording deliberately matches Python jinja2 so
	// templates that surface this string get an identical message.
	if !args[0].IsDict() {
		//lint:ignore ST1005 message text mirrors Python jinja2 verbatim
		return Undefined(), fmt.Errorf("Can only get item pairs from a mapping.")
	}

	d := args[0].AsDict()
	if !m.chargeMul(int64(d.Len()), pairSize) {
		return Undefined(), m.err
	}
	items := make([]Value, 0, d.Len())
	for _, key := range d.Keys {
		pair := NewList([]Value{NewString(key), d.Data[key]})
		items = append(items, pair)
	}

	return NewList(items), nil
}

func filterJoin(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}

	if !args[0].IsList() {
		return NewString(m.print(args[0])), nil
	}

	sep := ""
	if len(args) > 1 {
		sep = m.print(args[1])
	}
	if s, ok := kwargs["d"]; ok {
		sep = m.print(s)
	}

	attr := ""
	if a, ok := kwargs["attribute"]; ok {
		attr = m.print(a)
	}

	list := args[0].AsList()
	w := buf{m: m}
	for i, item := range list.Items {
		if attr != "" && item.IsDict() {
			v, ok := item.AsDict().Get(attr)
			if ok {
				item = v
			}
		}
		if (i > 0 && !w.put(sep)) || !w.put(m.print(item)) {
			return Undefined(), m.err
		}
	}

	return NewString(w.String()), nil
}

func filterDefault(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return Undefined(), nil
	}

	val := args[0]
	defVal := NewString("")
	if len(args) > 1 {
		defVal = args[1]
	}

	boolean := false
	if len(args) > 2 && args[2].IsBool() {
		boolean = args[2].AsBool()
	} else if b, ok := kwargs["boolean"]; ok && b.IsBool() {
		boolean = b.AsBool()
	}

	if val.IsUndefined() {
		return defVal, nil
	}

	if boolean && !val.IsTruthy() {
		return defVal, nil
	}

	return val, nil
}

func filterTrim(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}
	s := m.print(args[0])
	if len(args) > 1 {
		chars := m.print(args[1])
		s = strings.Trim(s, chars)
	} else {
		s = strings.TrimSpace(s)
	}
	return NewString(s), nil
}

func filterLower(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}
	s := m.print(args[0])
	if !m.caseMapped(s) {
		return Undefined(), m.err
	}
	return NewString(strings.ToLower(s)), nil
}

func filterUpper(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}
	s := m.print(args[0])
	if !m.caseMapped(s) {
		return Undefined(), m.err
	}
	return NewString(strings.ToUpper(s)), nil
}

func filterTitle(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}

	s := m.print(args[0])
	if !m.runes(s) {
		return Undefined(), m.err
	}
	runes := []rune(s)
	inWord := false
	for i, r := range runes {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if !inWord {
				runes[i] = unicode.ToUpper(r)
				inWord = true
			} else {
				runes[i] = unicode.ToLower(r)
			}
		} else {
			inWord = false
		}
	}
	return NewString(string(runes)), nil
}

func filterCapitalize(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}
	s := m.print(args[0])
	if len(s) == 0 {
		return NewString(""), nil
	}
	if !m.runes(s) {
		return Undefined(), m.err
	}
	runes := []rune(s)
	runes[0] = unicode.ToUpper(runes[0])
	for i := 1; i < len(runes); i++ {
		runes[i] = unicode.ToLower(runes[i])
	}
	return NewString(string(runes)), nil
}

func filterFirst(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 || !args[0].IsList() {
		return Undefined(), nil
	}
	l := args[0].AsList()
	if l.Len() == 0 {
		return Undefined(), nil
	}
	return l.Get(0), nil
}

func filterLast(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 || !args[0].IsList() {
		return Undefined(), nil
	}
	l := args[0].AsList()
	if l.Len() == 0 {
		return Undefined(), nil
	}
	return l.Get(l.Len() - 1), nil
}

func filterLength(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewInt(0), nil
	}

	v := args[0]
	switch {
	case v.IsList():
		return NewInt(int64(v.AsList().Len())), nil
	case v.IsDict():
		return NewInt(int64(v.AsDict().Len())), nil
	case v.IsString():
		return NewInt(int64(utf8.RuneCountInString(v.AsString()))), nil
	}

	return NewInt(0), nil
}

func filterReverse(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewList(nil), nil
	}

	v := args[0]
	if v.IsString() {
		if !m.runes(v.AsString()) {
			return Undefined(), m.err
		}
		runes := []rune(v.AsString())
		for i, j := 0, len(runes)-1; i < j; i, j = i+1, j-1 {
			runes[i], runes[j] = runes[j], runes[i]
		}
		return NewString(string(runes)), nil
	}

	if v.IsList() {
		src := v.AsList().Items
		if !m.chargeValues(len(src)) {
			return Undefined(), m.err
		}
		items := make([]Value, len(src))
		for i, item := range src {
			items[len(src)-1-i] = item
		}
		return NewList(items), nil
	}

	return v, nil
}

func filterSort(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 || !args[0].IsList() {
		return NewList(nil), nil
	}

	src := args[0].AsList().Items
	if !m.chargeValues(len(src)) {
		return Undefined(), m.err
	}
	items := make([]Value, len(src))
	copy(items, src)

	reverse := false
	if r, ok := kwargs["reverse"]; ok && r.IsBool() {
		reverse = r.AsBool()
	}

	sort.SliceStable(items, func(i, j int) bool {
		cmp := compareValues(items[i], items[j])
		if reverse {
			return cmp > 0
		}
		return cmp < 0
	})

	return NewList(items), nil
}

func filterUnique(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 || !args[0].IsList() {
		return NewList(nil), nil
	}

	src := args[0].AsList().Items
	if !m.chargeValues(len(src)) || !m.chargeMul(int64(len(src)), entrySize) {
		return Undefined(), m.err
	}
	seen := make(map[string]bool)
	items := make([]Value, 0, len(src))
	for _, item := range src {
		key := m.print(item)
		if !seen[key] {
			seen[key] = true
			items = append(items, item)
		}
	}

	return NewList(items), nil
}

func filterList(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewList(nil), nil
	}

	v := args[0]
	if v.IsList() {
		return v, nil
	}
	if v.IsString() {
		if !m.runes(v.AsString()) || !m.chargeNew(utf8.RuneCountInString(v.AsString())) {
			return Undefined(), m.err
		}
		runes := []rune(v.AsString())
		items := make([]Value, len(runes))
		for i, r := range runes {
			items[i] = NewString(string(r))
		}
		return NewList(items), nil
	}

	return NewList([]Value{v}), nil
}

func filterInt(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewInt(0), nil
	}
	return NewInt(toInt64(args[0])), nil
}

func filterFloatConv(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewFloat(0), nil
	}
	return NewFloat(toFloat64(args[0])), nil
}

func filterString(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}
	return NewString(m.print(args[0])), nil
}

func filterSafe(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}
	return args[0], nil
}

func filterReplace(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) < 3 {
		return NewString(""), fmt.Errorf("replace: expected at least 3 arguments")
	}
	s := m.print(args[0])
	old := m.print(args[1])
	newStr := m.print(args[2])

	count := -1
	if len(args) > 3 {
		count = int(toInt64(args[3]))
	}
	if c, ok := kwargs["count"]; ok {
		count = int(toInt64(c))
	}

	return NewString(m.replace(s, old, newStr, count)), nil
}

func filterRound(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewFloat(0), nil
	}

	precision := int64(0)
	if len(args) > 1 {
		precision = toInt64(args[1])
	}
	if p, ok := kwargs["precision"]; ok {
		precision = toInt64(p)
	}

	f := toFloat64(args[0])
	pow := math.Pow(10, float64(precision))
	rounded := math.Round(f*pow) / pow

	if precision == 0 {
		return NewFloat(rounded), nil
	}
	return NewFloat(rounded), nil
}

func filterAbs(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewInt(0), nil
	}

	v := args[0]
	if v.IsInt() {
		n := v.AsInt()
		if n < 0 {
			n = -n
		}
		return NewInt(n), nil
	}
	if v.IsFloat() {
		return NewFloat(math.Abs(v.AsFloat())), nil
	}

	return NewInt(0), nil
}

func filterMap(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 || !args[0].IsList() {
		return NewList(nil), nil
	}

	list := args[0].AsList()

	// map(attribute="name") form
	if attr, ok := kwargs["attribute"]; ok {
		attrName := m.print(attr)
		defVal := Undefined()
		if d, ok := kwargs["default"]; ok {
			defVal = d
		}

		if !m.chargeValues(list.Len()) {
			return Undefined(), m.err
		}
		items := make([]Value, list.Len())
		for i, item := range list.Items {
			if item.IsDict() {
				v, found := item.AsDict().Get(attrName)
				if found {
					items[i] = v
				} else {
					items[i] = defVal
				}
			} else {
				items[i] = defVal
			}
		}
		return NewList(items), nil
	}

	return NewList(list.Items), nil
}

func filterSelect(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 || !args[0].IsList() {
		return NewList(nil), nil
	}

	list := args[0].AsList()
	testName := ""
	if len(args) > 1 && args[1].IsString() {
		testName = args[1].AsString()
	}

	testArgs := args[2:]

	if !m.chargeValues(list.Len()) {
		return Undefined(), m.err
	}
	items := make([]Value, 0, list.Len())
	for _, item := range list.Items {
		if testName == "" {
			if item.IsTruthy() {
				items = append(items, item)
			}
		} else {
			result, err := evalTest(m, testName, item, testArgs)
			if err != nil {
				return Undefined(), err
			}
			if result {
				items = append(items, item)
			}
		}
	}

	return NewList(items), nil
}

func filterReject(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 || !args[0].IsList() {
		return NewList(nil), nil
	}

	list := args[0].AsList()
	testName := ""
	if len(args) > 1 && args[1].IsString() {
		testName = args[1].AsString()
	}

	testArgs := args[2:]

	if !m.chargeValues(list.Len()) {
		return Undefined(), m.err
	}
	items := make([]Value, 0, list.Len())
	for _, item := range list.Items {
		if testName == "" {
			if !item.IsTruthy() {
				items = append(items, item)
			}
		} else {
			result, err := evalTest(m, testName, item, testArgs)
			if err != nil {
				return Undefined(), err
			}
			if !result {
				items = append(items, item)
			}
		}
	}

	return NewList(items), nil
}

func filterSelectattr(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) < 2 || !args[0].IsList() {
		return NewList(nil), nil
	}

	list := args[0].AsList()
	attrName := m.print(args[1])
	testName := "truthy"
	if len(args) > 2 {
		testName = m.print(args[2])
	}

	testArgs := args[3:]

	if !m.chargeValues(list.Len()) {
		return Undefined(), m.err
	}
	items := make([]Value, 0, list.Len())
	for _, item := range list.Items {
		attrVal := Undefined()
		if item.IsDict() {
			if v, ok := item.AsDict().Get(attrName); ok {
				attrVal = v
			}
		}

		if testName == "truthy" {
			if attrVal.IsTruthy() {
				items = append(items, item)
			}
		} else {
			result, err := evalTest(m, testName, attrVal, testArgs)
			if err != nil {
				return Undefined(), err
			}
			if result {
				items = append(items, item)
			}
		}
	}

	return NewList(items), nil
}

func filterRejectattr(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) < 2 || !args[0].IsList() {
		return NewList(nil), nil
	}

	list := args[0].AsList()
	attrName := m.print(args[1])
	testName := "truthy"
	if len(args) > 2 {
		testName = m.print(args[2])
	}

	testArgs := args[3:]

	if !m.chargeValues(list.Len()) {
		return Undefined(), m.err
	}
	items := make([]Value, 0, list.Len())
	for _, item := range list.Items {
		attrVal := Undefined()
		if item.IsDict() {
			if v, ok := item.AsDict().Get(attrName); ok {
				attrVal = v
			}
		}

		if testName == "truthy" {
			if !attrVal.IsTruthy() {
				items = append(items, item)
			}
		} else {
			result, err := evalTest(m, testName, attrVal, testArgs)
			if err != nil {
				return Undefined(), err
			}
			if !result {
				items = append(items, item)
			}
		}
	}

	return NewList(items), nil
}

func filterIndent(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}

	s := m.print(args[0])
	width := 4
	if len(args) > 1 {
		width = int(toInt64(args[1]))
	}
	if w, ok := kwargs["width"]; ok {
		width = int(toInt64(w))
	}

	indentFirst := false
	if len(args) > 2 {
		indentFirst = args[2].IsTruthy()
	}
	if f, ok := kwargs["first"]; ok {
		indentFirst = f.IsTruthy()
	}

	// Each padded line is a copy (text plus pad) and Join copies them all
	// again: twice the text and twice a pad per line, plus the slice.
	nl := int64(strings.Count(s, "\n")) + 1
	if !m.chargeMul(nl, 2*int64(max(width, 0))+16) || !m.chargeMul(int64(len(s)), 2) {
		return Undefined(), m.err
	}
	pad := m.repeat(" ", int64(width))
	lines := strings.Split(s, "\n")
	for i, line := range lines {
		if i == 0 && !indentFirst {
			continue
		}
		if line != "" {
			lines[i] = pad + line
		}
	}

	return NewString(strings.Join(lines, "\n")), nil
}

func filterWordcount(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewInt(0), nil
	}
	n := 0
	for range strings.FieldsSeq(m.print(args[0])) {
		n++
	}
	return NewInt(int64(n)), nil
}

func filterEscape(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}
	s := m.print(args[0])
	s = m.replace(s, "&", "&amp;", -1)
	s = m.replace(s, "<", "&lt;", -1)
	s = m.replace(s, ">", "&gt;", -1)
	s = m.replace(s, `"`, "&quot;", -1)
	s = m.replace(s, "'", "&#39;", -1)
	return NewString(s), nil
}

func filterDictsort(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 || !args[0].IsDict() {
		return NewList(nil), nil
	}

	d := args[0].AsDict()
	reverse := false
	if r, ok := kwargs["reverse"]; ok && r.IsBool() {
		reverse = r.AsBool()
	}

	if !m.chargeMul(int64(len(d.Keys)), 16+4*valueSize+8) {
		return Undefined(), m.err
	}
	keys := make([]string, len(d.Keys))
	copy(keys, d.Keys)

	sort.SliceStable(keys, func(i, j int) bool {
		if reverse {
			return keys[i] > keys[j]
		}
		return keys[i] < keys[j]
	})

	items := make([]Value, len(keys))
	for i, key := range keys {
		items[i] = NewList([]Value{NewString(key), d.Data[key]})
	}

	return NewList(items), nil
}

func filterMax(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 || !args[0].IsList() {
		return Undefined(), nil
	}

	list := args[0].AsList()
	if list.Len() == 0 {
		return Undefined(), nil
	}

	maxVal := list.Items[0]
	for _, item := range list.Items[1:] {
		if compareValues(item, maxVal) > 0 {
			maxVal = item
		}
	}

	return maxVal, nil
}

func filterMin(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 || !args[0].IsList() {
		return Undefined(), nil
	}

	list := args[0].AsList()
	if list.Len() == 0 {
		return Undefined(), nil
	}

	minVal := list.Items[0]
	for _, item := range list.Items[1:] {
		if compareValues(item, minVal) < 0 {
			minVal = item
		}
	}

	return minVal, nil
}

func filterSum(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 || !args[0].IsList() {
		return NewInt(0), nil
	}

	list := args[0].AsList()
	var sumF float64
	isFloat := false

	for _, item := range list.Items {
		if item.IsFloat() {
			isFloat = true
			sumF += item.AsFloat()
		} else if item.IsInt() {
			sumF += float64(item.AsInt())
		}
	}

	if isFloat {
		return NewFloat(sumF), nil
	}
	return NewInt(int64(sumF)), nil
}

func filterBatch(m *meter, args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) < 2 || !args[0].IsList() {
		return NewList(nil), nil
	}

	list := args[0].AsList()
	linecount := int(toInt64(args[1]))
	if linecount <= 0 {
		return NewList(nil), nil
	}

	// Each item is copied once, plus a list per batch.
	if !m.chargeValues(list.Len()) || !m.chargeMul(int64(list.Len()/linecount+1), valueSize+8) {
		return Undefined(), m.err
	}
	var batches []Value
	for i := 0; i < list.Len(); i += linecount {
		end := min(i+linecount, list.Len())
		batch := make([]Value, end-i)
		copy(batch, list.Items[i:end])
		batches = append(batches, NewList(batch))
	}

	return NewList(batches), nil
}

// =============================================================================
// Helpers
// =============================================================================

func toInt64(v Value) int64 {
	switch {
	case v.IsInt():
		return v.AsInt()
	case v.IsFloat():
		return int64(v.AsFloat())
	case v.IsBool():
		if v.AsBool() {
			return 1
		}
		return 0
	case v.IsString():
		s := v.AsString()
		var n int64
		fmt.Sscanf(s, "%d", &n)
		return n
	}
	return 0
}

func toFloat64(v Value) float64 {
	switch {
	case v.IsFloat():
		return v.AsFloat()
	case v.IsInt():
		return float64(v.AsInt())
	case v.IsBool():
		if v.AsBool() {
			return 1
		}
		return 0
	case v.IsString():
		s := v.AsString()
		var f float64
		fmt.Sscanf(s, "%f", &f)
		return f
	}
	return 0
}

func compareValues(a, b Value) int {
	af := toFloat64(a)
	bf := toFloat64(b)
	if af < bf {
		return -1
	}
	if af > bf {
		return 1
	}
	if a.IsString() && b.IsString() {
		return strings.Compare(a.AsString(), b.AsString())
	}
	return 0
}

func containsValue(container, item Value) bool {
	if container.IsList() {
		for _, v := range container.AsList().Items {
			if v.Equals(item) {
				return true
			}
		}
		return false
	}
	if container.IsDict() && item.IsString() {
		return container.AsDict().Has(item.AsString())
	}
	if container.IsString() && item.IsString() {
		return strings.Contains(container.AsString(), item.AsString())
	}
	return false
}

// printValue converts a Value to its template output string. Unlike
// String() which returns a Python-style repr, printValue returns the
// raw text for template rendering (no quotes around strings, empty
// string for None/Undefined).
func printValue(v Value) string {
	switch v.kind {
	case KindUndefined:
		return ""
	case KindNone:
		return ""
	case KindBool:
		if v.AsBool() {
			return "True"
		}
		return "False"
	case KindInt:
		return fmt.Sprintf("%d", v.AsInt())
	case KindFloat:
		f := v.AsFloat()
		s := fmt.Sprintf("%g", f)
		return s
	case KindString:
		return v.AsString()
	case KindList:
		return v.String()
	case KindDict:
		return v.String()
	case KindCallable:
		return ""
	}
	return ""
}
