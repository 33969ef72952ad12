// Package backend is the registry of the devices kvwarden runs on. A device
// backend is a package that implements Backend and registers a Driver for
// it from init, as database/sql drivers do; the engine imports the
// built-in ones (engine/backend/cpu, engine/backend/cuda) for their side
// effects in engine/backends.go and knows no device by name otherwise.
// Adding a device is adding such a package.
//
// A Backend brings the three things the engine needs from a device: the
// memory the KV pool lives in (NewArena; its arenas scrub released pages
// in batches, device.Arena.ScrubPages), whether it can run a model
// (Supports), and the forward pass (NewRunner).
package backend

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// Auto is the device name that picks the best registered backend that
// works on this machine and runs the model ("" means the same).
const Auto = "auto"

var (
	// ErrUnknown is returned for a device name no driver registered.
	ErrUnknown = errors.New("backend: unknown device")
	// ErrKVTypeUnsupported: the device cannot run the requested KV type
	// (today: q8_0 and q4_0 on CUDA). Device auto then takes another.
	ErrKVTypeUnsupported = errors.New("KV type not supported on this device")
)

// Runner is a device's forward pass over a KV pool.
type Runner interface {
	Forward(b *model.Batch) error
}

// RunnerOptions are what the engine tells NewRunner beyond the model.
type RunnerOptions struct {
	// MaxContext is the engine's context size (prompt plus generated
	// tokens of one request); it picks LongRoPE's factor set, as
	// llama.cpp's n_ctx.
	MaxContext int
}

// Backend is one opened device.
type Backend interface {
	// Name is the name its driver was registered under.
	Name() string
	// NewArena allocates bytes of zeroed device memory for the KV pool
	// (device.Backend).
	NewArena(bytes int64) (device.Arena, error)
	// Supports is nil when the backend can run w with KV of type kv, and
	// otherwise says why not (wrapping ErrKVTypeUnsupported for the KV
	// type, model.ErrNotImplemented or another sentinel for the model).
	Supports(w *model.Weights, kv device.DType) error
	// NewRunner builds the forward pass of w over pool, whose arena came
	// from this backend's NewArena.
	NewRunner(w *model.Weights, pool *kvcache.Pool, opt RunnerOptions) (Runner, error)
}

// Driver opens a backend.
type Driver struct {
	// Open opens the device. An error wraps device.ErrUnavailable when
	// this machine does not have it.
	Open func() (Backend, error)
	// Probe, when set, says cheaply whether this machine has the device
	// (nil) or why not, without opening it; device auto then skips it
	// quietly (the reason is logged at debug level).
	Probe func() error
	// Describe, when set, names what Probe found (the driver library, the
	// device) for diagnostics such as `kvwarden version`.
	Describe func() string
	// Auto lets device auto pick this backend; a driver that only runs
	// when named (a test backend, an experimental device) leaves it false.
	Auto bool
	// Priority orders the Auto drivers: device auto tries the highest
	// first. The CPU, which always works, is 0.
	Priority int
}

// registry holds the drivers; the package functions use std, tests a
// fresh one.
type registry struct {
	sync.RWMutex
	drivers map[string]Driver
}

var std registry

// Register makes a backend available by name. It panics if the name is
// empty, "auto", already registered, or the driver has no Open: these are
// programming errors found at init, as in database/sql.
func Register(name string, d Driver) { std.register(name, d) }

// Names lists the registered backends, sorted.
func Names() []string { return std.names() }

// Check validates a device name without opening anything: "", "auto" or
// a registered backend. The error wraps ErrUnknown and lists the
// registered backends.
func Check(name string) error { return std.check(name) }

// Lookup returns the driver registered under name.
func Lookup(name string) (Driver, error) { return std.lookup(name) }

// Resolve opens the backend name ("" or "auto": every Auto driver that
// opens, by priority). It runs before the model is loaded, so a device
// that cannot work fails fast. log receives device auto's decisions; nil
// discards them.
func Resolve(name string, log *slog.Logger) (*Choice, error) { return std.resolve(name, log) }

func (r *registry) register(name string, d Driver) {
	r.Lock()
	defer r.Unlock()
	switch {
	case name == "" || name == Auto:
		panic(fmt.Sprintf("backend: Register of the reserved name %q", name))
	case d.Open == nil:
		panic("backend: Register of " + name + " without Open")
	}
	if _, dup := r.drivers[name]; dup {
		panic("backend: Register called twice for " + name)
	}
	if r.drivers == nil {
		r.drivers = map[string]Driver{}
	}
	r.drivers[name] = d
}

func (r *registry) names() []string {
	r.RLock()
	defer r.RUnlock()
	names := make([]string, 0, len(r.drivers))
	for n := range r.drivers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (r *registry) check(name string) error {
	if name == "" || name == Auto {
		return nil
	}
	r.RLock()
	_, ok := r.drivers[name]
	r.RUnlock()
	if !ok {
		return fmt.Errorf("%w %q (want auto or a registered backend: %s)", ErrUnknown, name, strings.Join(r.names(), ", "))
	}
	return nil
}

func (r *registry) lookup(name string) (Driver, error) {
	if err := r.check(name); err != nil {
		return Driver{}, err
	}
	if name == "" || name == Auto {
		return Driver{}, fmt.Errorf("%w %q: auto names no single backend", ErrUnknown, name)
	}
	r.RLock()
	defer r.RUnlock()
	return r.drivers[name], nil
}

// Choice is a resolved device name: the backend named, or for auto every
// backend that opened on this machine, best first. Supported picks from
// it once the model is known.
type Choice struct {
	name     string
	backends []Backend
	skipped  []string // auto: drivers that did not open, as "name: reason"
}

func (r *registry) resolve(name string, log *slog.Logger) (*Choice, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if name != "" && name != Auto {
		d, err := r.lookup(name)
		if err != nil {
			return nil, err
		}
		b, err := d.Open()
		if err != nil {
			return nil, fmt.Errorf("device %q: %w", name, err)
		}
		return &Choice{name: name, backends: []Backend{b}}, nil
	}
	type entry struct {
		name string
		d    Driver
	}
	r.RLock()
	var auto []entry
	for n, d := range r.drivers {
		if d.Auto {
			auto = append(auto, entry{n, d})
		}
	}
	r.RUnlock()
	slices.SortFunc(auto, func(a, b entry) int {
		if a.d.Priority != b.d.Priority {
			return b.d.Priority - a.d.Priority
		}
		return strings.Compare(a.name, b.name)
	})
	c := &Choice{name: Auto}
	var errs []error
	for _, e := range auto {
		if e.d.Probe != nil {
			if err := e.d.Probe(); err != nil {
				// On a machine without the device this is the normal
				// case: the search goes to the debug level only.
				log.Debug("engine: device auto: "+e.name+" unavailable", "reason", err)
				c.skipped = append(c.skipped, e.name+": unavailable")
				errs = append(errs, fmt.Errorf("%s: %w", e.name, err))
				continue
			}
		}
		b, err := e.d.Open()
		if err != nil {
			log.Warn("engine: device auto: "+e.name+" found but unusable", "reason", err)
			c.skipped = append(c.skipped, e.name+": unusable")
			errs = append(errs, fmt.Errorf("%s: %w", e.name, err))
			continue
		}
		c.backends = append(c.backends, b)
	}
	if len(c.backends) == 0 {
		return nil, fmt.Errorf("device auto: no registered backend opened (%s): %w: %w", strings.Join(r.names(), ", "), device.ErrUnavailable, errors.Join(errs...))
	}
	return c, nil
}

// First names the backend the choice prefers (for auto, the best that
// opened), which runs the model unless it cannot.
func (c *Choice) First() string { return c.backends[0].Name() }

// Supported returns the first backend of the choice that runs w with KV
// type kv (nil w: the first, for a caller that brings its own runner). A
// named device that cannot run it is an error; device auto moves on to
// the next backend and logs why.
func (c *Choice) Supported(w *model.Weights, kv device.DType, log *slog.Logger) (Backend, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	for _, b := range c.backends {
		var err error
		if w != nil {
			err = b.Supports(w, kv)
		}
		if err == nil {
			if c.name == Auto {
				log.Info("engine: device auto: using "+b.Name(), "skipped", strings.Join(c.skipped, "; "))
			}
			return b, nil
		}
		if c.name != Auto {
			return nil, fmt.Errorf("device %q: %w", c.name, err)
		}
		log.Warn("engine: device auto: "+b.Name()+" cannot run the model, trying the next backend", "reason", err)
		c.skipped = append(c.skipped, b.Name()+": "+err.Error())
		errs = append(errs, fmt.Errorf("%s: %w", b.Name(), err))
	}
	return nil, fmt.Errorf("device auto: no backend runs this model: %w", errors.Join(errs...))
}
