package ml

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestQ8KernelsGenerated regenerates kernels_q8_amd64.s with its generator
// (internal/gen/q8gen, see the go:generate line in q8.go) into a temporary
// file and requires it to match the committed file byte for byte.
func TestQ8KernelsGenerated(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			t.Skip("no go tool to run the generator")
		}
	}
	out := filepath.Join(t.TempDir(), "kernels_q8_amd64.s")
	cmd := exec.Command(goTool, "run", "./internal/gen/q8gen", "-o", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./internal/gen/q8gen: %v\n%s", err, msg)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("kernels_q8_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
		for i := 0; i < min(len(gl), len(wl)); i++ {
			if !bytes.Equal(gl[i], wl[i]) {
				t.Fatalf("kernels_q8_amd64.s is not what q8gen writes (run go generate in engine/ml): line %d is %q, generated %q", i+1, wl[i], gl[i])
			}
		}
		t.Fatalf("kernels_q8_amd64.s is not what q8gen writes (run go generate in engine/ml): %d lines, generated %d", len(wl), len(gl))
	}
}
