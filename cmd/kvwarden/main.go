// Command kvwarden generates text, serves an OpenAI-compatible HTTP API to
// many tenants, audits a deployment's KV isolation, and pulls models from
// Hugging Face.
//
//	kvwarden generate [flags] [PROMPT]
//	kvwarden serve    [flags] --addr 127.0.0.1:8080
//	kvwarden audit    [flags] [--json]
//	kvwarden pull     OWNER/REPO[:QUANT|:FILE.gguf]
//	kvwarden models
//	kvwarden chat     [flags]
//	kvwarden version  [--json]
//
// Run "kvwarden COMMAND -h" for the flags of a command. Exit status: 0 on
// success, 1 on a failure (the engine refused to start, a request failed,
// an audit that is not clean), 2 on a bad command line, 3 when generate's
// request was rejected at admission.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/kvwarden/kvwarden/cmd/kvwarden/internal/cli"
)

func main() {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if len(os.Args) > 1 && os.Args[1] == "chat" {
		sigs = sigs[1:] // chat takes Ctrl-C itself: it stops a reply, not the program
	}
	ctx, stop := signal.NotifyContext(context.Background(), sigs...)
	code := run(ctx, os.Args[1:], &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr})
	stop()
	os.Exit(code)
}

// env is the process environment a command runs in; tests substitute it.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// ready, when set, is called by serve with the address it listens on
	// once the model is loaded; listening when it serves, before the
	// model starts loading (which waits for listening to return).
	ready, listening func(addr string)
	// interrupts, when set, replaces chat's Ctrl-C (os.Interrupt) signals.
	interrupts <-chan os.Signal
}

const usage = `kvwarden: an embeddable LLM inference engine with KV isolation by construction

usage:
  kvwarden generate [flags] [PROMPT]     generate text (prompt from the argument, --prompt or stdin)
  kvwarden serve [flags] --addr HOST:PORT  serve the OpenAI-compatible HTTP API
  kvwarden audit [flags] [--json]        run a KV isolation audit
  kvwarden pull OWNER/REPO[:QUANT]       download a GGUF from Hugging Face into the cache
  kvwarden models                        list the cached models
  kvwarden chat [--model M]              talk with a model in the terminal
  kvwarden embed [flags] [TEXT...]       embeddings of texts (or, with --query, rerank scores)
  kvwarden version | --version           version, commit, Go, CPU features, CUDA status

Run "kvwarden COMMAND -h" for a command's flags. Every flag can also be set
through the environment: --max-context is KVWARDEN_MAX_CONTEXT (upper case,
dashes as underscores); the command line wins over the environment.
`

func run(ctx context.Context, args []string, e *env) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage)
		return cli.ExitUsage
	}
	cmd, rest := args[0], args[1:]
	var f func(context.Context, []string, *env) error
	switch cmd {
	case "generate", "gen":
		cmd, f = "generate", runGenerate
	case "serve":
		f = runServe
	case "audit":
		f = runAudit
	case "pull":
		f = runPull
	case "models":
		f = runModels
	case "chat":
		f = runChat
	case "embed":
		f = runEmbed
	case "version", "--version", "-version", "-V":
		cmd, f = "version", runVersion
	case "help", "-h", "-help", "--help":
		fmt.Fprint(e.stdout, usage)
		return cli.ExitOK
	default:
		fmt.Fprintf(e.stderr, "kvwarden: unknown command %q\n\n%s", cmd, usage)
		return cli.ExitUsage
	}
	err := f(ctx, rest, e)
	return exitCode(e.stderr, cmd, err)
}

// exitError carries an exit status; its message (if any) was printed.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func exitCode(stderr io.Writer, cmd string, err error) int {
	if err == nil {
		return cli.ExitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK
	}
	var xe *exitError
	if errors.As(err, &xe) {
		if xe.msg != "" {
			fmt.Fprintf(stderr, "kvwarden %s: %s\n", cmd, xe.msg)
		}
		return xe.code
	}
	if cli.IsUsage(err) {
		fmt.Fprintf(stderr, "kvwarden %s: %s\n(run \"kvwarden %s -h\" for usage)\n", cmd, cli.OneLine(err), cmd)
		return cli.ExitUsage
	}
	fmt.Fprintf(stderr, "kvwarden %s: %s\n", cmd, cli.OneLine(err))
	return cli.ExitFailure
}

// newFlagSet makes a flag set that reports nothing itself: parse errors are
// reported once, by exitCode, and -h by parseFlags.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args; on -h it prints the synopsis and the flags.
func parseFlags(fs *flag.FlagSet, args []string, synopsis string, stderr io.Writer) ([]string, error) {
	pos, err := cli.Parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stderr, "usage: kvwarden %s\n\nflags:\n", synopsis)
		cli.PrintFlags(stderr, fs)
		fmt.Fprintf(stderr, "\n%s", cli.EnvHelp)
	}
	return pos, err
}
