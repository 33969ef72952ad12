package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/kvwarden/kvwarden/cmd/kvwarden/internal/cli"
	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/grammar"
)

// grammarFlags are generate's --grammar and --json-schema: the output is
// constrained to a GBNF grammar or to JSON valid under a schema.
type grammarFlags struct {
	grammarFile, schemaFile string
	text                    []byte
}

func (g *grammarFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&g.grammarFile, "grammar", "", "constrain the output to the GBNF grammar in `file` (llama.cpp's format)")
	fs.StringVar(&g.schemaFile, "json-schema", "", "constrain the output to JSON valid under the JSON Schema in `file`")
}

// load reads and checks the file before the model loads, so that a bad
// grammar is a usage error naming the flag and the place.
func (g *grammarFlags) load() error {
	switch {
	case g.grammarFile != "" && g.schemaFile != "":
		return cli.Usagef("both --grammar and --json-schema: give one")
	case g.grammarFile != "":
		b, err := os.ReadFile(g.grammarFile)
		if err != nil {
			return cli.Usagef("--grammar: %v", err)
		}
		if _, err := grammar.Parse(string(b)); err != nil {
			return cli.Usagef("--grammar %s: %v", g.grammarFile, err)
		}
		g.text = b
	case g.schemaFile != "":
		b, err := os.ReadFile(g.schemaFile)
		if err != nil {
			return cli.Usagef("--json-schema: %v", err)
		}
		if _, err := grammar.FromJSONSchema(b); err != nil {
			return cli.Usagef("--json-schema %s: %v", g.schemaFile, err)
		}
		g.text = b
	}
	return nil
}

// compile gives the request's grammar (nil without either flag).
func (g *grammarFlags) compile(eng *engine.Engine) (*engine.Grammar, error) {
	switch {
	case g.grammarFile != "":
		gr, err := eng.CompileGrammar(string(g.text))
		if err != nil {
			return nil, fmt.Errorf("--grammar %s: %w", g.grammarFile, err)
		}
		return gr, nil
	case g.schemaFile != "":
		gr, err := eng.CompileJSONSchema(g.text)
		if err != nil {
			return nil, fmt.Errorf("--json-schema %s: %w", g.schemaFile, err)
		}
		return gr, nil
	}
	return nil, nil
}
