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

// BenchmarkParse parses a whole reply of each family once (the
// non-streamed answer): some text, then two calls in the family's markup.
func BenchmarkParse(b *testing.B) {
	text := strings.Repeat("Let me look that up for you. ", 8)
	for _, c := range []struct {
		f     Format
		calls string
		n     int
	}{
		{Format{Family: Hermes}, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>\n" +
			"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n</tool_call>", 2},
		{Format{Family: Llama3, PythonTag: true}, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}", 1},
		{Format{Family: MistralNemo}, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}, \"id\": \"abcdef123\"}, " +
			"{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}, \"id\": \"abcdef124\"}]", 2},
		{Format{Family: Mistral}, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\", \"unit\": \"celsius\"}[TOOL_CALLS]get_time[ARGS]{\"zone\": \"CET\"}", 2},
	} {
		b.Run(string(c.f.Family), func(b *testing.B) {
			out := text + c.calls
			o := Options{Format: c.f, Tools: true}
			if m := Parse(out, o); len(m.Calls) != c.n {
				b.Fatalf("%s: %d calls parsed from %q, want %d", c.f.Family, len(m.Calls), out, c.n)
			}
			b.SetBytes(int64(len(out)))
			b.ResetTimer()
			for range b.N {
				Parse(out, o)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/reply")
		})
	}
}
