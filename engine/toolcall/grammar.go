package toolcall

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/kvwarden/kvwarden/engine/grammar"
)

// MaxParallelCalls bounds the calls of a forced output, so that a weak
// model that never stops calling still ends.
const MaxParallelCalls = 8

// GrammarOptions shape a forcing grammar.
type GrammarOptions struct {
	// Parallel allows more than one call (parallel_tool_calls), up to
	// MaxParallelCalls. A named tool_choice is always one call, as OpenAI
	// has it.
	Parallel bool
	// Think allows a <think>…</think> block before the calls (a thinking
	// model); ThinkingOpen says the prompt already opened it, so the
	// output starts inside it and must close it.
	Think, ThinkingOpen bool
	// Tokens maps the family's markers (Format.KeepTokens) that are
	// control tokens of the model's vocabulary to their ids
	// (engine.Engine.ControlTokens). The grammar asks for such a marker as
	// that one token (<[id]>), the token the model was trained to write,
	// instead of its text spelled from ordinary tokens, which a real
	// Mistral or Llama 3 vocabulary could only do by pieces. The request
	// must keep their text (engine.Request.KeepTokens) for the parser.
	Tokens map[string]int
}

// Grammar is the GBNF grammar of an output that is nothing but tool calls
// in the family's markup (tool_choice "required": any of tools; a named
// choice: that one), whose arguments are valid under each tool's
// parameters schema. A schema the converter cannot take is an error
// naming the tool and the keyword (it wraps grammar.ErrUnsupportedSchema
// or grammar.ErrInvalidSchema).
func Grammar(f Format, tools []Tool, choice Choice, o GrammarOptions) (string, error) {
	if !choice.Forced() {
		return "", fmt.Errorf("%w: tool_choice %q does not force a call", ErrInvalid, choice.Mode)
	}
	var b strings.Builder
	var alts []string
	mk := markup(o.Tokens)
	for i, t := range tools {
		if choice.Mode == ModeFunction && t.Name != choice.Name {
			continue
		}
		src, err := grammar.JSONSchemaGBNF(t.Parameters)
		if err != nil {
			return "", fmt.Errorf("tools[%d] (%s) parameters: %w", i, t.Name, err)
		}
		prefix := fmt.Sprintf("t%d-", i)
		renamed, err := prefixRules(src, prefix)
		if err != nil {
			return "", fmt.Errorf("tools[%d] (%s) parameters: %w", i, t.Name, err)
		}
		b.WriteString(renamed)
		call := fmt.Sprintf("call-%d", i)
		fmt.Fprintf(&b, "%s ::= %s\n", call, mk.callRule(f.Family, t.Name, prefix+"root"))
		alts = append(alts, call)
	}
	if len(alts) == 0 {
		return "", reqErr("tool_choice", "names the function %q, which is not among the request's tools", choice.Name)
	}
	fmt.Fprintf(&b, "call ::= %s\n", strings.Join(alts, " | "))
	calls := mk.callsRule(f.Family, o.Parallel && choice.Mode != ModeFunction)
	if id, ok := o.Tokens["<|python_tag|>"]; ok && f.Family == Llama3 && f.PythonTag {
		// Llama 3.1 often opens a custom tool's call with <|python_tag|>
		// too; the parser takes both.
		calls = fmt.Sprintf("<[%d]>? %s", id, calls)
	}
	switch {
	case f.Family == Harmony:
		if o.Think {
			// An analysis message may come first; its body has no "<|".
			calls = "(" + mk.lit(hChannel+"analysis"+hMessage) + " harmony-body " + mk.lit(hEnd+hStart+"assistant") + ")? " + calls
			b.WriteString(`harmony-body ::= ([^<] | "<"+ [^|<])*` + "\n")
		}
	case o.ThinkingOpen:
		calls = "think-body " + mk.lit(thinkClose) + " think-space " + calls
	case o.Think:
		calls = "(" + mk.lit(thinkOpen) + " think-body " + mk.lit(thinkClose) + " think-space)? " + calls
	}
	if (o.Think || o.ThinkingOpen) && f.Family != Harmony {
		// Any text without "</" (the block ends at its first "</"): a run
		// of '<' is followed by neither '/' nor another '<'.
		b.WriteString(`think-body ::= ([^<] | "<"+ [^/<])*` + "\n")
		b.WriteString(`think-space ::= [ \t\n]{0,4}` + "\n")
	}
	return "root ::= " + calls + "\n" + b.String(), nil
}

// markup is GrammarOptions.Tokens: marker texts that are control tokens.
type markup map[string]int

// lit is the GBNF of text s: string literals, with each marker of mk in
// it (the longest at a place) asked for as its token.
func (mk markup) lit(s string) string {
	if len(mk) == 0 {
		return lit(s)
	}
	var parts []string
	start := 0
	for i := 0; i < len(s); {
		best := ""
		for m := range mk {
			if len(m) > len(best) && strings.HasPrefix(s[i:], m) {
				best = m
			}
		}
		if best == "" {
			i++
			continue
		}
		if i > start {
			parts = append(parts, lit(s[start:i]))
		}
		parts = append(parts, fmt.Sprintf("<[%d]>", mk[best]))
		i += len(best)
		start = i
	}
	if start < len(s) || len(parts) == 0 {
		parts = append(parts, lit(s[start:]))
	}
	return strings.Join(parts, " ")
}

// lit is a GBNF string literal.
func lit(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20:
			fmt.Fprintf(&b, `\x%02X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// callRule is one call of the named tool in the family's markup, args
// being the rule of its arguments. The spacing is the one each family's
// template prints in the history.
func (mk markup) callRule(f Family, name, args string) string {
	lit := mk.lit
	obj := func(argKey string) string {
		return lit(`{"name": "`+name+`", "`+argKey+`": `) + " " + args + " " + lit("}")
	}
	switch f {
	case Hermes:
		return lit("<tool_call>\n") + " " + obj("arguments") + " " + lit("\n</tool_call>")
	case Llama3:
		return obj("parameters")
	case MistralNemo:
		return lit(`{"name": "`+name+`", "arguments": `) + " " + args + " " + lit(`, "id": "`) + ` [a-zA-Z0-9]{9} ` + lit(`"}`)
	case Mistral:
		return lit("[TOOL_CALLS]"+name+"[ARGS]") + " " + args
	case DeepSeekR1:
		return lit(dsCallBegin+"function"+dsSep+name+"\n```json\n") + " " + args + " " + lit("\n```"+dsCallEnd)
	case Harmony:
		return lit(hChannel+"commentary to=functions."+name+" "+hConstrain+"json"+hMessage) + " " + args
	}
	// Generic, Gemma, Granite (inside its list).
	return obj("arguments")
}

// callsRule is the whole output: one call, or with parallel one or more,
// in the family's list form.
func (mk markup) callsRule(f Family, parallel bool) string {
	lit := mk.lit
	more := fmt.Sprintf("{0,%d}", MaxParallelCalls-1)
	many := func(sep string) string {
		if !parallel {
			return "call"
		}
		return "call (" + lit(sep) + " call)" + more
	}
	switch f {
	case Hermes:
		return many("\n")
	case Llama3:
		return many("; ")
	case MistralNemo:
		return lit("[TOOL_CALLS][") + " " + many(", ") + " " + lit("]")
	case Mistral:
		return many("")
	case Phi4:
		return lit("<|tool_call|>[") + " " + many(", ") + " " + lit("]<|/tool_call|>")
	case Granite:
		return lit("<|tool_call|>[") + " " + many(", ") + " " + lit("]")
	case DeepSeekR1:
		return lit(dsCallsBegin) + " " + many("") + " " + lit(dsCallsEnd)
	case Harmony:
		// One call per message, and <|call|> ends the generation.
		return "call"
	}
	if parallel {
		return lit(`{"tool_calls": [`) + " call (" + lit(", ") + " call)" + more + " " + lit("]}")
	}
	return "call"
}

var ruleHead = regexp.MustCompile(`(?m)^([A-Za-z0-9_-]+) ::= `)

// prefixRules renames every rule of a GBNF grammar (as JSONSchemaGBNF
// writes it: one "name ::= body" per line) by prefixing it, so that the
// grammars of several tools live side by side. References are renamed
// outside string literals, character classes and repetition counts.
func prefixRules(src, prefix string) (string, error) {
	names := map[string]bool{}
	for _, m := range ruleHead.FindAllStringSubmatch(src, -1) {
		names[m[1]] = true
	}
	if !names["root"] {
		return "", fmt.Errorf("%w: converted grammar has no root rule", grammar.ErrInvalidGrammar)
	}
	isName := func(c byte) bool {
		return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	var b strings.Builder
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '"' || c == '[':
			end := byte('"')
			if c == '[' {
				end = ']'
			}
			j := i + 1
			for j < len(src) && src[j] != end {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(src))
			b.WriteString(src[i:j])
			i = j
		case c == '{':
			j := strings.IndexByte(src[i:], '}')
			if j < 0 {
				j = len(src) - i - 1
			}
			b.WriteString(src[i : i+j+1])
			i += j + 1
		case isName(c):
			j := i
			for j < len(src) && isName(src[j]) {
				j++
			}
			if w := src[i:j]; names[w] {
				b.WriteString(prefix)
			}
			b.WriteString(src[i:j])
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), nil
}
