package backend

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/device/cpu"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// fake is a backend that runs what its refuse function lets through.
type fake struct {
	name   string
	refuse func(kv device.DType) error
}

func (f *fake) Name() string { return f.name }

func (f *fake) NewArena(n int64) (device.Arena, error) { return cpu.NewArena(n) }

func (f *fake) Supports(_ *model.Weights, kv device.DType) error {
	if f.refuse != nil {
		return f.refuse(kv)
	}
	return nil
}

func (f *fake) NewRunner(*model.Weights, *kvcache.Pool, RunnerOptions) (Runner, error) {
	return nil, errors.New("fake: no runner")
}

func driver(name string, auto bool, prio int, refuse func(device.DType) error) Driver {
	return Driver{Open: func() (Backend, error) { return &fake{name: name, refuse: refuse}, nil }, Auto: auto, Priority: prio}
}

var errNoChip = fmt.Errorf("no chip: %w", device.ErrUnavailable)

// quantRefused refuses block-quantized KV, as CUDA does.
func quantRefused(kv device.DType) error {
	if kv.Quantized() {
		return fmt.Errorf("%w: %s", ErrKVTypeUnsupported, kv)
	}
	return nil
}

func logTo(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestRegistryUnknownDevice: a name nobody registered is refused before anything
// opens, and the error lists what is registered.
func TestRegistryUnknownDevice(t *testing.T) {
	var r registry
	r.register("host", driver("host", true, 0, nil))
	r.register("accel", driver("accel", true, 10, nil))
	for _, f := range []func() error{
		func() error { return r.check("tpu") },
		func() error { _, err := r.lookup("tpu"); return err },
		func() error { _, err := r.resolve("tpu", nil); return err },
	} {
		err := f()
		require.ErrorIs(t, err, ErrUnknown)
		require.ErrorContains(t, err, `"tpu"`)
		require.ErrorContains(t, err, "accel, host", "the registered backends, sorted")
	}
	for _, ok := range []string{"", Auto, "host", "accel"} {
		require.NoError(t, r.check(ok))
	}
	require.Equal(t, []string{"accel", "host"}, r.names())
}

// TestRegistryRegisterRefuses: the mistakes Register panics on, at init.
func TestRegistryRegisterRefuses(t *testing.T) {
	var r registry
	r.register("x", driver("x", false, 0, nil))
	for name, f := range map[string]func(){
		"twice":   func() { r.register("x", driver("x", false, 0, nil)) },
		"empty":   func() { r.register("", driver("", false, 0, nil)) },
		"auto":    func() { r.register(Auto, driver(Auto, false, 0, nil)) },
		"no open": func() { r.register("y", Driver{}) },
	} {
		require.Panics(t, f, name)
	}
}

// TestRegistryNamedBackend: a registered backend is selected by its name, even one
// device auto never picks.
func TestRegistryNamedBackend(t *testing.T) {
	var r registry
	r.register("host", driver("host", true, 0, nil))
	r.register("test", driver("test", false, 50, nil))
	c, err := r.resolve("test", nil)
	require.NoError(t, err)
	b, err := c.Supported(nil, device.F16, nil)
	require.NoError(t, err)
	require.Equal(t, "test", b.Name())

	c, err = r.resolve(Auto, nil)
	require.NoError(t, err)
	b, err = c.Supported(nil, device.F16, nil)
	require.NoError(t, err)
	require.Equal(t, "host", b.Name(), "auto skips a driver without Auto")
}

// TestRegistryAuto: device auto tries the Auto drivers by priority and takes the
// first that is present, opens and runs the model; a named device that
// cannot run it is an error instead.
func TestRegistryAuto(t *testing.T) {
	for _, tc := range []struct {
		name    string
		accel   Driver
		kv      device.DType
		want    string
		logs    string
		named   error // from naming "accel" instead
		openErr bool
	}{
		{name: "present", accel: driver("accel", true, 10, quantRefused), kv: device.F16, want: "accel", logs: "using accel"},
		{name: "absent", accel: Driver{Open: func() (Backend, error) { panic("probed absent: not opened") },
			Probe: func() error { return errNoChip }, Auto: true, Priority: 10},
			kv: device.F16, want: "host", logs: "accel unavailable"},
		{name: "unusable", accel: Driver{Open: func() (Backend, error) { return nil, errNoChip }, Auto: true, Priority: 10},
			kv: device.F16, want: "host", logs: "accel found but unusable", named: device.ErrUnavailable, openErr: true},
		{name: "refuses the KV type", accel: driver("accel", true, 10, quantRefused), kv: device.Q8_0,
			want: "host", logs: "accel cannot run the model", named: ErrKVTypeUnsupported},
		{name: "lower priority", accel: driver("accel", true, -1, nil), kv: device.F16, want: "host", logs: "using host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r registry
			r.register("host", driver("host", true, 0, nil))
			r.register("accel", tc.accel)
			var buf bytes.Buffer
			c, err := r.resolve(Auto, logTo(&buf))
			require.NoError(t, err)
			b, err := c.Supported(&model.Weights{}, tc.kv, logTo(&buf))
			require.NoError(t, err)
			require.Equal(t, tc.want, b.Name())
			require.Contains(t, buf.String(), tc.logs)

			if tc.named == nil {
				return
			}
			c, err = r.resolve("accel", nil)
			if tc.openErr {
				require.ErrorIs(t, err, tc.named)
				require.ErrorContains(t, err, `device "accel"`)
				return
			}
			require.NoError(t, err)
			_, err = c.Supported(&model.Weights{}, tc.kv, nil)
			require.ErrorIs(t, err, tc.named)
			require.ErrorContains(t, err, `device "accel"`)
		})
	}
}

// TestRegistryAutoNothingOpens: with every driver absent, auto fails with
// device.ErrUnavailable and every reason.
func TestRegistryAutoNothingOpens(t *testing.T) {
	var r registry
	r.register("a", Driver{Open: func() (Backend, error) { return nil, errNoChip }, Auto: true})
	_, err := r.resolve(Auto, nil)
	require.ErrorIs(t, err, device.ErrUnavailable)
	require.ErrorContains(t, err, "a: no chip")
}
