package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/kvwarden/kvwarden/cmd/kvwarden/internal/cli"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/internal/audit"
)

// optBool is a boolean flag that remembers whether it was given.
type optBool struct{ v, given bool }

func (b *optBool) String() string   { return strconv.FormatBool(b.v) }
func (b *optBool) IsBoolFlag() bool { return true }
func (b *optBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	b.v, b.given = v, true
	return nil
}

func runAudit(ctx context.Context, args []string, e *env) error {
	var (
		c         cli.Common
		asJSON    bool
		echo      optBool
		tenants   int
		perTenant int
		rounds    int
		maxTokens int
		seed      uint64
		fault     string
		timeout   time.Duration
	)
	fs := newFlagSet("audit")
	// The audit's default is the synthetic model with the echo forward
	// pass, which makes every request's exact output known in advance.
	c.DefaultModel = model.BuiltinSynthetic
	c.Register(fs)
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fs.Var(&echo, "echo", "replace the forward pass with the echo test model, which copies its context from the KV cache (default: true for "+model.BuiltinSynthetic+", the audit's default model, false for others)")
	fs.IntVar(&tenants, "tenants", 8, "tenants in the canary workload")
	fs.IntVar(&perTenant, "requests", 6, "concurrent requests per tenant per round")
	fs.IntVar(&rounds, "rounds", 2, "workload rounds (later rounds reuse pages and prefixes)")
	fs.IntVar(&maxTokens, "max-tokens", 24, "tokens generated per request")
	fs.Uint64Var(&seed, "seed", 0, "workload seed (0 = fixed default)")
	fs.StringVar(&fault, "inject-fault", "", "testing: inject a fault the audit must catch ("+audit.FaultForeignRead+": one request reads another tenant's page)")
	fs.DurationVar(&timeout, "timeout", 5*time.Minute, "give up after this long")
	var spec specFlags
	spec.register(fs)
	pos, err := parseFlags(fs, args, "audit [flags] [--json]", e.stderr)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("unexpected argument %q", pos[0])
	}
	if err := c.Validate(); err != nil {
		return err
	}
	if err := c.ResolveModel(ctx, e.stderr); err != nil {
		return err
	}
	switch {
	case tenants < 2 || tenants > 64:
		return cli.Usagef("--tenants %d: want 2..64", tenants)
	case perTenant < 1 || perTenant > 64:
		return cli.Usagef("--requests %d: want 1..64", perTenant)
	case rounds < 1 || rounds > 100:
		return cli.Usagef("--rounds %d: want 1..100", rounds)
	case maxTokens < 1:
		return cli.Usagef("--max-tokens %d: want at least 1", maxTokens)
	case timeout <= 0:
		return cli.Usagef("--timeout %v: must be positive", timeout)
	case fault != "" && fault != audit.FaultForeignRead:
		return cli.Usagef("--inject-fault %q: want %s", fault, audit.FaultForeignRead)
	}
	cfg := c.EngineConfig()
	if err := spec.apply(&cfg); err != nil {
		return err
	}
	useEcho := c.Synthetic()
	if echo.given {
		useEcho = echo.v
	}
	if fault != "" && !useEcho {
		return cli.Usagef("--inject-fault needs the echo model (--echo)")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opts := audit.Options{
		Config: cfg, Echo: useEcho, Fault: fault,
		Tenants: tenants, PerTenant: perTenant, Rounds: rounds, MaxTokens: maxTokens, Seed: seed,
	}
	if !asJSON {
		opts.Progress = func(format string, args ...any) { fmt.Fprintf(e.stderr, "audit: "+format+"\n", args...) }
	}
	rep, err := audit.Run(ctx, opts)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		writeReport(e.stdout, rep)
	}
	if !rep.Clean {
		return &exitError{code: cli.ExitFailure, msg: "audit found isolation problems (see the report)"}
	}
	return nil
}

func writeReport(w io.Writer, r *audit.Report) {
	c := r.Config
	fmt.Fprintf(w, "kvwarden isolation audit\n\n")
	fmt.Fprintf(w, "model:    %s (runner: %s", c.Model, c.Runner)
	if c.Runner == "echo" {
		fmt.Fprint(w, ", a test model that copies its context from the KV cache, so any foreign read shows in its output")
	} else {
		fmt.Fprint(w, ", the real forward pass; contamination is detected through canary markers in the text")
	}
	fmt.Fprintln(w, ")")
	if c.StartupError == "" {
		chosen := ""
		if c.PoolChosen {
			chosen = " (small pool chosen by the audit to force preemption)"
		}
		fmt.Fprintf(w, "pool:     %d pages x %d tokens = %d tokens%s; MaxContext %d; model context %d\n",
			c.Pages, c.PageSize, c.CapacityTokens, chosen, c.MaxContext, c.ModelContext)
		fmt.Fprintf(w, "safety:   kv-checksum %s, zero-on-release %v, poison %v, host tier %s\n",
			c.KVChecksum, c.ZeroOnRelease, c.Poison, cli.FormatSize(c.HostTierBytes))
	}
	if r.Fault != "" {
		fmt.Fprintf(w, "fault:    %s injected (victim request %d)\n", r.Fault, r.Victim)
	}
	t := r.Tried
	fmt.Fprintf(w, "\ntried:    %d tenants x %d rounds, %d requests (%d completed, %d aborted mid-stream of %d aborts sent)\n",
		t.Tenants, t.Rounds, t.Requests, t.Completed, t.Aborted, t.AbortsRequested)
	fmt.Fprintf(w, "          %d over-length prompts (%d rejected), %d other invalid requests (%d rejected), %d output tokens checked\n",
		t.OverLength, t.OverLengthRejected, t.OtherRejections, t.OtherRejected, t.TokensChecked)
	en := r.Engine
	fmt.Fprintf(w, "engine:   %d preemptions (%d swap-outs, %d swap-ins), %d prefix hits, %d deferred releases; isolation failures %d, violations %d, checksum failures %d\n\n",
		en.Preemptions, en.SwapOuts, en.SwapIns, en.PrefixHits, en.DeferredReleases, en.IsolationFailures, en.IsolationViolations, en.ChecksumFailures)
	for _, ch := range r.Checks {
		fmt.Fprintf(w, "  %-4s  %-38s %s\n", strings.ToUpper(ch.Status), ch.Name, ch.Detail)
	}
	if len(r.Examples) > 0 {
		fmt.Fprintf(w, "\nfindings:\n")
		for _, x := range r.Examples {
			fmt.Fprintf(w, "  - %s\n", x)
		}
	}
	verdict := "CLEAN"
	if !r.Clean {
		verdict = "NOT CLEAN"
	}
	fmt.Fprintf(w, "\nresult: %s (%.1fs)\n", verdict, r.Seconds)
}
