package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/kvwarden/kvwarden/cmd/kvwarden/internal/cli"
	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/chat"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/server"
)

type serveFlags struct {
	common      cli.Common
	addr        string
	apiKeys     string
	pubMetrics  bool
	modelName   string
	maxQueue    int
	tenantQuota int
	maxBody     cli.SizeValue
	drain       time.Duration
	logLevel    string
	chatTmpl    string
	reasoning   string
	corsOrigins cli.StringList
	limits      limitFlags
	spec        specFlags
	memLimit    cli.SizeValue
	strictModel bool
}

func runServe(ctx context.Context, args []string, e *env) error {
	var f serveFlags
	fs := newFlagSet("serve")
	f.common.Register(fs)
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen `address`")
	fs.StringVar(&f.apiKeys, "api-keys", "", "API key `file`: one \"KEY TENANT\" per line; the tenant comes only from the key (default: no auth, one tenant \"default\")")
	fs.BoolVar(&f.pubMetrics, "public-metrics", false, "serve /metrics without an API key even with --api-keys (the metrics aggregate every tenant's traffic)")
	fs.StringVar(&f.modelName, "model-name", "", "model `id` /v1/models reports (default: the model file's base name); requests may name any model unless --strict-model-id")
	fs.BoolVar(&f.strictModel, "strict-model-id", false, "answer 404 model_not_found to requests whose model is not --model-name (default: the one model served answers any id, as llama-server does)")
	fs.IntVar(&f.maxQueue, "max-queue", 0, "waiting requests before new ones get 429 (default 1024)")
	fs.IntVar(&f.tenantQuota, "tenant-quota", 0, "concurrent requests per tenant before 429; 0: unlimited (default: a quarter of --max-queue with --api-keys, else 0)")
	fs.Var(&f.memLimit, "memory-limit", "Go memory `size` limit, e.g. 2GiB; 0: none (default: what the loaded engine holds + the host tier + 512MiB; GOMEMLIMIT wins)")
	fs.Var(&f.maxBody, "max-body", "request body limit, e.g. 1MiB (default 1MiB)")
	fs.DurationVar(&f.drain, "shutdown-timeout", 30*time.Second, "on SIGINT/SIGTERM, how long requests in flight may finish before they are aborted")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&f.chatTmpl, "chat-template-file", "", "Jinja chat template `file` that replaces the model's tokenizer.chat_template (as llama-server's --chat-template-file)")
	fs.StringVar(&f.reasoning, "reasoning-format", "deepseek", "where <think> blocks go: deepseek (reasoning_content, as llama-server) or none (inline in the content); a request's reasoning_format overrides it")
	f.limits.register(fs)
	f.spec.register(fs)
	fs.Var(&f.corsOrigins, "cors-origin", "`origin` browsers may call the API from, e.g. https://app.example.com, or * for any (repeatable; default: none)")
	pos, err := parseFlags(fs, args, "serve [flags] --addr HOST:PORT", e.stderr)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("unexpected argument %q", pos[0])
	}
	if err := f.common.Validate(); err != nil {
		return err
	}
	// The template file is read before any model is resolved (or pulled).
	chatTemplate, chatSource := "the model's tokenizer.chat_template", ""
	if f.chatTmpl != "" {
		b, err := os.ReadFile(f.chatTmpl)
		if err != nil {
			return cli.Usagef("--chat-template-file: %v", err)
		}
		if len(b) == 0 {
			return cli.Usagef("--chat-template-file %s is empty", f.chatTmpl)
		}
		chatTemplate, chatSource = f.chatTmpl, string(b)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return cli.Usagef("--log-level %q: want debug, info, warn or error", f.logLevel)
	}
	cfg := f.common.EngineConfig()
	cfg.MaxQueue = f.maxQueue
	cfg.TenantQuota = f.tenantQuota
	if err := f.spec.apply(&cfg); err != nil {
		return err
	}
	if err := cli.CheckEngineConfig(cfg); err != nil {
		return err
	}
	switch {
	case f.drain < 0:
		return cli.Usagef("--shutdown-timeout %v: must not be negative", f.drain)
	case f.maxBody.Given && f.maxBody.N < 1024:
		return cli.Usagef("--max-body %s: want at least 1KiB", cli.FormatSize(f.maxBody.N))
	case f.memLimit.Given && f.memLimit.N != 0 && f.memLimit.N < 64<<20:
		return cli.Usagef("--memory-limit %s: want 0 (none) or at least 64MiB", cli.FormatSize(f.memLimit.N))
	}
	for _, o := range f.corsOrigins {
		if o != "*" && !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") {
			return cli.Usagef("--cors-origin %q: want * or an origin such as https://app.example.com", o)
		}
	}
	if !server.ValidReasoningFormat(f.reasoning) {
		return cli.Usagef("--reasoning-format %q: want deepseek or none", f.reasoning)
	}
	if _, _, err := net.SplitHostPort(f.addr); err != nil {
		return cli.Usagef("--addr %q: %v", f.addr, err)
	}
	var keys *server.Keys
	if f.apiKeys != "" {
		if keys, err = server.LoadKeys(f.apiKeys); err != nil {
			return cli.Usagef("--api-keys: %v", err)
		}
	}
	opts := server.Options{Keys: keys, PublicMetrics: f.pubMetrics, CORSOrigins: f.corsOrigins, ReasoningFormat: f.reasoning}
	if err := f.limits.options(&opts); err != nil {
		return err
	}
	cfg.TenantQuota = tenantQuota(fs, f.tenantQuota, f.maxQueue, keys != nil)
	// The address is bound before the model is pulled or loaded, which
	// can take minutes: a busy port fails now. While the model loads the
	// server (built without its engine) answers 503 "Loading model";
	// while one is pulled into the cache, connections wait in the backlog.
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("--addr %s: %w", f.addr, err)
	}
	defer ln.Close()
	if err := f.common.ResolveModel(ctx, e.stderr); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	if f.common.KVChecksum == "off" {
		log.Warn("--kv-checksum off: KV pages are not verified, so corruption or a stray write into a request's cache goes undetected; use it only to measure the checks' cost")
	}

	cfg.Logger = log
	cfg.ChatTemplate = chatSource
	model := f.modelName
	if model == "" {
		model = f.common.ModelName()
	}
	opts.ModelID, opts.ModelPath, opts.StrictModelID = model, f.common.Model, f.strictModel
	opts.MaxBodyBytes, opts.Logger = f.maxBody.N, log
	srv := server.New(opts) // no engine yet: 503 "Loading model"
	auth := "none (every request is tenant \"default\"; the prefix cache is shared)"
	if keys != nil {
		auth = fmt.Sprintf("%d API keys from %s; tenant quota %d", keys.Len(), f.apiKeys, cfg.TenantQuota)
	}
	log.Info("listening", "addr", "http://"+ln.Addr().String(), "model", model, "auth", auth, "metrics", metricsAccess(opts))
	warnExposure(log, ln.Addr(), opts, f.apiKeys, f.limits.adminKeys)
	sctx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln, f.drain) }()
	if e.listening != nil {
		e.listening(ln.Addr().String()) // serving, the model not yet loading
	}

	eng, err := loadEngine(cfg, &f.common, log, e.stderr)
	if err != nil {
		stopServing()
		<-served
		if errors.Is(err, chat.ErrTemplate) {
			return cli.Usagef("--chat-template-file %s: %v", f.chatTmpl, err)
		}
		return err
	}
	defer eng.Close()
	memLimit, memSource, setLimit := memoryLimit(os.Getenv("GOMEMLIMIT"), f.memLimit, goMemory(), eng.Config().HostTierBytes)
	if setLimit {
		debug.SetMemoryLimit(memLimit)
	}
	if eng.ChatTemplateFallback() {
		chatTemplate = "ChatML (the model file has none)"
	}
	if err := srv.SetEngine(eng); err != nil {
		return err
	}
	log.Info("ready", "model", model, "chat_template", chatTemplate,
		"memory_limit", limitText(memLimit), "memory_limit_from", memSource)
	if e.ready != nil {
		e.ready(ln.Addr().String())
	}
	if err := <-served; err != nil {
		return err
	}
	if err := eng.Close(); err != nil {
		return fmt.Errorf("closing the engine: %w", err)
	}
	log.Info("engine closed")
	return nil
}

// loadEngine builds the engine, logging progress. A model file is read
// into memory while New runs, with its progress (bytes read of the total)
// on a redrawn line when stderr is a terminal, else in log lines at every
// tenth.
func loadEngine(cfg engine.Config, c *cli.Common, log *slog.Logger, stderr io.Writer) (*engine.Engine, error) {
	src := c.Model
	if c.Synthetic() {
		log.Warn("the built-in synthetic model has random weights, its output is gibberish")
	}
	log.Info("loading model", "model", src, "device", c.Device)
	start := time.Now()
	if !model.IsBuiltin(src) {
		if cli.IsTerminal(stderr) {
			bp := &cli.ByteProgress{W: stderr, TTY: true, Label: "loading " + filepath.Base(src)}
			cfg.LoadProgress = func(done, total int64) { bp.Update(done, total, 0, start, done == total) }
		} else {
			tenth := int64(-1)
			cfg.LoadProgress = func(done, total int64) {
				if t := done * 10 / max(total, 1); t > tenth {
					tenth = t
					log.Info("reading model", "percent", t*10, "bytes", done, "total", total)
				}
			}
		}
	}
	eng, err := engine.New(cfg)
	if err != nil {
		return nil, err
	}
	mc := eng.ModelConfig()
	rc := eng.Config()
	log.Info("model loaded", "took", time.Since(start).Round(time.Millisecond), "device", eng.Device(),
		"layers", mc.Layers, "dim", mc.Dim, "vocab", mc.Vocab, "model_context", mc.MaxContext)
	log.Info("kv pool", "pages", rc.KVPages, "page_size", rc.PageSize, "capacity_tokens", rc.CapacityTokens(),
		"page_bytes", rc.PageBytes(), "max_context", eng.MaxContext(), "kv_checksum", rc.KVChecksum.String(),
		"zero_on_release", rc.ZeroOnRelease, "host_tier", cli.FormatSize(rc.HostTierBytes))
	if mc.MaxContext > eng.MaxContext() {
		log.Warn("the model claims a longer context than requests may use; longer prompts are rejected with context_length_exceeded",
			"model_context", mc.MaxContext, "max_context", eng.MaxContext())
	}
	return eng, nil
}
