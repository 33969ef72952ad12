package grammar

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvwarden/kvwarden/internal/testmodels"
)

var benchSchemas = []struct{ name, schema string }{
	{"flat", `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"},"email":{"type":"string"},"active":{"type":"boolean"},"score":{"type":"number"}},"required":["id","name","email","active","score"],"additionalProperties":false}`},
	{"nested", `{"type":"object","properties":{"user":{"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"type":"string"},"maxItems":4}},"required":["name","tags"]},"orders":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{4}$"},"qty":{"type":"integer","minimum":1,"maximum":99},"lines":{"type":"array","items":{"type":"number"},"maxItems":3}},"required":["sku","qty","lines"]},"maxItems":3}},"required":["user","orders"]}`},
	{"enum", `{"type":"object","properties":{"country":{"enum":["Afghanistan","Albania","Algeria","Andorra","Angola","Argentina","Armenia","Australia","Austria","Azerbaijan","Bahamas","Bahrain","Bangladesh","Barbados","Belarus","Belgium","Belize","Benin","Bhutan","Bolivia","Botswana","Brazil","Brunei","Bulgaria","Burundi","Cambodia","Cameroon","Canada","Chad","Chile","China","Colombia","Comoros","Congo","Croatia","Cuba","Cyprus","Czechia","Denmark","Djibouti"]},"status":{"enum":["active","inactive","pending","banned","deleted"]},"level":{"enum":[1,2,3,4,5,null]},"lang":{"enum":["en","fr","de","es","it","pt","ja","zh","ko","ru"]}},"required":["country","status","level","lang"]}`},
}

// benchVocab returns a vocabulary of about size tokens: a real one from
// ../shared/vocab when present (grown with concatenated pairs of its own
// tokens past its size), else synthetic.
func benchVocab(b *testing.B, size int) (*Vocab, string) {
	b.Helper()
	root := testmodels.Dir(b)
	file := "llama-spm"
	if size > 40000 {
		file = "deepseek-llm"
	}
	var pieces [][]byte
	var special []bool
	var eog []int
	src := "synthetic"
	if path := filepath.Join(root, "..", "vocab", "ggml-vocab-"+file+".gguf"); fileExists(path) {
		tok := loadVocabFile(b, path)
		v, err := vocabFromTokenizer(tok)
		if err != nil {
			b.Fatal(err)
		}
		pieces, special, eog = v.pieces, v.special, v.eog
		src = file
	} else {
		pieces, special = [][]byte{[]byte("</s>")}, []bool{true}
		eog = []int{0}
		for c := range 256 {
			pieces = append(pieces, []byte{byte(c)})
			special = append(special, false)
		}
	}
	if len(pieces) < size {
		src = fmt.Sprintf("%s+%d pairs", src, size-len(pieces))
	}
	rng := rand.New(rand.NewPCG(1, uint64(size)))
	base := len(pieces)
	for len(pieces) < size {
		a, c := pieces[1+rng.IntN(base-1)], pieces[1+rng.IntN(base-1)]
		pieces = append(pieces, append(append([]byte{}, a...), c...))
		special = append(special, false)
	}
	v, err := NewVocab(pieces[:size], special[:size], eog...)
	if err != nil {
		b.Fatal(err)
	}
	return v, src
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// benchTrace is a token sequence through g chosen by a seeded random walk
// that favours long tokens, as a model's output would be.
func benchTrace(b *testing.B, g *Grammar, v *Vocab) []int {
	b.Helper()
	rng := rand.New(rand.NewPCG(42, 42))
	m := NewMatcher(g, v)
	mask := make([]uint64, v.MaskWords())
	var ids []int
	for step := 0; step < 400; step++ {
		if err := m.Allowed(mask); err != nil {
			b.Fatal(err)
		}
		var allowed []int
		for id := range v.Size() {
			if mask[id>>6]&(1<<(id&63)) != 0 && !v.special[id] {
				allowed = append(allowed, id)
			}
		}
		if m.CanEnd() || len(allowed) == 0 {
			break
		}
		// Best of a few draws by length; close strings after a while.
		id := allowed[rng.IntN(len(allowed))]
		for range 3 {
			if c := allowed[rng.IntN(len(allowed))]; len(v.pieces[c]) > len(v.pieces[id]) {
				id = c
			}
		}
		if step > 20 {
			for _, a := range allowed {
				if closers[string(v.pieces[a])] {
					id = a
					break
				}
			}
		}
		if err := m.Accept(id); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// BenchmarkMask reports the mask time per generated token (ns/token) for
// three schemas at three vocabulary sizes: "cold" with the mask cache
// emptied before each generation (a schema's first request), "warm" with
// the cache kept (later requests with the same compiled grammar).
func BenchmarkMask(b *testing.B) {
	for _, size := range []int{32000, 128256, 151936} {
		v, src := benchVocab(b, size)
		for _, s := range benchSchemas {
			g, err := FromJSONSchema([]byte(s.schema))
			if err != nil {
				b.Fatal(err)
			}
			trace := benchTrace(b, g, v)
			for _, mode := range []string{"cold", "warm"} {
				b.Run(fmt.Sprintf("%s/%dk/%s", s.name, size/1000, mode), func(b *testing.B) {
					b.Logf("vocabulary %s, %d tokens per generation", src, len(trace))
					mask := make([]uint64, v.MaskWords())
					tokens := 0
					b.ResetTimer()
					for range b.N {
						if mode == "cold" {
							b.StopTimer()
							g.resetCache()
							b.StartTimer()
						}
						m := NewMatcher(g, v)
						for _, id := range trace {
							if err := m.Allowed(mask); err != nil {
								b.Fatal(err)
							}
							if err := m.Accept(id); err != nil {
								b.Fatal(err)
							}
							tokens++
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(tokens), "ns/token")
				})
			}
		}
	}
}
