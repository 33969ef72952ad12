package bench

// Constrained decoding against free decoding through the engine (issue
// 23): the stories110M-shaped random Q4_K_M model with the llama-spm
// vocabulary (32000 tokens, ../shared/vocab), batch 1 and 32. Run:
//
//	go test ./bench/ -run '^$' -bench GrammarDecode -benchtime 2x -timeout 30m

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/grammar"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// grammarBenchSchemas are engine/grammar's benchmark shapes: a flat object,
// nested objects with arrays, and an enum-heavy object.
var grammarBenchSchemas = []struct{ name, schema string }{
	{"flat", `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"},"email":{"type":"string"},"active":{"type":"boolean"},"score":{"type":"number"}},"required":["id","name","email","active","score"],"additionalProperties":false}`},
	{"nested", `{"type":"object","properties":{"user":{"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"type":"string"},"maxItems":4}},"required":["name","tags"]},"orders":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{4}$"},"qty":{"type":"integer","minimum":1,"maximum":99}},"required":["sku","qty"]},"maxItems":3}},"required":["user","orders"]}`},
	{"enum", `{"type":"object","properties":{"status":{"enum":["active","inactive","pending","banned","deleted"]},"level":{"enum":[1,2,3,4,5,null]},"lang":{"enum":["en","fr","de","es","it","pt","ja","zh","ko","ru"]}},"required":["status","level","lang"]}`},
}

// llamaSPM is the 32000-token llama-spm tokenizer, the stories110M shape's
// vocabulary size.
func llamaSPM(b *testing.B) tokenizer.Tokenizer {
	b.Helper()
	return vocabFile(b, "llama-spm")
}

// BenchmarkGrammarDecode runs, per iteration, batch requests of 32
// tokens (sampled at temperature 0.8, or greedy) free and the same
// requests under a JSON Schema, and
// reports both decode rates (generated tokens per second of wall time,
// prompts of 16 tokens included) and their ratio. The schema is compiled
// once, as the server keeps it, so masks of states seen before come from
// its cache.
func BenchmarkGrammarDecode(b *testing.B) {
	var q quantMix
	for _, m := range quantMixes {
		if m.Name == "Q4_K_M" {
			q = m
		}
	}
	for _, batch := range []int{1, 32} {
		for _, sc := range grammarBenchSchemas {
			for _, temp := range []float32{0.8, 0} {
				b.Run(fmt.Sprintf("B=%d/%s/temp=%g", batch, sc.name, temp), func(b *testing.B) {
					tok := llamaSPM(b)
					w := mixModel(b, q)
					require.Equal(b, w.Config.Vocab, tok.VocabSize())
					e, err := engine.New(engine.Config{Weights: w, Tokenizer: tok, KVMemory: 256 << 20, MaxContext: 256,
						MaxSeqs: 32, DisablePrefixCache: true})
					require.NoError(b, err)
					defer e.Close()
					g, err := e.CompileJSONSchema([]byte(sc.schema))
					require.NoError(b, err)
					run := func(i int, g *engine.Grammar) (int, time.Duration) {
						start := time.Now()
						var wg sync.WaitGroup
						var mu sync.Mutex
						tokens := 0
						for s := range batch {
							wg.Add(1)
							go func() {
								defer wg.Done()
								res, err := e.Generate(context.Background(), engine.Request{
									Tokens: benchPrompt(i*batch+s, 16, w.Config.Vocab), MaxTokens: 32, Tenant: "bench",
									Sampling: sample.Params{Temperature: temp, TopP: 1, RepeatPenalty: 1, Seed: uint64(s), HasSeed: true},
									Grammar:  g,
								})
								if err != nil {
									b.Error(err)
									return
								}
								mu.Lock()
								tokens += len(res.Tokens)
								mu.Unlock()
							}()
						}
						wg.Wait()
						return tokens, time.Since(start)
					}
					var freeN, gramN int
					var freeT, gramT time.Duration
					b.ResetTimer()
					for i := range b.N {
						// Alternate which goes first, against drift.
						for k := range 2 {
							if (i+k)%2 == 0 {
								n, d := run(i, nil)
								freeN, freeT = freeN+n, freeT+d
							} else {
								n, d := run(i, g)
								gramN, gramT = gramN+n, gramT+d
							}
						}
					}
					free, gram := float64(freeN)/freeT.Seconds(), float64(gramN)/gramT.Seconds()
					b.ReportMetric(free, "free-tokens/s")
					b.ReportMetric(gram, "schema-tokens/s")
					b.ReportMetric(gram/free, "ratio")
					b.ReportMetric(float64(gramN)/float64(b.N*batch), "schema-tokens/req")
				})
			}
		}
	}
}

// samplingVocab is one vocabulary of BenchmarkGrammarSampling: its
// grammar Vocab, its end-of-generation ids, and where it came from.
type samplingVocab struct {
	name string
	v    *grammar.Vocab
	eog  []int
	src  string
}

// vocabFile loads ../shared/vocab/ggml-vocab-NAME.gguf, skipping (failing
// under CI) when absent.
func vocabFile(b *testing.B, name string) tokenizer.Tokenizer {
	b.Helper()
	path := filepath.Join(testmodels.Dir(b), "..", "vocab", "ggml-vocab-"+name+".gguf")
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") != "" {
			b.Fatalf("%s: %v", path, err)
		}
		b.Skipf("%s not found: the grammar benchmark needs llama.cpp's test vocabularies", path)
	}
	f, err := gguf.Open(path)
	require.NoError(b, err)
	defer f.Close()
	tok, err := tokenizer.FromMetadata(f)
	require.NoError(b, err)
	return tok
}

// samplingVocabs are the vocabulary sizes of issue 23: Llama 2's 32000
// (llama-spm, real), and Llama 3's 128256 and Qwen 2's 151936, which
// ../shared/vocab does not have: those are synthetic byte-level BPE
// vocabularies, gpt-2's 50257 tokens (real) grown with random merges
// (concatenations of two existing tokens, each new string once, seeded),
// as BPE grows a vocabulary, so their tries have real-shaped prefixes.
func samplingVocabs(b *testing.B) []samplingVocab {
	b.Helper()
	tokenVocab := func(tok tokenizer.Tokenizer, size int) ([][]byte, []bool) {
		n := tok.VocabSize()
		pieces := make([][]byte, n, size)
		special := make([]bool, n, size)
		for id := range n {
			pieces[id], special[id] = tokenizer.TokenBytes(tok, id)
		}
		return pieces, special
	}
	spm := vocabFile(b, "llama-spm")
	pieces, special := tokenVocab(spm, spm.VocabSize())
	v32, err := grammar.NewVocab(pieces, special, spm.EOG()...)
	require.NoError(b, err)
	out := []samplingVocab{{"32k", v32, spm.EOG(), "llama-spm (real)"}}
	gpt2 := vocabFile(b, "gpt-2")
	for _, sz := range []struct {
		name string
		size int
	}{{"128k", 128256}, {"152k", 151936}} {
		size := sz.size
		pieces, special := tokenVocab(gpt2, size)
		seen := make(map[string]bool, size)
		var ordinary []int
		for id, p := range pieces {
			seen[string(p)] = true
			if !special[id] && len(p) > 0 {
				ordinary = append(ordinary, id)
			}
		}
		rng := rand.New(rand.NewPCG(23, uint64(size)))
		for len(pieces) < size {
			a, c := pieces[ordinary[rng.IntN(len(ordinary))]], pieces[ordinary[rng.IntN(len(ordinary))]]
			p := append(append(make([]byte, 0, len(a)+len(c)), a...), c...)
			if len(p) > 32 || seen[string(p)] {
				continue
			}
			seen[string(p)] = true
			ordinary = append(ordinary, len(pieces))
			pieces, special = append(pieces, p), append(special, false)
		}
		v, err := grammar.NewVocab(pieces, special, gpt2.EOG()...)
		require.NoError(b, err)
		out = append(out, samplingVocab{sz.name, v, gpt2.EOG(),
			fmt.Sprintf("gpt-2 + %d random merges (synthetic)", size-gpt2.VocabSize())})
	}
	return out
}

// BenchmarkGrammarSampling isolates what a grammar adds to each token in
// the scheduler, without the forward pass (whose timing the shared
// machine makes noisy): for each vocabulary of samplingVocabs (32k, 128k,
// 152k) and fixed random logits, "free" is greedy Sample over the logits;
// "cold" and "warm" add the mask (Allowed), SampleMasked and Accept along
// generations of up to 64 tokens (mask-ns/token: Allowed and Accept
// alone). "cold" compiles the schema again for every generation (a new
// schema's first request: every mask computed); "warm" reuses it (masks of
// states seen before come from the cache). ns/token is the cost per
// generated token.
func BenchmarkGrammarSampling(b *testing.B) {
	for _, sv := range samplingVocabs(b) {
		v := sv.v
		n := v.Size()
		rng := rand.New(rand.NewPCG(7, 7))
		rows := make([][]float32, 64)
		for i := range rows {
			rows[i] = make([]float32, n)
			for j := range rows[i] {
				rows[i][j] = float32(rng.NormFloat64() * 3)
			}
		}
		logits := make([]float32, n)
		mask := make([]uint64, v.MaskWords())
		// Greedy: at temperature > 0 without top-k the sampler sorts the
		// whole vocabulary (about 2 ms a token at 32k here), which would
		// hide the mask.
		params := sample.Greedy()
		for _, sc := range grammarBenchSchemas {
			for _, mode := range []string{"free", "cold", "warm"} {
				b.Run(sv.name+"/"+sc.name+"/"+mode, func(b *testing.B) {
					b.Logf("vocabulary %s: %d tokens", sv.src, n)
					g, err := grammar.FromJSONSchema([]byte(sc.schema))
					require.NoError(b, err)
					s := sample.New(params)
					tokens := 0
					var masking time.Duration
					b.ResetTimer()
					for i := range b.N {
						if mode == "cold" {
							b.StopTimer()
							g, err = grammar.FromJSONSchema([]byte(sc.schema))
							require.NoError(b, err)
							b.StartTimer()
						}
						m := grammar.NewMatcher(g, v)
						var hist []int
						for step := range 64 {
							copy(logits, rows[(i+step)%len(rows)])
							var id int
							if mode == "free" {
								id = s.Sample(logits, hist)
							} else {
								t0 := time.Now()
								if err := m.Allowed(mask); err != nil {
									b.Fatal(err)
								}
								masking += time.Since(t0)
								if id, err = s.SampleMasked(logits, hist, mask); err != nil {
									b.Fatal(err)
								}
								if slices.Contains(sv.eog, id) {
									tokens++
									break
								}
								t0 = time.Now()
								if err := m.Accept(id); err != nil {
									b.Fatal(err)
								}
								masking += time.Since(t0)
							}
							hist = append(hist, id)
							tokens++
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(tokens), "ns/token")
					if mode != "free" {
						b.ReportMetric(float64(masking.Nanoseconds())/float64(tokens), "mask-ns/token")
					}
				})
			}
		}
	}
}
