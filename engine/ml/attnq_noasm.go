//go:build !amd64 || purego

package ml

func attnScoresQSIMD(kvQuant, []float32, []float32, []byte, []int, float32) bool { return false }

func attnAccumQSIMD(kvQuant, []float32, []float32, []byte, []int) bool { return false }
