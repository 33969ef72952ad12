//go:build !amd64 || purego

package ml

type bf16Variant struct {
	name         string
	set, restore func()
}

// bf16Variants: one way to run BF16 products here (the Go reference).
func bf16Variants() []bf16Variant {
	return []bf16Variant{{"go", func() {}, func() {}}}
}
