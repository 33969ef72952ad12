package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
)

func writeTemp(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

// TestGenerateJSONSchema: --json-schema constrains a sampled run of the
// built-in stories model to JSON that validates.
func TestGenerateJSONSchema(t *testing.T) {
	const schema = `{"type":"object","properties":{"hero":{"type":"string","maxLength":16},"age":{"type":"integer","minimum":1,"maximum":99},"mood":{"enum":["happy","sad"]}},"required":["hero","age","mood"],"additionalProperties":false}`
	file := writeTemp(t, "schema.json", schema)
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("schema.json", doc))
	v, err := c.Compile("schema.json")
	require.NoError(t, err)
	for _, seed := range []string{"1", "2", "3"} {
		r := runCmd(t, "", "generate", "--model", "builtin:stories260K", "--json-schema", file, "--temperature", "0.8", "--seed", seed, "-n", "200", "--json", "Once upon a time")
		require.Equal(t, 0, r.code, r.stderr)
		var out generateJSON
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
		require.Equal(t, "stop", out.FinishReason, out.Text)
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(out.Text))
		require.NoError(t, err, out.Text)
		require.NoError(t, v.Validate(inst), out.Text)
	}
}

func TestGenerateGrammar(t *testing.T) {
	file := writeTemp(t, "g.gbnf", "# yes or no, then a word\nroot ::= (\"yes\" | \"no\") \", \" word\nword ::= [a-z]{3,6}\n")
	r := runCmd(t, "", "generate", "--model", "builtin:stories260K", "--grammar", file, "--temperature", "0.8", "--seed", "5", "-n", "50", "--no-echo", "Once upon a time")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^(yes|no), [a-z]{3,6}\n$`, r.stdout)
}

func TestGenerateGrammarUsageErrors(t *testing.T) {
	bad := writeTemp(t, "bad.gbnf", "root ::= \"a\"\nitem ::= [a-\n")
	schema := writeTemp(t, "s.json", `{"type":"number","multipleOf":2}`)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--grammar", bad}, []string{"--grammar", "line 2, column"}},
		{[]string{"--json-schema", schema}, []string{"--json-schema", "multipleOf"}},
		{[]string{"--grammar", bad, "--json-schema", schema}, []string{"give one"}},
		{[]string{"--grammar", filepath.Join(t.TempDir(), "missing.gbnf")}, []string{"--grammar", "no such file"}},
	} {
		r := runCmd(t, "", append(append([]string{"generate"}, c.args...), "hi")...)
		require.Equal(t, 2, r.code, r.stderr)
		for _, w := range c.want {
			require.Contains(t, r.stderr, w)
		}
		require.Empty(t, r.stdout)
	}
}
