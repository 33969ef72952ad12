package blockq

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// Integers that a block holds exactly round-trip: a block whose largest
// magnitude is 127 (q8_0) or -8 (q4_0) has scale 1.
func TestRoundTripExact(t *testing.T) {
	x8, x4 := make([]float32, 64), make([]float32, 64)
	for i := range x8 {
		x8[i] = float32(i%255 - 127)
		x4[i] = float32(i%15 - 7)
	}
	x8[0], x8[32], x4[0], x4[32] = 127, -127, -8, -8
	q8, q4 := make([]byte, 2*Q8_0Bytes), make([]byte, 2*Q4_0Bytes)
	QuantizeRowQ8_0(q8, x8)
	QuantizeRowQ4_0(q4, x4)
	got := make([]float32, 64)
	DequantizeRowQ8_0(got, q8)
	require.Equal(t, x8, got)
	DequantizeRowQ4_0(got, q4)
	require.Equal(t, x4, got)
}

// A zero block has scale 0 and decodes to zeros; bad lengths panic with a
// message.
func TestZeroAndLengths(t *testing.T) {
	q := make([]byte, Q8_0Bytes)
	for i := range q {
		q[i] = 0xff
	}
	QuantizeRowQ8_0(q, make([]float32, 32))
	got := make([]float32, 32)
	DequantizeRowQ8_0(got, q)
	for _, v := range got {
		require.Equal(t, uint32(0), math.Float32bits(v))
	}
	require.PanicsWithValue(t, "blockq: QuantizeRowQ4_0 of 31 values into 18 bytes (want a multiple of 32 values, 18 bytes per 32)", func() {
		QuantizeRowQ4_0(make([]byte, 18), make([]float32, 31))
	})
	require.Panics(t, func() { DequantizeRowQ8_0(make([]float32, 64), make([]byte, 34)) })
}
