package tokenizer

import (
	"sort"
	"strings"
)

// specialMatcher finds special-token texts (control, unknown and
// user-defined pieces) in input text. It is used only when Options.Special
// is set.
type specialMatcher struct {
	byFirst map[byte][]specialText // candidates by first byte, longest first
}

type specialText struct {
	text string
	id   int
}

func newSpecialMatcher(texts []specialText) specialMatcher {
	m := specialMatcher{byFirst: make(map[byte][]specialText)}
	for _, t := range texts {
		if t.text == "" {
			continue
		}
		m.byFirst[t.text[0]] = append(m.byFirst[t.text[0]], t)
	}
	for _, l := range m.byFirst {
		sort.SliceStable(l, func(i, j int) bool {
			if len(l[i].text) != len(l[j].text) {
				return len(l[i].text) > len(l[j].text)
			}
			return l[i].id < l[j].id
		})
	}
	return m
}

// fragment is either raw text (id < 0) or a special token.
type fragment struct {
	text string
	id   int
}

// split cuts text into raw-text and special-token fragments. At each
// position the longest special text wins; among equal lengths the lowest id.
func (m specialMatcher) split(text string) []fragment {
	var out []fragment
	start := 0
	for i := 0; i < len(text); {
		cands := m.byFirst[text[i]]
		matched := false
		for _, c := range cands {
			if strings.HasPrefix(text[i:], c.text) {
				if start < i {
					out = append(out, fragment{text: text[start:i], id: -1})
				}
				out = append(out, fragment{id: c.id})
				i += len(c.text)
				start = i
				matched = true
				break
			}
		}
		if !matched {
			i++
		}
	}
	if start < len(text) {
		out = append(out, fragment{text: text[start:], id: -1})
	}
	return out
}
