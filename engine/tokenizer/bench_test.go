package tokenizer

import (
	"strings"
	"testing"
)

// BenchmarkEncodeVocab encodes all inputs of a llama.cpp test vocabulary
// (about 2 KB of mixed text) per iteration and reports tokens/s.
func BenchmarkEncodeVocab(b *testing.B) {
	for _, name := range []string{"llama-spm", "gpt-2", "deepseek-llm", "falcon", "mpt"} {
		b.Run(name, func(b *testing.B) {
			tok, cases := loadVocab(b, name)
			var sb strings.Builder
			for _, c := range cases {
				sb.WriteString(c.text)
				sb.WriteString("\n")
			}
			text := sb.String()
			b.SetBytes(int64(len(text)))
			b.ResetTimer()
			n := 0
			for b.Loop() {
				ids, err := tok.Encode(text, Options{})
				if err != nil {
					b.Fatal(err)
				}
				n += len(ids)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
