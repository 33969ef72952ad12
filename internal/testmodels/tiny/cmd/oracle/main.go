// Command oracle writes the oracle data of the tiny shapes
// (internal/testmodels/tiny/testdata/<shape>.json): for each shape it
// builds the GGUF, draws random prompts, runs them through llama.cpp with
// golden_run (../shared/golden/arch/tools/golden_run.cpp, built against a
// llama.cpp CPU build; see the tiny package documentation) at each of the
// shape's context sizes, keeps the first prompt of each length whose
// greedy continuation has every top1-top2 margin at or above -min-margin,
// and records the continuations and teacher-forced logits.
//
//	go run ./internal/testmodels/tiny/cmd/oracle -golden-run /tmp/oracle/golden_run -llama-commit <sha>
//
// or, to have it compile golden_run (into -work, from -tools) against a
// llama.cpp tree with a CPU build in build/bin:
//
//	go run ./internal/testmodels/tiny/cmd/oracle -llama /path/to/llama.cpp -llama-commit <sha>
//
// Run it from the repository root (or pass -out).
package main

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kvwarden/kvwarden/internal/testmodels"
	"github.com/kvwarden/kvwarden/internal/testmodels/tiny"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		os.Exit(1)
	}
}

type options struct {
	goldenRun, commit, out, work string
	llama, tools                 string
	nGen, nSteps, candidates     int
	minMargin                    float64
	lengths                      []int
}

func run() error {
	var o options
	flag.StringVar(&o.goldenRun, "golden-run", "", "golden_run binary (built from ../shared/golden/arch/tools/golden_run.cpp against llama.cpp)")
	flag.StringVar(&o.llama, "llama", "", "llama.cpp tree with a CPU build (build/bin): compile golden_run against it instead of -golden-run")
	flag.StringVar(&o.tools, "tools", filepath.Join("..", "shared", "golden", "arch", "tools"), "directory of golden_run.cpp (read only), for -llama")
	flag.StringVar(&o.commit, "llama-commit", "", "llama.cpp commit golden_run is linked against (recorded in the data)")
	flag.StringVar(&o.out, "out", filepath.Join("internal", "testmodels", "tiny", "testdata"), "output directory")
	flag.StringVar(&o.work, "work", "", "directory for the GGUF files and llama.cpp's raw output (default: a temporary one, removed)")
	shapes := flag.String("shapes", "", "comma-separated shape names (default: all)")
	lengths := flag.String("lengths", "4,11,27", "prompt lengths, one case each")
	flag.IntVar(&o.nGen, "n", 16, "greedy tokens per case")
	flag.IntVar(&o.nSteps, "k", 5, "logit vectors per case (after the prompt and after each of the first k-1 generated tokens)")
	flag.IntVar(&o.candidates, "candidates", 64, "random prompts drawn per length")
	flag.Float64Var(&o.minMargin, "min-margin", 0.01, "smallest top1-top2 margin a kept continuation may have at any step")
	flag.Parse()
	if (o.goldenRun == "") == (o.llama == "") || o.commit == "" {
		return errors.New("-llama-commit and one of -golden-run and -llama are required")
	}
	for _, f := range strings.Split(*lengths, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("-lengths: %q is not a positive integer", f)
		}
		o.lengths = append(o.lengths, n)
	}
	if o.nSteps < 1 || o.nSteps > o.nGen {
		return fmt.Errorf("-k %d must be in [1, -n %d]", o.nSteps, o.nGen)
	}
	if o.work == "" {
		dir, err := os.MkdirTemp("", "tiny-oracle")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.work = dir
	}
	if o.llama != "" {
		bin, err := buildGoldenRun(o)
		if err != nil {
			return err
		}
		o.goldenRun = bin
	}
	todo := tiny.Shapes
	if *shapes != "" {
		todo = nil
		for _, n := range strings.Split(*shapes, ",") {
			s, err := tiny.ByName(strings.TrimSpace(n))
			if err != nil {
				return err
			}
			todo = append(todo, s)
		}
	}
	for _, s := range todo {
		if err := shape(o, s); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
	}
	return nil
}

func shape(o options, s tiny.Shape) error {
	data, err := tiny.Build(s)
	if err != nil {
		return err
	}
	model := filepath.Join(o.work, s.Name+".gguf")
	if err := os.WriteFile(model, data, 0o644); err != nil {
		return err
	}
	res := tiny.Oracle{
		Shape: s.Name, Arch: s.Arch, Notes: s.Notes,
		GGUFSHA256: tiny.SHA256(data), GGUFBytes: len(data),
		Program: "golden_run (../shared/golden/arch/tools/golden_run.cpp): fresh context per prompt, F32 K/V cache, " +
			"flash attention off, prompt in one ubatch, greedy argmax (lowest id on ties)",
		LlamaCppCommit: o.commit, Threads: 1, MinMargin: o.minMargin,
	}
	// Prompts: uniform ids of the non-special tokens, from a stream of
	// their own so that they do not depend on the weights' generator.
	rng := rand.New(rand.NewPCG(s.Seed, 0x70726f6d707473)) // "prompts"
	var prompts [][]int
	for _, n := range o.lengths {
		for range o.candidates {
			p := make([]int, n)
			for i := range p {
				p[i] = tiny.FirstNormal + rng.IntN(s.Vocab-tiny.FirstNormal)
			}
			prompts = append(prompts, p)
		}
	}
	contexts := s.Contexts
	if len(contexts) == 0 {
		contexts = []int{s.Context}
	}
	for _, nctx := range contexts {
		if nctx == 0 {
			nctx = s.Context
		}
		if nctx%256 != 0 {
			return fmt.Errorf("context %d is not a multiple of 256 (llama.cpp would pad it)", nctx)
		}
		cases, err := runLlama(o, model, prompts, nctx)
		if err != nil {
			return err
		}
		var kept []testmodels.ArchCase
		for li := range o.lengths {
			c, ok := pick(o, cases[li*o.candidates:(li+1)*o.candidates])
			if !ok {
				return fmt.Errorf("n_ctx %d: none of %d prompts of %d tokens has all %d greedy margins >= %g",
					nctx, o.candidates, o.lengths[li], o.nGen, o.minMargin)
			}
			kept = append(kept, c)
		}
		res.Runs = append(res.Runs, tiny.Run{NCtx: nctx, Cases: kept})
	}
	js, err := json.MarshalIndent(res, "", " ")
	if err != nil {
		return err
	}
	path := filepath.Join(o.out, s.Name+".json")
	if err := os.WriteFile(path, append(js, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Printf("%s: %s (%d bytes), gguf sha256 %s\n", s.Name, path, len(js)+1, res.GGUFSHA256)
	return nil
}

// buildGoldenRun compiles golden_run.cpp of o.tools into o.work against
// the llama.cpp tree o.llama, as the tools' build.sh does.
func buildGoldenRun(o options) (string, error) {
	bin := filepath.Join(o.work, "golden_run")
	src := filepath.Join(o.tools, "golden_run.cpp")
	if _, err := os.Stat(src); err != nil {
		return "", fmt.Errorf("-tools: %w", err)
	}
	lib := filepath.Join(o.llama, "build", "bin")
	cmd := exec.Command("g++", "-O2", "-std=c++17", "-o", bin, src,
		"-I"+filepath.Join(o.llama, "include"), "-I"+filepath.Join(o.llama, "ggml", "include"),
		"-L"+lib, "-Wl,-rpath,"+lib, "-lllama", "-lggml", "-lggml-base")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("compiling golden_run: %w", err)
	}
	return bin, nil
}

// llamaCase is one prompt's golden_run output.
type llamaCase struct {
	prompt, gen []int
	margins     []float32
	logits      [][]float32
}

// pick is the first case whose continuation is not degenerate (at least
// 4 distinct tokens) and has every margin at or above the threshold.
func pick(o options, cases []llamaCase) (testmodels.ArchCase, bool) {
	for _, c := range cases {
		distinct := map[int]bool{}
		for _, t := range c.gen {
			distinct[t] = true
		}
		ok := len(distinct) >= 4
		for _, m := range c.margins {
			ok = ok && float64(m) >= o.minMargin
		}
		if !ok {
			continue
		}
		ac := testmodels.ArchCase{Prompt: c.prompt, Generated: c.gen}
		for _, m := range c.margins {
			ac.Margins = append(ac.Margins, float64(m))
		}
		for _, lg := range c.logits {
			b := make([]byte, 4*len(lg))
			for i, v := range lg {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
			}
			ac.Logits64 = append(ac.Logits64, base64.StdEncoding.EncodeToString(b))
		}
		return ac, true
	}
	return testmodels.ArchCase{}, false
}

// runLlama runs golden_run on all prompts with context size nctx.
func runLlama(o options, model string, prompts [][]int, nctx int) ([]llamaCase, error) {
	var sb strings.Builder
	for _, p := range prompts {
		for i, t := range p {
			if i > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(strconv.Itoa(t))
		}
		sb.WriteByte('\n')
	}
	pf := filepath.Join(o.work, "prompts.txt")
	if err := os.WriteFile(pf, []byte(sb.String()), 0o644); err != nil {
		return nil, err
	}
	out := strings.TrimSuffix(model, ".gguf") + fmt.Sprintf(".ctx%d.bin", nctx)
	cmd := exec.Command(o.goldenRun, "-m", model, "-p", pf, "-o", out, "-t", "1",
		"-n", strconv.Itoa(o.nGen), "-k", strconv.Itoa(o.nSteps), "--ctx", strconv.Itoa(nctx), "--quiet")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("golden_run: %w", err)
	}
	f, err := os.Open(out)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cases, err := parse(f)
	if err != nil {
		return nil, fmt.Errorf("golden_run output %s: %w", out, err)
	}
	if len(cases) != len(prompts) {
		return nil, fmt.Errorf("golden_run output %s: %d cases for %d prompts", out, len(cases), len(prompts))
	}
	return cases, nil
}

// parse reads golden_run's output (format at the top of golden_run.cpp).
func parse(r io.Reader) ([]llamaCase, error) {
	var err error
	i32 := func() int {
		var v int32
		if err == nil {
			err = binary.Read(r, binary.LittleEndian, &v)
		}
		return int(v)
	}
	size := func(n int) int {
		if err == nil && (n < 0 || n > 1<<26) {
			err = fmt.Errorf("implausible count %d", n)
		}
		if err != nil {
			return 0
		}
		return n
	}
	ints := func(n int) []int {
		n = size(n)
		v := make([]int32, n)
		if err == nil {
			err = binary.Read(r, binary.LittleEndian, v)
		}
		out := make([]int, n)
		for i, x := range v {
			out[i] = int(x)
		}
		return out
	}
	floats := func(n int) []float32 {
		n = size(n)
		v := make([]float32, n)
		if err == nil {
			err = binary.Read(r, binary.LittleEndian, v)
		}
		return v
	}
	if magic := i32(); err == nil && magic != 0x474c4431 {
		return nil, fmt.Errorf("magic %#x, want 0x474c4431", magic)
	}
	nVocab, n := i32(), i32()
	var cases []llamaCase
	for range n {
		var c llamaCase
		c.prompt = ints(i32())
		ng := i32()
		c.gen = ints(ng)
		c.margins = floats(ng)
		_ = ints(ng) // end-of-generation flags
		for range size(i32()) {
			c.logits = append(c.logits, floats(nVocab))
		}
		if err != nil {
			return nil, err
		}
		cases = append(cases, c)
	}
	return cases, err
}
