package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvwarden/kvwarden/cmd/kvwarden/internal/cli"
	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/model"
)

type genFlags struct {
	common      cli.Common
	prompt      string
	maxTokens   int
	temperature float64
	topK        int
	topP        float64
	seed        uint64
	stop        cli.StringList
	json        bool
	noEcho      bool
	grammar     grammarFlags
	spec        specFlags
}

// generateJSON is the --json output.
type generateJSON struct {
	Model        string      `json:"model"`
	PromptTokens []int       `json:"prompt_tokens"`
	Tokens       []int       `json:"tokens"`
	Text         string      `json:"text"`
	FinishReason string      `json:"finish_reason"`
	CachedTokens int         `json:"cached_tokens"`
	Seed         *uint64     `json:"seed,omitempty"` // sampled runs: the seed used
	Timings      timingsJSON `json:"timings"`
}

type timingsJSON struct {
	PrefillTokensPerS float64 `json:"prefill_tokens_per_s"`
	DecodeTokensPerS  float64 `json:"decode_tokens_per_s"`
	PrefillTokens     int     `json:"prefill_tokens"`
	DecodeTokens      int     `json:"decode_tokens"`
	QueuedMS          float64 `json:"queued_ms"`
	TimeToFirstTokMS  float64 `json:"time_to_first_token_ms"`
	PrefillMS         float64 `json:"prefill_ms"`
	DecodeMS          float64 `json:"decode_ms"`
	TotalMS           float64 `json:"total_ms"`
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

func runGenerate(ctx context.Context, args []string, e *env) error {
	var f genFlags
	fs := newFlagSet("generate")
	f.common.Register(fs)
	fs.StringVar(&f.prompt, "prompt", "", "prompt `text` (instead of the argument or stdin)")
	fs.IntVar(&f.maxTokens, "max-tokens", engine.DefaultMaxTokens, "most `tokens` to generate")
	fs.IntVar(&f.maxTokens, "n", engine.DefaultMaxTokens, "shorthand for --max-tokens")
	fs.Float64Var(&f.temperature, "temperature", 1, "sampling temperature; 0 = greedy")
	fs.IntVar(&f.topK, "top-k", 0, "sample from the k most likely tokens; 0 = off")
	fs.Float64Var(&f.topP, "top-p", 1, "nucleus sampling probability mass, in (0, 1]; 0 or 1 = off")
	fs.Uint64Var(&f.seed, "seed", 0, "sampling `seed` (any value, 0 included, is fixed; default: a random seed)")
	fs.Var(&f.stop, "stop", "stop `string` (repeatable)")
	f.grammar.register(fs)
	f.spec.register(fs)
	fs.BoolVar(&f.json, "json", false, "print one JSON object (prompt_tokens, tokens, text, finish_reason, timings) instead of streaming text")
	fs.BoolVar(&f.noEcho, "no-echo", false, "print only the generated text, not the prompt before it (as llama-cli's --no-display-prompt)")
	pos, err := parseFlags(fs, args, "generate [flags] [PROMPT]", e.stderr)
	if err != nil {
		return err
	}
	if err := f.common.Validate(); err != nil {
		return err
	}
	if err := cli.CheckSampling(cli.SamplingParams(f.temperature, f.topK, f.topP, &f.seed)); err != nil {
		return err
	}
	if err := f.common.ResolveModel(ctx, e.stderr); err != nil {
		return err
	}
	switch {
	case f.maxTokens < 1:
		return cli.Usagef("--max-tokens %d: want at least 1", f.maxTokens)
	case len(f.stop) > engine.MaxStopStrings:
		return cli.Usagef("--stop given %d times: at most %d", len(f.stop), engine.MaxStopStrings)
	}
	for _, s := range f.stop {
		if s == "" {
			return cli.Usagef("--stop: empty stop string")
		}
	}
	if err := f.grammar.load(); err != nil {
		return err
	}
	var specCfg engine.Config
	if err := f.spec.apply(&specCfg); err != nil {
		return err
	}

	prompt := f.prompt
	switch {
	case len(pos) > 1:
		return cli.Usagef("%d prompt arguments: quote the prompt as one argument", len(pos))
	case len(pos) == 1 && f.prompt != "":
		return cli.Usagef("both a prompt argument and --prompt: give one")
	case len(pos) == 1 && pos[0] != "-":
		prompt = pos[0]
	case f.prompt == "":
		b, err := io.ReadAll(e.stdin)
		if err != nil {
			return fmt.Errorf("reading the prompt from stdin: %w", err)
		}
		prompt = strings.TrimRight(string(b), "\r\n")
	}

	if f.common.Synthetic() {
		fmt.Fprintln(e.stderr, "kvwarden: note: the built-in synthetic model has random weights: the output is gibberish")
	}
	cfg := f.common.EngineConfig()
	cfg.Speculative = specCfg.Speculative
	if !model.IsBuiltin(cfg.ModelPath) && cli.IsTerminal(e.stderr) {
		bp := &cli.ByteProgress{W: e.stderr, TTY: true, Label: "loading " + filepath.Base(cfg.ModelPath)}
		start := time.Now()
		cfg.LoadProgress = func(done, total int64) { bp.Update(done, total, 0, start, done == total) }
	}
	eng, err := engine.New(cfg)
	if err != nil {
		return err
	}
	defer eng.Close()

	// Without --seed a sampled run gets a random seed, reported by --json
	// so the run can be repeated; --seed 0 is a seed like any other.
	seed := f.seed
	if !flagGiven(fs, "seed") {
		seed = uint64(time.Now().UnixNano())
	}
	req := engine.Request{
		Prompt:    prompt,
		Tenant:    "default",
		MaxTokens: f.maxTokens,
		Sampling:  cli.SamplingParams(f.temperature, f.topK, f.topP, &seed),
		Stop:      f.stop,
	}
	if req.Grammar, err = f.grammar.compile(eng); err != nil {
		return err
	}
	start := time.Now()
	st, err := eng.Submit(ctx, req)
	if err != nil {
		if isRejection(err) {
			return &exitError{code: cli.ExitRejected, msg: "request rejected: " + cli.OneLine(err)}
		}
		return err
	}
	var res engine.Result
	wrote := false
	endsNL := false
	// As llama-cli, the prompt is shown before its continuation (once the
	// request is admitted: a rejected one prints nothing on stdout).
	if !f.json && !f.noEcho && prompt != "" {
		if _, err := io.WriteString(e.stdout, prompt); err == nil {
			wrote, endsNL = true, strings.HasSuffix(prompt, "\n")
		}
	}
	for ev := range st.Events() {
		if !f.json && ev.Text != "" {
			if _, err := io.WriteString(e.stdout, ev.Text); err != nil {
				_ = eng.Abort(st.ID())
				break
			}
			wrote, endsNL = true, strings.HasSuffix(ev.Text, "\n")
		}
	}
	res = st.Wait()
	total := time.Since(start)
	if !f.json {
		if wrote && !endsNL {
			fmt.Fprintln(e.stdout)
		}
		if res.Err != nil {
			return requestFailure(ctx, res.Err)
		}
		return nil
	}
	out := generateJSON{
		Model:        f.common.ModelName(),
		PromptTokens: nonNil(res.PromptTokens),
		Tokens:       nonNil(res.Tokens),
		Text:         res.Text,
		FinishReason: res.FinishReason,
		CachedTokens: res.CachedTokens,
		Timings: timingsJSON{
			PrefillTokensPerS: math.Round(res.Timings.PrefillTPS()*10) / 10,
			DecodeTokensPerS:  math.Round(res.Timings.DecodeTPS()*10) / 10,
			PrefillTokens:     res.Timings.PrefillTokens,
			DecodeTokens:      res.Timings.DecodeTokens,
			QueuedMS:          ms(res.Timings.Queued),
			TimeToFirstTokMS:  ms(res.Timings.TimeToFirstTok),
			PrefillMS:         ms(res.Timings.Prefill),
			DecodeMS:          ms(res.Timings.Decode),
			TotalMS:           ms(total),
		},
	}
	if f.temperature > 0 {
		out.Seed = &seed
	}
	if res.Err != nil {
		out.FinishReason = "error: " + cli.OneLine(res.Err)
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return err
	}
	if res.Err != nil {
		return requestFailure(ctx, res.Err)
	}
	return nil
}

func nonNil(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

// isRejection reports whether err is an admission rejection.
func isRejection(err error) bool {
	for _, t := range []error{engine.ErrPromptTooLong, engine.ErrEmptyPrompt, engine.ErrInvalidParams, engine.ErrQuotaExceeded, engine.ErrOverloaded} {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// requestFailure is the exit for a request that failed after admission.
func requestFailure(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return &exitError{code: 130, msg: "interrupted"}
	}
	return &exitError{code: cli.ExitFailure, msg: "request failed: " + cli.OneLine(err)}
}

// flagGiven reports whether the flag name was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
