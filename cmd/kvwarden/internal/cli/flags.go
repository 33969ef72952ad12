package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kvwarden/kvwarden/engine"
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
	Model, Tokenizer string
	Device           string
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
}

// Register adds the common flags to fs.
func (c *Common) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.Model, "model", "", "model `file`: a .gguf or a llama2.c .bin checkpoint (default: the built-in synthetic model)")
	fs.StringVar(&c.Tokenizer, "tokenizer", "", "tokenizer `file` for a llama2.c .bin checkpoint")
	fs.StringVar(&c.Device, "device", "auto", "compute device: auto, cpu or cuda")
	fs.IntVar(&c.PageSize, "page-size", 0, "KV page size in `tokens` (default 16)")
	fs.IntVar(&c.KVPages, "kv-pages", 0, "KV pool size in `pages` (exclusive with --kv-memory)")
	fs.Var(&c.KVMemory, "kv-memory", "KV pool size in bytes, e.g. 512MiB (default: room for --max-seqs contexts, at most 256MiB unless one context needs more)")
	fs.StringVar(&c.KVType, "kv-type", "f16", "KV cache element type: f16 or f32 (f32: twice the memory, exact against float32 references)")
	fs.IntVar(&c.MaxContext, "max-context", 0, "most `tokens` (prompt + generated) one request may hold (default: min(model context, pool capacity))")
	fs.Var(&c.HostOffload, "host-offload", "host-memory tier `size` for preemption and prefix spill, e.g. 1GiB (default 0: none)")
	fs.StringVar(&c.HostCompression, "host-compression", "", "host tier compression: none, s2 or zstd (default: the engine's)")
	fs.BoolVar(&c.ZeroOnRelease, "zero-on-release", false, "zero KV pages before they return to the free list")
	fs.StringVar(&c.KVChecksum, "kv-checksum", "handoff", "KV page checksum verification: off, handoff or step")
	fs.BoolVar(&c.Poison, "poison", false, "debug: fill freed KV pages with NaN so a read of an unwritten slot shows")
	fs.IntVar(&c.MaxBatchTokens, "max-batch-tokens", 0, "token budget of one scheduler step (default 512)")
	fs.IntVar(&c.MaxSeqs, "max-seqs", 0, "running sequences at once (default 64)")
	fs.BoolVar(&c.NoPrefixCache, "no-prefix-cache", false, "disable the tenant-scoped prefix cache")
}

// Validate checks every common flag. Each error names its flag.
func (c *Common) Validate() error {
	switch c.Device {
	case "auto", "cpu", "cuda":
	default:
		return Usagef("--device %q: want auto, cpu or cuda", c.Device)
	}
	if c.PageSize < 0 || c.PageSize > 1<<15 {
		return Usagef("--page-size %d: want 1..32768 tokens (0 = default 16)", c.PageSize)
	}
	if c.KVPages < 0 {
		return Usagef("--kv-pages %d: must not be negative", c.KVPages)
	}
	if c.KVPages > 0 && c.KVMemory.Given {
		return Usagef("--kv-pages and --kv-memory both given: size the pool with one of them")
	}
	if c.KVMemory.Given && c.KVMemory.N == 0 {
		return Usagef("--kv-memory 0: the pool needs memory")
	}
	switch c.KVType {
	case "f16", "f32":
	default:
		return Usagef("--kv-type %q: want f16 or f32", c.KVType)
	}
	if c.MaxContext < 0 {
		return Usagef("--max-context %d: must not be negative", c.MaxContext)
	}
	if c.MaxBatchTokens < 0 {
		return Usagef("--max-batch-tokens %d: must not be negative", c.MaxBatchTokens)
	}
	if c.MaxSeqs < 0 {
		return Usagef("--max-seqs %d: must not be negative", c.MaxSeqs)
	}
	switch c.HostCompression {
	case "", "none", "s2", "zstd":
	default:
		return Usagef("--host-compression %q: want none, s2 or zstd", c.HostCompression)
	}
	if _, err := engine.ParseChecksum(c.KVChecksum); err != nil || c.KVChecksum == "" {
		return Usagef("--kv-checksum %q: want off, handoff or step", c.KVChecksum)
	}
	if c.Tokenizer != "" && c.Model == "" {
		return Usagef("--tokenizer given without --model: the built-in model has its own tokenizer")
	}
	for _, f := range []struct{ name, path string }{{"model", c.Model}, {"tokenizer", c.Tokenizer}} {
		if f.path == "" {
			continue
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

// Synthetic reports whether the built-in synthetic model is in use.
func (c *Common) Synthetic() bool { return c.Model == "" }

// ModelName is a short name for the configured model.
func (c *Common) ModelName() string {
	if c.Model == "" {
		return "kvwarden-synthetic"
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
	}
}

// Parse parses args with fs, allowing flags and positional arguments in
// any order ("generate 'a prompt' --json" works); "--" ends flag parsing.
// Flag errors come back as UsageError.
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
			return pos, nil
		}
		// fs.Parse stops at the first non-flag, or after "--".
		if i := len(args) - len(rest); i > 0 && args[i-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// OneLine flattens an error message to a single line.
func OneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " ")), " ")
}
