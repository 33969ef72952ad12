package gguf

import (
	"fmt"

	"github.com/kvwarden/kvwarden/engine/ml"
)

// GGMLType is a tensor storage type, numbered as ggml's enum ggml_type.
// It is engine/ml's Type: one table (ml's type traits) gives every type's
// name, block size and block bytes to the reader, the loader and the
// kernels; Known reports whether a type is sized, ml.Type.Supported
// whether it can be computed with.
type GGMLType = ml.Type

// The ggml tensor types a GGUF file may contain. Values 4, 5, 31-33 and
// 36-38 were removed from ggml and are rejected.
const (
	TypeF32     = ml.F32
	TypeF16     = ml.F16
	TypeQ4_0    = ml.Q4_0
	TypeQ4_1    = ml.Q4_1
	TypeQ5_0    = ml.Q5_0
	TypeQ5_1    = ml.Q5_1
	TypeQ8_0    = ml.Q8_0
	TypeQ8_1    = ml.Q8_1
	TypeQ2_K    = ml.Q2_K
	TypeQ3_K    = ml.Q3_K
	TypeQ4_K    = ml.Q4_K
	TypeQ5_K    = ml.Q5_K
	TypeQ6_K    = ml.Q6_K
	TypeQ8_K    = ml.Q8_K
	TypeIQ2_XXS = ml.IQ2_XXS
	TypeIQ2_XS  = ml.IQ2_XS
	TypeIQ3_XXS = ml.IQ3_XXS
	TypeIQ1_S   = ml.IQ1_S
	TypeIQ4_NL  = ml.IQ4_NL
	TypeIQ3_S   = ml.IQ3_S
	TypeIQ2_S   = ml.IQ2_S
	TypeIQ4_XS  = ml.IQ4_XS
	TypeI8      = ml.I8
	TypeI16     = ml.I16
	TypeI32     = ml.I32
	TypeI64     = ml.I64
	TypeF64     = ml.F64
	TypeIQ1_M   = ml.IQ1_M
	TypeBF16    = ml.BF16
	TypeTQ1_0   = ml.TQ1_0
	TypeTQ2_0   = ml.TQ2_0
	TypeMXFP4   = ml.MXFP4
)

// ValueType is the type of a metadata value.
type ValueType uint32

// Metadata value types, as numbered by the GGUF specification.
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("valuetype(%d)", uint32(t))
}

// minSize is the fewest bytes a value of type t occupies in a file: its
// fixed size, or the length prefix of a string, or the element type and
// length of an array. 0 for unknown types.
func (t ValueType) minSize() uint64 {
	switch t {
	case ValueUint8, ValueInt8, ValueBool:
		return 1
	case ValueUint16, ValueInt16:
		return 2
	case ValueUint32, ValueInt32, ValueFloat32:
		return 4
	case ValueUint64, ValueInt64, ValueFloat64, ValueString:
		return 8
	case ValueArray:
		return 12
	}
	return 0
}
