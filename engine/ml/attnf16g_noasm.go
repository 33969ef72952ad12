//go:build !amd64 || purego

package ml

func attnScoresF16GroupSIMD(dst []float32, ds int, q []float32, g, d, n int, kv []uint16, offs []int, scale float32) int {
	return 0
}

func attnAccumF16GroupSIMD(out, w []float32, ws, g, d, n int, kv []uint16, offs []int) int {
	return 0
}
