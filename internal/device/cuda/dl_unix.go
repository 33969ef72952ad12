//go:build !windows

package cuda

import "github.com/ebitengine/purego"

// The dynamic-loader calls live behind a build constraint because purego has
// no Dlopen on Windows; there the CUDA backend reports itself unsupported.

func dlopen(name string) (uintptr, error) {
	return purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

func dlsym(h uintptr, name string) (uintptr, error) { return purego.Dlsym(h, name) }

func dlclose(h uintptr) error { return purego.Dlclose(h) }
