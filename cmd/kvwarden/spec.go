package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/kvwarden/kvwarden/cmd/kvwarden/internal/cli"
	"github.com/kvwarden/kvwarden/engine"
)

// specFlags are generate's and serve's speculative decoding flags, named
// as llama-server's (--spec-type, --draft-max).
type specFlags struct {
	typ                string
	draftMax           int
	ngramMin, ngramMax int
	draftModel         string
}

func (s *specFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.typ, "spec-type", engine.SpecNone, "speculative decoding: none, ngram (drafts from n-gram lookup in the prompt and output) or draft (drafts from --spec-draft-model); the output is unchanged")
	fs.IntVar(&s.draftMax, "draft-max", engine.DefaultDraftMax, fmt.Sprintf("most draft `tokens` verified per step with --spec-type (1..%d)", engine.MaxDraftTokens))
	fs.IntVar(&s.ngramMin, "spec-ngram-min", engine.DefaultNgramMin, "shortest n-gram (`tokens`) looked up with --spec-type ngram")
	fs.StringVar(&s.draftModel, "spec-draft-model", "", "draft model `file` (GGUF, or a built-in model name) for --spec-type draft: a small model with the same tokenizer")
	fs.IntVar(&s.ngramMax, "spec-ngram-max", engine.DefaultNgramMax, fmt.Sprintf("longest n-gram (`tokens`) looked up with --spec-type ngram (at most %d)", engine.MaxNgram))
}

// apply sets cfg.Speculative, validated by the engine's own checks, with
// a bad value reported against its flag.
func (s *specFlags) apply(cfg *engine.Config) error {
	sp := engine.Speculative{Type: s.typ, DraftMax: s.draftMax, NgramMin: s.ngramMin, NgramMax: s.ngramMax, DraftModel: s.draftModel}
	if s.draftModel != "" && s.typ != engine.SpecDraft {
		return cli.Usagef("--spec-draft-model is only for --spec-type %s", engine.SpecDraft)
	}
	if s.typ == engine.SpecDraft && s.draftModel == "" {
		return cli.Usagef("--spec-type %s needs --spec-draft-model FILE", engine.SpecDraft)
	}
	if err := (engine.Config{Speculative: engine.Speculative{Type: s.typ, DraftModel: s.draftModel}}).Validate(); err != nil {
		return specUsage("--spec-type", err)
	}
	if s.typ == engine.SpecNgram || s.typ == engine.SpecDraft {
		if s.draftMax < 1 {
			return cli.Usagef("--draft-max %d: want 1..%d", s.draftMax, engine.MaxDraftTokens)
		}
		if err := (engine.Config{Speculative: engine.Speculative{Type: s.typ, DraftMax: s.draftMax, DraftModel: s.draftModel}}).Validate(); err != nil {
			return specUsage("--draft-max", err)
		}
		if err := (engine.Config{Speculative: sp}).Validate(); err != nil {
			return specUsage("--spec-ngram-min/--spec-ngram-max", err)
		}
	}
	cfg.Speculative = sp
	return nil
}

func specUsage(flag string, err error) error {
	var ce *engine.ConfigError
	if errors.As(err, &ce) {
		return cli.Usagef("%s: %s", flag, ce.Msg)
	}
	return cli.Usagef("%s: %v", flag, err)
}
