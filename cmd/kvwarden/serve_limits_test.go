package main

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/server"
)

func TestWarnExposure(t *testing.T) {
	long, err := server.ParseKeys(strings.NewReader("sk-0123456789abcdef alice\n"), "keys")
	require.NoError(t, err)
	short, err := server.ParseKeys(strings.NewReader("sk-0123456789abcdef alice\nsk-short bob\n"), "keys")
	require.NoError(t, err)
	cases := []struct {
		name string
		ip   string
		keys *server.Keys
		want []string // warnings expected; none when empty
	}{
		{"loopback, open", "127.0.0.1", nil, nil},
		{"ipv6 loopback, open", "::1", nil, nil},
		{"all interfaces, open", "0.0.0.0", nil, []string{"non-loopback address without --api-keys"}},
		{"ipv6 any, open", "::", nil, []string{"non-loopback address without --api-keys"}},
		{"lan address, open", "192.168.1.10", nil, []string{"non-loopback address without --api-keys"}},
		{"all interfaces, long keys", "0.0.0.0", long, nil},
		{"all interfaces, a short key", "0.0.0.0", short, []string{"--api-keys: keys shorter than 16 characters", "lines=[2]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			warnExposure(log, &net.TCPAddr{IP: net.ParseIP(tc.ip), Port: 8080}, server.Options{Keys: tc.keys}, "keys", "")
			if len(tc.want) == 0 {
				require.Empty(t, buf.String())
			}
			for _, w := range tc.want {
				require.Contains(t, buf.String(), w)
			}
		})
	}
}

// An operator key may not also be a tenant key.
func TestServeAdminKeysMustBeSeparate(t *testing.T) {
	dir := t.TempDir()
	keys, admin := filepath.Join(dir, "keys"), filepath.Join(dir, "admin")
	require.NoError(t, os.WriteFile(keys, []byte("sk-shared-0123456789 alice\n"), 0o600))
	require.NoError(t, os.WriteFile(admin, []byte("sk-shared-0123456789\n"), 0o600))
	r := runCmd(t, "", "serve", "--addr", "127.0.0.1:0", "--api-keys", keys, "--admin-keys", admin)
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stderr, "also a tenant key")
}
