package main

import (
	"flag"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/cmd/kvwarden/internal/cli"
)

func TestTenantQuotaDefault(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		maxQueue int
		keys     bool
		want     int
	}{
		{"keys: a quarter of the default queue", nil, 0, true, 256},
		{"keys: a quarter of --max-queue", []string{"--max-queue", "40"}, 40, true, 10},
		{"keys: at least one", []string{"--max-queue", "2"}, 2, true, 1},
		{"keys: --tenant-quota wins", []string{"--tenant-quota", "7"}, 0, true, 7},
		{"keys: --tenant-quota 0 is unlimited", []string{"--tenant-quota", "0"}, 0, true, 0},
		{"no keys: unlimited", nil, 0, false, 0},
		{"no keys: --tenant-quota", []string{"--tenant-quota", "3"}, 0, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			quota := fs.Int("tenant-quota", 0, "")
			fs.Int("max-queue", 0, "")
			require.NoError(t, fs.Parse(tc.args))
			require.Equal(t, tc.want, tenantQuota(fs, *quota, tc.maxQueue, tc.keys))
		})
	}
}

func TestMemoryLimit(t *testing.T) {
	given := func(n int64) cli.SizeValue { return cli.SizeValue{N: n, Given: true} }
	for _, tc := range []struct {
		name    string
		env     string
		flag    cli.SizeValue
		want    int64
		wantSet bool
	}{
		{"default: engine + host tier + headroom", "", cli.SizeValue{}, 100<<20 + 1<<30 + memoryHeadroom, true},
		{"flag", "", given(3 << 30), 3 << 30, true},
		{"flag 0: none", "", given(0), math.MaxInt64, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, source, set := memoryLimit(tc.env, tc.flag, 100<<20, 1<<30)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.wantSet, set)
			require.NotEmpty(t, source)
		})
	}
	// GOMEMLIMIT wins over the flag: the runtime's own limit is kept.
	got, source, set := memoryLimit("2GiB", given(3<<30), 100<<20, 0)
	require.False(t, set)
	require.Equal(t, "GOMEMLIMIT", source)
	require.NotEqual(t, int64(3<<30), got)
}
