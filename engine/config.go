package engine

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/kvwarden/kvwarden/engine/backend"
	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/gguf/mmap"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
	"github.com/kvwarden/kvwarden/internal/device"
	"github.com/kvwarden/kvwarden/internal/kvcache"
	"github.com/kvwarden/kvwarden/internal/kvseal"
)

// ErrDeviceUnavailable is wrapped when the requested device cannot be used.
var ErrDeviceUnavailable = device.ErrUnavailable

type resolved struct {
	cfg        Config
	weights    *model.Weights
	ownWeights bool
	chat       *chatTemplates
	tok        tokenizer.Tokenizer
	pool       *kvcache.Pool
	runner     Runner
	backend    string
	keys       *kvseal.Keyring
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidParams}, args...)...)
}

// ConfigError is an invalid Config field, found by Config.Validate (and so
// by New). It wraps ErrInvalidParams; Field names the Config field, so a
// front end can name its own flag.
type ConfigError struct {
	Field string
	Msg   string
}

func (e *ConfigError) Error() string { return ErrInvalidParams.Error() + ": " + e.Msg }

func (e *ConfigError) Unwrap() error { return ErrInvalidParams }

func badField(field, format string, args ...any) error {
	return &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Validate checks every field that can be checked without loading the
// model: ranges, contradictions and names. It is the one place these are
// checked; New runs it first, and front ends call it to report a bad flag
// before loading anything. Errors are *ConfigError.
func (c Config) Validate() error {
	return checkFields(&c)
}

// checkFields validates the fields that do not need the model and fills in
// their defaults.
func checkFields(c *Config) error {
	switch {
	case c.KVDiskBudget < 0:
		return badField("KVDiskBudget", "disk tier budget %d bytes is negative", c.KVDiskBudget)
	case c.KVDisk != "" && c.KVDiskBudget == 0:
		return badField("KVDiskBudget", "the disk tier (%s) needs a budget in bytes", c.KVDisk)
	case c.KVDisk == "" && c.KVDiskBudget > 0:
		return badField("KVDisk", "a disk tier budget without a disk tier directory")
	}
	if c.KVKeyFile != "" {
		if err := kvseal.CheckKeyFile(c.KVKeyFile); err != nil {
			return badField("KVKeyFile", "%v", err)
		}
	}
	switch {
	case c.PageSize < 0 || c.PageSize > 1<<15:
		return badField("PageSize", "page size %d tokens (want 1..32768, 0 for the default %d)", c.PageSize, DefaultPageSize)
	case c.KVPages < 0:
		return badField("KVPages", "KV pages %d is negative", c.KVPages)
	case c.KVMemory < 0:
		return badField("KVMemory", "KV memory %d bytes is negative", c.KVMemory)
	case c.KVPages > 0 && c.KVMemory > 0:
		return badField("KVMemory", "both KV pages (%d) and KV memory (%d bytes) are set; give one", c.KVPages, c.KVMemory)
	case c.MaxContext < 0:
		return badField("MaxContext", "max context %d is negative", c.MaxContext)
	case c.MaxBatchTokens < 0:
		return badField("MaxBatchTokens", "max batch tokens %d is negative", c.MaxBatchTokens)
	case c.MaxSeqs < 0:
		return badField("MaxSeqs", "max sequences %d is negative", c.MaxSeqs)
	case c.MaxQueue < 0:
		return badField("MaxQueue", "max queue %d is negative", c.MaxQueue)
	case c.Threads < 0:
		return badField("Threads", "threads %d is negative (0 = the physical cores)", c.Threads)
	case c.Threads > MaxThreads:
		return badField("Threads", "threads %d exceeds %d", c.Threads, MaxThreads)
	case c.TenantQuota < 0:
		return badField("TenantQuota", "tenant quota %d is negative", c.TenantQuota)
	case c.HostTierBytes < 0:
		return badField("HostTierBytes", "host tier %d bytes is negative", c.HostTierBytes)
	case c.KVChecksum < ChecksumHandoff || c.KVChecksum > ChecksumOff:
		return badField("KVChecksum", "kv checksum %d (want handoff, step or off)", int(c.KVChecksum))
	}
	if err := backend.Check(c.Device); err != nil {
		return badField("Device", "%v", err)
	}
	switch c.KVType {
	case "":
		c.KVType = DefaultKVType
	case "f16", "f32", "q8_0", "q4_0":
	default:
		return badField("KVType", "KV type %q (want f16, f32, q8_0 or q4_0)", c.KVType)
	}
	switch c.Compression {
	case "", "none", "s2", "zstd":
	default:
		return badField("Compression", "host tier compression %q (want none, s2 or zstd)", c.Compression)
	}
	if c.Compression != "" && c.Compression != "none" && c.HostTierBytes == 0 {
		return badField("Compression", "host tier compression %q without a host tier (HostTierBytes is 0)", c.Compression)
	}
	if _, err := c.Speculative.resolve("Speculative"); err != nil {
		return err
	}
	if c.WeightPages != "" {
		if _, err := mmap.ParseMode(c.WeightPages); err != nil {
			return badField("WeightPages", "%v", err)
		}
	} else if _, err := mmap.ParseMode(os.Getenv(mmap.ModeEnv)); err != nil {
		return badField("WeightPages", "%s: %v", mmap.ModeEnv, err)
	}
	if c.Weights != nil && c.ModelPath != "" {
		return badField("ModelPath", "both Weights and ModelPath (%s) are set; give one", c.ModelPath)
	}
	if c.Weights != nil && c.Tokenizer == nil {
		return badField("Tokenizer", "Weights given without a Tokenizer")
	}
	if c.PageSize == 0 {
		c.PageSize = DefaultPageSize
	}
	if c.MaxBatchTokens == 0 {
		c.MaxBatchTokens = DefaultMaxBatchTokens
	}
	if c.MaxSeqs == 0 {
		c.MaxSeqs = DefaultMaxSeqs
	}
	if c.MaxQueue == 0 {
		c.MaxQueue = DefaultMaxQueue
	}
	if c.Threads == 0 {
		c.Threads = ml.PhysicalCores()
	}
	return nil
}

func resolve(cfg Config, hooks TestHooks) (r resolved, err error) {
	c := cfg
	if err := checkFields(&c); err != nil {
		return r, err
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// The device opens before the model loads, so one that cannot work
	// fails fast; which of auto's backends runs it is settled once the
	// model is known.
	devices, err := backend.Resolve(c.Device, c.Logger)
	if err != nil {
		return r, err
	}

	// Model and tokenizer.
	switch {
	case c.Weights != nil:
		r.weights, r.tok = c.Weights, c.Tokenizer
		if err := r.weights.Check(); err != nil {
			return r, invalid("weights: %v", err)
		}
	default:
		w, tok, err := model.OpenWith(c.ModelPath, c.TokenizerPath, model.LoadOptions{Mode: weightPages(c, devices.First())})
		if err != nil {
			return r, fmt.Errorf("engine: loading model: %w", err)
		}
		logPlacement(c.Logger, w)
		r.weights, r.ownWeights, r.tok = w, true, tok
		if c.Tokenizer != nil {
			r.tok = c.Tokenizer
		}
		if c.LoadProgress != nil {
			w.Prefetch(c.LoadProgress)
		}
	}
	defer func() {
		if err != nil && r.ownWeights {
			_ = r.weights.Close()
		}
	}()
	runs := r.weights
	if hooks.NewRunner != nil {
		runs = nil // the hook's runner, not the backend's, runs the model
	}
	be, err := devices.Supported(runs, kvDType(c.KVType), c.Logger)
	if err != nil {
		return r, err
	}
	r.backend, c.Device = be.Name(), be.Name()
	mc := r.weights.Config
	if v := r.tok.VocabSize(); v > mc.Vocab {
		return r, invalid("tokenizer has %d tokens, model vocabulary is %d", v, mc.Vocab)
	}
	if r.chat, err = newChatTemplates(c, r.weights, c.Logger); err != nil {
		return r, err
	}

	// Pool sizing. KV in f16 by default, on the CPU as on a GPU: attention
	// is bound by KV bandwidth and capacity; f32 is exact against float32
	// references.
	kvType := kvDType(c.KVType)
	if b := kvType.BlockElems(); mc.HeadDim%b != 0 {
		return r, invalid("KVType %s stores blocks of %d values along the head; this model's head dim %d is not a multiple (use f16)", c.KVType, b, mc.HeadDim)
	}
	geo := mc.KVGeometry(c.PageSize, kvType) // K-only for latent attention
	pageBytes := geo.PageBytes()
	switch {
	case c.KVPages == 0 && c.KVMemory > 0:
		c.KVPages = int(c.KVMemory / pageBytes)
		if c.KVPages == 0 {
			return r, invalid("KV memory of %d bytes holds no page (one page of %d tokens is %d bytes for this model)", c.KVMemory, c.PageSize, pageBytes)
		}
	case c.KVPages == 0:
		c.KVPages = defaultPages(c, mc.MaxContext, pageBytes)
	}
	c.KVMemory = int64(c.KVPages) * pageBytes
	capacity := c.KVPages * c.PageSize

	// Invariant 1: one request must fit the whole pool.
	switch {
	case c.MaxContext == 0:
		c.MaxContext = capacity
		if mc.MaxContext > 0 {
			c.MaxContext = min(mc.MaxContext, capacity)
		}
	case c.MaxContext > capacity:
		return r, fmt.Errorf("%w: MaxContext %d tokens exceeds the KV pool capacity of %d tokens (%d pages of %d tokens); raise KVPages/KVMemory or lower MaxContext",
			ErrInvalidParams, c.MaxContext, capacity, c.KVPages, c.PageSize)
	}
	if c.MaxContext < 2 {
		return r, invalid("MaxContext %d leaves no room for a prompt and a generated token", c.MaxContext)
	}
	if mc.MaxContext > 0 && c.MaxContext > mc.MaxContext {
		c.Logger.Warn("engine: MaxContext exceeds the model's stated context length",
			"max_context", c.MaxContext, "model_context", mc.MaxContext)
	}

	if r.keys, err = newKeyring(c); err != nil {
		return r, err
	}
	defer func() {
		if err != nil {
			r.keys.Close()
		}
	}()
	pool, err := kvcache.New(be, kvcache.Config{
		Geometry: geo, Pages: c.KVPages, ZeroOnRelease: c.ZeroOnRelease, Poison: c.Poison,
		HostTierBytes: c.HostTierBytes, Compression: c.Compression, Faults: hooks.poolFaults(), Logger: c.Logger,
		Sealer: hooks.sealer(r.keys),
	})
	if err != nil {
		if errors.Is(err, kvcache.ErrConfig) {
			return r, fmt.Errorf("%w: %w", ErrInvalidParams, err)
		}
		return r, fmt.Errorf("engine: KV pool: %w", err)
	}
	defer func() {
		if err != nil {
			_ = pool.Close()
		}
	}()
	if hooks.NewRunner != nil {
		r.runner, err = hooks.NewRunner(pool)
	} else {
		r.runner, err = be.NewRunner(r.weights, pool, backend.RunnerOptions{MaxContext: c.MaxContext})
	}
	if err != nil {
		return r, fmt.Errorf("engine: runner: %w", err)
	}
	r.pool, r.cfg = pool, c
	return r, nil
}

// defaultPages sizes the pool to what the model and the settings need:
// MaxSeqs sequences of the context (MaxContext, else the model's context
// up to DefaultContext), capped at DefaultKVMemory, but never less than
// one whole context, so a 1 MB model does not get a 256 MiB pool and a
// long-context model still fits one request.
func defaultPages(c Config, modelCtx int, pageBytes int64) int {
	ctx := c.MaxContext
	if ctx == 0 {
		ctx = DefaultContext
		if modelCtx > 0 {
			ctx = min(modelCtx, DefaultContext)
		}
	}
	perSeq := (ctx + c.PageSize - 1) / c.PageSize
	want := int64(perSeq) * int64(c.MaxSeqs)
	capPages := max(1, DefaultKVMemory/pageBytes)
	return int(max(int64(perSeq), min(want, capPages)))
}

// sealer is what seals pages leaving the pool: keys, or nothing
// (UnsafePlainTiers).
func (h *TestHooks) sealer(keys *kvseal.Keyring) kvcache.Sealer {
	if h.UnsafePlainTiers {
		return nil
	}
	return keys
}

func (h *TestHooks) poolFaults() *kvcache.Faults {
	if h.Faults == nil {
		return nil
	}
	return h.Faults.Pool
}
