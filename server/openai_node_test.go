package server

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/internal/testenv"
)

// openaiVersion is the `openai` npm package the client test installs.
const openaiVersion = "openai@4"

// skipOrFail skips locally and fails in CI (CI must run the client test).
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// npmDir installs the openai package (once) into $KVWARDEN_NPM_DIR or the
// repository's bench/out/npm, which git ignores.
func npmDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("KVWARDEN_NPM_DIR")
	if dir == "" {
		dir = filepath.Join(testenv.Root(t), "bench", "out", "npm")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err == nil {
		return dir
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error", openaiVersion)
	if out, err := cmd.CombinedOutput(); err != nil {
		skipOrFail(t, "npm install %s failed: %v\n%s", openaiVersion, err, out)
	}
	return dir
}

// TestOpenAINodeClient runs the official openai npm client (not written by
// this project) against the server: models, completions, chat, streaming
// with usage, and the error mapping (400 context_length_exceeded, 401,
// 400 naming a bad parameter).
func TestOpenAINodeClient(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFail(t, "%s not found: the openai npm client test needs Node.js and npm", tool)
		}
	}
	dir := npmDir(t)
	script, err := os.ReadFile(filepath.Join("testdata", "openai_client.mjs"))
	require.NoError(t, err)
	scriptPath := filepath.Join(dir, "openai_client.mjs")
	require.NoError(t, os.WriteFile(scriptPath, script, 0o644))

	// The real synthetic forward pass (not the echo model).
	ts := start(t, setup{keys: "sk-node-test-key tenant-node\n", cfg: engine.Config{MaxContext: 512, KVPages: 64}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", scriptPath, ts.url+"/v1", "sk-node-test-key", "test-model")
	cmd.Dir = dir
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "node client failed:\n%s\n%s", out, stderr)
	var res map[string]any
	line := strings.TrimSpace(string(out))
	require.NoError(t, json.Unmarshal([]byte(line[strings.LastIndex(line, "\n")+1:]), &res), "%s", out)
	t.Logf("openai client: %s", line)
	require.Contains(t, res, "stream")
	require.Contains(t, res, "too_long")
	require.Contains(t, res, "bad_schema")
	require.Contains(t, res, "logprobs")
	// The strict json_schema answer validates against its schema.
	js, ok := res["json_schema"].(map[string]any)
	require.True(t, ok, "%s", out)
	schema, err := json.Marshal(js["schema"])
	require.NoError(t, err)
	requireValid(t, schemaValidator(t, string(schema)), js["content"].(string))
}
