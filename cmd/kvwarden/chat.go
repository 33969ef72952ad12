package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvwarden/kvwarden/cmd/kvwarden/internal/cli"
	"github.com/kvwarden/kvwarden/engine"
	"github.com/kvwarden/kvwarden/engine/chat"
	"github.com/kvwarden/kvwarden/engine/model"
	"github.com/kvwarden/kvwarden/engine/sample"
)

type chatFlags struct {
	common      cli.Common
	system      string
	maxTokens   int
	temperature float64
	topK        int
	topP        float64
	seed        uint64
	chatTmpl    string
}

const chatHelp = `Ctrl-C stops a reply, Ctrl-D (or /bye) leaves, /clear forgets the conversation; end a line with \ to continue it on the next`

// runChat is an interactive conversation in the terminal: each line of
// stdin is a user turn, rendered with the model's chat template together
// with the conversation so far, and the reply streams to stdout. With
// stdin from a pipe it reads the turns one line each and prints the
// replies, one after the other.
func runChat(ctx context.Context, args []string, e *env) error {
	var f chatFlags
	fs := newFlagSet("chat")
	f.common.Register(fs)
	fs.StringVar(&f.system, "system", "", "system `message` that opens the conversation")
	fs.IntVar(&f.maxTokens, "max-tokens", engine.MaxTokensUntilEnd, "most `tokens` of one reply; -1: until the model ends its turn or the context is full")
	fs.Float64Var(&f.temperature, "temperature", 0.8, "sampling temperature; 0 = greedy")
	fs.IntVar(&f.topK, "top-k", 40, "sample from the k most likely tokens; 0 = off")
	fs.Float64Var(&f.topP, "top-p", 0.95, "nucleus sampling probability mass, in (0, 1]; 1 = off")
	fs.Uint64Var(&f.seed, "seed", 0, "sampling `seed` (default: a random seed per reply)")
	fs.StringVar(&f.chatTmpl, "chat-template-file", "", "Jinja chat template `file` that replaces the model's tokenizer.chat_template")
	pos, err := parseFlags(fs, args, "chat [flags]\n\n"+chatHelp+".", e.stderr)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("unexpected argument %q (chat reads the conversation from stdin)", pos[0])
	}
	if err := f.common.Validate(); err != nil {
		return err
	}
	var seed *uint64
	if flagGiven(fs, "seed") {
		seed = &f.seed
	}
	sp := cli.SamplingParams(f.temperature, f.topK, f.topP, seed)
	if err := cli.CheckSampling(sp); err != nil {
		return err
	}
	if f.maxTokens == 0 || f.maxTokens < engine.MaxTokensUntilEnd {
		return cli.Usagef("--max-tokens %d: want at least 1, or -1 (until the end of the turn)", f.maxTokens)
	}
	cfg := f.common.EngineConfig()
	if f.chatTmpl != "" {
		b, err := os.ReadFile(f.chatTmpl)
		if err != nil {
			return cli.Usagef("--chat-template-file: %v", err)
		}
		cfg.ChatTemplate = string(b)
	}
	if err := f.common.ResolveModel(ctx, e.stderr); err != nil {
		return err
	}
	cfg.ModelPath = f.common.Model
	if f.common.Synthetic() {
		fmt.Fprintln(e.stderr, "kvwarden: note: the built-in synthetic model has random weights: the output is gibberish")
	}
	if !model.IsBuiltin(cfg.ModelPath) && cli.IsTerminal(e.stderr) {
		bp := &cli.ByteProgress{W: e.stderr, TTY: true, Label: "loading " + filepath.Base(cfg.ModelPath)}
		start := time.Now()
		cfg.LoadProgress = func(done, total int64) { bp.Update(done, total, 0, start, done == total) }
	}
	eng, err := engine.New(cfg)
	if err != nil {
		if errors.Is(err, chat.ErrTemplate) {
			return cli.Usagef("--chat-template-file %s: %v", f.chatTmpl, err)
		}
		return err
	}
	defer eng.Close()

	tmpl := "the model's chat template"
	if eng.ChatTemplateFallback() {
		tmpl = "ChatML (the model file has no chat template)"
	} else if f.chatTmpl != "" {
		tmpl = f.chatTmpl
	}
	fmt.Fprintf(e.stderr, "kvwarden chat: %s, %s. %s.\n", f.common.ModelName(), tmpl, chatHelp)

	intr := e.interrupts
	if intr == nil {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt)
		defer signal.Stop(ch)
		intr = ch
	}
	c := &chatSession{eng: eng, e: e, intr: intr, sampling: sp, maxTokens: f.maxTokens, tty: isTerminalReader(e.stdin)}
	if f.system != "" {
		c.history = []chat.Message{{Role: "system", Content: f.system}}
		c.keep = 1
	}
	return c.run(ctx)
}

// chatSession is one conversation.
type chatSession struct {
	eng       *engine.Engine
	e         *env
	intr      <-chan os.Signal
	sampling  sample.Params
	maxTokens int
	tty       bool
	history   []chat.Message
	keep      int // leading messages never dropped (the system message)
}

func (c *chatSession) run(ctx context.Context) error {
	lines := make(chan string)
	readErr := make(chan error, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(c.e.stdin)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-stop:
				return
			}
		}
		readErr <- sc.Err()
	}()
	var turn strings.Builder
	for {
		if c.tty {
			if turn.Len() == 0 {
				fmt.Fprint(c.e.stdout, "> ")
			} else {
				fmt.Fprint(c.e.stdout, ". ")
			}
		}
		var line string
		select {
		case l, ok := <-lines:
			if !ok {
				if c.tty {
					fmt.Fprintln(c.e.stdout)
				}
				if err := <-readErr; err != nil {
					return fmt.Errorf("reading stdin: %w", err)
				}
				return nil
			}
			line = l
		case <-c.intr:
			turn.Reset()
			fmt.Fprintln(c.e.stdout)
			fmt.Fprintln(c.e.stderr, "(Ctrl-D or /bye leaves)")
			continue
		case <-ctx.Done():
			return nil
		}
		if more, ok := strings.CutSuffix(line, `\`); ok {
			turn.WriteString(more)
			turn.WriteByte('\n')
			continue
		}
		turn.WriteString(line)
		text := strings.TrimSpace(turn.String())
		turn.Reset()
		switch text {
		case "":
			continue
		case "/bye", "/exit", "/quit":
			return nil
		case "/clear":
			c.history = c.history[:c.keep]
			fmt.Fprintln(c.e.stderr, "(conversation cleared)")
			continue
		case "/help", "/?":
			fmt.Fprintln(c.e.stderr, chatHelp+".")
			continue
		}
		if err := c.reply(ctx, text); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// reply adds the user's turn, streams the model's reply to stdout and
// adds it to the conversation. Ctrl-C stops the reply (what was shown
// stays in the conversation). A turn the engine refuses is reported and
// left out; only a failure of the engine itself ends the chat.
func (c *chatSession) reply(ctx context.Context, text string) error {
	c.history = append(c.history, chat.Message{Role: "user", Content: text})
	var st *engine.Stream
	for {
		prompt, err := c.eng.ApplyChatTemplate(c.history, engine.ChatOptions{AddGenerationPrompt: true})
		if err != nil {
			c.history = c.history[:len(c.history)-1]
			fmt.Fprintf(c.e.stderr, "kvwarden chat: the chat template refused the conversation: %s\n", cli.OneLine(err))
			return nil
		}
		st, err = c.eng.Submit(ctx, engine.Request{Prompt: prompt, ParseSpecial: true, Tenant: "default",
			MaxTokens: c.maxTokens, Sampling: c.sampling})
		if errors.Is(err, engine.ErrPromptTooLong) && len(c.history)-c.keep > 2 {
			// The oldest exchange goes, so the conversation fits again.
			c.history = append(c.history[:c.keep], c.history[c.keep+2:]...)
			fmt.Fprintln(c.e.stderr, "(the conversation outgrew the context: dropped its oldest exchange)")
			continue
		}
		if err != nil {
			c.history = c.history[:len(c.history)-1]
			if ctx.Err() != nil {
				return nil
			}
			if isRejection(err) {
				fmt.Fprintf(c.e.stderr, "kvwarden chat: %s\n", cli.OneLine(err))
				return nil
			}
			return err
		}
		break
	}
	var out strings.Builder
	write := func(s string) {
		out.WriteString(s)
		_, _ = io.WriteString(c.e.stdout, s)
	}
	interrupted := false
	events := st.Events()
recv:
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				break recv
			}
			write(ev.Text)
			if ev.Done {
				break recv
			}
		case <-c.intr:
			interrupted = true
			st.Close() // aborts the request; its pages are freed at once
			break recv
		}
	}
	res := st.Wait()
	fmt.Fprintln(c.e.stdout)
	switch {
	case interrupted:
		fmt.Fprintln(c.e.stderr, "(reply stopped)")
	case res.Err != nil && ctx.Err() == nil:
		fmt.Fprintf(c.e.stderr, "kvwarden chat: the reply failed: %s\n", cli.OneLine(res.Err))
	}
	c.history = append(c.history, chat.Message{Role: "assistant", Content: out.String()})
	return nil
}

// isTerminalReader reports whether r is a terminal (prompts are shown
// only then).
func isTerminalReader(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
