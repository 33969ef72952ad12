//go:build arm64 && !purego

package ml

import "sync/atomic"

//go:noescape
func dotQ8KVNEON(q *float32, kv *byte, nb int) float32

//go:noescape
func axpyQ8KVNEON(dst *float32, a float32, kv *byte, nb int)

// attnQ8Calls counts the positions the arm64 Q8_0 KV attention kernels
// scored or accumulated, so tests can tell they ran.
var attnQ8Calls atomic.Int64

// attnScoresQSIMD scores Q8_0 keys with dotQ8KVNEON, which dequantizes in
// registers: the bits of the tile path (dequantQ8_0, then attnScores at
// the same level), as rows are whole 32-value blocks and so have no tail.
// Q4_0 keys take the tile path.
func attnScoresQSIMD(k kvQuant, dst, q []float32, kv []byte, offs []int, scale float32) bool {
	if !useSIMD() || k.blockBytes != kvQ8_0.blockBytes {
		return false
	}
	nb := len(q) / 32
	for t, o := range offs[:len(dst)] {
		dst[t] = dotQ8KVNEON(&q[0], &kv[o], nb) * scale
	}
	attnQ8Calls.Add(int64(len(dst)))
	return true
}

// attnAccumQSIMD accumulates Q8_0 values with axpyQ8KVNEON: the bits of
// the tile path (axpy is fused throughout).
func attnAccumQSIMD(k kvQuant, out, w []float32, kv []byte, offs []int) bool {
	if !useSIMD() || k.blockBytes != kvQ8_0.blockBytes {
		return false
	}
	nb := len(out) / 32
	for t, o := range offs[:len(w)] {
		axpyQ8KVNEON(&out[0], w[t], &kv[o], nb)
	}
	attnQ8Calls.Add(int64(len(w)))
	return true
}

// The grouped (several query heads per key row) kernels are amd64's; on
// arm64 each head takes the one-head kernels above.
type qScoresKernel = func(dst, q *float32, kv *byte, offs *int, n, nb int, scale float32)
type qAccumKernel = func(out, w *float32, kv *byte, offs *int, n, nb int)

func groupKernel(kvQuant, int) qScoresKernel { return nil }

func accumKernel(kvQuant, int, int) qAccumKernel { return nil }
