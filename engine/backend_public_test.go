package engine_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/backend"
	"github.com/kvwarden/kvwarden/engine/backend/cpu"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/internal/device"
	hostmem "github.com/kvwarden/kvwarden/internal/device/cpu"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// counting is a device backend defined outside the engine, as a new device
// package would be: the CPU backend with every call counted. Registering
// it is all it takes for Config.Device to select it.
type counting struct {
	cpu.Backend
	arenas, runners, forwards, scrubs atomic.Int64
}

const countingName = "counting-cpu"

var countingDev = &counting{}

func init() {
	backend.Register(countingName, backend.Driver{
		Open: func() (backend.Backend, error) { return countingDev, nil },
		// Not Auto: device auto must never pick a test backend.
	})
}

func (c *counting) Name() string { return countingName }

func (c *counting) NewArena(n int64) (device.Arena, error) {
	c.arenas.Add(1)
	a, err := hostmem.NewArena(n)
	if err != nil {
		return nil, err
	}
	return &countingArena{Arena: a, c: c}, nil
}

func (c *counting) NewRunner(w *model.Weights, pool *kvcache.Pool, opt backend.RunnerOptions) (backend.Runner, error) {
	c.runners.Add(1)
	r, err := c.Backend.NewRunner(w, pool, opt)
	if err != nil {
		return nil, err
	}
	return countingRunner{r, c}, nil
}

type countingRunner struct {
	backend.Runner
	c *counting
}

func (r countingRunner) Forward(b *model.Batch) error {
	r.c.forwards.Add(1)
	return r.Runner.Forward(b)
}

// countingArena is a host arena (the CPU runner reads K/V in place through
// its views) whose page scrubs are counted.
type countingArena struct {
	*hostmem.Arena
	c *counting
}

func (a *countingArena) ScrubPages(pages []uint32, pageBytes int64, word uint32) (device.Fence, error) {
	a.c.scrubs.Add(1)
	return a.Arena.ScrubPages(pages, pageBytes, word)
}

// A backend registered by a package of its own is selected by name: the
// pool's memory, the forward pass and the page scrub all go through it,
// and it produces what the built-in CPU backend does.
func TestPublicRegisteredBackend(t *testing.T) {
	req := engine.Request{Prompt: "Once upon a time", MaxTokens: 12, Sampling: sample.Params{Temperature: 0}}
	var texts []string
	for _, dev := range []string{"cpu", countingName} {
		e, err := engine.New(engine.Config{ModelPath: "builtin:stories260K", MaxContext: 256, Device: dev, ZeroOnRelease: true})
		require.NoError(t, err)
		require.Equal(t, dev, e.Device())
		r, err := e.Generate(t.Context(), req)
		require.NoError(t, err)
		texts = append(texts, r.Text)
		require.NoError(t, e.Close())
	}
	require.Equal(t, texts[0], texts[1])
	require.Equal(t, int64(1), countingDev.arenas.Load())
	require.Equal(t, int64(1), countingDev.runners.Load())
	require.Positive(t, countingDev.forwards.Load())
	require.Positive(t, countingDev.scrubs.Load(), "released pages are scrubbed through the backend")
}

// A device nobody registered is a Config error naming the field and
// listing what is registered; "auto" never picks a backend that did not
// ask for it.
func TestPublicUnknownDevice(t *testing.T) {
	_, err := engine.New(engine.Config{Device: "tpu"})
	require.ErrorIs(t, err, engine.ErrInvalidParams)
	var ce *engine.ConfigError
	require.True(t, errors.As(err, &ce))
	require.Equal(t, "Device", ce.Field)
	require.ErrorContains(t, err, `"tpu"`)
	require.ErrorContains(t, err, "cpu, cuda")
	require.Contains(t, backend.Names(), countingName)

	e, err := engine.New(engine.Config{ModelPath: "builtin:stories260K", MaxContext: 256, Device: "auto"})
	require.NoError(t, err)
	defer e.Close()
	require.NotEqual(t, countingName, e.Device())
}
