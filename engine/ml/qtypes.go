package ml

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnsupportedType is wrapped by every error about a tensor type that
// exists but cannot be computed with (or does not exist).
var ErrUnsupportedType = errors.New("unsupported tensor type")

// Type is the storage type of a tensor, numbered as ggml's enum ggml_type,
// so GGUF readers use it directly (gguf.GGMLType is this type).
type Type uint32

// The ggml tensor types. Values 4, 5, 31-33 and 36-38 were removed from
// ggml and are unknown here.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
)

// actFormat is how a product quantizes the activation rows it multiplies
// a weight type with (its "vec_dot_type" in ggml's terms).
type actFormat uint8

const (
	actF32  actFormat = iota // activations stay float32; weights are decoded
	actQ8                    // 32-value blocks, see quantizeActQ8Generic
	actQ8K                   // 256-value blocks, see quantizeActQ8K
	actBF16                  // bf16 values, see roundBF16 (BF16 weights)
)

// blockBytes of one quantized activation block of each format, and the
// number of values it holds.
func (f actFormat) blockBytes() int {
	switch f {
	case actQ8:
		return q8ActBlock
	case actQ8K:
		return q8KActBlock
	case actBF16:
		return 2
	}
	return 0
}

func (f actFormat) blockSize() int {
	switch f {
	case actQ8:
		return 32
	case actQ8K:
		return 256
	case actBF16:
		return 1
	}
	return 0
}

// typeTraits is everything the reader, the loader and the kernels need to
// know about one storage type.
type typeTraits struct {
	name       string
	blockSize  int // elements per block
	blockBytes int // bytes per block

	// dequant decodes whole blocks (len(dst) a multiple of blockSize)
	// bit-exactly as ggml's dequantize_row_<type>. nil: the type is known
	// (sized) but cannot be computed with.
	dequant func(dst []float32, src []byte)

	// act and unpack define the product of a weight row with an
	// activation row: act is the activation format, unpack decodes one
	// weight block into the normal form whose integer dot (dotNorm, with
	// the offset term where withMin) is the reference arithmetic of every
	// output (BF16: no unpack, the reference is dotBF16Ref). A SIMD kernel for the type (see matmulIntSIMD) must
	// reproduce it bit for bit, so results do not depend on the kernel,
	// the batch or the threads.
	act     actFormat
	unpack  func(nf *normBlock, blk []byte)
	withMin bool
}

// traits is the one table of storage types, as in ggml's type_traits.
var traits = map[Type]*typeTraits{
	F32:     {name: "F32", blockSize: 1, blockBytes: 4, dequant: dequantF32},
	F16:     {name: "F16", blockSize: 1, blockBytes: 2, dequant: dequantF16},
	BF16:    {name: "BF16", blockSize: 1, blockBytes: 2, dequant: dequantBF16, act: actBF16},
	Q4_0:    {name: "Q4_0", blockSize: 32, blockBytes: 18, dequant: dequantQ4_0, act: actQ8, unpack: unpackQ4_0},
	Q4_1:    {name: "Q4_1", blockSize: 32, blockBytes: 20, dequant: dequantQ4_1, act: actQ8, unpack: unpackQ4_1, withMin: true},
	Q5_0:    {name: "Q5_0", blockSize: 32, blockBytes: 22, dequant: dequantQ5_0, act: actQ8, unpack: unpackQ5_0},
	Q5_1:    {name: "Q5_1", blockSize: 32, blockBytes: 24, dequant: dequantQ5_1, act: actQ8, unpack: unpackQ5_1, withMin: true},
	Q8_0:    {name: "Q8_0", blockSize: 32, blockBytes: 34, dequant: dequantQ8_0, act: actQ8, unpack: unpackQ8_0},
	Q8_1:    {name: "Q8_1", blockSize: 32, blockBytes: 36},
	Q2_K:    {name: "Q2_K", blockSize: 256, blockBytes: 84, dequant: dequantQ2K, act: actQ8K, unpack: unpackQ2K},
	Q3_K:    {name: "Q3_K", blockSize: 256, blockBytes: 110, dequant: dequantQ3K, act: actQ8K, unpack: unpackQ3K},
	Q4_K:    {name: "Q4_K", blockSize: 256, blockBytes: 144, dequant: dequantQ4K, act: actQ8K, unpack: unpackQ4K},
	Q5_K:    {name: "Q5_K", blockSize: 256, blockBytes: 176, dequant: dequantQ5K, act: actQ8K, unpack: unpackQ5K},
	Q6_K:    {name: "Q6_K", blockSize: 256, blockBytes: 210, dequant: dequantQ6K, act: actQ8K, unpack: unpackQ6K},
	Q8_K:    {name: "Q8_K", blockSize: 256, blockBytes: 292},
	IQ2_XXS: {name: "IQ2_XXS", blockSize: 256, blockBytes: 66},
	IQ2_XS:  {name: "IQ2_XS", blockSize: 256, blockBytes: 74},
	IQ3_XXS: {name: "IQ3_XXS", blockSize: 256, blockBytes: 98},
	IQ1_S:   {name: "IQ1_S", blockSize: 256, blockBytes: 50},
	IQ4_NL:  {name: "IQ4_NL", blockSize: 32, blockBytes: 18, dequant: dequantIQ4NL, act: actQ8, unpack: unpackIQ4NL},
	IQ3_S:   {name: "IQ3_S", blockSize: 256, blockBytes: 110},
	IQ2_S:   {name: "IQ2_S", blockSize: 256, blockBytes: 82},
	IQ4_XS:  {name: "IQ4_XS", blockSize: 256, blockBytes: 136, dequant: dequantIQ4XS, act: actQ8K, unpack: unpackIQ4XS},
	I8:      {name: "I8", blockSize: 1, blockBytes: 1},
	I16:     {name: "I16", blockSize: 1, blockBytes: 2},
	I32:     {name: "I32", blockSize: 1, blockBytes: 4},
	I64:     {name: "I64", blockSize: 1, blockBytes: 8},
	F64:     {name: "F64", blockSize: 1, blockBytes: 8},
	IQ1_M:   {name: "IQ1_M", blockSize: 256, blockBytes: 56},
	TQ1_0:   {name: "TQ1_0", blockSize: 256, blockBytes: 54},
	TQ2_0:   {name: "TQ2_0", blockSize: 256, blockBytes: 66},
	MXFP4:   {name: "MXFP4", blockSize: 32, blockBytes: mxfp4BlockBytes, dequant: dequantMXFP4, act: actQ8, unpack: unpackMXFP4},
}

// unknownTraits stands in for types ggml does not define.
var unknownTraits = &typeTraits{}

func (t Type) traits() *typeTraits {
	if tr, ok := traits[t]; ok {
		return tr
	}
	return unknownTraits
}

// Known reports whether t is a ggml type whose storage size is known.
func (t Type) Known() bool { _, ok := traits[t]; return ok }

// Supported reports whether matrices of type t can be decoded and
// multiplied.
func (t Type) Supported() bool { return t.traits().dequant != nil }

// SupportedTypes lists the types Supported accepts, in ggml order.
func SupportedTypes() []Type {
	var out []Type
	for t := Type(0); t < 64; t++ {
		if t.Supported() {
			out = append(out, t)
		}
	}
	return out
}

// SupportedTypeNames is SupportedTypes as a comma-separated list, for
// error messages.
func SupportedTypeNames() string {
	var names []string
	for _, t := range SupportedTypes() {
		names = append(names, t.String())
	}
	return strings.Join(names, ", ")
}

func (t Type) String() string {
	if tr, ok := traits[t]; ok {
		return tr.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of elements one block of t encodes (1 for plain
// types, 0 for unknown types).
func (t Type) BlockSize() int { return t.traits().blockSize }

// BlockBytes is the size in bytes of one block of t (0 for unknown types).
func (t Type) BlockBytes() int { return t.traits().blockBytes }

// RowBytes is the size of one row of cols elements, or an error when t
// cannot be computed with or cols does not divide into whole blocks.
func (t Type) RowBytes(cols int) (int, error) {
	if !t.Supported() {
		return 0, fmt.Errorf("ml: %v: %w (supported: %s)", t, ErrUnsupportedType, SupportedTypeNames())
	}
	bs := t.BlockSize()
	if cols%bs != 0 {
		return 0, fmt.Errorf("ml: %d columns is not a multiple of the %v block size %d", cols, t, bs)
	}
	return cols / bs * t.BlockBytes(), nil
}
