// Package version says which kvwarden this is: its version, the commit it
// was built from (the Go toolchain's VCS stamp), the Go version, and the
// CPU features the kernels can use. The kvwarden command prints it
// (kvwarden --version), the server reports it (/props build_info, the
// system_fingerprint).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"golang.org/x/sys/cpu"
)

// Version is the release version. Release builds set it with
//
//	go build -ldflags "-X github.com/kvwarden/kvwarden/internal/version.Version=v1.2.3"
//
// Without it, the module version of a `go install ...@v1.2.3` build is
// used, else "devel".
var Version = ""

// Info describes a build.
type Info struct {
	Version   string // v1.2.3, or "devel"
	Commit    string // VCS revision ("" when the build has no VCS stamp)
	Time      string // commit time, RFC 3339 ("" when unknown)
	Modified  bool   // built from a work tree with uncommitted changes
	GoVersion string
	Platform  string // GOOS/GOARCH
}

// Get reads the build's information (runtime/debug.ReadBuildInfo).
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	return infoFrom(bi, ok)
}

func infoFrom(bi *debug.BuildInfo, ok bool) Info {
	i := Info{Version: Version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if ok && bi != nil {
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			i.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Commit = s.Value
			case "vcs.time":
				i.Time = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	if i.Version == "" {
		i.Version = "devel"
	}
	return i
}

// ShortCommit is the first 12 characters of Commit, with "-dirty" when
// Modified; "unknown" without a VCS stamp.
func (i Info) ShortCommit() string {
	c := i.Commit
	if c == "" {
		return "unknown"
	}
	if len(c) > 12 {
		c = c[:12]
	}
	if i.Modified {
		c += "-dirty"
	}
	return c
}

// String is the one-line form: "kvwarden v1.2.3 (commit 0123456789ab,
// go1.26.0, linux/amd64)".
func (i Info) String() string {
	return fmt.Sprintf("kvwarden %s (commit %s, %s, %s)", i.Version, i.ShortCommit(), i.GoVersion, i.Platform)
}

// BuildInfo is llama-server's build_info form: "VERSION-COMMIT".
func (i Info) BuildInfo() string { return i.Version + "-" + i.ShortCommit() }

// CPUFeatures lists the CPU features the kernels look for that this CPU
// has (amd64: avx2, fma, f16c, avx512f/bw/vl/dq, avx512vnni; arm64:
// asimd, fphp, asimdhp, asimddp), and which kernel family that selects.
func CPUFeatures() (features []string, kernels string) {
	switch runtime.GOARCH {
	case "amd64":
		x := cpu.X86
		for _, f := range []struct {
			name string
			has  bool
		}{
			{"avx2", x.HasAVX2}, {"fma", x.HasFMA}, {"f16c", x.HasF16C},
			{"avx512f", x.HasAVX512F}, {"avx512bw", x.HasAVX512BW}, {"avx512vl", x.HasAVX512VL},
			{"avx512dq", x.HasAVX512DQ}, {"avx512vnni", x.HasAVX512VNNI},
		} {
			if f.has {
				features = append(features, f.name)
			}
		}
		// The same conditions as engine/ml's kernel choice.
		switch {
		case x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512DQ:
			kernels = "avx512"
		case x.HasAVX2 && x.HasFMA && x.HasF16C:
			kernels = "avx2"
		default:
			kernels = "generic"
		}
	case "arm64":
		a := cpu.ARM64
		for _, f := range []struct {
			name string
			has  bool
		}{{"asimd", a.HasASIMD}, {"fphp", a.HasFPHP}, {"asimdhp", a.HasASIMDHP}, {"asimddp", a.HasASIMDDP}} {
			if f.has {
				features = append(features, f.name)
			}
		}
		kernels = "generic"
	default:
		kernels = "generic"
	}
	return features, kernels
}

// CPUSummary is CPUFeatures on one line: "avx2 fma f16c (kernels: avx2)".
func CPUSummary() string {
	f, k := CPUFeatures()
	list := strings.Join(f, " ")
	if list == "" {
		list = "none of note"
	}
	return fmt.Sprintf("%s (kernels: %s)", list, k)
}
