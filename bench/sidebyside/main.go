// Command sidebyside is kvwarden's half of bench/sidebyside.sh, the
// side-by-side benchmark against llama.cpp (issue 11).
//
//	sidebyside mkgguf -o model-f32.gguf
//	    writes the stories110M-shaped synthetic model (random weights, F32,
//	    untied output, a placeholder 32000-token SentencePiece vocabulary)
//	    as a GGUF file that llama.cpp's llama-quantize and llama-bench load.
//	sidebyside run -model FILE -b 32 -npp 128 -ntg 128
//	    submits B requests of npp random prompt tokens, each generating ntg
//	    tokens greedily, through kvwarden's public Go API, and prints one
//	    line "pp_tps=... tg_tps=..." with llama-batched-bench's meaning:
//	    prompt tokens of all sequences over the time until every sequence
//	    had its first token, and the tokens generated after that over the
//	    remaining time. With -json-schema FILE the output is constrained
//	    to that schema (llama.cpp's --json-schema).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sidebyside mkgguf|run [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "mkgguf":
		err = mkgguf(os.Args[2:])
	case "run":
		err = run(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sidebyside:", err)
		os.Exit(1)
	}
}

func mkgguf(args []string) error {
	fs := flag.NewFlagSet("mkgguf", flag.ExitOnError)
	out := fs.String("o", "", "output GGUF path")
	seed := fs.Uint64("seed", 110, "weight seed")
	_ = fs.Parse(args)
	if *out == "" {
		return errors.New("mkgguf: -o is required")
	}
	cfg := model.Stories110MConfig()
	w, err := model.Synthetic(cfg, *seed, ml.F32)
	if err != nil {
		return err
	}
	b := gguf.NewBuilder()
	b.Set("general.architecture", "llama")
	b.Set("general.name", "kvwarden synthetic stories110M (random weights)")
	b.Set("general.file_type", uint32(0))
	b.Set("llama.context_length", uint32(cfg.MaxContext))
	b.Set("llama.embedding_length", uint32(cfg.Dim))
	b.Set("llama.feed_forward_length", uint32(cfg.Hidden))
	b.Set("llama.block_count", uint32(cfg.Layers))
	b.Set("llama.attention.head_count", uint32(cfg.Heads))
	b.Set("llama.attention.head_count_kv", uint32(cfg.KVHeads))
	b.Set("llama.attention.layer_norm_rms_epsilon", cfg.NormEps)
	b.Set("llama.rope.freq_base", cfg.RopeTheta)
	b.Set("llama.rope.dimension_count", uint32(cfg.RopeDim))
	b.Set("llama.vocab_size", uint32(cfg.Vocab))
	// A placeholder SentencePiece vocabulary: <unk>, <s>, </s>, the 256
	// byte tokens, then distinct filler pieces. The benchmark feeds token
	// IDs, so only its size and special IDs matter.
	toks := make([]string, cfg.Vocab)
	scores := make([]float32, cfg.Vocab)
	types := make([]int32, cfg.Vocab)
	for i := range toks {
		switch {
		case i == 0:
			toks[i], types[i] = "<unk>", 2
		case i == 1:
			toks[i], types[i] = "<s>", 3
		case i == 2:
			toks[i], types[i] = "</s>", 3
		case i < 3+256:
			toks[i], types[i] = fmt.Sprintf("<0x%02X>", i-3), 6
		default:
			toks[i], types[i] = fmt.Sprintf("\u2581t%d", i), 1
			scores[i] = -float32(i)
		}
	}
	b.Set("tokenizer.ggml.model", "llama")
	b.Set("tokenizer.ggml.tokens", toks)
	b.Set("tokenizer.ggml.scores", scores)
	b.Set("tokenizer.ggml.token_type", types)
	b.Set("tokenizer.ggml.bos_token_id", uint32(cfg.BOS))
	b.Set("tokenizer.ggml.eos_token_id", uint32(cfg.EOS))
	b.Set("tokenizer.ggml.unknown_token_id", uint32(0))
	mat := func(name string, m *ml.Matrix) {
		b.AddTensor(name, gguf.TypeF32, []uint64{uint64(m.Cols), uint64(m.Rows)}, m.Data)
	}
	vec := func(name string, v []float32) { b.AddF32(name, []uint64{uint64(len(v))}, v) }
	mat("token_embd.weight", w.Embed)
	vec("output_norm.weight", w.Norm)
	mat("output.weight", w.Output)
	for i, l := range w.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		vec(p+"attn_norm.weight", l.AttnNorm)
		mat(p+"attn_q.weight", l.Q)
		mat(p+"attn_k.weight", l.K)
		mat(p+"attn_v.weight", l.V)
		mat(p+"attn_output.weight", l.O)
		vec(p+"ffn_norm.weight", l.FFNNorm)
		mat(p+"ffn_gate.weight", l.Gate)
		mat(p+"ffn_up.weight", l.Up)
		mat(p+"ffn_down.weight", l.Down)
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if _, err := b.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	path := fs.String("model", "", "GGUF model")
	nb := fs.Int("b", 1, "parallel sequences")
	npp := fs.Int("npp", 128, "prompt tokens per sequence")
	ntg := fs.Int("ntg", 128, "generated tokens per sequence")
	threads := fs.Int("t", 2, "compute threads")
	reps := fs.Int("r", 1, "repetitions (the best is printed)")
	batchTokens := fs.Int("batch-tokens", 0, "engine MaxBatchTokens (0 = default)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the measured rounds")
	schemaFile := fs.String("json-schema", "", "constrain the output to this JSON Schema file (as llama.cpp's --json-schema)")
	_ = fs.Parse(args)
	if *path == "" {
		return errors.New("run: -model is required")
	}
	w, tok, err := model.Open(*path, "")
	if err != nil {
		return err
	}
	defer w.Close()
	ctx := *npp + *ntg + 16
	perToken := int64(w.Config.Layers*w.Config.KVHeads*w.Config.HeadDim) * 2 * 4 // K and V, f32
	e, err := engine.New(engine.Config{
		Weights: w, Tokenizer: tok, Threads: *threads, KVMemory: int64(*nb) * int64(ctx+32) * perToken,
		MaxContext: ctx, MaxSeqs: max(64, *nb), MaxBatchTokens: *batchTokens, DisablePrefixCache: true,
	})
	if err != nil {
		return err
	}
	defer e.Close()
	// Warm-up as llama-bench's: one full prompt of npp tokens (and a few
	// generated), so that the measured rounds do not pay the first touch
	// of the KV pages and of the batch's scratch buffers (llama.cpp clears
	// its whole KV buffer when it creates the context and runs its
	// warm-up prompt at the full prompt length).
	var g *engine.Grammar
	if *schemaFile != "" {
		schema, err := os.ReadFile(*schemaFile)
		if err != nil {
			return err
		}
		// Compiled once, as the server keeps a tenant's grammars.
		if g, err = e.CompileJSONSchema(schema); err != nil {
			return err
		}
	}
	if _, _, _, err := once(e, 1, *npp, 4, 0, nil); err != nil {
		return err
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var bestPP, bestTG float64
	for r := 0; r < *reps; r++ {
		pp, tg, gen, err := once(e, *nb, *npp, *ntg, r+1, g)
		if err != nil {
			return err
		}
		if gen < *nb**ntg {
			fmt.Fprintf(os.Stderr, "sidebyside: note: %d of %d tokens generated (EOS or grammar complete)\n", gen, *nb**ntg)
		}
		bestPP, bestTG = max(bestPP, pp), max(bestTG, tg)
	}
	fmt.Printf("pp_tps=%.2f tg_tps=%.2f\n", bestPP, bestTG)
	return nil
}

// once runs one round and returns prompt and generation tokens/s.
func once(e *engine.Engine, nb, npp, ntg, seed int, g *engine.Grammar) (pp, tg float64, gen int, err error) {
	vocab := e.ModelConfig().Vocab
	var mu sync.Mutex
	var firstAll time.Time
	var wg sync.WaitGroup
	errs := make([]error, nb)
	start := time.Now()
	for i := range nb {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := e.Submit(context.Background(), engine.Request{
				Tokens: prompt(seed*1000+i, npp, vocab), MaxTokens: ntg, Tenant: "bench", Grammar: g,
			})
			if err != nil {
				errs[i] = err
				return
			}
			n := 0
			for ev := range st.Events() {
				if ev.Done {
					break
				}
				if n == 0 {
					now := time.Now()
					mu.Lock()
					if now.After(firstAll) {
						firstAll = now
					}
					mu.Unlock()
				}
				n++
			}
			if r := st.Wait(); r.Err != nil {
				errs[i] = r.Err
			}
			mu.Lock()
			gen += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	end := time.Now()
	if err := errors.Join(errs...); err != nil {
		return 0, 0, 0, err
	}
	tpp := firstAll.Sub(start).Seconds()
	ttg := end.Sub(firstAll).Seconds()
	return float64(nb*npp) / tpp, float64(gen-nb) / ttg, gen, nil
}

// prompt is n pseudo-random token IDs above the special ones.
func prompt(i, n, vocab int) []int {
	p := make([]int, n)
	x := uint64(i)*0x9E3779B97F4A7C15 + 1
	for j := range p {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		p[j] = 3 + int(x%uint64(vocab-3))
	}
	return p
}
