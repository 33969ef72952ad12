package engine

import (
	"github.com/kvwarden/kvwarden/engine/backend"
	"github.com/kvwarden/kvwarden/internal/device"
)

// ErrKVTypeUnsupported: the device cannot run the requested KV type (today:
// q8_0 and q4_0 on CUDA, whose attention kernels read f32, f16 and bf16
// only). With Device "auto" the engine uses the CPU instead.
var ErrKVTypeUnsupported = backend.ErrKVTypeUnsupported

// KVTypes are the accepted values of Config.KVType.
var KVTypes = []string{"f16", "f32", "q8_0", "q4_0"}

// kvDType maps Config.KVType (checked by checkFields) to the pool's type.
func kvDType(name string) device.DType {
	switch name {
	case "f32":
		return device.F32
	case "q8_0":
		return device.Q8_0
	case "q4_0":
		return device.Q4_0
	}
	return device.F16
}
