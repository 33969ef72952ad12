package toolcall

import "strings"

// gpt-oss's harmony format: the output is a run of messages, each a header
// and a body:
//
//	<|channel|>analysis<|message|>reasoning<|end|>
//	<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{args}<|call|>
//	<|start|>assistant<|channel|>final<|message|>answer<|return|>
//
// The recipient (to=functions.NAME) may also come before the channel. The
// first message has no <|start|>assistant: the generation prompt ends with
// it. <|call|> and <|return|> end the generation, so they are not in the
// text. All of these are control tokens the output must keep
// (Format.KeepTokens).
const (
	hStart     = "<|start|>"
	hChannel   = "<|channel|>"
	hMessage   = "<|message|>"
	hEnd       = "<|end|>"
	hConstrain = "<|constrain|>"
	hCall      = "<|call|>"
	hReturn    = "<|return|>"
)

var harmonyMarkers = []string{hStart, hChannel, hMessage, hEnd, hCall, hReturn}

// harmonyHeader reads a message header: its channel and, for a tool call,
// the function named by to=functions.NAME.
func harmonyHeader(h string) (channel, recipient string) {
	h = strings.TrimPrefix(strings.TrimSpace(h), "assistant")
	if i := strings.Index(h, "to=functions."); i >= 0 {
		r := h[i+len("to=functions."):]
		end := strings.IndexAny(r, " <\t\n")
		if end < 0 {
			end = len(r)
		}
		recipient = r[:end]
	}
	if i := strings.Index(h, hChannel); i >= 0 {
		c := h[i+len(hChannel):]
		end := strings.IndexAny(c, " <\t\n")
		if end < 0 {
			end = len(c)
		}
		channel = c[:end]
	}
	return channel, recipient
}

// harmony reads the whole output (or, partial, its prefix) as messages.
func (p *parser) harmony() {
	s := p.text
	p.trim, p.settled = true, true
	pos := 0
	for pos < len(s) {
		rest := s[pos:]
		if strings.HasPrefix(rest, hStart) {
			pos += len(hStart)
			continue
		}
		m := strings.Index(rest, hMessage)
		if m < 0 {
			if p.final {
				// A header that never opened a body: keep it as text.
				p.content.WriteString(rest)
			}
			return
		}
		channel, recipient := harmonyHeader(rest[:m])
		body := pos + m + len(hMessage)
		if recipient != "" && p.opt.Tools {
			// The arguments end where their JSON does: a string in them
			// may spell a marker.
			j := skipSpace(s, body)
			end, st := scanValue(s, j, 0)
			if st == complete || (st == incomplete && !p.final) {
				c := Call{Name: recipient, Arguments: s[j:end], partial: st != complete}
				if st == incomplete {
					c.Arguments = s[j:]
				}
				p.calls = append(p.calls, c)
				if st == incomplete {
					return
				}
				pos = skipSpace(s, end)
				for _, stop := range []string{hEnd, hCall, hReturn} {
					if strings.HasPrefix(s[pos:], stop) {
						pos += len(stop)
						break
					}
				}
				continue
			}
		}
		end, next := len(s), len(s)
		for _, stop := range []string{hEnd, hStart, hCall, hReturn} {
			if k := strings.Index(s[body:], stop); k >= 0 && body+k < end {
				end, next = body+k, body+k
				if stop != hStart {
					next += len(stop)
				}
			}
		}
		text := s[body:end]
		open := end == len(s) && !p.final // the body may still grow
		if open {
			text = text[:len(text)-holdBack(text, harmonyMarkers)]
		}
		switch {
		case recipient != "" && p.opt.Tools:
			args := strings.TrimSpace(text)
			if open {
				args = strings.TrimLeft(text, " \t\r\n")
			}
			p.calls = append(p.calls, Call{Name: recipient, Arguments: args, partial: open})
		case channel == "analysis":
			p.reasoning.WriteString(text)
		default: // final, a commentary preamble, or a call with tools off
			p.content.WriteString(text)
		}
		pos = next
	}
}
