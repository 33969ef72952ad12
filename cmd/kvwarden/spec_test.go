package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGenerateSpeculative: --spec-type ngram and draft (with a draft
// model) give the same greedy tokens as a run without them, and bad values are usage errors naming the flag.
func TestGenerateSpeculative(t *testing.T) {
	prompt := "Lily and Tom went to the park. Lily and Tom went to the park. Lily and"
	gen := func(extra ...string) generateJSON {
		args := append([]string{"generate", "--model", "builtin:stories260K", "--device", "cpu", "--json", "--temperature", "0", "-n", "60"}, extra...)
		r := runCmd(t, "", append(args, prompt)...)
		require.Equal(t, 0, r.code, r.stderr)
		var out generateJSON
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		return out
	}
	want := gen()
	got := gen("--spec-type", "ngram", "--draft-max", "5")
	require.Equal(t, want.Tokens, got.Tokens)
	require.Equal(t, want.Text, got.Text)
	got = gen("--spec-type", "draft", "--spec-draft-model", "builtin:stories260K")
	require.Equal(t, want.Tokens, got.Tokens)

	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"generate", "--spec-type", "eagle", "x"}, "--spec-type"},
		{[]string{"generate", "--spec-type", "ngram", "--draft-max", "0", "x"}, "--draft-max"},
		{[]string{"generate", "--spec-type", "ngram", "--draft-max", "65", "x"}, "--draft-max"},
		{[]string{"generate", "--spec-type", "ngram", "--spec-ngram-min", "5", "x"}, "--spec-ngram-min"},
		{[]string{"serve", "--spec-type", "medusa"}, "--spec-type"},
		{[]string{"serve", "--spec-type", "ngram", "--spec-ngram-max", "17"}, "--spec-ngram-max"},
		{[]string{"generate", "--spec-type", "draft", "x"}, "--spec-draft-model"},
		{[]string{"serve", "--spec-type", "ngram", "--spec-draft-model", "d.gguf"}, "--spec-draft-model"},
	} {
		r := runCmd(t, "", c.args...)
		require.Equal(t, 2, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.flag, "%v", c.args)
		require.Empty(t, r.stdout)
	}
}

// TestAuditSpeculative: the canary audit is clean with speculation on,
// and drafts were verified.
func TestAuditSpeculative(t *testing.T) {
	r := runCmd(t, "", "audit", "--json", "--spec-type", "ngram", "--draft-max", "6", "--tenants", "4", "--requests", "4", "--rounds", "1")
	require.Equal(t, 0, r.code, r.stderr)
	var rep struct {
		Clean  bool `json:"clean"`
		Engine struct {
			Drafted  uint64 `json:"draft_tokens"`
			Accepted uint64 `json:"accepted_draft_tokens"`
		} `json:"engine"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.True(t, rep.Clean)
	require.Positive(t, rep.Engine.Accepted)
}
