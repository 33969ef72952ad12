// Package ml owns the CPU numeric kernels of kvwarden: the table of tensor
// storage types (qtypes.go: F32, F16, BF16 and the ggml quantizations,
// see SupportedTypes), weight matrices in those types, their bit-exact
// dequantization, matrix products against activations (in integers for
// the quantized types; for BF16 the activations are rounded to bf16 and
// multiplied as llama.cpp's VDPBF16PS does, see bf16dot.go, with the same
// bits on every CPU), and the small vector operations of a layer.
package ml

import (
	"fmt"
	"unsafe"
)

// Matrix is a row-major weight matrix: Rows output features, each a
// contiguous row of Cols input features, encoded as Type. Data may point
// into a memory-mapped file; it is never written.
type Matrix struct {
	Type       Type
	Rows, Cols int
	Data       []byte
}

// NewMatrix checks that data holds exactly rows x cols elements of t.
func NewMatrix(t Type, rows, cols int, data []byte) (*Matrix, error) {
	rb, err := t.RowBytes(cols)
	if err != nil {
		return nil, err
	}
	if rows <= 0 || cols <= 0 {
		return nil, fmt.Errorf("ml: bad matrix shape %dx%d", rows, cols)
	}
	if want := int64(rb) * int64(rows); int64(len(data)) != want {
		return nil, fmt.Errorf("ml: %v matrix %dx%d needs %d bytes, have %d", t, rows, cols, want, len(data))
	}
	return &Matrix{Type: t, Rows: rows, Cols: cols, Data: data}, nil
}

// FromF32 wraps float32 data as an F32 matrix without copying.
func FromF32(rows, cols int, data []float32) *Matrix {
	if len(data) != rows*cols {
		panic(fmt.Sprintf("ml: FromF32 %dx%d with %d values", rows, cols, len(data)))
	}
	return &Matrix{Type: F32, Rows: rows, Cols: cols, Data: F32Bytes(data)}
}

// F32Bytes views float32s as bytes without copying.
func F32Bytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(f)*4)
}

// BytesF32 views bytes as float32s without copying. len(b) must be a
// multiple of 4 and b 4-byte aligned.
func BytesF32(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}
