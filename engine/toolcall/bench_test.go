package toolcall

import (
	"strings"
	"testing"
)

// BenchmarkStreamFeed streams a 16 KiB Hermes reply (about 4000 tokens of
// text, then a call) four bytes at a time and reports the cost per piece.
func BenchmarkStreamFeed(b *testing.B) {
	out := strings.Repeat("Once upon a time, a cat sat. ", 16<<10/29) +
		"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>"
	o := Options{Format: Format{Family: Hermes}, Tools: true}
	pieces := 0
	b.ResetTimer()
	for range b.N {
		s := NewStream(o, func() string { return "id" })
		for i := 0; i < len(out); i += 4 {
			s.Feed(out[i:min(i+4, len(out))])
			pieces++
		}
		s.Finish()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pieces), "ns/piece")
}
