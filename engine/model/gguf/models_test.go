package gguf

import (
	"testing"

	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// modelsDir returns the shared model directory: $KVWARDEN_TEST_MODELS, or
// ../shared/models next to the repository root. It skips the test when the
// directory is missing, unless $CI is set, in which case it fails.
func modelsDir(t testing.TB) string {
	t.Helper()
	return testmodels.RequireDir(t)
}
