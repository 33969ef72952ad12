// Command sidebyside is kvwarden's half of bench/sidebyside.sh, the
// side-by-side benchmark against llama.cpp (issue 11).
//
//	sidebyside mkgguf -shape 110m|1b|8b|30b-a3b|phi4-mini|gptoss-20b -type f32|q4_k_m|mxfp4_moe|... [-layers N] -o FILE
//	    writes a synthetic model (random weights, a placeholder
//	    SentencePiece vocabulary) of the stories110M, TinyLlama-1.1B,
//	    Llama-3-8B, Qwen3-30B-A3B (mixture of experts), Phi-4-mini (phi3,
//	    partial rotary, LongRoPE, tied output) or gpt-oss-20b (MXFP4
//	    experts, sinks, sliding window, YaRN) shape as a GGUF file that
//	    llama.cpp loads; -layers cuts the depth. Quantized types are
//	    written directly, as random blocks in llama-quantize's mix of types
//	    for that file type, so no F32 or F16 intermediate (17 GB at 8B) is
//	    needed.
//	sidebyside run -model FILE -b 32 -npp 128 -ntg 128
//	    submits B requests of npp random prompt tokens, each generating ntg
//	    tokens greedily, through kvwarden's public Go API, and prints one
//	    line "pp_tps=... tg_tps=..." with llama-batched-bench's meaning:
//	    prompt tokens of all sequences over the time until every sequence
//	    had its first token, and the tokens generated after that (only
//	    those: see once) over the remaining time. With -json-schema FILE
//	    the output is constrained to that schema (llama.cpp's
//	    --json-schema).
//	sidebyside bw -t 2 -mib 1024 -r 5
//	    streams a buffer of that size with t threads r times and prints
//	    "read_gbs=BEST median_gbs=MEDIAN": the read bandwidth that bounds
//	    one-sequence decode (weights read per token x tokens/s).
//	sidebyside recache FILE...
//	    drops each file's page cache and reads it back through a mapping
//	    advised for 2 MiB pages, so both sides of the benchmark map the
//	    weights with 2 MiB pages where the filesystem caches in large
//	    folios (ext4, XFS); prints "huge_frac=F" per file, the share of
//	    the file then mapped with them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"sync"
	"time"

	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
	"github.com/kvwarden/kvwarden/engine/model/gguf/mmap"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sidebyside mkgguf|run|bw|recache [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "mkgguf":
		err = mkgguf(os.Args[2:])
	case "run":
		err = run(os.Args[2:])
	case "bw":
		err = bw(os.Args[2:])
	case "recache":
		err = recache(os.Args[2:])
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
	shape := fs.String("shape", "110m", "model shape: "+shapeNames())
	typ := fs.String("type", "f32", "file type: "+fileTypeNames())
	layers := fs.Int("layers", 0, "number of layers (0: the shape's own; fewer cut a large model to fit memory)")
	_ = fs.Parse(args)
	if *out == "" {
		return errors.New("mkgguf: -o is required")
	}
	cfg, ok := shapes[*shape]
	if !ok {
		return fmt.Errorf("mkgguf: unknown shape %q (want %s)", *shape, shapeNames())
	}
	ft, ok := fileTypes[*typ]
	if !ok {
		return fmt.Errorf("mkgguf: unknown type %q (want %s)", *typ, fileTypeNames())
	}
	if *layers < 0 {
		return fmt.Errorf("mkgguf: -layers %d is negative", *layers)
	}
	if *layers > 0 {
		cfg.Layers = *layers
	}
	an := "llama"
	if cfg.Arch != "" {
		an = cfg.Arch
	}
	b := gguf.NewBuilder()
	b.Set("general.architecture", an)
	b.Set("general.name", fmt.Sprintf("kvwarden synthetic %s shape (random weights)", *shape))
	b.Set("general.file_type", ft.ftype)
	b.Set(an+".context_length", uint32(cfg.MaxContext))
	b.Set(an+".embedding_length", uint32(cfg.Dim))
	b.Set(an+".feed_forward_length", uint32(cfg.Hidden))
	b.Set(an+".block_count", uint32(cfg.Layers))
	b.Set(an+".attention.head_count", uint32(cfg.Heads))
	b.Set(an+".attention.head_count_kv", uint32(cfg.KVHeads))
	b.Set(an+".attention.layer_norm_rms_epsilon", cfg.NormEps)
	b.Set(an+".rope.freq_base", cfg.RopeTheta)
	b.Set(an+".rope.dimension_count", uint32(cfg.RopeDim))
	b.Set(an+".vocab_size", uint32(cfg.Vocab))
	// A placeholder vocabulary: the benchmark feeds token IDs, so only its
	// size and special IDs matter.
	b.PlaceholderVocab(cfg.Vocab)
	b.Set("tokenizer.ggml.bos_token_id", uint32(cfg.BOS))
	b.Set("tokenizer.ggml.eos_token_id", uint32(cfg.EOS))
	ones := make([]float32, cfg.Dim)
	for i := range ones {
		ones[i] = 1
	}
	vec := func(name string) { b.AddF32(name, []uint64{uint64(cfg.Dim)}, ones) }
	setMoEKeys(b, an, cfg)
	setPhi3Keys(b, an, cfg)
	setGptOssKeys(b, an, cfg)
	// Norms go in the builder; the matrices are generated one at a time
	// while the file is written (an 8B file does not fit in memory twice).
	var ts []gguf.StreamTensor
	// tensor adds a random tensor of n matrices rows x cols (n > 1: a 3-D
	// tensor of experts).
	tensor := func(name string, t ml.Type, n, rows, cols int) {
		id := *seed*1000003 + uint64(len(ts))
		dims := []uint64{uint64(cols), uint64(rows)}
		if n > 1 {
			dims = append(dims, uint64(n))
		}
		ts = append(ts, gguf.StreamTensor{
			Name: name, Type: t, Dims: dims,
			Fill: func(dst []byte) error { return randomTensor(dst, t, n*rows, cols, id) },
		})
	}
	mat := func(name string, t ml.Type, rows, cols int) { tensor(name, t, 1, rows, cols) }
	// randVec adds a random F32 vector (biases, attention sinks).
	randVec := func(name string, n int) {
		id := *seed*1000003 + uint64(len(ts))
		ts = append(ts, gguf.StreamTensor{
			Name: name, Type: ml.F32, Dims: []uint64{uint64(n)},
			Fill: func(dst []byte) error { return randomTensor(dst, ml.F32, 1, n, id) },
		})
	}
	qDim, kvDim := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	embd := ft.base
	if tiedOutput(cfg) {
		embd = ft.output
	}
	mat("token_embd.weight", embd, cfg.Vocab, cfg.Dim)
	vec("output_norm.weight")
	if !tiedOutput(cfg) {
		mat("output.weight", ft.output, cfg.Vocab, cfg.Dim)
	}
	for i := range cfg.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		more := ft.base
		if moreBits(i, cfg.Layers) {
			more = ft.more
		}
		vec(p + "attn_norm.weight")
		if cfg.Arch == "gpt-oss" {
			gptossLayer(p, cfg, ft, vec, randVec, tensor)
			continue
		}
		if cfg.Arch == "phi3" {
			vec(p + "ffn_norm.weight")
			phi3Layer(p, cfg, ft, more, mat)
			continue
		}
		mat(p+"attn_q.weight", ft.base, qDim, cfg.Dim)
		mat(p+"attn_k.weight", ft.base, kvDim, cfg.Dim)
		mat(p+"attn_v.weight", more, kvDim, cfg.Dim)
		mat(p+"attn_output.weight", ft.base, cfg.Dim, qDim)
		vec(p + "ffn_norm.weight")
		if cfg.Block.MoE.Experts > 0 {
			moeLayer(b, p, cfg, ft.base, more, tensor)
			continue
		}
		mat(p+"ffn_gate.weight", ft.base, cfg.Hidden, cfg.Dim)
		mat(p+"ffn_up.weight", ft.base, cfg.Hidden, cfg.Dim)
		mat(p+"ffn_down.weight", more, cfg.Dim, cfg.Hidden)
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := b.WriteStream(f, ts); err != nil {
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
	reps := fs.Int("r", 1, "repetitions (the best and the median are printed)")
	batchTokens := fs.Int("batch-tokens", 0, "engine MaxBatchTokens (0 = default)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the measured rounds")
	schemaFile := fs.String("json-schema", "", "constrain the output to this JSON Schema file (as llama.cpp's --json-schema)")
	depth := fs.Int("depth", 0, "KV depth (llama-bench's -d): tokens already in the context before the timed prefill and decode (see depth.go)")
	weights := fs.String("weights", "", "weight placement: auto, map, recache or copy (default: $KVWARDEN_WEIGHTS, else auto)")
	_ = fs.Parse(args)
	if *path == "" {
		return errors.New("run: -model is required")
	}
	w, tok, err := model.OpenWith(*path, "", model.LoadOptions{Mode: mmap.Mode(*weights)})
	if err != nil {
		return err
	}
	defer w.Close()
	ctx := *depth + *npp + *ntg + 16
	perToken := int64(w.Config.Layers*w.Config.KVHeads*w.Config.HeadDim) * 2 * 4 // K and V, f32
	cfg := engine.Config{
		Weights: w, Tokenizer: tok, Threads: *threads, KVMemory: int64(*nb) * int64(ctx+32) * perToken,
		MaxContext: ctx, MaxSeqs: max(64, *nb), MaxBatchTokens: *batchTokens, DisablePrefixCache: true,
	}
	if err := withDepth(&cfg, *depth, *nb, perToken); err != nil {
		return err
	}
	e, err := engine.New(cfg)
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
	if *depth > 0 {
		if err := warmDepth(e, *depth, *npp); err != nil {
			return err
		}
	} else if _, _, _, err := once(e, 1, *npp, 4, 0, nil); err != nil {
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
	var pps, tgs []float64
	for r := 0; r < *reps; r++ {
		pp, tg, gen, err := once(e, *nb, *npp, *ntg, r+1, g)
		if err != nil {
			return err
		}
		if gen < *nb**ntg {
			fmt.Fprintf(os.Stderr, "sidebyside: note: %d of %d tokens generated (EOS or grammar complete)\n", gen, *nb**ntg)
		}
		pps, tgs = append(pps, pp), append(tgs, tg)
	}
	// Which page size the weights got: it moves decode by 1.2-1.4x.
	hugeFrac := -1.0
	if huge, res, err := mmap.HugeMapped(w.Output.Data); err == nil && res > 0 {
		hugeFrac = float64(huge) / float64(res)
	}
	fmt.Printf("pp_tps=%.2f tg_tps=%.2f pp_median=%.2f tg_median=%.2f weight_bytes=%d huge_frac=%.3f%s weight_pages=%q\n",
		best(pps), best(tgs), median(pps), median(tgs), w.StepBytes(), hugeFrac, depthNote(e, *depth, *reps**nb), w.Placement.String())
	return nil
}

func best(v []float64) float64 {
	b := 0.0
	for _, x := range v {
		b = max(b, x)
	}
	return b
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func bw(args []string) error {
	fs := flag.NewFlagSet("bw", flag.ExitOnError)
	threads := fs.Int("t", 2, "threads")
	mib := fs.Int("mib", 1024, "buffer size in MiB (far above the last-level cache)")
	reps := fs.Int("r", 5, "passes")
	_ = fs.Parse(args)
	if *mib < 64 || *reps < 1 || *threads < 1 {
		return errors.New("bw: want -mib >= 64, -r >= 1, -t >= 1")
	}
	// The bound is the faster of a heap buffer (4 KiB pages) and one on
	// 2 MiB pages: weights mapped on 2 MiB pages stream faster than a
	// 4 KiB-page buffer reads, and a bound below the decode rate bounds
	// nothing. Both are printed.
	fill := func(buf []float32) []float32 {
		for i := range buf {
			buf[i] = float32(i & 1023) // touch every page before timing
		}
		return buf
	}
	ml.SetThreads(*threads)
	b, m := ml.ReadBandwidth(fill(make([]float32, *mib<<18)), *threads, *reps)
	b4, m4 := b, m
	if hb, ok := hugeFloats(*mib << 18); ok {
		bh, mh := ml.ReadBandwidth(fill(hb), *threads, *reps)
		fmt.Printf("huge_read_gbs=%.2f huge_median_gbs=%.2f\n", bh/1e9, mh/1e9)
		b, m = max(b, bh), max(m, mh)
	}
	fmt.Printf("small_read_gbs=%.2f small_median_gbs=%.2f\n", b4/1e9, m4/1e9)
	fmt.Printf("read_gbs=%.2f median_gbs=%.2f\n", b/1e9, m/1e9)
	return nil
}

// once runs one round and returns prompt and generation tokens/s.
//
// The generation rate counts only tokens received after the timer
// started (the moment the last sequence got its first token), and of
// each sequence's tokens after that moment not the first: it may come
// from the step that started the timer. So the tokens that early
// sequences decode while later prompts are still being prefilled are not
// counted, and the rate errs low by at most one step's tokens. A non-nil
// g constrains every request to that grammar.
func once(e *engine.Engine, nb, npp, ntg, seed int, g *engine.Grammar) (pp, tg float64, gen int, err error) {
	vocab := e.ModelConfig().Vocab
	var mu sync.Mutex
	var firstAll time.Time
	var wg sync.WaitGroup
	errs := make([]error, nb)
	stamps := make([][]time.Time, nb)
	start := time.Now()
	for i := range nb {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := e.Submit(context.Background(), engine.Request{
				Tokens: append(depthPrefix(vocab), prompt(seed*1000+i, npp, vocab)...), MaxTokens: ntg, Tenant: "bench", Grammar: g,
			})
			if err != nil {
				errs[i] = err
				return
			}
			ts := make([]time.Time, 0, ntg)
			for ev := range st.Events() {
				if ev.Done {
					break
				}
				ts = append(ts, time.Now())
			}
			if r := st.Wait(); r.Err != nil {
				errs[i] = r.Err
			}
			mu.Lock()
			if len(ts) > 0 && ts[0].After(firstAll) {
				firstAll = ts[0]
			}
			stamps[i] = ts
			gen += len(ts)
			mu.Unlock()
		}()
	}
	wg.Wait()
	end := time.Now()
	if err := errors.Join(errs...); err != nil {
		return 0, 0, 0, err
	}
	counted := 0
	for _, ts := range stamps {
		after := 0
		for _, t := range ts {
			if t.After(firstAll) {
				after++
			}
		}
		if after > 0 && !ts[0].Equal(firstAll) {
			after-- // may belong to the step that started the timer
		}
		counted += after
	}
	tpp := firstAll.Sub(start).Seconds()
	ttg := end.Sub(firstAll).Seconds()
	return float64(nb*npp) / tpp, float64(counted) / ttg, gen, nil
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

// recache puts each file's page cache in 2 MiB folios (mmap.Recache) and
// reports the share of it a fresh mapping then maps with 2 MiB pages.
func recache(files []string) error {
	if len(files) == 0 {
		return errors.New("recache: want one or more files")
	}
	for _, path := range files {
		if err := mmap.Recache(path); err != nil {
			return err
		}
		r, err := mmap.Map(path)
		if err != nil {
			return err
		}
		var sink byte
		for off := 0; off < len(r.Data); off += 4096 {
			sink ^= r.Data[off]
		}
		huge, res, err := mmap.HugeMapped(r.Data)
		_ = r.Close()
		if err != nil {
			return err
		}
		runtime.KeepAlive(sink) // the reads must happen
		fmt.Printf("%s huge_frac=%.3f resident_mb=%d\n", path, float64(huge)/float64(max(res, 1)), res>>20)
	}
	return nil
}
