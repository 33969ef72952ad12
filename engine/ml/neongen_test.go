package ml

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNEONKernelsGenerated regenerates kernels_arm64.s with its generator
// (internal/gen/neongen, see the go:generate line in kquant_arm64.go) into
// a temporary file and requires it to match the committed file byte for
// byte. It runs on every architecture: the file is text here.
func TestNEONKernelsGenerated(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to run the generator")
	}
	out := filepath.Join(t.TempDir(), "kernels_arm64.s")
	msg, err := exec.Command(goTool, "run", "./internal/gen/neongen", "-o", out).CombinedOutput()
	require.NoError(t, err, "go run ./internal/gen/neongen: %s", msg)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	want, err := os.ReadFile("kernels_arm64.s")
	require.NoError(t, err)
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := range min(len(gl), len(wl)) {
		require.Equal(t, string(gl[i]), string(wl[i]),
			"kernels_arm64.s line %d is not what neongen writes (run go generate in engine/ml)", i+1)
	}
	require.Len(t, wl, len(gl), "kernels_arm64.s: line count differs from neongen's (run go generate in engine/ml)")
}
