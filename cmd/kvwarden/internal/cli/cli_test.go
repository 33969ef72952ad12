package cli

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseSize(t *testing.T) {
	ok := map[string]int64{
		"0": 0, "4096": 4096, "512MiB": 512 << 20, "512mib": 512 << 20, "1GiB": 1 << 30, "1.5GiB": 3 << 29,
		"64KB": 64000, "2MB": 2e6, "1GB": 1e9, "8KiB": 8192, "100B": 100, " 3 MiB ": 3 << 20, "1g": 1 << 30,
	}
	for in, want := range ok {
		got, err := ParseSize(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "MiB", "-1", "-5MiB", "12XB", "1e400GiB", "NaN", "99999999999TiB", "1.2.3MB"} {
		_, err := ParseSize(bad)
		require.Error(t, err, bad)
	}
	require.Equal(t, "512MiB", FormatSize(512<<20))
	require.Equal(t, "1.5GiB", FormatSize(3<<29))
	require.Equal(t, "100B", FormatSize(100))
}

func TestParseInterleaved(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	j := fs.Bool("json", false, "")
	n := fs.Int("n", 0, "")
	pos, err := Parse(fs, []string{"a prompt", "--json", "-n", "3"})
	require.NoError(t, err)
	require.Equal(t, []string{"a prompt"}, pos)
	require.True(t, *j)
	require.Equal(t, 3, *n)
	pos, err = Parse(fs, []string{"-n", "2", "--", "--json"})
	require.NoError(t, err)
	require.Equal(t, []string{"--json"}, pos)
	_, err = Parse(fs, []string{"-n", "x"})
	require.True(t, IsUsage(err))
	require.Contains(t, err.Error(), "-n")
}

func TestCommonValidateNamesFlag(t *testing.T) {
	base := func() Common { return Common{Device: "auto", KVChecksum: "handoff", KVType: "f16"} }
	cases := map[string]func(*Common){
		"--device":           func(c *Common) { c.Device = "gpu" },
		"--threads":          func(c *Common) { c.Threads = -2 },
		"--page-size":        func(c *Common) { c.PageSize = 1 << 16 },
		"--kv-pages":         func(c *Common) { c.KVPages = -1 },
		"--kv-memory":        func(c *Common) { c.KVMemory = SizeValue{N: 0, Given: true} },
		"--kv-type":          func(c *Common) { c.KVType = "q8" },
		"--max-context":      func(c *Common) { c.MaxContext = -4 },
		"--max-batch-tokens": func(c *Common) { c.MaxBatchTokens = -1 },
		"--max-seqs":         func(c *Common) { c.MaxSeqs = -1 },
		"--kv-checksum":      func(c *Common) { c.KVChecksum = "" },
		"--host-compression": func(c *Common) { c.HostCompression = "gzip" },
		"--tokenizer":        func(c *Common) { c.Tokenizer = "x" },
		"--model":            func(c *Common) { c.Model = "/nonexistent" },
	}
	for name, mut := range cases {
		c := base()
		mut(&c)
		err := c.Validate()
		require.Error(t, err, name)
		require.True(t, IsUsage(err))
		require.Contains(t, err.Error(), name)
	}
	c := base()
	require.NoError(t, c.Validate())
	cfg := c.EngineConfig()
	require.Equal(t, "auto", cfg.Device)
	require.Equal(t, 0, cfg.Threads, "0: the engine picks the physical cores")

	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c = base()
	c.Register(fs)
	_, err := Parse(fs, []string{"--threads", "3"})
	require.NoError(t, err)
	require.Equal(t, 3, c.EngineConfig().Threads)
}

func TestApplyEnv(t *testing.T) {
	for _, c := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    int
		wantErr string
	}{
		{"default", nil, nil, 7, ""},
		{"environment", nil, map[string]string{"KVWARDEN_MAX_TOKENS": "3"}, 3, ""},
		{"flag wins", []string{"--max-tokens", "5"}, map[string]string{"KVWARDEN_MAX_TOKENS": "3"}, 5, ""},
		{"shorthand wins over the long name's variable", []string{"-n", "5"}, map[string]string{"KVWARDEN_MAX_TOKENS": "3"}, 5, ""},
		{"shorthands have no variable", nil, map[string]string{"KVWARDEN_N": "3"}, 7, ""},
		{"empty is unset", nil, map[string]string{"KVWARDEN_MAX_TOKENS": ""}, 7, ""},
		{"bad value names the variable", nil, map[string]string{"KVWARDEN_MAX_TOKENS": "many"}, 0, `KVWARDEN_MAX_TOKENS="many" (--max-tokens)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			n := fs.Int("max-tokens", 7, "")
			fs.IntVar(n, "n", 7, "")
			json := fs.Bool("json", false, "")
			_, err := Parse(fs, c.args)
			require.NoError(t, err)
			err = applyEnv(fs, func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
			if c.wantErr != "" {
				require.ErrorContains(t, err, c.wantErr)
				require.True(t, IsUsage(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, *n)
			require.False(t, *json)
		})
	}
	require.Equal(t, "KVWARDEN_KV_CHECKSUM", EnvName("kv-checksum"))
}
