//go:build !amd64 || purego

package ml

func addTo(dst, x []float32) { addGeneric(dst, x) }
