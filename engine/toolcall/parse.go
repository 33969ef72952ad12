package toolcall

import (
	"encoding/json"
	"strings"
)

// Call is one tool call, as OpenAI's tool_calls[i].function holds it.
// Arguments is the JSON text of the arguments object as the model wrote
// it (whitespace trimmed).
type Call struct {
	ID        string
	Name      string
	Arguments string
	partial   bool // arguments still growing (a stream's view)
}

// Message is a parsed output: reasoning_content, content and tool_calls.
type Message struct {
	Reasoning string
	Content   string
	Calls     []Call
}

// Options say how to read one output.
type Options struct {
	Format Format
	// Tools: tool calls are parsed (the request has tools and tool_choice
	// is not "none"). Otherwise the output is content (and reasoning).
	Tools bool
	// ThinkingOpen: the prompt ends inside a <think> block (DeepSeek R1's
	// template ends its generation prompt with "<think>\n"), so the
	// output starts as reasoning.
	ThinkingOpen bool
	// KeepReasoning leaves <think> blocks inline in the content
	// (--reasoning-format none).
	KeepReasoning bool
}

// ThinkingOpen reports whether a rendered prompt ends inside an open
// <think> block, for Options.ThinkingOpen.
func ThinkingOpen(prompt string) bool {
	return strings.HasSuffix(strings.TrimRight(prompt, " \t\r\n"), "<think>")
}

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// Parse reads a whole output. Markup that does not form a valid call
// (an unclosed block, malformed JSON) stays in the content.
func Parse(text string, o Options) Message {
	p := parser{text: text, opt: o, final: true}
	p.run()
	return p.msg()
}

// parser reads text from the start. With final false the text is a
// prefix of the output: a piece that may still turn into markup is held
// back (neither content nor a call yet), so that every result is a prefix
// of the next one.
type parser struct {
	text  string
	opt   Options
	final bool

	reasoning strings.Builder
	content   strings.Builder
	calls     []Call
	// trim: the output had a reasoning block or is read for tool calls,
	// so content and reasoning are trimmed; plain text stays as it is.
	trim bool
	// settled: the reasoning block (if any) is over, or never started.
	settled bool
}

func (p *parser) msg() Message {
	// Whitespace at either end is trimmed, as llama-server does; during a
	// partial parse that holds trailing whitespace back until text
	// follows it, so a stream never sends what the end result trims.
	if !p.trim {
		return Message{Content: p.content.String()}
	}
	return Message{
		Reasoning: strings.TrimSpace(p.reasoning.String()),
		Content:   strings.TrimSpace(p.content.String()),
		Calls:     p.calls,
	}
}

// holdBack returns how many bytes at the end of s may be the start of one
// of the markers (a proper prefix of it), and so must wait.
func holdBack(s string, markers []string) int {
	n := 0
	for _, m := range markers {
		for k := min(len(m)-1, len(s)); k > n; k-- {
			if strings.HasSuffix(s, m[:k]) {
				n = k
				break
			}
		}
	}
	return n
}

func (p *parser) run() {
	if p.opt.Format.Family == Harmony && !p.opt.KeepReasoning {
		p.harmony()
		return
	}
	pos := 0
	p.trim = p.opt.Tools
	if !p.opt.KeepReasoning {
		pos = p.reason()
		if pos < 0 {
			p.trim = true
			return
		}
		p.trim = p.trim || pos > 0
	}
	p.settled = true
	if !p.opt.Tools {
		p.addContent(p.text[pos:], nil)
		return
	}
	p.body(pos)
}

// reason reads a leading <think> block into the reasoning and returns where
// the rest starts, or -1 when the text ends inside it.
func (p *parser) reason() int {
	s := p.text
	start := 0
	if !p.opt.ThinkingOpen {
		i := skipSpace(s, 0)
		rest := s[i:]
		if !strings.HasPrefix(rest, thinkOpen) {
			if !p.final && strings.HasPrefix(thinkOpen, rest) {
				return -1 // may be the start of <think>
			}
			return 0
		}
		start = i + len(thinkOpen)
	}
	end := strings.Index(s[start:], thinkClose)
	if end < 0 {
		if p.final {
			// An unclosed block (the output was cut): all of it is
			// reasoning, as llama-server has it.
			p.reasoning.WriteString(s[start:])
			return len(s)
		}
		p.reasoning.WriteString(s[start : len(s)-holdBack(s[start:], []string{thinkClose})])
		return -1
	}
	p.reasoning.WriteString(s[start : start+end])
	return start + end + len(thinkClose)
}

// addContent adds plain text; during a partial parse the tail that may
// start one of the markers is held back, and it reports whether all of it
// was added.
func (p *parser) addContent(s string, markers []string) bool {
	if p.final {
		p.content.WriteString(s)
		return true
	}
	h := holdBack(s, markers)
	p.content.WriteString(s[:len(s)-h])
	return h == 0
}

// markers are the strings that open a family's tool-call markup anywhere
// in the output.
func (f Format) markers() []string {
	switch f.Family {
	case Hermes:
		return []string{"<tool_call>"}
	case Llama3:
		return []string{"<|python_tag|>"}
	case MistralNemo, Mistral:
		return []string{"[TOOL_CALLS]"}
	case Phi4, Granite:
		return []string{"<|tool_call|>"}
	case DeepSeekR1:
		return []string{"<｜tool▁calls▁begin｜>", "<｜tool_calls_begin｜>", "<｜tool calls begin｜>", "<｜tool▁calls｜>"}
	}
	return nil
}

// startJSON says whether a bare JSON call object may make up the output
// (at its start, or right after another call). DeepSeek R1's template
// does not print tools, so they are described asking for this form
// (ToolPrompt).
func (f Format) startJSON() bool {
	switch f.Family {
	case Generic, Gemma, Llama3, Hermes, Phi4, DeepSeekR1:
		return true
	}
	return false
}

// region is the result of reading markup at one place.
type region struct {
	calls []Call
	end   int
	st    status
}

func (p *parser) body(pos int) {
	s := p.text
	markers := p.opt.Format.markers()
	atStart := true // only whitespace so far, or just after a call
	for pos <= len(s) {
		if atStart && p.opt.Format.startJSON() {
			i := skipSpace(s, pos)
			if i == len(s) && !p.final {
				return // only whitespace so far: wait
			}
			if r, ok := p.leadingCall(i); ok {
				if r.st == incomplete && !p.final {
					p.calls = append(p.calls, r.calls...)
					return
				}
				if r.st == complete {
					p.calls = append(p.calls, r.calls...)
					pos = skipCallSeparators(s, r.end)
					continue
				}
			}
		}
		atStart = false
		idx, marker := -1, ""
		for _, m := range markers {
			if k := strings.Index(s[pos:], m); k >= 0 && (idx < 0 || k < idx) {
				idx, marker = k, m
			}
		}
		if idx < 0 {
			p.addContent(s[pos:], markers)
			return
		}
		p.content.WriteString(s[pos : pos+idx])
		at := pos + idx
		r := p.markup(marker, at+len(marker))
		switch {
		case r.st == complete:
			p.calls = append(p.calls, r.calls...)
			pos = r.end
			atStart = true
		case r.st == incomplete && !p.final:
			p.calls = append(p.calls, r.calls...)
			return
		default:
			// Not a call after all: the marker is text.
			p.content.WriteString(marker)
			pos = at + len(marker)
		}
	}
}

// skipCallSeparators passes what may sit between two bare JSON calls.
func skipCallSeparators(s string, i int) int {
	for i < len(s) && strings.IndexByte(" \t\r\n;,", s[i]) >= 0 {
		i++
	}
	return i
}

// leadingCall reads a bare call at s[i]: a JSON object (in a ``` fence for
// the generic families), or Gemma's ```tool_code fence. ok is false when
// the text there cannot be one.
func (p *parser) leadingCall(i int) (region, bool) {
	s := p.text
	fam := p.opt.Format.Family
	fenced := fam == Generic || fam == Gemma
	rest := s[i:]
	if fenced && strings.HasPrefix(rest, "```") {
		nl := strings.IndexByte(rest, '\n')
		if nl < 0 {
			if !p.final && isFenceStart(rest) {
				return region{st: incomplete}, true
			}
			return region{}, false
		}
		lang := strings.TrimSpace(rest[3:nl])
		inner := i + nl + 1
		var r region
		switch lang {
		case "json", "":
			r = p.jsonCall(skipSpace(s, inner))
		case "tool_code", "python":
			r = p.pythonCall(skipSpace(s, inner))
		default:
			return region{}, false
		}
		if r.st != complete {
			return r, r.st != invalid
		}
		j := skipSpace(s, r.end)
		switch {
		case strings.HasPrefix(s[j:], "```"):
			r.end = j + 3
		case !p.final && strings.HasPrefix("```", s[j:]):
			r.st = incomplete
		default:
			return region{}, false
		}
		return r, true
	}
	if !p.final && fenced && strings.HasPrefix("```", rest) && rest != "" {
		return region{st: incomplete}, true
	}
	if rest == "" || rest[0] != '{' {
		return region{}, false
	}
	r := p.jsonCall(i)
	return r, r.st != invalid
}

func isFenceStart(s string) bool {
	for _, l := range []string{"```json", "```tool_code", "```python", "```"} {
		if strings.HasPrefix(l, s) || strings.HasPrefix(s, l) {
			return true
		}
	}
	return false
}

// jsonCall reads a call object (or a wrapper of calls) at s[i].
func (p *parser) jsonCall(i int) region {
	s := p.text
	obj, end, st := scanCallObject(s, i)
	if st == invalid {
		return region{st: invalid}
	}
	calls, ok := flatten([]callObject{obj}, st == complete)
	if st == complete && !ok {
		return region{st: invalid}
	}
	return region{calls: calls, end: end, st: st}
}

// markup reads a family's call markup after its opening marker at s[i].
func (p *parser) markup(marker string, i int) region {
	s := p.text
	switch p.opt.Format.Family {
	case Hermes:
		j := skipSpace(s, i)
		r := p.jsonCall(j)
		return p.closeWith(r, "</tool_call>", true)
	case Llama3:
		j := skipSpace(s, i)
		if j < len(s) && s[j] == '{' {
			r := p.jsonCall(j)
			if r.st == complete {
				r.end = skipCallSeparators(s, r.end)
			}
			return r
		}
		return p.pythonCall(j)
	case MistralNemo:
		j := skipSpace(s, i)
		if j < len(s) && s[j] == '{' {
			return p.jsonCall(j)
		}
		objs, end, st := scanCallArray(s, j)
		if st == invalid {
			return region{st: invalid}
		}
		calls, ok := flatten(objs, st == complete)
		if st == complete && !ok {
			return region{st: invalid}
		}
		return region{calls: calls, end: end, st: st}
	case Mistral:
		return p.mistralArgs(i)
	case Phi4, Granite:
		j := skipSpace(s, i)
		var r region
		if j < len(s) && s[j] == '[' {
			objs, end, st := scanCallArray(s, j)
			if st == invalid {
				return region{st: invalid}
			}
			calls, ok := flatten(objs, st == complete)
			if st == complete && !ok {
				return region{st: invalid}
			}
			r = region{calls: calls, end: end, st: st}
		} else {
			// Objects, several separated by commas without brackets
			// (Phi-4-mini writes parallel calls so at times).
			r = p.jsonCall(j)
			for r.st == complete {
				k := skipSpace(s, r.end)
				if k >= len(s) || s[k] != ',' {
					break
				}
				next := p.jsonCall(skipSpace(s, k+1))
				if next.st == invalid {
					break
				}
				r = region{calls: append(r.calls, next.calls...), end: next.end, st: next.st}
			}
		}
		return p.closeWith(r, "<|/tool_call|>", false)
	case DeepSeekR1:
		return p.deepseek(i)
	}
	return region{st: invalid}
}

// closeWith reads an optional or required closing tag after a complete
// region (whitespace around it is passed).
func (p *parser) closeWith(r region, tag string, required bool) region {
	if r.st != complete {
		return r
	}
	s := p.text
	j := skipSpace(s, r.end)
	switch {
	case strings.HasPrefix(s[j:], tag):
		r.end = j + len(tag)
	case !p.final && strings.HasPrefix(tag, s[j:]):
		// The tag may be on its way; the calls are known already.
		r.st = incomplete
	case required:
		return region{st: invalid}
	}
	return r
}

// mistralArgs reads name[ARGS]{...} or name[CALL_ID]id[ARGS]{...} after
// [TOOL_CALLS]; more calls may follow, each with its own [TOOL_CALLS].
func (p *parser) mistralArgs(i int) region {
	s := p.text
	j := skipSpace(s, i)
	if j < len(s) && (s[j] == '[' || s[j] == '{') {
		// The old array form, which newer models still write at times.
		save := p.opt.Format.Family
		p.opt.Format.Family = MistralNemo
		r := p.markup("", i)
		p.opt.Format.Family = save
		return r
	}
	br := strings.IndexByte(s[j:], '[')
	if br < 0 {
		if !p.final && validName(s[j:]) {
			return region{st: incomplete}
		}
		return region{st: invalid}
	}
	name := strings.TrimSpace(s[j : j+br])
	if !validName(name) || name == "" {
		return region{st: invalid}
	}
	k := j + br
	id := ""
	if rest := s[k:]; strings.HasPrefix(rest, "[CALL_ID]") {
		k += len("[CALL_ID]")
		e := strings.IndexByte(s[k:], '[')
		if e < 0 {
			if !p.final {
				return region{st: incomplete}
			}
			return region{st: invalid}
		}
		id = strings.TrimSpace(s[k : k+e])
		k += e
	}
	rest := s[k:]
	if !strings.HasPrefix(rest, "[ARGS]") {
		if !p.final && (strings.HasPrefix("[ARGS]", rest) || strings.HasPrefix("[CALL_ID]", rest)) {
			return region{st: incomplete}
		}
		return region{st: invalid}
	}
	k = skipSpace(s, k+len("[ARGS]"))
	end, st := scanValue(s, k, 0)
	if st == invalid || (k < len(s) && s[k] != '{') {
		return region{st: invalid}
	}
	c := Call{ID: id, Name: name, Arguments: s[k:end]}
	if st == incomplete {
		c.Arguments, c.partial = s[k:], true
	}
	return region{calls: []Call{c}, end: end, st: st}
}

// validName: the characters a function name may have (OpenAI's rule,
// with dots, which some tools use).
func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '-' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// pythonCall reads name(arg=value, ...) (Llama 3's built-in tools write
// name.call(...)), values being JSON or Python literals. The call is
// known only once it closes.
func (p *parser) pythonCall(i int) region {
	s := p.text
	j := i
	for j < len(s) && (validName(s[j : j+1])) {
		j++
	}
	name := s[i:j]
	if j == len(s) {
		if !p.final && (name != "" || i == len(s)) {
			return region{st: incomplete}
		}
		return region{st: invalid}
	}
	if name == "" || s[j] != '(' {
		return region{st: invalid}
	}
	name = strings.TrimSuffix(name, ".call")
	args := map[string]json.RawMessage{}
	var order []string
	k := skipSpace(s, j+1)
	for {
		if k >= len(s) {
			return region{st: incomplete}
		}
		if s[k] == ')' {
			k++
			break
		}
		e := k
		for e < len(s) && validName(s[e:e+1]) && s[e] != '.' {
			e++
		}
		key := s[k:e]
		e = skipSpace(s, e)
		if e >= len(s) {
			return region{st: incomplete}
		}
		if key == "" || s[e] != '=' {
			return region{st: invalid}
		}
		v := skipSpace(s, e+1)
		val, end, st := pyValue(s, v)
		if st != complete {
			return region{st: st}
		}
		if _, dup := args[key]; !dup {
			order = append(order, key)
		}
		args[key] = val
		k = skipSpace(s, end)
		if k < len(s) && s[k] == ',' {
			k = skipSpace(s, k+1)
		}
	}
	var b strings.Builder
	b.WriteByte('{')
	for n, key := range order {
		if n > 0 {
			b.WriteString(", ")
		}
		kj, _ := json.Marshal(key)
		b.Write(kj)
		b.WriteString(": ")
		b.Write(args[key])
	}
	b.WriteByte('}')
	return region{calls: []Call{{Name: name, Arguments: b.String()}}, end: k, st: complete}
}

// pyValue reads a JSON value or a Python literal (single-quoted string,
// True, False, None) and returns it as JSON.
func pyValue(s string, i int) (json.RawMessage, int, status) {
	if i >= len(s) {
		return nil, i, incomplete
	}
	for lit, js := range map[string]string{"True": "true", "False": "false", "None": "null"} {
		if strings.HasPrefix(s[i:], lit) {
			return json.RawMessage(js), i + len(lit), complete
		}
		if strings.HasPrefix(lit, s[i:]) {
			return nil, len(s), incomplete
		}
	}
	if s[i] == '\'' {
		var b strings.Builder
		for j := i + 1; j < len(s); j++ {
			switch s[j] {
			case '\\':
				if j+1 < len(s) {
					j++
					b.WriteByte(s[j])
				}
			case '\'':
				out, _ := json.Marshal(b.String())
				return out, j + 1, complete
			default:
				b.WriteByte(s[j])
			}
		}
		return nil, len(s), incomplete
	}
	end, st := scanValue(s, i, 0)
	if st != complete {
		return nil, end, st
	}
	return json.RawMessage(s[i:end]), end, complete
}

// DeepSeek R1's markup.
const (
	dsCallBegin  = "<｜tool▁call▁begin｜>"
	dsSep        = "<｜tool▁sep｜>"
	dsCallEnd    = "<｜tool▁call▁end｜>"
	dsCallsEnd   = "<｜tool▁calls▁end｜>"
	dsCallsBegin = "<｜tool▁calls▁begin｜>"
)

// deepseek reads the calls after <｜tool▁calls▁begin｜> up to
// <｜tool▁calls▁end｜>.
func (p *parser) deepseek(i int) region {
	s := p.text
	var calls []Call
	k := skipSpace(s, i)
	partial := func() region { return region{calls: calls, st: incomplete} }
	for {
		rest := s[k:]
		switch {
		case strings.HasPrefix(rest, dsCallsEnd):
			return region{calls: calls, end: k + len(dsCallsEnd), st: complete}
		case p.final && rest == "" && len(calls) > 0:
			// The output ended after a whole call without the closing
			// marker, as R1's own template writes a single call.
			return region{calls: calls, end: k, st: complete}
		case !p.final && strings.HasPrefix(dsCallsEnd, rest) || !p.final && strings.HasPrefix(dsCallBegin, rest):
			return partial()
		}
		if strings.HasPrefix(rest, dsCallBegin) {
			k += len(dsCallBegin)
		}
		rest = s[k:]
		head := "function" + dsSep
		if !strings.HasPrefix(rest, head) {
			if !p.final && strings.HasPrefix(head, rest) {
				return partial()
			}
			return region{st: invalid}
		}
		k += len(head)
		nl := strings.Index(s[k:], "\n")
		if nl < 0 {
			if !p.final {
				return partial()
			}
			return region{st: invalid}
		}
		name := strings.TrimSpace(s[k : k+nl])
		k += nl + 1
		fence := "```json\n"
		rest = s[k:]
		if !strings.HasPrefix(rest, fence) {
			if !p.final && strings.HasPrefix(fence, rest) {
				return partial()
			}
			return region{st: invalid}
		}
		k += len(fence)
		end, st := scanValue(s, k, 0)
		if st == invalid {
			return region{st: invalid}
		}
		if st == incomplete {
			calls = append(calls, Call{Name: name, Arguments: s[k:], partial: true})
			return partial()
		}
		calls = append(calls, Call{Name: name, Arguments: s[k:end]})
		k = skipSpace(s, end)
		closing := "```"
		rest = s[k:]
		if !strings.HasPrefix(rest, closing) {
			if !p.final && strings.HasPrefix(closing, rest) {
				return partial()
			}
			return region{st: invalid}
		}
		k = skipSpace(s, k+len(closing))
		rest = s[k:]
		if !strings.HasPrefix(rest, dsCallEnd) {
			if !p.final && strings.HasPrefix(dsCallEnd, rest) {
				return partial()
			}
			return region{st: invalid}
		}
		k = skipSpace(s, k+len(dsCallEnd))
	}
}

// ParsePartial reads text as a prefix of an output, the way a Stream
// does: markup that may still be completing is held back, a call is
// returned once its name is known with the arguments written so far, and
// each result extends the one before (for callers that stream through an
// interface that only passes whole texts, such as the C ABI).
func ParsePartial(text string, o Options) Message {
	p := parser{text: text, opt: o}
	p.run()
	return p.msg()
}
