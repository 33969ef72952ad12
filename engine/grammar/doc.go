// Package grammar owns constrained decoding: it compiles a grammar (GBNF,
// llama.cpp's format, or a JSON Schema converted to GBNF) and, for one
// output, says which tokens may come next.
//
// Parse compiles GBNF into a Grammar whose characters are spelled as
// UTF-8 byte classes. FromJSONSchema and JSONObjectGBNF give the grammars
// of OpenAI's json_schema and json_object response formats; an unsupported
// schema keyword is a *SchemaError naming it (ErrUnsupportedSchema), never
// silently dropped. docs/GRAMMAR.md lists the supported subset.
//
// A Vocab is a tokenizer's vocabulary as bytes (build it once per
// tokenizer with engine/tokenizer.TokenBytes). A Matcher follows one
// output: Allowed fills a bitset of the tokens whose whole byte string
// keeps the grammar alive (end-of-generation tokens only where the grammar
// can end), Accept moves past a token, CanEnd says whether the output is
// complete, Clone copies the state. Matching works on bytes, so tokens
// that split a UTF-8 character, and byte-fallback tokens, are checked
// exactly. Allowed walks a trie of the vocabulary, skipping every subtree
// no parse stack takes, and caches masks per grammar state, so a state
// seen before (inside a string, say) costs a copy.
//
// Token references (<[id]>, <text>, !<...>, llama.cpp's syntax) match one
// whole token, so that a grammar can ask for a control token such as
// [TOOL_CALLS] that no text spells; they resolve per vocabulary
// (Vocab.WithNames, Grammar.CheckVocab, ErrUnknownToken).
//
// The package knows nothing of models or tokenizers beyond the Vocab; the
// sampler applies the mask (engine/sample.SampleMasked).
package grammar
