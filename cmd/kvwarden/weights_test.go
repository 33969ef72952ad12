package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model/gguf/mmap"
)

// TestGenerateWeights: every placement generates the same tokens, and the
// load's log line stays out of generate's output.
func TestGenerateWeights(t *testing.T) {
	var want string
	for _, w := range []string{"auto", "map", "recache", "copy"} {
		r := runCmd(t, "", append(stories(t, "generate"), "--weights", w, "--temperature", "0", "-n", "8", "Once")...)
		require.Equal(t, 0, r.code, "%s: %s", w, r.stderr)
		require.NotContains(t, r.stdout+r.stderr, "weights on", w)
		if want == "" {
			want = r.stdout
		}
		require.Equal(t, want, r.stdout, w)
	}
	t.Setenv(mmap.ModeEnv, "copy")
	r := runCmd(t, "", append(stories(t, "generate"), "--temperature", "0", "-n", "8", "Once")...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, want, r.stdout, "KVWARDEN_WEIGHTS is the flag's variable")
}
