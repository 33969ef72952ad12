package engine

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
)

// ErrKVTypeUnsupported: the device cannot run the requested KV type (today:
// q8_0 and q4_0 on CUDA, whose attention kernels read f32, f16 and bf16
// only). With Device "auto" the engine uses the CPU instead.
var ErrKVTypeUnsupported = errors.New("KV type not supported on this device")

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

// kvTypeOnCUDA decides what a quantized KV type does on the CUDA backend:
// an explicit "cuda" is refused with ErrKVTypeUnsupported, "auto" falls
// back to the CPU with a log line. Other types keep be.
func kvTypeOnCUDA(be device.Backend, deviceName, kvType string, log *slog.Logger) (device.Backend, error) {
	if !kvDType(kvType).Quantized() {
		return be, nil
	}
	if deviceName == "cuda" {
		return nil, fmt.Errorf("%w: KVType %q on device cuda (the CUDA attention kernels read f16, bf16 or f32 KV; use KVType f16 or Device cpu)",
			ErrKVTypeUnsupported, kvType)
	}
	log.Warn("engine: device auto: the quantized KV type needs the CPU runner, using the CPU", "kv_type", kvType)
	return cpu.New(), nil
}
