package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kvwarden/kvwarden/cmd/kvwarden/internal/cli"
	"github.com/kvwarden/kvwarden/engine/backend"
	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/internal/version"
)

// versionJSON is version --json.
type versionJSON struct {
	Version     string   `json:"version"`
	Commit      string   `json:"commit"`
	CommitTime  string   `json:"commit_time,omitempty"`
	Modified    bool     `json:"modified"`
	Go          string   `json:"go"`
	Platform    string   `json:"platform"`
	CPUFeatures []string `json:"cpu_features"`
	CPUKernels  string   `json:"cpu_kernels"`
	CPUCores    int      `json:"cpu_cores"`
	// CUDA repeats Devices["cuda"] for clients of the older output.
	CUDA    string            `json:"cuda"`
	Devices map[string]string `json:"devices"`
}

// runVersion prints the version, the commit it was built from, the Go
// version, the CPU features the kernels use and whether each registered
// device backend (CUDA) is usable.
func runVersion(_ context.Context, args []string, e *env) error {
	fs := newFlagSet("version")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, err := parseFlags(fs, args, "version [--json]", e.stderr)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("unexpected argument %q", pos[0])
	}
	v := version.Get()
	feats, kernels := version.CPUFeatures()
	// Every registered device backend with a probe (the CPU has its own
	// line): the registry, not this command, knows which devices exist.
	devices := map[string]string{}
	var lines []string
	for _, name := range backend.Names() {
		d, err := backend.Lookup(name)
		if err != nil || d.Probe == nil {
			continue
		}
		status, short := "available", ""
		if err := d.Probe(); err == nil && d.Describe != nil {
			status += ", " + d.Describe()
		} else if err != nil {
			status = "unavailable: " + cli.OneLine(err)
			// The text may list every library path searched: --json has it all.
			if s, _, cut := strings.Cut(status, "; searched"); cut {
				short = s + " (version --json lists the paths searched)"
			}
		}
		if short == "" {
			short = status
		}
		devices[name] = status
		lines = append(lines, fmt.Sprintf("%-7s %s\n", name+":", short))
	}
	if *asJSON {
		if feats == nil {
			feats = []string{}
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(versionJSON{Version: v.Version, Commit: v.Commit, CommitTime: v.Time, Modified: v.Modified,
			Go: v.GoVersion, Platform: v.Platform, CPUFeatures: feats, CPUKernels: kernels, CPUCores: ml.PhysicalCores(), CUDA: devices["cuda"], Devices: devices})
	}
	commit := v.ShortCommit()
	if v.Time != "" {
		commit += " (" + v.Time + ")"
	}
	fmt.Fprintf(e.stdout, "kvwarden %s\ncommit: %s\ngo:     %s %s\ncpu:    %s, %d physical cores\n%s",
		v.Version, commit, v.GoVersion, v.Platform, version.CPUSummary(), ml.PhysicalCores(), strings.Join(lines, ""))
	return nil
}
