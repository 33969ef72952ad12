//go:build !amd64 || purego

package ml

type bf16Variant struct {
	name         string
	set, restore func()
}

// bf16Variants: one variant here; the SIMD level alone chooses the path
// (the Go reference, or NEON on arm64).
func bf16Variants() []bf16Variant {
	return []bf16Variant{{"go", func() {}, func() {}}}
}
