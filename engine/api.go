// Package engine is kvwarden's public Go API: an Engine that serves many
// concurrent requests from many tenants with continuous batching over a
// paged KV cache, and keeps the isolation contract of docs/ISOLATION.md: no request
// ever reads KV data it did not write, or that was not shared with it as an
// immutable prefix of its own tenant.
package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/sample"
	"github.com/kvwarden/kvwarden/engine/tokenizer"
	"github.com/kvwarden/kvwarden/internal/kvcache"
)

// Errors callers must tell apart. Returned errors wrap one of these; use
// errors.Is. Rejections happen at admission, before any page is allocated.
var (
	ErrPromptTooLong = errors.New("prompt too long")
	ErrEmptyPrompt   = errors.New("empty prompt")
	ErrInvalidParams = errors.New("invalid parameters")
	ErrQuotaExceeded = errors.New("tenant quota exceeded")
	ErrOverloaded    = errors.New("engine overloaded")
	ErrClosed        = errors.New("engine closed")
	ErrAborted       = errors.New("request aborted")
	ErrNotFound      = errors.New("request not found")
	ErrIsolation     = kvcache.ErrIsolation
	// ErrUnsupported: the model file is readable but describes something
	// the engine cannot run (architecture, tensor type, RoPE scaling type,
	// a missing or unexpected tensor). It is model.ErrUnsupported.
	ErrUnsupported = model.ErrUnsupported
	// ErrNotModelFile: ModelPath is neither a GGUF file nor a llama2.c
	// checkpoint. It is model.ErrNotModelFile.
	ErrNotModelFile = model.ErrNotModelFile
	// ErrStepFailed ends the requests of a forward step that failed as a
	// whole (e.g. a device error); the details are in the engine's log.
	ErrStepFailed = errors.New("forward step failed")
)

// PromptTooLongError carries the numbers behind ErrPromptTooLong.
type PromptTooLongError struct {
	Requested int // prompt tokens plus max new tokens (the default when the request set none)
	Limit     int // MaxContext
	Prompt    int // prompt tokens
	// AtLeast: Prompt (and so Requested) is a lower bound. A prompt is
	// tokenized only until it is known not to fit, or not at all when its
	// length in bytes proves it, so a very long prompt's count is partial.
	AtLeast bool
}

func (e *PromptTooLongError) Error() string {
	at := ""
	if e.AtLeast {
		at = "at least "
	}
	return fmt.Sprintf("prompt too long: %s%d tokens requested (prompt %s%d), limit is MaxContext %d", at, e.Requested, at, e.Prompt, e.Limit)
}

func (e *PromptTooLongError) Unwrap() error { return ErrPromptTooLong }

// Checksum selects when sealed KV pages are verified (invariant 6).
type Checksum int

const (
	// ChecksumHandoff verifies at prefill-to-decode, restore and prefix-cache handoffs (default).
	ChecksumHandoff Checksum = iota
	// ChecksumStep verifies every page that every step reads.
	ChecksumStep
	// ChecksumOff exists only for benchmarks.
	ChecksumOff
)

// ParseChecksum reads "off", "handoff" or "step".
func ParseChecksum(s string) (Checksum, error) {
	switch s {
	case "handoff", "":
		return ChecksumHandoff, nil
	case "step":
		return ChecksumStep, nil
	case "off":
		return ChecksumOff, nil
	}
	return 0, fmt.Errorf("%w: kv checksum %q (want off, handoff or step)", ErrInvalidParams, s)
}

func (c Checksum) String() string {
	switch c {
	case ChecksumHandoff:
		return "handoff"
	case ChecksumStep:
		return "step"
	case ChecksumOff:
		return "off"
	}
	return fmt.Sprintf("checksum(%d)", int(c))
}

// Runner runs the model forward pass over a batch. model.Runner implements
// it; tests substitute an echo model that emits what it reads from its KV.
type Runner interface {
	Forward(b *model.Batch) error
}

// MaxThreads bounds Config.Threads (each thread is a worker goroutine).
const MaxThreads = 1024

// Config configures an Engine. The zero value of each field picks a default;
// New validates everything and refuses contradictions (invariant 1).
type Config struct {
	// Model source: ModelPath ("" = the built-in synthetic model) and, for a
	// llama2.c checkpoint, TokenizerPath. Alternatively Weights and Tokenizer
	// may be given directly (embedding applications, tests).
	ModelPath     string
	TokenizerPath string
	Weights       *model.Weights
	Tokenizer     tokenizer.Tokenizer
	// WeightPages is how the model file is placed in memory: "auto" (the
	// default; "" follows the KVWARDEN_WEIGHTS environment variable, else
	// auto), "map", "recache" or "copy" (mmap.Mode). Auto puts the weights
	// on 2 MiB pages where that is cheap and safe, and on a device that
	// uploads the weights (CUDA) maps the file as it is.
	WeightPages string

	// Device is "auto" (the default: CUDA when a GPU is present and runs
	// the model, else the CPU) or a registered backend by name: "cpu",
	// "cuda", or one an application registers (engine/backend).
	Device string

	// Threads is the number of compute threads of the CPU forward pass
	// (the caller's goroutine included); 0 means the physical cores
	// (ml.PhysicalCores). The CPU worker pool is process-wide: New applies
	// the setting to it, so with several engines in one process the most
	// recently opened one's setting holds for all of them. At most
	// MaxThreads.
	Threads int

	PageSize int   // tokens per KV page (default 16)
	KVPages  int   // pool size in pages; or
	KVMemory int64 // pool size in bytes (default: see DefaultKVMemory)
	// KVType is the element type of the KV cache: "f16" (the default, on
	// the CPU as on a GPU, as in llama.cpp), "f32" (twice the memory;
	// exact against float32 references such as llama2.c's run.c), or
	// "q8_0" / "q4_0" (ggml blocks of 32 along the head: 0.53x / 0.28x of
	// f16's bytes; the head dim must be a multiple of 32; CPU runner only:
	// Device "cuda" fails with ErrKVTypeUnsupported, "auto" uses the CPU).
	KVType string

	// MaxContext is the most tokens (prompt + generated) one request may
	// hold. Default: min(model context, pool capacity). New refuses a value
	// the pool cannot hold. For LongRoPE models (Phi-3/3.5 128k) it also
	// picks the RoPE factor set, as llama.cpp's context size does: the long
	// factors when it exceeds the model's original context length.
	MaxContext int

	MaxBatchTokens int // token budget of one step (default 512)
	MaxSeqs        int // running sequences at once (default 64)
	MaxQueue       int // waiting requests before ErrOverloaded (default 1024)
	TenantQuota    int // concurrent requests per tenant, 0 = unlimited

	HostTierBytes int64  // host-memory tier for preemption and prefix spill, 0 = none
	Compression   string // host tier compression: "none", "s2" or "zstd"
	// KVKeyFile holds the master key (32 raw bytes or 64 hex digits) the
	// per-tenant keys that seal every page outside the pool derive from
	// (docs/ISOLATION.md). "" draws a random key per process: host copies
	// are sealed all the same, and a disk tier does not outlive the process.
	KVKeyFile string
	// KVDisk is a directory for the disk tier below the host tier: prefix
	// pages leaving the host tier (or the device, without one) and the
	// whole prefix cache on Close go there, sealed, and serve prefix hits
	// after a restart with the same KVKeyFile; "" = none. KVDiskBudget is
	// its hard limit in bytes (required with KVDisk).
	KVDisk       string
	KVDiskBudget int64

	// ZeroOnRelease scrubs KV bytes in every tier: freed device pages
	// before reuse, and every host buffer that held them (host-tier
	// copies, compressed or not, when dropped; the compression and CUDA
	// staging buffers after each copy).
	ZeroOnRelease bool
	KVChecksum    Checksum
	Poison        bool // fill freed pages with NaN (debugging)

	// DisablePrefixCache turns the tenant-scoped prefix cache off.
	DisablePrefixCache bool

	// Speculative turns speculative decoding on for every request that
	// does not set its own (Request.Speculative); the zero value is off.
	// Output is unchanged by it (see spec.go).
	Speculative Speculative

	// ChatTemplate, when set, is a Jinja chat template that replaces the
	// model file's tokenizer.chat_template (serve --chat-template-file).
	// New refuses one that does not parse.
	ChatTemplate string

	Logger *slog.Logger // nil = discard

	// LoadProgress, when set, makes New read the whole model file into
	// memory before it returns (rather than letting the first requests
	// fault it in), calling LoadProgress with the bytes read so far and the
	// total, at least every 32 MiB. Use it to show loading progress.
	LoadProgress func(done, total int64)

	// hooks are test hooks set by the engine package's own tests (others
	// use WithTestHooks); a WithTestHooks option overrides them.
	hooks *TestHooks
}

// Option is an option of New beyond Config. The only one is
// WithTestHooks: everything in Config is meant for production use.
type Option func(*options)

type options struct {
	hooks TestHooks
}

// TestHooks are for tests and benchmarks of kvwarden itself, never for
// production: they replace the forward pass, inject faults, or switch an
// isolation check off. They are kept out of Config so that no
// configuration file or flag can reach them.
type TestHooks struct {
	// NewRunner overrides the forward pass (tests: the echo model). It
	// gets the pool the engine built.
	NewRunner func(pool *kvcache.Pool) (Runner, error)
	// Faults injects failures.
	Faults *Faults
	// UnsafeSkipValidation skips the page-table validation before each
	// step (invariant 4), to measure that check's cost in benchmarks.
	UnsafeSkipValidation bool
	// UnsafePlainTiers seals nothing that leaves the pool (host tier and
	// disk tier pages are written in the clear, unauthenticated), to
	// measure what encryption costs in benchmarks.
	UnsafePlainTiers bool
}

// WithTestHooks installs test hooks (see TestHooks).
func WithTestHooks(h TestHooks) Option { return func(o *options) { o.hooks = h } }

// Faults injects failures for tests (TestHooks). Page-level faults pass
// through to the pool.
type Faults struct {
	Pool *kvcache.Faults
	// AbortAt aborts a request when it enters the named state.
	AbortAt func(id uint64, state State) bool
	// CorruptSealed, when it returns true, flips a byte of a page of
	// request id right after a step sealed it (without updating its
	// checksum), as a bad write or bit flip would. The handoff, step
	// verification, swap-out and prefix-cache checks must catch it.
	CorruptSealed func(id uint64, page kvcache.PageRef) bool
	// CorruptHandoff, when it returns true, flips a byte of the written,
	// handoff-checksummed slots of request id's partial last page right
	// after its prefill to decode handoff, as a stray write would. Step
	// verification, swap-out and the page's seal must catch it.
	CorruptHandoff func(id uint64, page kvcache.PageRef) bool
}

// State is a request's lifecycle state.
type State int

const (
	StateWaiting State = iota
	StatePrefilling
	StateDecoding
	StateSwapped
	StateFinished
	StateAborted
	StateFailed
	StateRejected
)

func (s State) String() string {
	return [...]string{"waiting", "prefilling", "decoding", "swapped", "finished", "aborted", "failed", "rejected"}[s]
}

// Request is one generation request.
type Request struct {
	Prompt string // text; or
	Tokens []int  // token IDs (used as given, no BOS added)
	// Tenant scopes the prefix cache and quotas. The embedding application
	// or the server's authenticated key sets it, never a request body.
	Tenant string
	// MaxTokens is the most new tokens to generate: 0 (the zero value)
	// means DefaultMaxTokens (128), MaxTokensUntilEnd (-1) means until the
	// model ends generation or the request reaches MaxContext; other
	// negative values are refused. A value beyond what the context has
	// left is clamped: the request then ends with "length" at MaxContext.
	MaxTokens int
	Sampling  sample.Params
	Stop      []string
	NoBOS     bool // do not prepend BOS to Prompt
	// ParseSpecial lets special-token text in Prompt ("<|im_start|>",
	// "<|eot_id|>") become the special token. Leave it off for untrusted
	// text: with it, a user can forge turns of the conversation. BOS is
	// added only when the vocabulary wants it (tokenizer.ggml.add_bos_token)
	// and the prompt does not already start with it.
	ParseSpecial bool
	// KeepTokens names control tokens (by their text, e.g. "<|python_tag|>",
	// "[TOOL_CALLS]") that the output spells out instead of dropping, so
	// that tool-call markup made of them can be parsed.
	KeepTokens []string

	// Logprobs records the log-probability of each generated token
	// (Event.Logprob, Result.Logprobs); TopLogprobs (at most
	// MaxTopLogprobs, implies Logprobs) also the most likely tokens of each
	// step. They are the model's: see TokenLogprobs.
	Logprobs    bool
	TopLogprobs int
	// LastLogits keeps the raw logits of the last step (Result.Logits).
	LastLogits bool
	// PromptLogprobs also records the log-probability of each prompt
	// token after the first (Result.PromptLogprobs, with TopLogprobs
	// alternatives), as OpenAI's echo with logprobs reports them. It costs
	// one forward step per prompt token, and such a prompt is computed,
	// never taken from the prefix cache.
	PromptLogprobs bool

	// Grammar, when set, constrains the output to its sentences (GBNF or
	// a JSON Schema: Engine.CompileGrammar, CompileJSONSchema,
	// JSONObjectGrammar). The request finishes with "stop" when the
	// grammar is complete and only end-of-generation may follow, or when
	// the model ends it where the grammar can end; it fails with
	// ErrGrammarDeadEnd when no token can go on.
	Grammar *Grammar

	// Speculative, when set, replaces Config.Speculative for this request
	// (&Speculative{} turns it off).
	Speculative *Speculative

	// embed makes the request an embedding input (Engine.Embed): prefill
	// only, its hidden states pooled, never sampled.
	embed *embedJob
}

// Event is one item of a stream: a token with the text it completes, or,
// as the last event, Done with the Result.
type Event struct {
	Token  int
	Text   string // complete UTF-8; may be empty while a multibyte character is pending
	Done   bool
	Result *Result

	// Logprob and TopLogprobs: with Request.Logprobs / TopLogprobs.
	Logprob     float32
	TopLogprobs []TokenLogprob
	// PromptLogprobs: with Request.PromptLogprobs, on the first event
	// only (a token's, or Done when none was generated), as in
	// Result.PromptLogprobs.
	PromptLogprobs []TokenLogprobs
}

// Timings of one request.
type Timings struct {
	Queued          time.Duration
	TimeToFirstTok  time.Duration
	Prefill, Decode time.Duration
	PrefillTokens   int
	DecodeTokens    int
}

// PrefillTPS and DecodeTPS are tokens per second of each phase.
func (t Timings) PrefillTPS() float64 { return rate(t.PrefillTokens, t.Prefill) }
func (t Timings) DecodeTPS() float64  { return rate(t.DecodeTokens, t.Decode) }

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Result is the outcome of a request. FinishReason is "stop" (EOS or a stop
// string), "length" (MaxTokens or MaxContext), "abort" or "error"; Err is
// set for the last two.
type Result struct {
	ID           uint64
	PromptTokens []int
	Tokens       []int
	Text         string
	FinishReason string
	Err          error
	Timings      Timings
	CachedTokens int // prompt tokens served from the prefix cache
	// Logprobs has one entry per generated token with Request.Logprobs.
	Logprobs []TokenLogprobs
	// PromptLogprobs has one entry per prompt token after the first with
	// Request.PromptLogprobs (the first token has no context to be
	// predicted from).
	PromptLogprobs []TokenLogprobs
	// Logits are the raw logits of the last step with Request.LastLogits
	// (that step's sampled token may be the EOS that ended the request).
	Logits []float32
}

// CapacityTokens is how many tokens the KV pool holds: KVPages x PageSize
// of a resolved configuration (Engine.Config).
func (c Config) CapacityTokens() int { return c.KVPages * c.PageSize }

// PageBytes is the size of one KV page (all layers, K and V; K alone for
// latent attention, whose values are read from its K rows) of a resolved
// configuration (Engine.Config); 0 before resolution.
func (c Config) PageBytes() int64 {
	if c.KVPages == 0 {
		return 0
	}
	return c.KVMemory / int64(c.KVPages)
}
