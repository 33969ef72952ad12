package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kvwarden/kvwarden/cmd/kvwarden/internal/cli"
	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/internal/device/cuda"
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
	CUDA        string   `json:"cuda"`
}

// runVersion prints the version, the commit it was built from, the Go
// version, the CPU features the kernels use and whether CUDA is usable.
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
	cudaStatus, cudaShort := "available, driver "+cuda.DriverPath(), ""
	if err := cuda.Available(); err != nil {
		cudaStatus = "unavailable: " + cli.OneLine(err)
		// The text lists every library path searched: --json has it all.
		if short, _, cut := strings.Cut(cudaStatus, "; searched"); cut {
			cudaShort = short + " (version --json lists the paths searched)"
		}
	}
	if *asJSON {
		if feats == nil {
			feats = []string{}
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(versionJSON{Version: v.Version, Commit: v.Commit, CommitTime: v.Time, Modified: v.Modified,
			Go: v.GoVersion, Platform: v.Platform, CPUFeatures: feats, CPUKernels: kernels, CPUCores: ml.PhysicalCores(), CUDA: cudaStatus})
	}
	commit := v.ShortCommit()
	if v.Time != "" {
		commit += " (" + v.Time + ")"
	}
	if cudaShort == "" {
		cudaShort = cudaStatus
	}
	fmt.Fprintf(e.stdout, "kvwarden %s\ncommit: %s\ngo:     %s %s\ncpu:    %s, %d physical cores\ncuda:   %s\n",
		v.Version, commit, v.GoVersion, v.Platform, version.CPUSummary(), ml.PhysicalCores(), cudaShort)
	return nil
}
