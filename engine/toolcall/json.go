package toolcall

import (
	"encoding/json"
	"strings"
)

// status says how far a scanned piece of model output got.
type status int

const (
	complete   status = iota // the piece is whole
	incomplete               // the text ends inside it: more output may complete it
	invalid                  // it cannot be what was expected, whatever follows
)

// maxDepth bounds JSON nesting in model output; deeper is invalid.
const maxDepth = 128

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// scanValue scans one JSON value starting at s[i] (no leading whitespace)
// and returns the offset just past it.
func scanValue(s string, i, depth int) (int, status) {
	if i >= len(s) {
		return i, incomplete
	}
	if depth > maxDepth {
		return i, invalid
	}
	switch c := s[i]; {
	case c == '{':
		return scanContainer(s, i, depth, '}', true)
	case c == '[':
		return scanContainer(s, i, depth, ']', false)
	case c == '"':
		return scanString(s, i)
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(s, i)
	case c == 't':
		return scanLiteral(s, i, "true")
	case c == 'f':
		return scanLiteral(s, i, "false")
	case c == 'n':
		return scanLiteral(s, i, "null")
	}
	return i, invalid
}

func scanLiteral(s string, i int, lit string) (int, status) {
	rest := s[i:]
	if len(rest) < len(lit) {
		if strings.HasPrefix(lit, rest) {
			return len(s), incomplete
		}
		return i, invalid
	}
	if !strings.HasPrefix(rest, lit) {
		return i, invalid
	}
	return i + len(lit), complete
}

func scanString(s string, i int) (int, status) {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1, complete
		default:
			if s[j] < 0x20 {
				return j, invalid
			}
		}
	}
	return len(s), incomplete
}

// scanNumber accepts JSON number characters; a number that ends the text
// may go on, so it is incomplete there (the digits so far are a prefix).
func scanNumber(s string, i int) (int, status) {
	j := i
	for j < len(s) && strings.IndexByte("+-0123456789.eE", s[j]) >= 0 {
		j++
	}
	if j == len(s) {
		return j, incomplete
	}
	if !json.Valid([]byte(s[i:j])) {
		return j, invalid
	}
	return j, complete
}

func scanContainer(s string, i, depth int, closer byte, object bool) (int, status) {
	j := skipSpace(s, i+1)
	if j < len(s) && s[j] == closer {
		return j + 1, complete
	}
	for {
		if j >= len(s) {
			return j, incomplete
		}
		if object {
			if s[j] != '"' {
				return j, invalid
			}
			var st status
			if j, st = scanString(s, j); st != complete {
				return j, st
			}
			j = skipSpace(s, j)
			if j >= len(s) {
				return j, incomplete
			}
			if s[j] != ':' {
				return j, invalid
			}
			j = skipSpace(s, j+1)
		}
		var st status
		if j, st = scanValue(s, j, depth+1); st != complete {
			return j, st
		}
		j = skipSpace(s, j)
		if j >= len(s) {
			return j, incomplete
		}
		switch s[j] {
		case ',':
			j = skipSpace(s, j+1)
		case closer:
			return j + 1, complete
		default:
			return j, invalid
		}
	}
}

// callObject is what an object-shaped call ({"name": ..., "arguments": ...})
// holds so far.
type callObject struct {
	name     string
	hasName  bool
	id       string
	args     string // raw JSON text of the arguments (a prefix while argsDone is false)
	hasArgs  bool
	argsDone bool
	// wrap is a nested call ("function": {...}, "tool_call": {...}) or a
	// list of calls ("tool_calls": [...]) found instead of name/arguments.
	wrap []callObject
}

// argKeys are the keys a call's arguments go under: OpenAI's and
// Hermes' "arguments", Llama 3's "parameters".
func isArgKey(k string) bool { return k == "arguments" || k == "parameters" }

// scanCallObject walks a JSON object at s[i] that should be a tool call,
// collecting name, id and arguments as far as the text goes.
func scanCallObject(s string, i int) (callObject, int, status) {
	var c callObject
	if i >= len(s) {
		return c, i, incomplete
	}
	if s[i] != '{' {
		return c, i, invalid
	}
	j := skipSpace(s, i+1)
	if j < len(s) && s[j] == '}' {
		return c, j + 1, complete
	}
	for {
		if j >= len(s) {
			return c, j, incomplete
		}
		if s[j] != '"' {
			return c, j, invalid
		}
		kEnd, st := scanString(s, j)
		if st != complete {
			return c, kEnd, st
		}
		var key string
		if json.Unmarshal([]byte(s[j:kEnd]), &key) != nil {
			return c, j, invalid
		}
		j = skipSpace(s, kEnd)
		if j >= len(s) {
			return c, j, incomplete
		}
		if s[j] != ':' {
			return c, j, invalid
		}
		j = skipSpace(s, j+1)
		vStart := j
		switch {
		case isArgKey(key) && j < len(s) && s[j] == '{':
			c.hasArgs = true
			end, st := scanValue(s, j, 1)
			c.args = s[vStart:end]
			if st != complete {
				if st == incomplete {
					c.args = s[vStart:]
				}
				return c, end, st
			}
			c.argsDone = true
			j = end
		case key == "function" || key == "tool_call":
			inner, end, st := scanCallObject(s, j)
			c.wrap = append(c.wrap[:0], inner)
			if st != complete {
				return c, end, st
			}
			j = end
		case key == "tool_calls":
			list, end, st := scanCallArray(s, j)
			c.wrap = list
			if st != complete {
				return c, end, st
			}
			j = end
		default:
			end, st := scanValue(s, j, 1)
			if st != complete {
				return c, end, st
			}
			raw := s[vStart:end]
			switch {
			case key == "name":
				if json.Unmarshal([]byte(raw), &c.name) != nil {
					return c, j, invalid
				}
				c.hasName = true
			case key == "id":
				_ = json.Unmarshal([]byte(raw), &c.id)
			case isArgKey(key):
				// Arguments given as a JSON string holding the object
				// (some models encode them twice, as the API does).
				var str string
				if json.Unmarshal([]byte(raw), &str) == nil && json.Valid([]byte(str)) {
					c.args = str
				} else {
					c.args = raw
				}
				c.hasArgs, c.argsDone = true, true
			}
			j = end
		}
		j = skipSpace(s, j)
		if j >= len(s) {
			return c, j, incomplete
		}
		switch s[j] {
		case ',':
			j = skipSpace(s, j+1)
		case '}':
			return c, j + 1, complete
		default:
			return c, j, invalid
		}
	}
}

// scanCallArray walks a JSON array of call objects.
func scanCallArray(s string, i int) ([]callObject, int, status) {
	var out []callObject
	if i >= len(s) {
		return nil, i, incomplete
	}
	if s[i] != '[' {
		return nil, i, invalid
	}
	j := skipSpace(s, i+1)
	if j < len(s) && s[j] == ']' {
		return nil, j + 1, complete
	}
	for {
		c, end, st := scanCallObject(s, j)
		if st != invalid && (st == complete || c.hasName || c.hasArgs || len(c.wrap) > 0) {
			out = append(out, c)
		}
		if st != complete {
			return out, end, st
		}
		j = skipSpace(s, end)
		if j >= len(s) {
			return out, j, incomplete
		}
		switch s[j] {
		case ',':
			j = skipSpace(s, j+1)
		case ']':
			return out, j + 1, complete
		default:
			return out, j, invalid
		}
	}
}

// flatten turns scanned call objects into calls, unwrapping nested
// shapes. It stops at the first object without a name and then reports
// false. done says the scan is complete: a call without arguments then
// has "{}"; during a partial scan its arguments are still to come.
func flatten(objs []callObject, done bool) ([]Call, bool) {
	var out []Call
	for _, o := range objs {
		if len(o.wrap) > 0 && !o.hasName {
			inner, ok := flatten(o.wrap, done)
			if !ok {
				return out, false
			}
			out = append(out, inner...)
			continue
		}
		if !o.hasName {
			return out, false
		}
		args := o.args
		if !o.hasArgs && done {
			args = "{}"
		}
		out = append(out, Call{ID: o.id, Name: o.name, Arguments: args, partial: !done && !o.argsDone})
	}
	return out, true
}
