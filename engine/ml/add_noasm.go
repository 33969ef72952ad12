//go:build (!amd64 && !arm64) || purego

package ml

func addTo(dst, x []float32) { addGeneric(dst, x) }
