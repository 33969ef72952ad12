package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kvwarden/kvwarden/cmd/kvwarden/internal/cli"
	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/model"
)

type embedFlags struct {
	common      cli.Common
	pooling     string
	noNormalize bool
	dimensions  int
	truncate    bool
	json        bool
	query       string
}

// runEmbed is `kvwarden embed`: the embeddings of the arguments (each one
// input) or of stdin's lines, or with --query their rerank scores.
func runEmbed(ctx context.Context, args []string, e *env) error {
	var f embedFlags
	fs := newFlagSet("embed")
	f.common.Register(fs)
	fs.StringVar(&f.pooling, "pooling", "", "pooling `type`: mean, cls, last or none (per-token vectors) (default: the model's pooling_type)")
	fs.BoolVar(&f.noNormalize, "no-normalize", false, "print the pooled vectors as they are, not scaled to unit L2 norm")
	fs.IntVar(&f.dimensions, "dimensions", 0, "keep the first `n` values of each vector (Matryoshka), then normalize")
	fs.BoolVar(&f.truncate, "truncate", false, "cut inputs longer than the engine takes instead of failing")
	fs.BoolVar(&f.json, "json", false, "print OpenAI's embeddings (or rerank) response as JSON")
	fs.StringVar(&f.query, "query", "", "rerank the inputs as documents against this `query` (a reranker model)")
	pos, err := parseFlags(fs, args, "embed [flags] [TEXT...]  (no TEXT: one input per line of stdin)", e.stderr)
	if err != nil {
		return err
	}
	if err := f.common.Validate(); err != nil {
		return err
	}
	var pool model.Pooling
	if f.pooling != "" {
		if pool, err = model.ParsePooling(f.pooling); err != nil || pool == model.PoolingRank {
			return cli.Usagef("--pooling %q: want mean, cls, last or none", f.pooling)
		}
	}
	if f.dimensions < 0 {
		return cli.Usagef("--dimensions %d: want at least 1", f.dimensions)
	}
	inputs := pos
	if len(inputs) == 0 {
		sc := bufio.NewScanner(e.stdin)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			if line := strings.TrimRight(sc.Text(), "\r"); line != "" {
				inputs = append(inputs, line)
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("reading inputs from stdin: %w", err)
		}
	}
	if len(inputs) == 0 {
		return cli.Usagef("no inputs: give TEXT arguments or lines on stdin")
	}
	if err := f.common.ResolveModel(ctx, e.stderr); err != nil {
		return err
	}
	eng, err := engine.New(f.common.EngineConfig())
	if err != nil {
		return err
	}
	defer eng.Close()
	out := bufio.NewWriter(e.stdout)
	defer out.Flush()
	if f.query != "" {
		res, err := eng.Rerank(ctx, engine.RerankRequest{Query: f.query, Documents: inputs, Truncate: f.truncate})
		if err != nil {
			return err
		}
		if f.json {
			type result struct {
				Index int     `json:"index"`
				Score float32 `json:"relevance_score"`
			}
			rs := make([]result, len(res.Results))
			for i, r := range res.Results {
				rs[i] = result{r.Index, r.Score}
			}
			return writeJSONLine(out, map[string]any{"object": "list", "results": rs,
				"usage": map[string]int{"prompt_tokens": res.PromptTokens, "total_tokens": res.PromptTokens}})
		}
		for _, r := range res.Results {
			fmt.Fprintf(out, "%d %s\n", r.Index, strconv.FormatFloat(float64(r.Score), 'g', -1, 32))
		}
		return nil
	}
	res, err := eng.Embed(ctx, engine.EmbedRequest{Inputs: inputs, Pooling: pool, NoNormalize: f.noNormalize, Dimensions: f.dimensions, Truncate: f.truncate})
	if err != nil {
		return err
	}
	if f.json {
		type datum struct {
			Object    string `json:"object"`
			Index     int    `json:"index"`
			Embedding any    `json:"embedding"` // per-token vectors with pooling none
		}
		data := make([]datum, len(res.Data))
		for i, d := range res.Data {
			data[i] = datum{"embedding", d.Index, d.Vector}
			if d.Vector == nil {
				data[i].Embedding = d.PerToken
			}
		}
		return writeJSONLine(out, map[string]any{"object": "list", "data": data,
			"usage": map[string]int{"prompt_tokens": res.PromptTokens, "total_tokens": res.PromptTokens}})
	}
	// One line per input: its values, space-separated, exactly as float32;
	// with pooling none one line per token, an empty line after each input.
	line := func(vec []float32) {
		for i, v := range vec {
			if i > 0 {
				out.WriteByte(' ')
			}
			out.WriteString(strconv.FormatFloat(float64(v), 'g', -1, 32))
		}
		out.WriteByte('\n')
	}
	for _, d := range res.Data {
		if d.Vector == nil {
			for _, v := range d.PerToken {
				line(v)
			}
			out.WriteByte('\n')
			continue
		}
		line(d.Vector)
	}
	return nil
}

func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
