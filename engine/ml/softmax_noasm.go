//go:build !amd64 || purego

package ml

func maxOf(x []float32) float32 { return maxOfGeneric(x) }

func divBy(x []float32, d float32) { divByGeneric(x, d) }
