// Package ml owns the CPU numeric kernels of kvwarden: weight matrices in
// their storage types (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K), matrix products
// against activations, and the small vector operations of a Llama layer.
package ml

import (
	"fmt"
	"unsafe"
)

// Type is the storage type of a weight matrix. The values follow GGUF's
// ggml_type numbering so loaders can map them directly.
type Type uint32

const (
	F32  Type = 0
	F16  Type = 1
	Q4_0 Type = 2
	Q8_0 Type = 8
	Q4_K Type = 12
	Q6_K Type = 14
	BF16 Type = 30
)

func (t Type) String() string {
	switch t {
	case F32:
		return "F32"
	case F16:
		return "F16"
	case Q4_0:
		return "Q4_0"
	case Q8_0:
		return "Q8_0"
	case Q4_K:
		return "Q4_K"
	case Q6_K:
		return "Q6_K"
	case BF16:
		return "BF16"
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of elements one block of t encodes, and
// BlockBytes its size in bytes. For unquantized types both describe one element.
func (t Type) BlockSize() int {
	switch t {
	case Q4_0, Q8_0:
		return 32
	case Q4_K, Q6_K:
		return 256
	case F32, F16, BF16:
		return 1
	}
	return 0
}

func (t Type) BlockBytes() int {
	switch t {
	case F32:
		return 4
	case F16, BF16:
		return 2
	case Q4_0:
		return 18
	case Q8_0:
		return 34
	case Q4_K:
		return 144
	case Q6_K:
		return 210
	}
	return 0
}

// RowBytes is the size of one row of cols elements, or an error when cols
// does not divide into whole blocks.
func (t Type) RowBytes(cols int) (int, error) {
	bs := t.BlockSize()
	if bs == 0 {
		return 0, fmt.Errorf("ml: unsupported type %v", t)
	}
	if cols%bs != 0 {
		return 0, fmt.Errorf("ml: %d columns is not a multiple of the %v block size %d", cols, t, bs)
	}
	return cols / bs * t.BlockBytes(), nil
}

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
