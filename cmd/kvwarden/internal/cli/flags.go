package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/backend"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/internal/hub"
)

// Exit statuses of the kvwarden command.
const (
	ExitOK       = 0
	ExitFailure  = 1 // runtime failure: the engine refused to start, I/O, an audit that is not clean
	ExitUsage    = 2 // bad command line
	ExitRejected = 3 // generate: the engine rejected the request at admission
)

// UsageError is a bad command line. The command prints it with a hint and
// exits with ExitUsage.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef builds a UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// IsUsage reports whether err is a usage error (including flag parse
// errors, which the flag package words as "invalid value ... for flag -x").
func IsUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}

// Common holds the flags every subcommand takes: the model, the KV pool,
// the safety switches and the batching limits.
type Common struct {
	// DefaultModel is the --model default, set before Register
	// ("" = model.BuiltinStories).
	DefaultModel     string
	Model, Tokenizer string
	Device           string
	Weights          string
	Threads          int
	PageSize         int
	KVPages          int
	KVMemory         SizeValue
	KVType           string
	MaxContext       int
	HostOffload      SizeValue
	HostCompression  string
	ZeroOnRelease    bool
	KVChecksum       string
	Poison           bool
	MaxBatchTokens   int
	MaxSeqs          int
	NoPrefixCache    bool
	KVKeyFile        string
	KVDisk           string
	KVDiskBudget     SizeValue
}

// Register adds the common flags to fs.
func (c *Common) Register(fs *flag.FlagSet) {
	if c.DefaultModel == "" {
		c.DefaultModel = model.BuiltinStories
	}
	fs.StringVar(&c.Model, "model", c.DefaultModel, "model `file`: a .gguf or a llama2.c .bin checkpoint, a Hugging Face reference (owner/repo:Q4_K_M, owner/repo:file.gguf, hf://owner/repo/file.gguf; pulled into the cache if absent), or "+
		model.BuiltinStories+" (a 260K-parameter story model compiled in) or "+model.BuiltinSynthetic+" (random weights, for tests)")
	fs.StringVar(&c.Model, "m", c.DefaultModel, "shorthand for --model (llama.cpp's -m)")
	fs.StringVar(&c.Tokenizer, "tokenizer", "", "tokenizer `file` for a llama2.c .bin checkpoint")
	fs.StringVar(&c.Device, "device", "auto", "compute device: auto or a registered backend ("+strings.Join(backend.Names(), ", ")+")")
	fs.StringVar(&c.Weights, "weights", "", "weight placement: auto (default: 2 MiB pages where cheap and safe, else the file mapped on 4 KiB pages), map (the file mapped as its page cache is), recache (re-read the file's page cache in 2 MiB folios) or copy (anonymous 2 MiB pages, page cache dropped)")
	fs.IntVar(&c.Threads, "threads", 0, "compute `threads` of the CPU forward pass (default: the physical cores)")
	fs.IntVar(&c.PageSize, "page-size", 0, "KV page size in `tokens` (default 16)")
	fs.IntVar(&c.KVPages, "kv-pages", 0, "KV pool size in `pages` (exclusive with --kv-memory)")
	fs.Var(&c.KVMemory, "kv-memory", "KV pool size in bytes, e.g. 512MiB (default: room for --max-seqs contexts, at most 256MiB unless one context needs more)")
	fs.StringVar(&c.KVType, "kv-type", "f16", "KV cache element type: f16, f32, q8_0 or q4_0 (f32: twice the memory, exact against float32 references; q8_0/q4_0: ggml blocks, 0.53x/0.28x of f16, CPU only)")
	fs.IntVar(&c.MaxContext, "max-context", 0, "most `tokens` (prompt + generated) one request may hold (default: min(model context, pool capacity))")
	fs.Var(&c.HostOffload, "host-offload", "host-memory tier `size` for preemption and prefix spill, e.g. 1GiB (default 0: none)")
	fs.StringVar(&c.HostCompression, "host-compression", "", "host tier compression: none, s2 or zstd (default: the engine's)")
	fs.BoolVar(&c.ZeroOnRelease, "zero-on-release", false, "zero KV bytes in every tier: pages before they return to the free list, host-tier copies and staging buffers when dropped")
	fs.StringVar(&c.KVChecksum, "kv-checksum", "handoff", "KV page checksum verification: off, handoff or step")
	fs.BoolVar(&c.Poison, "poison", false, "debug: fill freed KV pages with NaN so a read of an unwritten slot shows")
	fs.IntVar(&c.MaxBatchTokens, "max-batch-tokens", 0, "token budget of one scheduler step (default 512)")
	fs.IntVar(&c.MaxSeqs, "max-seqs", 0, "running sequences at once (default 64)")
	fs.BoolVar(&c.NoPrefixCache, "no-prefix-cache", false, "disable the tenant-scoped prefix cache")
	fs.StringVar(&c.KVDisk, "kv-disk", "", "disk tier `dir`ectory below the host tier: prefix pages, sealed, kept across restarts with the same --kv-key-file (needs --kv-disk-budget)")
	fs.Var(&c.KVDiskBudget, "kv-disk-budget", "disk tier `size`, a hard limit, e.g. 10GiB")
	fs.StringVar(&c.KVKeyFile, "kv-key-file", "", "master key `file` (32 bytes, or 64 hex digits) that per-tenant keys sealing every KV page outside the pool derive from (default: a random key per process)")
}

// Validate checks every common flag (an empty --model becomes the
// default). Each error names its flag. Ranges and contradictions are the
// engine's to check (engine.Config.Validate, through CheckEngineConfig);
// Validate adds only what the command line itself can get wrong: a flag
// spelled as text, a size of 0, a missing file or model name.
func (c *Common) Validate() error {
	if _, err := engine.ParseChecksum(c.KVChecksum); err != nil || c.KVChecksum == "" {
		return Usagef("--kv-checksum %q: want off, handoff or step", c.KVChecksum)
	}
	if c.KVMemory.Given && c.KVMemory.N == 0 {
		return Usagef("--kv-memory 0: the pool needs memory")
	}
	if err := CheckEngineConfig(c.EngineConfig()); err != nil {
		return err
	}
	if c.Model == "" {
		c.Model = c.DefaultModel
		if c.Model == "" {
			c.Model = model.BuiltinStories
		}
	}
	if c.Tokenizer != "" && model.IsBuiltin(c.Model) {
		return Usagef("--tokenizer given with the built-in model %s, which has its own tokenizer", c.Model)
	}
	if model.IsBuiltin(c.Model) && c.Model != model.BuiltinStories && c.Model != model.BuiltinSynthetic {
		return Usagef("--model %s: unknown built-in model (want %s or %s)", c.Model, model.BuiltinStories, model.BuiltinSynthetic)
	}
	for _, f := range []struct{ name, path string }{{"model", c.Model}, {"tokenizer", c.Tokenizer}} {
		if f.path == "" || model.IsBuiltin(f.path) {
			continue
		}
		if f.name == "model" && hub.LooksLikeRef(f.path) {
			if _, err := os.Stat(f.path); err != nil {
				if _, err := hub.ParseRef(f.path); err != nil {
					return Usagef("--model: %v", err)
				}
				continue // resolved through the cache by ResolveModel
			}
		}
		st, err := os.Stat(f.path)
		if err != nil {
			return Usagef("--%s: %v", f.name, err)
		}
		if st.IsDir() {
			return Usagef("--%s %s: is a directory, want a file", f.name, f.path)
		}
	}
	return nil
}

// flagOf names the flag that sets each engine.Config field.
var flagOf = map[string]string{
	"Device": "device", "WeightPages": "weights", "PageSize": "page-size", "KVPages": "kv-pages", "KVMemory": "kv-memory",
	"MaxContext": "max-context", "MaxBatchTokens": "max-batch-tokens", "MaxSeqs": "max-seqs",
	"MaxQueue": "max-queue", "TenantQuota": "tenant-quota", "HostTierBytes": "host-offload",
	"Compression": "host-compression", "KVChecksum": "kv-checksum", "KVType": "kv-type", "ModelPath": "model",
	"TokenizerPath": "tokenizer", "Threads": "threads", "KVKeyFile": "kv-key-file",
	"KVDisk": "kv-disk", "KVDiskBudget": "kv-disk-budget",
}

// CheckEngineConfig validates cfg with the engine's own checks and turns a
// bad field into a UsageError naming its flag.
func CheckEngineConfig(cfg engine.Config) error {
	err := cfg.Validate()
	var ce *engine.ConfigError
	if errors.As(err, &ce) {
		if name, ok := flagOf[ce.Field]; ok {
			return Usagef("--%s: %s", name, ce.Msg)
		}
	}
	if err != nil {
		return &UsageError{Err: err}
	}
	return nil
}

// CheckSampling validates p with the sampler's own checks and turns a bad
// parameter into a UsageError naming its flag (top_p is --top-p).
func CheckSampling(p sample.Params) error {
	err := p.Validate()
	var pe *sample.ParamError
	if errors.As(err, &pe) {
		return Usagef("--%s %v: want %s", strings.ReplaceAll(pe.Param, "_", "-"), pe.Value, pe.Want)
	}
	if err != nil {
		return &UsageError{Err: err}
	}
	return nil
}

// ResolveModel turns a Hugging Face reference in --model (owner/repo:Q4_K_M,
// owner/repo:file.gguf, hf://...) into the path of the cached file,
// pulling it first, with progress on stderr, when the cache lacks it.
// Local paths and built-in names are left alone. The cache is
// $KVWARDEN_CACHE_DIR, else $XDG_CACHE_HOME/kvwarden; HF_TOKEN is sent for
// gated repositories.
func (c *Common) ResolveModel(ctx context.Context, stderr io.Writer) error {
	if c.Model == "" || model.IsBuiltin(c.Model) || !hub.LooksLikeRef(c.Model) {
		return nil
	}
	if _, err := os.Stat(c.Model); err == nil {
		return nil // a local file that happens to look like a reference
	}
	ref, err := hub.ParseRef(c.Model)
	if err != nil {
		return Usagef("--model: %v", err)
	}
	client, err := hub.New("")
	if err != nil {
		return err
	}
	m, err := client.Cached(ref)
	if err != nil {
		fmt.Fprintf(stderr, "kvwarden: pulling %s into %s\n", ref, client.CacheDir)
		client.Progress = HubProgress(stderr)
		if m, err = client.Pull(ctx, ref); err != nil {
			return fmt.Errorf("--model %s: %w", c.Model, err)
		}
	}
	c.Model = m.Path
	return nil
}

// Synthetic reports whether the built-in synthetic model (random
// weights) is in use.
func (c *Common) Synthetic() bool { return c.Model == "" || c.Model == model.BuiltinSynthetic }

// ModelName is a short name for the configured model.
func (c *Common) ModelName() string {
	switch {
	case c.Synthetic():
		return "kvwarden-synthetic"
	case model.IsBuiltin(c.Model):
		return strings.TrimPrefix(c.Model, model.BuiltinPrefix)
	}
	base := filepath.Base(c.Model)
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// EngineConfig turns validated flags into an engine configuration.
func (c *Common) EngineConfig() engine.Config {
	ck, _ := engine.ParseChecksum(c.KVChecksum)
	return engine.Config{
		ModelPath:          c.Model,
		TokenizerPath:      c.Tokenizer,
		Device:             c.Device,
		WeightPages:        c.Weights,
		Threads:            c.Threads,
		PageSize:           c.PageSize,
		KVPages:            c.KVPages,
		KVMemory:           c.KVMemory.N,
		KVType:             c.KVType,
		MaxContext:         c.MaxContext,
		MaxBatchTokens:     c.MaxBatchTokens,
		MaxSeqs:            c.MaxSeqs,
		HostTierBytes:      c.HostOffload.N,
		Compression:        c.HostCompression,
		ZeroOnRelease:      c.ZeroOnRelease,
		KVChecksum:         ck,
		Poison:             c.Poison,
		DisablePrefixCache: c.NoPrefixCache,
		KVKeyFile:          c.KVKeyFile,
		KVDisk:             c.KVDisk,
		KVDiskBudget:       c.KVDiskBudget.N,
	}
}

// Parse parses args with fs, allowing flags and positional arguments in
// any order ("generate 'a prompt' --json" works); "--" ends flag parsing.
// Flags the command line does not set are then read from their
// environment variables (EnvName). Flag errors come back as UsageError.
func Parse(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &UsageError{Err: err}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, applyEnv(fs, osLookup)
		}
		// fs.Parse stops at the first non-flag, or after "--".
		if i := len(args) - len(rest); i > 0 && args[i-1] == "--" {
			return append(pos, rest...), applyEnv(fs, osLookup)
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// OneLine flattens an error message to a single line.
func OneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " ")), " ")
}
