package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// dialRaw opens a TCP connection to ts from the loopback address local
// ("" : any).
func dialRaw(t *testing.T, ts *testServer, local string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	c, err := d.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil && local != "" {
		t.Skipf("cannot dial from %s: %v", local, err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// readUntilClosed reads c until the server closes it; it fails the test
// if that takes more than 10 s (no lower bound: only the server closing
// the connection matters, not when).
func readUntilClosed(t *testing.T, c net.Conn) string {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	got, err := io.ReadAll(c)
	require.NoError(t, err, "the server did not close the connection; read so far: %q", got)
	return string(got)
}

// A client that sends its headers and part of a body is answered and
// closed at the body deadline, and one without a valid key gets its 401
// and is closed whether or not a deadline is set (before, both kept the
// connection open for as long as the client liked, and the 401 was never
// sent: the server waited for the body before answering).
func TestStalledBodyIsClosed(t *testing.T) {
	keys := "secret-aaaa-0123456789 alice\n"
	cases := []struct {
		name    string
		key     string
		timeout time.Duration
		status  string
	}{
		{"valid key, deadline", "secret-aaaa-0123456789", 200 * time.Millisecond, "408"},
		{"no key, deadline", "", 200 * time.Millisecond, "401"},
		{"wrong key, deadline", "wrong-key-0123456789", 200 * time.Millisecond, "401"},
		{"no key, no deadline", "", -1, "401"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := start(t, setup{echo: true, keys: keys, opts: func(o *Options) { o.BodyTimeout = tc.timeout }})
			c := dialRaw(t, ts, "")
			req := "POST /v1/completions HTTP/1.1\r\nHost: kvwarden\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
			if tc.key != "" {
				req += "Authorization: Bearer " + tc.key + "\r\n"
			}
			_, err := io.WriteString(c, req+"\r\n"+`{"prompt": "never finished`)
			require.NoError(t, err)
			got := readUntilClosed(t, c)
			require.True(t, strings.HasPrefix(got, "HTTP/1.1 "+tc.status+" "), "got %q", got)
		})
	}
}

// The body deadline bounds reading the request only: a streaming
// response that outlives it runs to the end, and the connection stays
// usable for the next request.
func TestStreamingOutlivesBodyTimeout(t *testing.T) {
	ts := start(t, setup{echo: true, delay: 20 * time.Millisecond, opts: func(o *Options) { o.BodyTimeout = 50 * time.Millisecond }})
	for range 2 { // the second request reuses the connection
		began := time.Now()
		resp, raw := ts.post(t, "/v1/completions", "", map[string]any{"prompt": tokPrompt("ab"), "max_tokens": 10, "stream": true})
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
		events, done := sse(t, bytes.NewReader(raw))
		require.True(t, done, "the stream ends with [DONE]: %s", raw)
		text, finish := streamText(t, events, false)
		require.Equal(t, "length", finish)
		require.Len(t, text, 10)
		require.Greater(t, time.Since(began), 50*time.Millisecond, "the stream outlived the body deadline")
	}
}

// Connections over the global cap are answered 503 and closed; the open
// ones keep working, and a slot freed is usable again.
func TestConnectionCap(t *testing.T) {
	ts := start(t, setup{echo: true, opts: func(o *Options) { o.MaxConns, o.MaxConnsPerIP = 3, -1 }})
	conns := make([]net.Conn, 3)
	for i := range conns {
		conns[i] = dialRaw(t, ts, "")
	}
	// The listener accepts in order: the fourth is the one over the cap.
	extra := dialRaw(t, ts, "")
	got := readUntilClosed(t, extra)
	require.True(t, strings.HasPrefix(got, "HTTP/1.1 503 "), "got %q", got)
	require.Contains(t, got, "Retry-After: 1")
	require.Contains(t, got, "too_many_connections")

	requireHealthy(t, conns[0])
	require.NoError(t, conns[1].Close())
	waitOpen(t, ts, "127.0.0.1", 2)
	again := dialRaw(t, ts, "")
	requireHealthy(t, again)
	require.NoError(t, again.Close())
	waitOpen(t, ts, "127.0.0.1", 2)
	require.Contains(t, scrape(t, ts), `kvwarden_rejections_total{reason="too_many_connections"} 1`)
}

// The per-address cap counts each client address on its own.
func TestConnectionCapPerClient(t *testing.T) {
	ts := start(t, setup{echo: true, opts: func(o *Options) { o.MaxConns, o.MaxConnsPerIP = -1, 2 }})
	a, b := dialRaw(t, ts, "127.0.0.1"), dialRaw(t, ts, "127.0.0.1")
	waitOpen(t, ts, "127.0.0.1", 2)
	got := readUntilClosed(t, dialRaw(t, ts, "127.0.0.1"))
	require.True(t, strings.HasPrefix(got, "HTTP/1.1 503 "), "got %q", got)
	require.Contains(t, got, "too_many_connections_per_client")
	// Another address is not affected.
	requireHealthy(t, dialRaw(t, ts, "127.0.0.2"))
	requireHealthy(t, a)
	requireHealthy(t, b)
}

// waitOpen waits until the server counts want open connections of ip.
func waitOpen(t *testing.T, ts *testServer, ip string, want int) {
	t.Helper()
	require.Eventually(t, func() bool {
		cl := ts.srv.conns.Load()
		if cl == nil {
			return false // Serve has not started yet
		}
		_, n := cl.open(ip)
		return n == want
	}, 10*time.Second, time.Millisecond)
}

// requireHealthy sends GET /healthz on c and wants 200.
func requireHealthy(t *testing.T, c net.Conn) {
	t.Helper()
	_, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: kvwarden\r\n\r\n")
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestClientKey(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:5000":               "127.0.0.1",
		"[::ffff:10.0.0.1]:80":         "10.0.0.1",
		"[2001:db8:1:2:3:4:5:6]:443":   "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443":   "2001:db8:1:2::/64",
		"[2001:db8:1:3::1]:443":        "2001:db8:1:3::/64",
		"not an address":               "not an address",
		fmt.Sprintf("%s:1", "[::1]"):   "::/64",
		"192.168.1.20:65535":           "192.168.1.20",
		"[fe80::1%eth0]:8080":          "fe80::1%eth0",
		"[2001:db8::1]:8080":           "2001:db8::/64",
		"[2001:db8:0:0:1::1]:8080":     "2001:db8::/64",
		"[2001:db8:0:1::1]:8080":       "2001:db8:0:1::/64",
		"[2001:0db8:0000:0001::]:1234": "2001:db8:0:1::/64",
	} {
		require.Equal(t, want, clientKey(addr), addr)
	}
}
