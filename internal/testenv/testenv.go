// Package testenv finds the shared test models and golden files for the
// kvwarden command's tests: $KVWARDEN_TEST_MODELS, or ../shared/models
// beside the repository. A missing file skips the test, or fails it when
// the CI environment variable is set.
package testenv

import (
	"runtime"
	"testing"
	"time"

	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// Root is the repository root.
func Root(tb testing.TB) string { return testmodels.Root(tb) }

// ModelDir is the test model directory.
func ModelDir(tb testing.TB) string { return testmodels.Dir(tb) }

// Model returns the path of a test model file.
func Model(tb testing.TB, name string) string {
	tb.Helper()
	return testmodels.Path(tb, name)
}

// Golden returns the path of a file in the golden directory beside the
// model directory.
func Golden(tb testing.TB, name string) string {
	tb.Helper()
	return testmodels.Golden(tb, name)
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
