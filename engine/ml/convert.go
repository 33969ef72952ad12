package ml

import "github.com/kvwarden/kvwarden/internal/half"

// The 16-bit float conversions live in internal/half, which the KV pool
// uses without importing the kernels; these keep engine/ml's API.

// F16ToF32 converts an IEEE 754 half-precision value to float32, exactly.
func F16ToF32(h uint16) float32 { return half.F16ToF32(h) }

// F32ToF16 converts a float32 to half precision, rounding to nearest even.
// Values beyond the f16 range become infinities; NaNs stay NaN.
func F32ToF16(f float32) uint16 { return half.F32ToF16(f) }

// BF16ToF32 converts a bfloat16 value to float32, exactly.
func BF16ToF32(h uint16) float32 { return half.BF16ToF32(h) }

// F32ToBF16 converts a float32 to bfloat16 with round-to-nearest-even, as
// ggml's GGML_FP32_TO_BF16 does (NaNs are kept quiet).
func F32ToBF16(f float32) uint16 { return half.F32ToBF16(f) }
