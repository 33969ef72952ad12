// Package testenv finds the shared test models and golden files for the
// kvwarden command's tests: $KVWARDEN_TEST_MODELS, or ../shared/models
// beside the repository. A missing file skips the test, or fails it when
// the CI environment variable is set.
package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// Root is the repository root: the nearest directory above the working
// directory that holds go.mod.
func Root(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("testenv: no go.mod above the working directory")
		}
		dir = parent
	}
}

// ModelDir is the test model directory.
func ModelDir(tb testing.TB) string {
	tb.Helper()
	if d := os.Getenv("KVWARDEN_TEST_MODELS"); d != "" {
		return d
	}
	return filepath.Join(Root(tb), "..", "shared", "models")
}

func need(tb testing.TB, p string) string {
	tb.Helper()
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("test file %s not found (set KVWARDEN_TEST_MODELS): %v", p, err)
		}
		tb.Skipf("test file %s not found; set KVWARDEN_TEST_MODELS to run this test", p)
	}
	return p
}

// Model returns the path of a test model file.
func Model(tb testing.TB, name string) string {
	tb.Helper()
	return need(tb, filepath.Join(ModelDir(tb), name))
}

// Golden returns the path of a file in the golden directory beside the
// model directory.
func Golden(tb testing.TB, name string) string {
	tb.Helper()
	return need(tb, filepath.Join(ModelDir(tb), "..", "golden", name))
}

// NoGoroutineLeak records the goroutine count and, at cleanup, waits up to
// 5 s for it to come back down (allowing slack for runtime and net/http
// background goroutines), failing with a dump otherwise.
func NoGoroutineLeak(tb testing.TB, slack int) {
	tb.Helper()
	before := runtime.NumGoroutine()
	tb.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		n := 0
		for time.Now().Before(deadline) {
			if n = runtime.NumGoroutine(); n <= before+slack {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		tb.Errorf("goroutine leak: %d goroutines before, %d after\n%s", before, n, buf)
	})
}
