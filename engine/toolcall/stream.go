package toolcall

import (
	"crypto/rand"
	"strings"
)

// Delta is one piece of a streamed output, in the order it is to be sent:
// OpenAI's delta.reasoning_content, delta.content or one
// delta.tool_calls entry.
type Delta struct {
	Reasoning string
	Content   string
	Call      *CallDelta
}

// CallDelta is a streamed tool call fragment. The first fragment of a call
// carries its ID and Name; later ones only argument text.
type CallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}

// Stream parses an output as it is generated. It is not safe for
// concurrent use.
type Stream struct {
	opt   Options
	newID func() string
	text  strings.Builder

	reasoning, content string
	calls              []Call // as sent: IDs assigned, Arguments sent so far

	// pass: no tools and the reasoning block is over (or there was none):
	// the rest of the output is content, sent as it comes (trim: with
	// whitespace held back at the end, as Parse trims it), without
	// parsing the whole text again for every piece.
	pass, passTrim bool
	passWS         string
	passContent    strings.Builder
}

// NewStream starts a stream. newID gives the ID of each call the model
// did not name itself (nil: NewID for the family).
func NewStream(o Options, newID func() string) *Stream {
	if newID == nil {
		fam := o.Format.Family
		newID = func() string { return NewID(fam) }
	}
	return &Stream{opt: o, newID: newID}
}

// Feed adds generated text and returns what can be sent now.
func (s *Stream) Feed(text string) []Delta {
	if text == "" {
		return nil
	}
	s.text.WriteString(text)
	if s.pass {
		return s.passThrough(text)
	}
	p := parser{text: s.text.String(), opt: s.opt}
	p.run()
	d := s.diff(p.msg())
	if !s.opt.Tools && p.settled {
		s.pass, s.passTrim = true, p.trim
		s.passContent.WriteString(s.content)
		if p.trim {
			// What the parse held back: the content's trailing whitespace.
			raw := p.content.String()
			s.passWS = raw[len(strings.TrimRight(raw, " \t\r\n")):]
		}
	}
	return d
}

func (s *Stream) passThrough(text string) []Delta {
	if !s.passTrim {
		s.passContent.WriteString(text)
		return []Delta{{Content: text}}
	}
	t := s.passWS + text
	body := strings.TrimRight(t, " \t\r\n")
	s.passWS = t[len(body):]
	if s.passContent.Len() == 0 {
		body = strings.TrimLeft(body, " \t\r\n")
	}
	if body == "" {
		return nil
	}
	s.passContent.WriteString(body)
	return []Delta{{Content: body}}
}

// Finish parses the whole output and returns the last deltas and the
// final message (with the same call IDs as the deltas). A call that the
// stream sent but the end of the output turned into text (markup that
// never closed) stays in the message: it was sent.
func (s *Stream) Finish() ([]Delta, Message) {
	if s.pass {
		return nil, Message{Reasoning: s.reasoning, Content: s.passContent.String()}
	}
	final := Parse(s.text.String(), s.opt)
	if len(final.Calls) < len(s.calls) {
		// The output ended inside a call that was sent already (cut by
		// max_tokens): its markup must not come out as content now.
		p := parser{text: s.text.String(), opt: s.opt}
		p.run()
		final = p.msg()
	}
	d := s.diff(final)
	msg := Message{Reasoning: s.reasoning, Content: s.content, Calls: s.calls}
	return d, msg
}

// diff sends what m has beyond what was sent. A result that does not
// extend what was sent (which the held-back markup rules avoid) sends
// nothing for that field.
func (s *Stream) diff(m Message) []Delta {
	var out []Delta
	if rest, ok := strings.CutPrefix(m.Reasoning, s.reasoning); ok && rest != "" {
		out = append(out, Delta{Reasoning: rest})
		s.reasoning = m.Reasoning
	}
	if rest, ok := strings.CutPrefix(m.Content, s.content); ok && rest != "" {
		out = append(out, Delta{Content: rest})
		s.content = m.Content
	}
	for i, c := range m.Calls {
		if i < len(s.calls) {
			sent := &s.calls[i]
			if c.Name != sent.Name {
				continue
			}
			if rest, ok := strings.CutPrefix(c.Arguments, sent.Arguments); ok && rest != "" {
				out = append(out, Delta{Call: &CallDelta{Index: i, Arguments: rest}})
				sent.Arguments = c.Arguments
			}
			continue
		}
		id := c.ID
		if id == "" {
			id = s.newID()
		}
		s.calls = append(s.calls, Call{ID: id, Name: c.Name, Arguments: c.Arguments})
		out = append(out, Delta{Call: &CallDelta{Index: i, ID: id, Name: c.Name, Arguments: c.Arguments}})
	}
	return out
}

// AssignIDs gives every call without an ID one (nil newID: NewID for the
// family), for a non-streamed result.
func AssignIDs(calls []Call, f Family, newID func() string) {
	for i := range calls {
		if calls[i].ID == "" {
			if newID != nil {
				calls[i].ID = newID()
			} else {
				calls[i].ID = NewID(f)
			}
		}
	}
}

const idChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// NewID is a random tool call ID: "call_" and 24 letters or digits, or,
// for the Mistral families, whose templates refuse any other ID in the
// history, 9 letters or digits.
func NewID(f Family) string {
	n, prefix := 24, "call_"
	if f == Mistral || f == MistralNemo {
		n, prefix = 9, ""
	}
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = idChars[int(b[i])%len(idChars)]
	}
	return prefix + string(b)
}
