package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/kvwarden/kvwarden/cmd/kvwarden/internal/cli"
	"github.com/kvwarden/kvwarden/internal/hub"
)

// runPull downloads a model from a Hugging Face hub into the cache and
// prints its path.
func runPull(ctx context.Context, args []string, e *env) error {
	fs := newFlagSet("pull")
	cacheDir := fs.String("cache-dir", "", "cache `directory` (default $KVWARDEN_CACHE_DIR, else $XDG_CACHE_HOME/kvwarden)")
	quiet := fs.Bool("quiet", false, "no progress output")
	unverified := fs.Bool("allow-unverified", false, "download a file the hub gives no size or no SHA-256/git digest for (refused otherwise: it cannot be checked)")
	pos, err := parseFlags(fs, args, "pull [flags] OWNER/REPO[:QUANT|:FILE.gguf][@REVISION] | hf://OWNER/REPO/FILE.gguf", e.stderr)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return cli.Usagef("want one model reference, e.g. bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M")
	}
	ref, err := hub.ParseRef(pos[0])
	if err != nil {
		return cli.Usagef("%v", err)
	}
	c, err := hub.New(*cacheDir)
	if err != nil {
		return err
	}
	c.AllowUnverified = *unverified
	if !*quiet {
		c.Progress = cli.HubProgress(e.stderr)
	}
	m, err := c.Pull(ctx, ref)
	if err != nil {
		return err
	}
	if !*quiet {
		fmt.Fprintf(e.stderr, "%s: %s, sha256 %s\n", m.Ref(), cli.FormatSize(m.Size), m.SHA256)
	}
	fmt.Fprintln(e.stdout, m.Path)
	return nil
}

// runModels lists the cache.
func runModels(_ context.Context, args []string, e *env) error {
	fs := newFlagSet("models")
	cacheDir := fs.String("cache-dir", "", "cache `directory` (default $KVWARDEN_CACHE_DIR, else $XDG_CACHE_HOME/kvwarden)")
	asJSON := fs.Bool("json", false, "print a JSON array")
	pos, err := parseFlags(fs, args, "models [--json] [--cache-dir DIR]", e.stderr)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("unexpected argument %q", pos[0])
	}
	c, err := hub.New(*cacheDir)
	if err != nil {
		return err
	}
	list, err := c.List()
	if err != nil {
		return err
	}
	parts, err := c.Partials()
	if err != nil {
		return err
	}
	if *asJSON {
		type row struct {
			hub.Model
			Ref  string `json:"ref"`
			Path string `json:"path"`
		}
		rows := make([]row, 0, len(list))
		for _, m := range list {
			rows = append(rows, row{Model: m, Ref: m.Ref().String(), Path: m.Path})
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(list) == 0 {
		fmt.Fprintf(e.stderr, "no models in %s (kvwarden pull OWNER/REPO:QUANT adds one)\n", c.CacheDir)
	} else {
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MODEL\tSIZE\tPULLED\tPATH")
		for _, m := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Ref(), cli.FormatSize(m.Size), m.Pulled.Format("2006-01-02 15:04"), m.Path)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, p := range parts {
		fmt.Fprintf(e.stderr, "incomplete download (pull again to resume): %s, %s\n", p.Path, cli.FormatSize(p.Bytes))
	}
	return nil
}
