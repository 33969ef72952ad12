// Package cpu registers the CPU backend ("cpu"): KV pages in host memory
// (internal/device/cpu) and the Go forward pass of engine/model. It works
// on every machine and runs every model and KV type, so device auto falls
// back to it. Import it for its side effect.
package cpu

import (
	"github.com/kvwarden/kvwarden/engine/backend"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// Name is the device name the CPU backend is registered under.
const Name = "cpu"

func init() {
	backend.Register(Name, backend.Driver{
		Open:     func() (backend.Backend, error) { return Backend{}, nil },
		Auto:     true,
		Priority: 0,
	})
}

// Backend is the CPU backend.
type Backend struct{}

// Name is "cpu".
func (Backend) Name() string { return Name }

// NewArena allocates host memory (an anonymous mapping outside the Go heap).
func (Backend) NewArena(bytes int64) (device.Arena, error) { return cpu.NewArena(bytes) }

// Supports is always nil: the CPU forward pass runs every architecture
// and KV type the loader accepts.
func (Backend) Supports(*model.Weights, device.DType) error { return nil }

// NewRunner is the Go forward pass over pool.
func (Backend) NewRunner(w *model.Weights, pool *kvcache.Pool, opt backend.RunnerOptions) (backend.Runner, error) {
	r, err := model.NewRunnerContext(w, pool, opt.MaxContext)
	if err != nil {
		return nil, err
	}
	return r, nil
}
