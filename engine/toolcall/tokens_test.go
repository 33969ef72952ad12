package toolcall

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/grammar"
)

// ctlVocab is byteVocab plus each of the family's markers as a control
// token (no bytes, as a real Mistral or Llama 3 vocabulary has
// [TOOL_CALLS] and <|python_tag|>). text[id] is what the output shows for
// a token when the request keeps the markers (engine.Request.KeepTokens).
func ctlVocab(t *testing.T, f Format) (v *grammar.Vocab, text [][]byte, tokens map[string]int) {
	t.Helper()
	_, pieces := byteVocab(t)
	special := make([]bool, len(pieces))
	special[0] = true
	names := make([]string, len(pieces))
	for id, p := range pieces {
		names[id] = string(p)
	}
	text = append([][]byte(nil), pieces...)
	tokens = map[string]int{}
	for _, k := range f.KeepTokens() {
		tokens[k] = len(pieces)
		pieces = append(pieces, nil)
		special = append(special, true)
		names = append(names, k)
		text = append(text, []byte(k))
	}
	v, err := grammar.NewVocab(pieces, special, 0)
	require.NoError(t, err)
	v, err = v.WithNames(names)
	require.NoError(t, err)
	return v, text, tokens
}

// walkIDs generates one sentence of g with random allowed tokens, as walk,
// and returns their ids.
func walkIDs(t *testing.T, g *grammar.Grammar, v *grammar.Vocab, text [][]byte, rng *rand.Rand) []int {
	t.Helper()
	m := grammar.NewMatcher(g, v)
	mask := make([]uint64, v.MaskWords())
	var ids []int
	for step := 0; ; step++ {
		require.Less(t, step, 4000, "walk did not end")
		require.NoError(t, m.Allowed(mask))
		var allowed, closers []int
		for id := range v.Size() {
			if mask[id>>6]&(1<<(id&63)) == 0 {
				continue
			}
			allowed = append(allowed, id)
			for _, c := range walkClosers {
				if string(text[id]) == c {
					closers = append(closers, id)
				}
			}
		}
		if mask[0]&1 != 0 && (rng.Float64() < 0.3 || step > 80 || len(allowed) == 1) {
			return ids
		}
		id := allowed[rng.IntN(len(allowed))]
		if step > 30 && rng.Float64() < 0.8 && len(closers) > 0 {
			id = closers[rng.IntN(len(closers))]
		}
		if id == 0 {
			continue
		}
		require.NoError(t, m.Accept(id))
		ids = append(ids, id)
	}
}

// TestGrammarControlTokens: when the family's markers are control tokens
// of the vocabulary, a forced call asks for each marker as its token:
// random sentences of the grammar, with the markers' text kept, parse into
// valid calls, and a sentence of the plain grammar, whose markers are
// spelled by ordinary pieces, is refused where a family's call markup
// needs a marker.
func TestGrammarControlTokens(t *testing.T) {
	tools := mustTools(t)
	validators := map[string]*jsonschema.Schema{}
	for _, tl := range tools {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(tl.Parameters)))
		require.NoError(t, err)
		c := jsonschema.NewCompiler()
		require.NoError(t, c.AddResource(tl.Name+".json", doc))
		validators[tl.Name], err = c.Compile(tl.Name + ".json")
		require.NoError(t, err)
	}
	seed := uint64(100)
	for _, fam := range Families {
		for _, think := range []bool{false, true} {
			seed++
			t.Run(fmt.Sprintf("%s/think=%v", fam, think), func(t *testing.T) {
				f := Format{Family: fam, PythonTag: fam == Llama3}
				v, text, tokens := ctlVocab(t, f)
				src, err := Grammar(f, tools, Choice{Mode: ModeRequired}, GrammarOptions{Parallel: true, Think: think, Tokens: tokens})
				require.NoError(t, err)
				g, err := grammar.Parse(src)
				require.NoError(t, err, src)
				require.NoError(t, g.CheckVocab(v))
				rng := rand.New(rand.NewPCG(seed, 5))
				plain, err := Grammar(f, tools, Choice{Mode: ModeRequired}, GrammarOptions{Parallel: true, Think: think})
				require.NoError(t, err)
				pg, err := grammar.Parse(plain)
				require.NoError(t, err)
				pv, pieces := byteVocab(t)
				for range 4 {
					// ctlVocab keeps byteVocab's ids, so the plain sentence's
					// tokens are the same tokens there.
					spelled := walkIDs(t, pg, pv, pieces, rng)
					m := grammar.NewMatcher(g, v)
					var err error
					for _, id := range spelled {
						if err = m.Accept(id); err != nil {
							break
						}
					}
					switch fam {
					case Generic, Gemma, Llama3:
						// Markers only in the optional think block or
						// <|python_tag|>.
					default:
						require.ErrorIs(t, err, grammar.ErrTokenRejected, "markers spelled by pieces were accepted")
					}
				}
				for range 8 {
					ids := walkIDs(t, g, v, text, rng)
					var kept strings.Builder
					for _, id := range ids {
						kept.Write(text[id])
					}
					msg := Parse(kept.String(), Options{Format: f, Tools: true})
					require.NotEmpty(t, msg.Calls, "no call parsed from %q", kept.String())
					require.Empty(t, msg.Content, "%q", kept.String())
					for _, c := range msg.Calls {
						val, ok := validators[c.Name]
						require.True(t, ok, "unknown tool %q in %q", c.Name, kept.String())
						inst, err := jsonschema.UnmarshalJSON(strings.NewReader(c.Arguments))
						require.NoError(t, err, "arguments not JSON: %q", c.Arguments)
						require.NoError(t, val.Validate(inst), "%q", c.Arguments)
					}
				}
			})
		}
	}
}

// TestGrammarControlTokenFirst: Mistral's forced call starts with the
// [TOOL_CALLS] token itself, and nothing else; Llama 3.1's may start with
// <|python_tag|> or the JSON object. Without Tokens the markers stay text.
func TestGrammarControlTokenFirst(t *testing.T) {
	tools := mustTools(t)
	cases := []struct {
		f     Format
		first []string // texts of the tokens allowed first, besides '{' for Llama 3
	}{
		{Format{Family: MistralNemo}, []string{"[TOOL_CALLS]"}},
		{Format{Family: Mistral}, []string{"[TOOL_CALLS]"}},
		{Format{Family: Llama3, PythonTag: true}, []string{"<|python_tag|>", "{"}},
		{Format{Family: Phi4}, []string{"<|tool_call|>"}},
	}
	for _, c := range cases {
		t.Run(string(c.f.Family), func(t *testing.T) {
			v, text, tokens := ctlVocab(t, c.f)
			src, err := Grammar(c.f, tools, Choice{Mode: ModeFunction, Name: "now"}, GrammarOptions{Tokens: tokens})
			require.NoError(t, err)
			require.Contains(t, src, fmt.Sprintf("<[%d]>", tokens[c.first[0]]))
			g, err := grammar.Parse(src)
			require.NoError(t, err)
			mask := make([]uint64, v.MaskWords())
			require.NoError(t, grammar.NewMatcher(g, v).Allowed(mask))
			var got []string
			for id := range v.Size() {
				if mask[id>>6]&(1<<(id&63)) != 0 {
					got = append(got, string(text[id]))
				}
			}
			require.ElementsMatch(t, c.first, got)

			plain, err := Grammar(c.f, tools, Choice{Mode: ModeFunction, Name: "now"}, GrammarOptions{})
			require.NoError(t, err)
			require.NotContains(t, plain, "<[")
		})
	}
}
