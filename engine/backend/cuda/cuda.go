// Package cuda registers the CUDA backend ("cuda"): KV pages in GPU
// memory (internal/device/cuda, the driver loaded at run time) and the
// forward pass of engine/model/gpu. Device auto prefers it when a driver
// and a GPU are present and the model runs on it. Import it for its side
// effect.
package cuda

import (
	"fmt"

	"github.com/kvwarden/kvwarden/engine/backend"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/gpu"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cuda"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// Name is the device name the CUDA backend is registered under.
const Name = "cuda"

func init() {
	backend.Register(Name, backend.Driver{
		Open:     open,
		Probe:    cuda.Available,
		Describe: func() string { return "driver " + cuda.DriverPath() },
		Auto:     true,
		Priority: 100,
	})
}

func open() (backend.Backend, error) {
	b, err := cuda.NewBackend()
	if err != nil {
		return nil, err
	}
	return New(b.Device()), nil
}

// Backend is the CUDA backend on one GPU.
type Backend struct{ dev *cuda.Device }

// New is the backend on an open device.
func New(d *cuda.Device) *Backend { return &Backend{dev: d} }

// Name is "cuda".
func (*Backend) Name() string { return Name }

// Device is the backend's GPU.
func (b *Backend) Device() *cuda.Device { return b.dev }

// NewArena allocates zeroed device memory.
func (b *Backend) NewArena(bytes int64) (device.Arena, error) { return b.dev.NewArena(bytes) }

// Supports refuses what the CUDA runner cannot run: a block-quantized KV
// type (its attention kernels read f16, bf16 or f32 KV), and the models
// gpu.Supports refuses (encoders, embedding models, an expert gating it
// does not route).
func (*Backend) Supports(w *model.Weights, kv device.DType) error {
	if kv.Quantized() {
		return fmt.Errorf("%w: KVType %q on device cuda (the CUDA attention kernels read f16, bf16 or f32 KV; use KVType f16 or Device cpu)",
			backend.ErrKVTypeUnsupported, kv)
	}
	return gpu.Supports(w)
}

// NewRunner uploads w and returns the CUDA forward pass over pool.
func (b *Backend) NewRunner(w *model.Weights, pool *kvcache.Pool, opt backend.RunnerOptions) (backend.Runner, error) {
	o := gpu.DefaultOptions()
	o.MaxContext = opt.MaxContext
	r, err := gpu.New(b.dev, w, pool, o)
	if err != nil {
		return nil, err
	}
	return r, nil
}
