package gguf

import (
	"os"
	"path/filepath"
	"testing"
)

// modelsDir returns the shared model directory: $KVWARDEN_TEST_MODELS, or
// ../shared/models next to the repository root. It skips the test when the
// directory is missing, unless $CI is set, in which case it fails.
func modelsDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("KVWARDEN_TEST_MODELS")
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				dir = filepath.Join(d, "..", "shared", "models")
				break
			}
			if filepath.Dir(d) == d {
				dir = filepath.Join(wd, "..", "..", "..", "..", "shared", "models")
				break
			}
		}
	}
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("test models not found at %s (set KVWARDEN_TEST_MODELS): %v", dir, err)
		}
		t.Skipf("test models not found at %s (set KVWARDEN_TEST_MODELS to run this test)", dir)
	}
	return dir
}
