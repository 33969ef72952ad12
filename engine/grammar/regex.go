package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// regexConv turns a JSON Schema pattern (the common subset of ECMA-262
// regular expressions) into a GBNF expression over the JSON-escaped
// characters of a string's content: a '"' in the pattern is written \" in
// the output, a newline \n, and so on.
type regexConv struct {
	src string
	pos int
}

func (r *regexConv) fail(format string, args ...any) error {
	return fmt.Errorf("pattern %q at offset %d: %s", r.src, r.pos, fmt.Sprintf(format, args...))
}

// patternExpr converts pattern; anyChar is the GBNF expression of one JSON
// string character, used for the unanchored ends (a pattern matches
// anywhere in the string unless anchored with ^ and $).
func patternExpr(pattern, anyChar string) (string, error) {
	src := pattern
	anchoredStart := strings.HasPrefix(src, "^")
	if anchoredStart {
		src = src[1:]
	}
	anchoredEnd := false
	if strings.HasSuffix(src, "$") {
		// Not when the $ is escaped: count the backslashes before it.
		n := 0
		for i := len(src) - 2; i >= 0 && src[i] == '\\'; i-- {
			n++
		}
		if n%2 == 0 {
			anchoredEnd = true
			src = src[:len(src)-1]
		}
	}
	r := &regexConv{src: src}
	e, err := r.alt()
	if err != nil {
		return "", fmt.Errorf("%w (in %q)", err, pattern)
	}
	if r.pos < len(r.src) {
		return "", r.fail("unmatched )")
	}
	var b strings.Builder
	if !anchoredStart {
		b.WriteString(anyChar + "* ")
	}
	b.WriteString(e)
	if !anchoredEnd {
		b.WriteString(" " + anyChar + "*")
	}
	return "(" + b.String() + ")", nil
}

func (r *regexConv) alt() (string, error) {
	var alts []string
	for {
		s, err := r.seq()
		if err != nil {
			return "", err
		}
		alts = append(alts, s)
		if r.pos < len(r.src) && r.src[r.pos] == '|' {
			r.pos++
			continue
		}
		break
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return "(" + strings.Join(alts, " | ") + ")", nil
}

func (r *regexConv) seq() (string, error) {
	var items []string
	for r.pos < len(r.src) {
		c := r.src[r.pos]
		if c == '|' || c == ')' {
			break
		}
		atom, err := r.atom()
		if err != nil {
			return "", err
		}
		atom, err = r.quantifier(atom)
		if err != nil {
			return "", err
		}
		items = append(items, atom)
	}
	if len(items) == 0 {
		return `""`, nil
	}
	return "(" + strings.Join(items, " ") + ")", nil
}

func (r *regexConv) quantifier(atom string) (string, error) {
	if r.pos >= len(r.src) {
		return atom, nil
	}
	var q string
	switch c := r.src[r.pos]; c {
	case '*', '+', '?':
		q = string(c)
		r.pos++
	case '{':
		end := strings.IndexByte(r.src[r.pos:], '}')
		if end < 0 {
			return "", r.fail("unclosed {")
		}
		body := r.src[r.pos+1 : r.pos+end]
		lo, hi, comma := strings.Cut(body, ",")
		m, err := strconv.Atoi(lo)
		if err != nil || m > maxRepeat {
			return "", r.fail("bad repetition {%s}", body)
		}
		q = "{" + strconv.Itoa(m) + "}"
		if comma {
			q = "{" + strconv.Itoa(m) + ",}"
			if hi != "" {
				n, err := strconv.Atoi(hi)
				if err != nil || n < m || n > maxRepeat {
					return "", r.fail("bad repetition {%s}", body)
				}
				q = "{" + strconv.Itoa(m) + "," + strconv.Itoa(n) + "}"
			}
		}
		r.pos += end + 1
	default:
		return atom, nil
	}
	if r.pos < len(r.src) {
		switch r.src[r.pos] {
		case '?': // lazy: the same set of strings
			r.pos++
		case '+':
			return "", r.fail("possessive quantifiers are not supported")
		}
	}
	if r.pos < len(r.src) && strings.ContainsRune("*+?{", rune(r.src[r.pos])) {
		return "", r.fail("nested quantifier")
	}
	return atom + q, nil
}

func (r *regexConv) atom() (string, error) {
	c := r.src[r.pos]
	switch c {
	case '(':
		r.pos++
		if strings.HasPrefix(r.src[r.pos:], "?:") {
			r.pos += 2
		} else if strings.HasPrefix(r.src[r.pos:], "?") {
			return "", r.fail("lookaround and named groups are not supported")
		}
		e, err := r.alt()
		if err != nil {
			return "", err
		}
		if r.pos >= len(r.src) || r.src[r.pos] != ')' {
			return "", r.fail("unclosed (")
		}
		r.pos++
		return e, nil
	case '[':
		rs, neg, err := r.class()
		if err != nil {
			return "", err
		}
		return r.charsExpr(normalize(rs, neg))
	case '.':
		r.pos++
		// Line terminators are outside . in ECMA-262; \n in RE2.
		return r.charsExpr(normalize([]cpRange{{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}, true))
	case '^', '$':
		return "", r.fail("anchor %c is supported only at the start (^) and end ($)", c)
	case '*', '+', '?', '{':
		return "", r.fail("quantifier %c without an item", c)
	case '\\':
		rs, err := r.escape(false)
		if err != nil {
			return "", err
		}
		return r.charsExpr(normalize(rs, false))
	}
	ch, n := utf8.DecodeRuneInString(r.src[r.pos:])
	r.pos += n
	return r.charsExpr([]cpRange{{ch, ch}})
}

var (
	digitRanges = []cpRange{{'0', '9'}}
	wordRanges  = []cpRange{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	// \s generates only the whitespace every regex dialect agrees on, and
	// \S only what none counts as whitespace, so that the output matches
	// the pattern under ECMA-262 and RE2 alike.
	spaceRanges   = []cpRange{{'\t', '\n'}, {'\f', '\r'}, {' ', ' '}}
	unicodeSpaces = []cpRange{{'\t', '\r'}, {' ', ' '}, {0x85, 0x85}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
		{0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}}
)

// escape reads a backslash escape: a set of characters.
func (r *regexConv) escape(inClass bool) ([]cpRange, error) {
	r.pos++
	if r.pos >= len(r.src) {
		return nil, r.fail("trailing backslash")
	}
	c := r.src[r.pos]
	r.pos++
	one := func(x rune) []cpRange { return []cpRange{{x, x}} }
	switch c {
	case 'd':
		return digitRanges, nil
	case 'D':
		return normalize(digitRanges, true), nil
	case 'w':
		return wordRanges, nil
	case 'W':
		return normalize(wordRanges, true), nil
	case 's':
		return spaceRanges, nil
	case 'S':
		return normalize(unicodeSpaces, true), nil
	case 'n':
		return one('\n'), nil
	case 't':
		return one('\t'), nil
	case 'r':
		return one('\r'), nil
	case 'f':
		return one('\f'), nil
	case 'v':
		return one('\v'), nil
	case '0':
		return one(0), nil
	case 'b':
		if inClass {
			return one('\b'), nil
		}
		return nil, r.fail(`word boundary \b is not supported`)
	case 'x', 'u':
		n := 2
		if c == 'u' {
			n = 4
		}
		if len(r.src)-r.pos < n {
			return nil, r.fail(`\%c needs %d hex digits`, c, n)
		}
		v, err := strconv.ParseUint(r.src[r.pos:r.pos+n], 16, 32)
		if err != nil {
			return nil, r.fail(`\%c needs %d hex digits`, c, n)
		}
		r.pos += n
		return one(rune(v)), nil
	}
	if c >= '1' && c <= '9' {
		return nil, r.fail("backreferences are not supported")
	}
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
		return nil, r.fail(`escape \%c is not supported`, c)
	}
	ch, n := utf8.DecodeRuneInString(r.src[r.pos-1:])
	r.pos += n - 1
	return one(ch), nil
}

func (r *regexConv) class() ([]cpRange, bool, error) {
	start := r.pos
	r.pos++
	neg := false
	if r.pos < len(r.src) && r.src[r.pos] == '^' {
		neg = true
		r.pos++
	}
	var rs []cpRange
	first := true
	for {
		if r.pos >= len(r.src) {
			r.pos = start
			return nil, false, r.fail("unclosed [")
		}
		c := r.src[r.pos]
		if c == ']' && !first {
			r.pos++
			return rs, neg, nil
		}
		first = false
		var lo []cpRange
		if c == '\\' {
			var err error
			if lo, err = r.escape(true); err != nil {
				return nil, false, err
			}
		} else {
			ch, n := utf8.DecodeRuneInString(r.src[r.pos:])
			r.pos += n
			lo = []cpRange{{ch, ch}}
		}
		if len(lo) == 1 && lo[0].lo == lo[0].hi && r.pos+1 < len(r.src) && r.src[r.pos] == '-' && r.src[r.pos+1] != ']' {
			r.pos++
			var hi []cpRange
			if r.src[r.pos] == '\\' {
				var err error
				if hi, err = r.escape(true); err != nil {
					return nil, false, err
				}
			} else {
				ch, n := utf8.DecodeRuneInString(r.src[r.pos:])
				r.pos += n
				hi = []cpRange{{ch, ch}}
			}
			if len(hi) != 1 || hi[0].lo != hi[0].hi || hi[0].lo < lo[0].lo {
				return nil, false, r.fail("bad range in character class")
			}
			rs = append(rs, cpRange{lo[0].lo, hi[0].lo})
			continue
		}
		rs = append(rs, lo...)
	}
}

// charsExpr is a GBNF expression for one character of rs (normalized) as
// it appears inside a JSON string: quotes, backslashes and control
// characters escaped.
func (r *regexConv) charsExpr(rs []cpRange) (string, error) {
	e := jsonCharsExpr(rs)
	if e == "" {
		return "", r.fail("character class matches nothing")
	}
	return e, nil
}

func jsonCharsExpr(rs []cpRange) string {
	var plain []cpRange
	var alts []string
	for _, x := range rs {
		for c := x.lo; c <= x.hi && c < 0x20; c++ {
			alts = append(alts, gbnfLiteral(jsonEscapeRune(c)))
		}
		lo := max(x.lo, 0x20)
		for _, special := range []rune{'"', '\\'} {
			if lo <= special && special <= x.hi {
				alts = append(alts, gbnfLiteral(jsonEscapeRune(special)))
			}
		}
		// Split around '"' (0x22) and '\\' (0x5C).
		for _, cut := range []cpRange{{lo, min(x.hi, 0x21)}, {max(lo, 0x23), min(x.hi, 0x5B)}, {max(lo, 0x5D), x.hi}} {
			if cut.lo <= cut.hi {
				plain = append(plain, cut)
			}
		}
	}
	if len(plain) == 1 && plain[0].lo == plain[0].hi {
		alts = append([]string{gbnfLiteral(string(plain[0].lo))}, alts...)
	} else if len(plain) > 0 {
		var b strings.Builder
		b.WriteByte('[')
		for _, x := range plain {
			b.WriteString(classChar(x.lo))
			if x.hi != x.lo {
				b.WriteByte('-')
				b.WriteString(classChar(x.hi))
			}
		}
		b.WriteByte(']')
		alts = append([]string{b.String()}, alts...)
	}
	switch len(alts) {
	case 0:
		return ""
	case 1:
		return alts[0]
	}
	return "(" + strings.Join(alts, " | ") + ")"
}

func jsonEscapeRune(c rune) string {
	switch c {
	case '"':
		return `\"`
	case '\\':
		return `\\`
	case '\n':
		return `\n`
	case '\t':
		return `\t`
	case '\r':
		return `\r`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	}
	return fmt.Sprintf(`\u%04x`, c)
}

// classChar writes c for a GBNF character class.
func classChar(c rune) string {
	switch {
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
		return string(c)
	case c < 0x80:
		return fmt.Sprintf(`\x%02X`, c)
	case c <= 0xFFFF:
		return fmt.Sprintf(`\u%04X`, c)
	}
	return fmt.Sprintf(`\U%08X`, c)
}

// gbnfLiteral quotes s as a GBNF string literal.
func gbnfLiteral(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c == 0x7F:
			fmt.Fprintf(&b, `\x%02X`, c)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
