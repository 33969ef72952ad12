package tiny

import (
	"embed"
	"encoding/json"
	"fmt"

	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// Oracle is llama.cpp's output on one shape's file (testdata/<shape>.json,
// written by cmd/oracle).
type Oracle struct {
	Shape string `json:"shape"`
	Arch  string `json:"arch"`
	Notes string `json:"notes"`
	// GGUFSHA256 and GGUFBytes identify the file the oracle ran: Build of
	// the shape must reproduce it.
	GGUFSHA256 string `json:"gguf_sha256"`
	GGUFBytes  int    `json:"gguf_bytes"`
	// Program and LlamaCppCommit name the oracle: golden_run (of
	// ../shared/golden/arch/tools) linked against that llama.cpp.
	Program        string `json:"program"`
	LlamaCppCommit string `json:"llama_cpp_commit"`
	Threads        int    `json:"threads"`
	// MinMargin is the smallest top1-top2 logit margin of every recorded
	// greedy step: prompts were drawn until their continuations cleared
	// it, so an engine within half of it reproduces the tokens.
	MinMargin float64 `json:"min_margin"`
	Runs      []Run   `json:"runs"`
}

// Run is one llama.cpp context size's results.
type Run struct {
	// NCtx is llama.cpp's context size (n_ctx, a multiple of 256, as
	// llama.cpp pads it): it picks LongRoPE's factor set (long when NCtx
	// exceeds the original context). An engine serving requests of up to
	// NCtx tokens must give the same logits.
	NCtx int `json:"n_ctx"`
	// Cases hold, per prompt, the greedy continuation and the full-vocab
	// logits after the prompt and after each of the first generated
	// tokens (teacher-forced on llama.cpp's own continuation), as the
	// golden/arch JSON files do.
	Cases []testmodels.ArchCase `json:"cases"`
}

//go:embed testdata
var testdata embed.FS

// Load reads the oracle data of shape name.
func Load(name string) (*Oracle, error) {
	data, err := testdata.ReadFile("testdata/" + name + ".json")
	if err != nil {
		return nil, fmt.Errorf("tiny: no oracle data for shape %q (generate it with cmd/oracle): %w", name, err)
	}
	var o Oracle
	if err := json.Unmarshal(data, &o); err != nil {
		return nil, fmt.Errorf("tiny: oracle data %s.json: %w", name, err)
	}
	if len(o.Runs) == 0 {
		return nil, fmt.Errorf("tiny: oracle data %s.json has no runs", name)
	}
	for _, r := range o.Runs {
		if len(r.Cases) == 0 {
			return nil, fmt.Errorf("tiny: oracle data %s.json: run n_ctx %d has no cases", name, r.NCtx)
		}
	}
	return &o, nil
}
