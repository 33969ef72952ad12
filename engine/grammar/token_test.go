package grammar

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kvwarden/kvwarden/engine/model/gguf"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
	"github.com/kvwarden/kvwarden/internal/testmodels"
	"github.com/stretchr/testify/require"
)

func vocabOf(t testing.TB, pieces ...string) *Vocab {
	t.Helper()
	// 0 is EOS, 1 a control token.
	bs := [][]byte{[]byte("</s>"), []byte("<ctl>")}
	for _, p := range pieces {
		bs = append(bs, []byte(p))
	}
	special := make([]bool, len(bs))
	special[1] = true
	v, err := NewVocab(bs, special, 0)
	require.NoError(t, err)
	return v
}

func allowedSet(t testing.TB, m *Matcher, v *Vocab) map[int]bool {
	t.Helper()
	mask := make([]uint64, v.MaskWords())
	require.NoError(t, m.Allowed(mask))
	got := map[int]bool{}
	for id := range v.Size() {
		if mask[id>>6]&(1<<(id&63)) != 0 {
			got[id] = true
		}
	}
	return got
}

func set(ids ...int) map[int]bool {
	m := map[int]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func TestAllowedWholeToken(t *testing.T) {
	g, err := Parse(`root ::= "ab" [0-9]+ "c"`)
	require.NoError(t, err)
	//               2    3     4     5      6     7     8      9
	v := vocabOf(t, "a", "ab", "abc", "ab1", "12", "1c", "1cx", "c")
	m := NewMatcher(g, v)
	require.Equal(t, set(2, 3, 5), allowedSet(t, m, v))
	require.NoError(t, m.Accept(5))
	require.Equal(t, set(6, 7, 9), allowedSet(t, m, v))
	require.ErrorIs(t, m.Accept(8), ErrTokenRejected) // "1cx" runs past the end
	require.ErrorIs(t, m.Accept(0), ErrTokenRejected) // EOG before the end
	require.ErrorIs(t, m.Accept(1), ErrTokenRejected) // control token
	require.NoError(t, m.Accept(7))
	require.True(t, m.CanEnd())
	require.Equal(t, set(0), allowedSet(t, m, v)) // only EOG
	require.NoError(t, m.Accept(0))
	require.True(t, m.Done())
	require.ErrorIs(t, m.Accept(2), ErrFinished)
}

func TestEOGOnlyWhereAccepted(t *testing.T) {
	g, err := Parse(`root ::= "x" "y"?`)
	require.NoError(t, err)
	v := vocabOf(t, "x", "y", "xy")
	m := NewMatcher(g, v)
	require.False(t, allowedSet(t, m, v)[0])
	require.NoError(t, m.Accept(2))
	require.Equal(t, set(0, 3), allowedSet(t, m, v))
}

func TestByteFallbackAndSplitUTF8(t *testing.T) {
	// [^"] over codepoints: é (C3 A9) and 日 (E6 97 A5) arrive as single
	// bytes (SPM byte fallback) or as pieces split inside the character.
	g, err := Parse(`root ::= "\"" [^"a]* "\""`)
	require.NoError(t, err)
	pieces := []string{`"`, "a", "\xc3", "\xa9", "\xe6", "\x97", "\xa5", "\xe6\x97", "\xa5\"", "é", "\xa9\xa9", "\xff"}
	v := vocabOf(t, pieces...)
	id := func(p string) int {
		for i, x := range pieces {
			if x == p {
				return i + 2
			}
		}
		t.Fatalf("no piece %q", p)
		return -1
	}
	m := NewMatcher(g, v)
	require.NoError(t, m.Accept(id(`"`)))
	// Lead bytes and whole characters; never a lone continuation byte, an
	// invalid byte, or the excluded "a".
	require.Equal(t, set(id(`"`), id("\xc3"), id("\xe6"), id("\xe6\x97"), id("é")), allowedSet(t, m, v))
	require.NoError(t, m.Accept(id("\xc3")))
	// Any continuation byte completes a character U+00C0..U+00FF.
	require.Equal(t, set(id("\xa9"), id("\x97"), id("\xa5"), id("\xa5\"")), allowedSet(t, m, v))
	require.ErrorIs(t, m.Accept(id("\xa9\xa9")), ErrTokenRejected)
	require.NoError(t, m.Accept(id("\xa9")))
	require.NoError(t, m.Accept(id("\xe6\x97")))
	require.False(t, m.CanEnd())
	require.Equal(t, set(id("\xa9"), id("\x97"), id("\xa5"), id("\xa5\"")), allowedSet(t, m, v))
	require.NoError(t, m.Accept(id("\xa5\"")))
	require.True(t, m.CanEnd())

	// A narrow class: after the lead byte C3 only A9 completes é.
	g, err = Parse(`root ::= [éa日]+`)
	require.NoError(t, err)
	m = NewMatcher(g, v)
	require.NoError(t, m.Accept(id("\xc3")))
	require.Equal(t, set(id("\xa9")), allowedSet(t, m, v))
	require.NoError(t, m.Accept(id("\xa9")))
	require.True(t, m.CanEnd())
	require.NoError(t, m.Accept(id("\xe6\x97")))
	require.False(t, m.CanEnd())
	require.Equal(t, set(id("\xa5")), allowedSet(t, m, v))
}

func TestDeadEnd(t *testing.T) {
	g, err := Parse(`root ::= "a" "z"`)
	require.NoError(t, err)
	v := vocabOf(t, "a", "b")
	m := NewMatcher(g, v)
	require.NoError(t, m.Accept(2))
	mask := make([]uint64, v.MaskWords())
	require.ErrorIs(t, m.Allowed(mask), ErrDeadEnd)
	require.Error(t, m.Allowed(make([]uint64, 0)))
}

func TestMaskCacheSameState(t *testing.T) {
	g, err := FromJSONSchema([]byte(`{"type":"object","properties":{"s":{"type":"string"}},"required":["s"]}`))
	require.NoError(t, err)
	v := testVocab(t)
	m := NewMatcher(g, v)
	require.NoError(t, m.AcceptBytes([]byte(`{"s":"`)))
	first := allowedSet(t, m, v)
	before := len(m.cache.masks)
	// Inside the string the state repeats: a cache hit, the same mask.
	require.NoError(t, m.AcceptBytes([]byte(`abc`)))
	require.Equal(t, first, allowedSet(t, m, v))
	require.Equal(t, before, len(m.cache.masks))
	// And the mask matches a fresh computation.
	fresh := NewMatcher(g, v)
	require.NoError(t, fresh.AcceptBytes([]byte(`{"s":"abc`)))
	require.Equal(t, first, allowedSet(t, fresh, v))
}

// TestMaskAgreesWithAccept checks, token by token over a random walk, that
// the mask allows exactly the tokens Accept takes.
func TestMaskAgreesWithAccept(t *testing.T) {
	v := testVocab(t)
	rng := rand.New(rand.NewPCG(9, 9))
	for _, c := range schemaCases[:12] {
		g, err := FromJSONSchema([]byte(c.schema))
		require.NoError(t, err)
		m := NewMatcher(g, v)
		for step := 0; step < 30 && !m.Done(); step++ {
			allowed := allowedSet(t, m, v)
			for id := range v.Size() {
				err := m.Clone().Accept(id)
				require.Equal(t, allowed[id], err == nil, "%s: token %q", c.name, v.pieces[id])
			}
			ids := make([]int, 0, len(allowed))
			for id := range allowed {
				ids = append(ids, id)
			}
			require.NoError(t, m.Accept(ids[rng.IntN(len(ids))]))
		}
	}
}

// vocabFromTokenizer is how the engine builds a Vocab.
func vocabFromTokenizer(tok tokenizer.Tokenizer) (*Vocab, error) {
	n := tok.VocabSize()
	pieces := make([][]byte, n)
	special := make([]bool, n)
	for id := range n {
		pieces[id], special[id] = tokenizer.TokenBytes(tok, id)
	}
	return NewVocab(pieces, special, tok.EOG()...)
}

// generateWith random-walks g over a real tokenizer's vocabulary and
// checks the decoded text.
func generateWith(t *testing.T, tok tokenizer.Tokenizer, schema string, walks int) {
	t.Helper()
	v, err := vocabFromTokenizer(tok)
	require.NoError(t, err)
	g, err := FromJSONSchema([]byte(schema))
	require.NoError(t, err)
	validator := compileSchema(t, schema)
	rng := rand.New(rand.NewPCG(11, uint64(tok.VocabSize())))
	mask := make([]uint64, v.MaskWords())
	for range walks {
		m := NewMatcher(g, v)
		var ids []int
		for step := 0; ; step++ {
			require.Less(t, step, 3000)
			require.NoError(t, m.Allowed(mask))
			var allowed []int
			for id := range v.Size() {
				if mask[id>>6]&(1<<(id&63)) != 0 {
					allowed = append(allowed, id)
				}
			}
			for _, id := range allowed {
				require.False(t, tok.IsEOG(id) && !m.CanEnd())
			}
			text := slices.DeleteFunc(allowed, tok.IsEOG)
			if m.CanEnd() && (step > 30 || rng.Float64() < 0.3 || len(text) == 0) {
				break
			}
			id := text[rng.IntN(len(text))]
			if step > 25 {
				// Prefer short tokens that close things.
				for _, a := range allowed {
					if p, _ := tokenizer.TokenBytes(tok, a); len(p) == 1 && strings.ContainsRune(`"]}`, rune(p[0])) {
						id = a
						break
					}
				}
			}
			require.NoError(t, m.Accept(id))
			ids = append(ids, id)
		}
		var text []byte
		prev := 0 // not BOS: keep SentencePiece's leading spaces
		if prev == tok.BOS() {
			prev = 3
		}
		for _, id := range ids {
			text = append(text, tok.Decode(prev, id)...)
			prev = id
		}
		inst, err := jsonUnmarshal(text)
		require.NoError(t, err, "%q", text)
		require.NoError(t, validator.Validate(inst), "%q", text)
	}
}

const realVocabSchema = `{"type":"object","properties":{"name":{"type":"string","maxLength":12},"langs":{"type":"array","items":{"enum":["go","c","日本語"]},"maxItems":3},"n":{"type":"integer","minimum":-5,"maximum":5000}},"required":["name","langs","n"]}`

func TestBuiltinVocab(t *testing.T) {
	generateWith(t, tokenizer.NewBytes(), realVocabSchema, 10)
}

// vocabPath is llama.cpp's test vocabulary ggml-vocab-NAME.gguf in
// ../shared/vocab, skipping (failing under CI) when absent.
func vocabPath(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(testmodels.Dir(t), "..", "vocab", "ggml-vocab-"+name+".gguf")
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("vocabulary %s not found: %v", p, err)
		}
		t.Skipf("vocabulary %s not found: %v", p, err)
	}
	return p
}

func loadVocabFile(t testing.TB, path string) tokenizer.Tokenizer {
	t.Helper()
	f, err := gguf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	tok, err := tokenizer.FromMetadata(f)
	require.NoError(t, err)
	return tok
}

func TestRealVocabs(t *testing.T) {
	for _, name := range []string{"llama-spm", "gpt-2", "phi-3"} {
		t.Run(name, func(t *testing.T) {
			generateWith(t, loadVocabFile(t, vocabPath(t, name)), realVocabSchema, 5)
		})
	}
}

// TestConcurrentMatchers runs matchers of one Grammar and Vocab on several
// goroutines: they share the mask cache (run with -race).
func TestConcurrentMatchers(t *testing.T) {
	v := testVocab(t)
	g, err := FromJSONSchema([]byte(schemaCases[6].schema))
	require.NoError(t, err)
	validator := compileSchema(t, schemaCases[6].schema)
	outs := make([][][]byte, 4)
	var wg sync.WaitGroup
	for w := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 5 {
				outs[w] = append(outs[w], randomWalk(t, g, v, rng))
			}
		}()
	}
	wg.Wait()
	for _, o := range outs {
		require.Len(t, o, 5)
		for _, doc := range o {
			inst, err := jsonUnmarshal(doc)
			require.NoError(t, err)
			require.NoError(t, validator.Validate(inst), "%q", doc)
		}
	}
}

// TestMaskAgreesWithAcceptLargeVocab is TestMaskAgreesWithAccept over a
// vocabulary big enough for the walk to skip whole subtrees of states
// that loop on themselves.
func TestMaskAgreesWithAcceptLargeVocab(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	alphabet := []string{"a", "b", "c", " ", `"`, `\`, "{", "}", ":", ",", "1", "é", "\xe6", "\x97", "\xa5", "n", "u", "[", "]"}
	pieces := [][]byte{[]byte("</s>")}
	for b := range 256 {
		pieces = append(pieces, []byte{byte(b)})
	}
	for range 4000 {
		var p []byte
		for range 1 + rng.IntN(7) {
			p = append(p, alphabet[rng.IntN(len(alphabet))]...)
		}
		pieces = append(pieces, p)
	}
	special := make([]bool, len(pieces))
	special[0] = true
	v, err := NewVocab(pieces, special, 0)
	require.NoError(t, err)
	for _, schema := range []string{
		`{"type":"object","properties":{"s":{"type":"string"},"t":{"type":"array","items":{"type":"string","maxLength":3}}},"required":["s","t"]}`,
		`{"type":"string","pattern":"^[a-c ]*\"?$"}`,
	} {
		g, err := FromJSONSchema([]byte(schema))
		require.NoError(t, err)
		m := NewMatcher(g, v)
		for step := 0; step < 25 && !m.Done(); step++ {
			allowed := allowedSet(t, m, v)
			for id := range v.Size() {
				err := m.Clone().Accept(id)
				require.Equal(t, allowed[id], err == nil, "token %q", v.pieces[id])
			}
			// Prefer single bytes, so that the walk stays inside strings.
			ids := make([]int, 0, len(allowed))
			for id := range allowed {
				if len(v.pieces[id]) == 1 || rng.IntN(4) == 0 {
					ids = append(ids, id)
				}
			}
			if len(ids) == 0 {
				break
			}
			require.NoError(t, m.Accept(ids[rng.IntN(len(ids))]))
		}
	}
}
