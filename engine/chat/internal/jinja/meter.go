package jinja

// This file is kvwarden's addition to the engine (see README.md): a meter
// that every operation building a value asks BEFORE it allocates. A chat
// template is untrusted input, and a single expression such as
// 'x|tojson|tojson|…' or 's ~ s ~ s ~ …' can otherwise ask for gigabytes in
// one step, which kills a Go process with a fatal (unrecoverable) out of
// memory error. The meter counts bytes cumulatively over the render: what
// has been charged is an upper bound of what the render allocated for its
// values and output, so it bounds the peak as well as the total work.

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Errors a limited render reports; callers tell them apart with errors.Is.
var (
	// ErrBudget: the render would allocate more than Limits.MaxBytes.
	ErrBudget = errors.New("jinja: memory budget exceeded")
	// ErrDepth: a value is nested deeper than Limits.MaxDepth (a value that
	// contains itself is infinitely deep).
	ErrDepth = errors.New("jinja: value nested too deep")
	// ErrWork: comparing values took more than Limits.MaxOps node visits
	// (values that share sub-values can be exponentially large to walk).
	ErrWork = errors.New("jinja: too much work in one operation")
)

// Limits bound one render. Zero fields take the defaults.
type Limits struct {
	// MaxBytes bounds the bytes the render allocates for values and output,
	// counted before each allocation and never credited back.
	MaxBytes int64
	// MaxDepth bounds the nesting of a value that is printed, encoded or
	// compared.
	MaxDepth int
	// MaxOps bounds the node visits of comparisons over the whole render.
	MaxOps int64
}

// Defaults for Limits.
const (
	DefaultMaxBytes = 256 << 20
	DefaultMaxDepth = 256
	DefaultMaxOps   = 64 << 20
)

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxOps <= 0 {
		l.MaxOps = DefaultMaxOps
	}
	return l
}

// valueSize is what one Value costs in a slice.
const valueSize = int64(unsafe.Sizeof(Value{}))

// entrySize approximates what one dict entry costs: the key in Keys, the
// map slot (key and value) and the map's overhead.
const entrySize = 256

// dictSize is an empty dict: the Dict and the map's first group.
const dictSize = 512

// meter is the state of one render. Its error is sticky: an operation that
// is refused returns an empty value, and the evaluator reports m.err at
// the next expression or node boundary, so no code path can go on using a
// value that was never built.
type meter struct {
	lim  Limits
	used int64
	ops  int64
	err  error
}

func newMeter(lim Limits) *meter { return &meter{lim: lim.withDefaults()} }

// Used reports the bytes charged so far.
func (m *meter) Used() int64 { return m.used }

func (m *meter) fail(err error) bool {
	if m.err == nil {
		m.err = err
	}
	return false
}

// charge reserves n bytes; it reports false (and records ErrBudget) when
// they would take the render over its budget. A negative n is an overflow
// in the caller's arithmetic and is refused the same way.
func (m *meter) charge(n int64) bool {
	if m.err != nil {
		return false
	}
	if n < 0 || n > m.lim.MaxBytes-m.used {
		return m.fail(fmt.Errorf("%w: %s more would exceed %d MiB", ErrBudget, bytesText(n), m.lim.MaxBytes>>20))
	}
	m.used += n
	return true
}

// chargeMul charges a*b bytes, refusing when the product overflows.
func (m *meter) chargeMul(a, b int64) bool {
	if a < 0 || b < 0 || (a > 0 && b > math.MaxInt64/a) {
		return m.charge(-1)
	}
	return m.charge(a * b)
}

// chargeValues charges a slice of n Values.
func (m *meter) chargeValues(n int) bool { return m.chargeMul(int64(n), valueSize) }

// boxedSize is a Value made from a new string or number: the slot plus
// the interface's boxed copy (a string header, or an int64 or float64).
const boxedSize = valueSize + 16

// chargeNew charges a slice of n Values, each made new.
func (m *meter) chargeNew(n int) bool { return m.chargeMul(int64(n), boxedSize) }

// pairSize is one [key, value] list of dict.items(): the slot, the List,
// its two-item backing array and the boxed key.
const pairSize = valueSize + 24 + 2*valueSize + 16

func (m *meter) deep(depth int) bool {
	if depth > m.lim.MaxDepth {
		return m.fail(fmt.Errorf("%w: more than %d levels (or a value that contains itself)", ErrDepth, m.lim.MaxDepth))
	}
	return true
}

func (m *meter) op() bool {
	if m.ops++; m.ops > m.lim.MaxOps {
		return m.fail(fmt.Errorf("%w: more than %d value visits", ErrWork, m.lim.MaxOps))
	}
	return true
}

func bytesText(n int64) string {
	if n < 0 {
		return "an overflowing number of bytes"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// buf is a strings.Builder whose growth is charged before it happens.
// strings.Builder.Grow(n) allocates 2*cap+n bytes when it must grow, so
// that is what is charged.
type buf struct {
	m *meter
	b strings.Builder
}

func (w *buf) put(s string) bool {
	if w.b.Cap()-w.b.Len() < len(s) {
		if !w.m.charge(2*int64(w.b.Cap()) + int64(len(s))) {
			return false
		}
		w.b.Grow(len(s))
	}
	w.b.WriteString(s)
	return true
}

func (w *buf) putByte(c byte) bool {
	if w.b.Cap() == w.b.Len() {
		if !w.m.charge(2*int64(w.b.Cap()) + 1) {
			return false
		}
		w.b.Grow(1)
	}
	w.b.WriteByte(c)
	return true
}

func (w *buf) String() string { return w.b.String() }
func (w *buf) Len() int       { return w.b.Len() }

// print is printValue under the meter: the template text of v.
func (m *meter) print(v Value) string {
	switch v.kind {
	case KindString:
		return v.AsString()
	case KindList, KindDict:
		return m.repr(v)
	}
	return printValue(v)
}

// repr is Value.String under the meter.
func (m *meter) repr(v Value) string {
	w := buf{m: m}
	if !m.writeRepr(&w, v, 0) {
		return ""
	}
	return w.String()
}

func (m *meter) writeRepr(w *buf, v Value, depth int) bool {
	if !m.deep(depth) {
		return false
	}
	switch v.kind {
	case KindString:
		return w.putByte('\'') && w.put(v.AsString()) && w.putByte('\'')
	case KindList:
		if !w.putByte('[') {
			return false
		}
		for i, item := range v.AsList().Items {
			if i > 0 && !w.put(", ") {
				return false
			}
			if !m.writeRepr(w, item, depth+1) {
				return false
			}
		}
		return w.putByte(']')
	case KindDict:
		d := v.AsDict()
		if !w.putByte('{') {
			return false
		}
		for i, key := range d.Keys {
			if i > 0 && !w.put(", ") {
				return false
			}
			if !w.putByte('\'') || !w.put(key) || !w.put("': ") {
				return false
			}
			if !m.writeRepr(w, d.Data[key], depth+1) {
				return false
			}
		}
		return w.putByte('}')
	}
	return w.put(v.scalarString())
}

// equal is Value.Equals under the meter: bounded in depth and in visits.
func (m *meter) equal(a, b Value, depth int) bool {
	if !m.deep(depth) || !m.op() {
		return false
	}
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case KindList:
		x, y := a.AsList(), b.AsList()
		if x == y {
			return true
		}
		if x.Len() != y.Len() {
			return false
		}
		for i := range x.Items {
			if !m.equal(x.Items[i], y.Items[i], depth+1) {
				return false
			}
		}
		return true
	case KindDict:
		x, y := a.AsDict(), b.AsDict()
		if x == y {
			return true
		}
		if x.Len() != y.Len() {
			return false
		}
		for _, key := range x.Keys {
			bv, ok := y.Get(key)
			if !ok || !m.equal(x.Data[key], bv, depth+1) {
				return false
			}
		}
		return true
	}
	return a.Equals(b)
}

// valuesEqual is ==: numbers compare across int and float.
func (m *meter) valuesEqual(a, b Value) bool {
	if a.IsNumber() && b.IsNumber() {
		return toFloat64(a) == toFloat64(b)
	}
	if a.IsNone() && b.IsNone() {
		return true
	}
	return m.equal(a, b, 0)
}

func (m *meter) contains(container, item Value) bool {
	if container.IsList() {
		for _, v := range container.AsList().Items {
			if m.equal(v, item, 0) {
				return true
			}
			if m.err != nil {
				return false
			}
		}
		return false
	}
	return containsValue(container, item)
}

// concat is a + b for strings, charged first.
func (m *meter) concat(a, b string) string {
	if !m.charge(int64(len(a)) + int64(len(b))) {
		return ""
	}
	return a + b
}

// repeat is strings.Repeat, charged first.
func (m *meter) repeat(s string, n int64) string {
	if n <= 0 || s == "" {
		return ""
	}
	if !m.chargeMul(int64(len(s)), n) {
		return ""
	}
	return strings.Repeat(s, int(n))
}

// replace is strings.Replace with the size of the result charged first.
func (m *meter) replace(s, old, repl string, count int) string {
	n := strings.Count(s, old) // for old == "", the rune count + 1
	if count >= 0 && count < n {
		n = count
	}
	if n == 0 {
		return s
	}
	grow := int64(len(repl)) - int64(len(old))
	if grow < 0 {
		grow = 0
	}
	if !m.chargeMul(int64(n), grow) || !m.charge(int64(len(s))) {
		return ""
	}
	return strings.Replace(s, old, repl, count)
}

// caseMapped charges what strings.ToUpper / ToLower / Title can produce:
// an invalid byte becomes U+FFFD, three bytes.
func (m *meter) caseMapped(s string) bool { return m.chargeMul(int64(len(s)), 3) }

// runes charges []rune(s) and the string made back from it.
func (m *meter) runes(s string) bool {
	return m.chargeMul(int64(utf8.RuneCountInString(s)), 4) && m.chargeMul(int64(len(s)), 3)
}

// reserve makes room for n more items in l, charging the new backing array
// (doubling, as append does for small slices) before it is made.
func (m *meter) reserve(l *List, n int) bool {
	if cap(l.Items)-len(l.Items) >= n {
		return true
	}
	newCap := max(2*cap(l.Items), len(l.Items)+n, 4)
	if !m.chargeValues(newCap) {
		return false
	}
	items := make([]Value, len(l.Items), newCap)
	copy(items, l.Items)
	l.Items = items
	return true
}
