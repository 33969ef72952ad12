// Package testmodels finds the model files and golden data that tests read
// in place from ../shared (never copied into the repository).
package testmodels

import (
	"os"
	"path/filepath"
	"testing"
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
			tb.Fatal("testmodels: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Dir is the model directory: $KVWARDEN_TEST_MODELS, or ../shared/models
// beside the repository.
func Dir(tb testing.TB) string {
	tb.Helper()
	if d := os.Getenv("KVWARDEN_TEST_MODELS"); d != "" {
		return d
	}
	return filepath.Join(Root(tb), "..", "shared", "models")
}

// Path returns the path of a model file, skipping the test when it is
// absent, or failing it when CI is set (CI must run every model test).
func Path(tb testing.TB, name string) string {
	tb.Helper()
	p := filepath.Join(Dir(tb), name)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("test model %s not found (set KVWARDEN_TEST_MODELS): %v", p, err)
		}
		tb.Skipf("test model %s not found; set KVWARDEN_TEST_MODELS to run this test", p)
	}
	return p
}

// Golden returns the path of a file in ../shared/golden (beside the model
// directory), with the same skip-or-fail rule as Path.
func Golden(tb testing.TB, name string) string {
	tb.Helper()
	p := filepath.Join(Dir(tb), "..", "golden", name)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("golden file %s not found: %v", p, err)
		}
		tb.Skipf("golden file %s not found", p)
	}
	return p
}

// RequireDir is Dir, skipping the test when the directory is absent (or
// failing it when CI is set).
func RequireDir(tb testing.TB) string {
	tb.Helper()
	d := Dir(tb)
	if _, err := os.Stat(d); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("test models not found at %s (set KVWARDEN_TEST_MODELS): %v", d, err)
		}
		tb.Skipf("test models not found at %s; set KVWARDEN_TEST_MODELS to run this test", d)
	}
	return d
}
