package ml

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTileKernelsGenerated builds internal/gen/tilegen, regenerates every
// file it owns (the go:generate lines in gen.go) into a temporary directory
// and requires each to match the committed file byte for byte, so the
// assembly cannot drift from its generator.
func TestTileKernelsGenerated(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			t.Skip("no go tool to build the generator")
		}
	}
	dir := t.TempDir()
	gen := filepath.Join(dir, "tilegen")
	msg, err := exec.Command(goTool, "build", "-o", gen, "./internal/gen/tilegen").CombinedOutput()
	require.NoError(t, err, "go build ./internal/gen/tilegen: %s", msg)
	for _, tc := range []struct{ kind, file string }{
		{"q4k", "q4kgemm_amd64.s"},
		{"q6k", "q6kgemm_amd64.s"},
		{"quantk", "quantk_amd64.s"},
		{"iq4xs", "iq4xsgemm_amd64.s"},
		{"q41", "q41gemm_amd64.s"},
		{"attnqg", "attnqg_amd64.s"},
		{"kquant", "kquant_amd64.s"},
		{"expand", "expand_amd64.s"},
		{"kquantlow", "kquant_low_amd64.s"},
		{"q41dot", "q41_amd64.s"},
		{"mxfp4", "mxfp4_amd64.s"},
		{"gemmf", "gemmf_amd64.s"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			out := filepath.Join(dir, tc.file)
			msg, err := exec.Command(gen, "-kind", tc.kind, "-o", out).CombinedOutput()
			require.NoError(t, err, "tilegen -kind %s: %s", tc.kind, msg)
			got, err := os.ReadFile(out)
			require.NoError(t, err)
			want, err := os.ReadFile(tc.file)
			require.NoError(t, err)
			if bytes.Equal(got, want) {
				return
			}
			gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
			for i := range min(len(gl), len(wl)) {
				require.Equal(t, string(gl[i]), string(wl[i]),
					"%s line %d is not what tilegen -kind %s writes (run go generate in engine/ml)", tc.file, i+1, tc.kind)
			}
			require.Len(t, wl, len(gl), "%s: line count differs from tilegen -kind %s (run go generate in engine/ml)", tc.file, tc.kind)
		})
	}
}
