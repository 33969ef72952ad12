package jinja

// kvwarden's addition (see README.md): the tojson encoder writes straight
// into a metered buffer, so a value is charged as its encoding grows and
// 'x|tojson|tojson|…' (each level escapes the previous one's quotes and
// backslashes, doubling it) is refused before the allocation that would
// cross the budget. The output is byte for byte what the engine produced
// before: the compact form as encodeValueJSON wrote it (Go's string
// escaping without HTML escapes), the indented form as
// json.MarshalIndent(valueToGo(v)) wrote it (keys sorted, HTML escaped).

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

type jsonEncoder struct {
	m        *meter
	w        buf
	itemSep  string
	keySep   string
	indent   string
	indented bool
}

// tojson encodes v; ok is false when the meter refused (m.err says why)
// or v holds a float JSON cannot represent.
func (m *meter) tojson(v Value, itemSep, keySep string, indent int, indented bool) (string, bool) {
	e := jsonEncoder{m: m, w: buf{m: m}, itemSep: itemSep, keySep: keySep, indented: indented}
	if indented {
		e.indent = m.repeat(" ", int64(max(indent, 0)))
		if m.err != nil {
			return "", false
		}
	}
	if !e.value(v, 0) {
		return "", false
	}
	return e.w.String(), true
}

func (e *jsonEncoder) newline(depth int) bool {
	if !e.w.putByte('\n') {
		return false
	}
	for range depth {
		if !e.w.put(e.indent) {
			return false
		}
	}
	return true
}

func (e *jsonEncoder) value(v Value, depth int) bool {
	if !e.m.deep(depth) {
		return false
	}
	switch v.kind {
	case KindBool:
		if v.AsBool() {
			return e.w.put("true")
		}
		return e.w.put("false")
	case KindInt:
		var b [20]byte
		return e.w.put(string(strconv.AppendInt(b[:0], v.AsInt(), 10)))
	case KindFloat:
		f := v.AsFloat()
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return false
		}
		if e.indented {
			b, err := json.Marshal(f)
			return err == nil && e.w.put(string(b))
		}
		var b [32]byte
		return e.w.put(string(strconv.AppendFloat(b[:0], f, 'g', -1, 64)))
	case KindString:
		return e.str(v.AsString())
	case KindList:
		items := v.AsList().Items
		if !e.w.putByte('[') {
			return false
		}
		for i, item := range items {
			if e.indented {
				if (i > 0 && !e.w.putByte(',')) || !e.newline(depth+1) {
					return false
				}
			} else if i > 0 && !e.w.put(e.itemSep) {
				return false
			}
			if !e.value(item, depth+1) {
				return false
			}
		}
		if e.indented && len(items) > 0 && !e.newline(depth) {
			return false
		}
		return e.w.putByte(']')
	case KindDict:
		d := v.AsDict()
		keys := d.Keys
		if e.indented {
			// MarshalIndent of a map[string]any sorts the keys.
			if !e.m.chargeMul(int64(len(keys)), 16) {
				return false
			}
			keys = slices.Clone(keys)
			slices.Sort(keys)
		}
		if !e.w.putByte('{') {
			return false
		}
		for i, key := range keys {
			if e.indented {
				if (i > 0 && !e.w.putByte(',')) || !e.newline(depth+1) {
					return false
				}
			} else if i > 0 && !e.w.put(e.itemSep) {
				return false
			}
			sep := e.keySep
			if e.indented {
				sep = ": "
			}
			if !e.str(key) || !e.w.put(sep) || !e.value(d.Data[key], depth+1) {
				return false
			}
		}
		if e.indented && len(keys) > 0 && !e.newline(depth) {
			return false
		}
		return e.w.putByte('}')
	}
	return e.w.put("null")
}

const hexDigits = "0123456789abcdef"

// str writes s quoted as encoding/json does: control characters, '"' and
// '\\' escaped, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped, and in
// the indented form (json.Marshal's default) '<', '>' and '&' too.
func (e *jsonEncoder) str(s string) bool {
	if !e.w.putByte('"') {
		return false
	}
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && (!e.indented || (b != '<' && b != '>' && b != '&')) {
				i++
				continue
			}
			if !e.w.put(s[start:i]) {
				return false
			}
			var esc string
			switch b {
			case '\\':
				esc = `\\`
			case '"':
				esc = `\"`
			case '\b':
				esc = `\b`
			case '\f':
				esc = `\f`
			case '\n':
				esc = `\n`
			case '\r':
				esc = `\r`
			case '\t':
				esc = `\t`
			default:
				esc = `\u00` + string(hexDigits[b>>4]) + string(hexDigits[b&0xF])
			}
			if !e.w.put(esc) {
				return false
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
			if !e.w.put(s[start:i]) {
				return false
			}
			esc := `\ufffd`
			if r != utf8.RuneError {
				esc = `\u202` + string(hexDigits[r&0xF])
			}
			if !e.w.put(esc) {
				return false
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	return e.w.put(s[start:]) && e.w.putByte('"')
}
