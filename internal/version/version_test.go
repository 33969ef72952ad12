package version

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestInfoFrom(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	for _, c := range []struct {
		name       string
		bi         *debug.BuildInfo
		ok         bool
		ldflags    string
		want       string
		wantCommit string
	}{
		{"stamped module build", stamped, true, "", "kvwarden v1.2.3 (commit 0123456789ab-dirty, go1.26.0, " + runtime.GOOS + "/" + runtime.GOARCH + ")", "0123456789ab-dirty"},
		{"ldflags wins", stamped, true, "v9.9.9", "kvwarden v9.9.9 (commit 0123456789ab-dirty, go1.26.0, " + runtime.GOOS + "/" + runtime.GOARCH + ")", "0123456789ab-dirty"},
		{"devel without vcs", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}, true, "",
			"kvwarden devel (commit unknown, go1.26.0, " + runtime.GOOS + "/" + runtime.GOARCH + ")", "unknown"},
		{"no build info", nil, false, "", "kvwarden devel (commit unknown, " + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")", "unknown"},
	} {
		t.Run(c.name, func(t *testing.T) {
			old := Version
			Version = c.ldflags
			defer func() { Version = old }()
			i := infoFrom(c.bi, c.ok)
			require.Equal(t, c.want, i.String())
			require.Equal(t, c.wantCommit, i.ShortCommit())
			require.Equal(t, i.Version+"-"+c.wantCommit, i.BuildInfo())
		})
	}
}

func TestCPUFeatures(t *testing.T) {
	f, k := CPUFeatures()
	require.Contains(t, []string{"avx512", "avx2", "generic"}, k)
	if k != "generic" {
		require.Contains(t, f, "avx2", "AVX kernels imply AVX2")
	}
	require.Contains(t, CPUSummary(), "(kernels: "+k+")")
}
