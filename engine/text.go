package engine

import (
	"strings"
	"unicode/utf8"
)

// textStream turns a request's sampled tokens into text for streaming. It
// never emits half a multibyte UTF-8 character, and it holds back any tail
// that could still become one of the stop strings, so a client never sees
// text that a later stop match would have cut. Invalid byte sequences (which
// can never complete) are emitted as U+FFFD, so every emitted string is
// valid UTF-8.
//
// It is owned by the scheduler goroutine.
type textStream struct {
	decode func(prev, id int) []byte
	stops  []string
	prev   int

	pending []byte // undecoded bytes: an incomplete UTF-8 sequence at the end
	held    string // complete text held back as a possible stop-string prefix
	out     strings.Builder
}

func newTextStream(decode func(prev, id int) []byte, prev int, stops []string) *textStream {
	ts := &textStream{decode: decode, prev: prev}
	for _, s := range stops {
		if s != "" {
			ts.stops = append(ts.stops, s)
		}
	}
	return ts
}

// push adds token id and returns the text that may be streamed now, and
// whether a stop string was found (in which case the returned text is the
// final text before the stop string, and no more tokens should follow).
func (ts *textStream) push(id int) (string, bool) {
	if ts.decode != nil {
		ts.pending = append(ts.pending, ts.decode(ts.prev, id)...)
	}
	ts.prev = id
	complete := ts.takeComplete()
	text := ts.held + complete
	if len(ts.stops) > 0 {
		if cut := ts.findStop(text); cut >= 0 {
			emit := text[:cut]
			ts.held = ""
			ts.pending = ts.pending[:0]
			ts.out.WriteString(emit)
			return emit, true
		}
		keep := ts.stopPrefixLen(text)
		ts.held = text[len(text)-keep:]
		text = text[:len(text)-keep]
	}
	ts.out.WriteString(text)
	return text, false
}

// flush returns everything still held: a pending incomplete character
// becomes U+FFFD (the generation ended inside it), a held stop prefix is
// plain text after all.
func (ts *textStream) flush() string {
	text := ts.held
	if len(ts.pending) > 0 {
		text += strings.ToValidUTF8(string(ts.pending), "\uFFFD")
	}
	ts.held, ts.pending = "", nil
	ts.out.WriteString(text)
	return text
}

// text is everything emitted so far.
func (ts *textStream) text() string { return ts.out.String() }

// takeComplete removes and returns the longest prefix of pending that does
// not end inside a UTF-8 sequence that could still complete.
func (ts *textStream) takeComplete() string {
	p := ts.pending
	if len(p) == 0 {
		return ""
	}
	// Find a possibly incomplete sequence at the end: scan back at most
	// UTFMax-1 bytes for a lead byte whose sequence is not yet full.
	cut := len(p)
	for i := len(p) - 1; i >= 0 && i >= len(p)-(utf8.UTFMax-1); i-- {
		b := p[i]
		if b < 0x80 {
			break // ASCII: nothing after it can be a pending lead
		}
		if b >= 0xC0 { // a lead byte
			if !utf8.FullRune(p[i:]) {
				cut = i
			}
			break
		}
	}
	s := string(p[:cut])
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	rest := copy(p, p[cut:])
	ts.pending = p[:rest]
	return s
}

// findStop returns the byte index of the earliest stop string in text, or -1.
func (ts *textStream) findStop(text string) int {
	best := -1
	for _, s := range ts.stops {
		if i := strings.Index(text, s); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best
}

// stopPrefixLen is the length of the longest suffix of text that is a
// proper prefix of a stop string (and so must be held back).
func (ts *textStream) stopPrefixLen(text string) int {
	best := 0
	for _, s := range ts.stops {
		for n := min(len(s)-1, len(text)); n > best; n-- {
			if strings.HasSuffix(text, s[:n]) {
				best = n
				break
			}
		}
	}
	return best
}
