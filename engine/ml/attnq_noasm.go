//go:build (!amd64 && !arm64) || purego

package ml

func attnScoresQSIMD(kvQuant, []float32, []float32, []byte, []int, float32) bool { return false }

func attnAccumQSIMD(kvQuant, []float32, []float32, []byte, []int) bool { return false }

type qScoresKernel = func(dst, q *float32, kv *byte, offs *int, n, nb int, scale float32)
type qAccumKernel = func(out, w *float32, kv *byte, offs *int, n, nb int)

func groupKernel(kvQuant, int) qScoresKernel { return nil }

func accumKernel(kvQuant, int, int) qAccumKernel { return nil }
