package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// get sends GET path with key ("" : none) and returns the status and body.
func (ts *testServer) get(t *testing.T, path, key string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.url+path, nil)
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := ts.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, raw
}

// /metrics aggregates every tenant's traffic: tenant keys get 403 there,
// operator keys (--admin-keys) open it.
func TestMetricsNeedOperatorKey(t *testing.T) {
	const tenantKey, adminKey = "tenant-key-0123456789", "admin-key-0123456789"
	tenants := tenantKey + " alice\n"
	admins, err := ParseAdminKeys(strings.NewReader("# operators\n"+adminKey+"\n"), "admin")
	require.NoError(t, err)
	type try struct {
		key    string
		status int
	}
	cases := []struct {
		name   string
		keys   string
		admin  *Keys
		public bool
		tries  []try
	}{
		{"tenant and operator keys", tenants, admins, false,
			[]try{{"", 401}, {"wrong-key-0123456789", 401}, {tenantKey, 403}, {adminKey, 200}}},
		{"tenant keys only: nobody", tenants, nil, false,
			[]try{{"", 401}, {tenantKey, 403}, {adminKey, 401}}},
		{"open server, operator keys", "", admins, false,
			[]try{{"", 401}, {"wrong-key-0123456789", 401}, {adminKey, 200}}},
		{"open server", "", nil, false, []try{{"", 200}}},
		{"public metrics", tenants, admins, true, []try{{"", 200}, {tenantKey, 200}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := start(t, setup{echo: true, keys: tc.keys, publicMetrics: tc.public,
				opts: func(o *Options) { o.AdminKeys = tc.admin }})
			for _, tr := range tc.tries {
				resp, raw := ts.get(t, "/metrics", tr.key)
				require.Equal(t, tr.status, resp.StatusCode, "key %q: %s", tr.key, raw)
				if tr.status == 200 {
					require.Contains(t, string(raw), "kvwarden_kv_pages_capacity")
					continue
				}
				require.NotContains(t, string(raw), "kvwarden_kv_pages")
				code := map[int]string{401: "invalid_api_key", 403: "forbidden"}[tr.status]
				requireAPIError(t, resp, raw, tr.status, code)
			}
		})
	}

	// An operator key is not a tenant key: the API refuses it.
	ts := start(t, setup{echo: true, keys: tenants, opts: func(o *Options) { o.AdminKeys = admins }})
	resp, raw := ts.post(t, "/v1/completions", adminKey, map[string]any{"prompt": tokPrompt("hi"), "max_tokens": 1})
	requireAPIError(t, resp, raw, 401, "invalid_api_key")
}

func TestAdminKeyFile(t *testing.T) {
	k, err := ParseAdminKeys(strings.NewReader("# ops\nshort-ok1\n\nlong-enough-operator-key\n"), "admin")
	require.NoError(t, err)
	require.Equal(t, 2, k.Len())
	require.Equal(t, []int{2}, k.ShortKeyLines())
	for _, bad := range []string{"", "# none\n", "key-one-0123456789 tenant\n", "short\n", "dup-key-0123456789\ndup-key-0123456789\n"} {
		_, err := ParseAdminKeys(strings.NewReader(bad), "admin")
		require.Error(t, err, "%q", bad)
	}
	tenants, err := ParseKeys(strings.NewReader("long-enough-operator-key ops\nshort-ok2 bob\n"), "keys")
	require.NoError(t, err)
	require.Equal(t, []int{2}, tenants.ShortKeyLines())
	require.True(t, tenants.Shares(k))
	other, err := ParseKeys(strings.NewReader("another-key-0123456 bob\n"), "keys")
	require.NoError(t, err)
	require.False(t, other.Shares(k))
}

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Repeated 401s from one address make it wait: 429 with Retry-After, for
// every key (a valid one too, or a guesser would learn from the
// difference), until the bucket refills; other addresses are unaffected.
func TestAuthFailuresAreRateLimited(t *testing.T) {
	const good = "good-key-0123456789"
	ts := start(t, setup{echo: true, keys: good + " alice\n", opts: func(o *Options) {
		o.AuthFailBurst, o.AuthFailEvery = 3, 10*time.Second
	}})
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	ts.srv.authLim.setClock(clock.now)
	models := func(key string) (*http.Response, []byte) { return ts.get(t, "/v1/models", key) }

	for i := range 3 {
		resp, raw := models("wrong-key-" + fmt.Sprint(i))
		requireAPIError(t, resp, raw, 401, "invalid_api_key")
	}
	resp, raw := models("wrong-key-3")
	e := requireAPIError(t, resp, raw, 429, "too_many_auth_failures")
	require.Equal(t, "rate_limit_error", e.Error.Type)
	require.Equal(t, "10", resp.Header.Get("Retry-After"))
	resp, raw = models(good)
	requireAPIError(t, resp, raw, 429, "too_many_auth_failures")
	resp, raw = ts.post(t, "/v1/completions", "", map[string]any{"prompt": tokPrompt("hi"), "max_tokens": 1})
	requireAPIError(t, resp, raw, 429, "too_many_auth_failures")
	resp, raw = ts.get(t, "/metrics", testAdminKey)
	requireAPIError(t, resp, raw, 429, "too_many_auth_failures")

	// Another address has its own bucket.
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	defer other.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, ts.url+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer wrong-key-x")
	if r2, err := other.Do(req); err == nil {
		r2.Body.Close()
		require.Equal(t, http.StatusUnauthorized, r2.StatusCode)
	} else {
		t.Logf("cannot dial from 127.0.0.2: %v", err)
	}

	clock.advance(4 * time.Second)
	resp, _ = models(good)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "6", resp.Header.Get("Retry-After"))

	clock.advance(6 * time.Second) // one failure's worth refilled
	resp, raw = models(good)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	resp, _ = models(good)
	require.Equal(t, http.StatusOK, resp.StatusCode, "valid keys spend nothing")
	resp, raw = models("wrong-key-4")
	requireAPIError(t, resp, raw, 401, "invalid_api_key")
	resp, raw = models(good)
	requireAPIError(t, resp, raw, 429, "too_many_auth_failures")

	clock.advance(time.Hour)
	resp, _ = models(good)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, scrape(t, ts), `kvwarden_rejections_total{reason="auth_rate_limited"} 6`)
}

// The limiter's memory is bounded: past authLimitEntries addresses it
// forgets the ones that refilled, and otherwise puts newcomers in one
// shared bucket.
func TestAuthLimiterIsBounded(t *testing.T) {
	l := newAuthLimiter(2, time.Second)
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	l.now = clock.now
	for i := range authLimitEntries + 500 {
		l.fail(fmt.Sprint("10.0.", i/256, ".", i%256))
	}
	require.Len(t, l.buckets, authLimitEntries)
	// Newcomers share the overflow bucket: 500 failures emptied it.
	require.Positive(t, l.wait("192.0.2.1"))
	require.Zero(t, l.wait("10.0.0.0"), "one failure of two: still allowed")
	l.fail("10.0.0.0")
	require.Positive(t, l.wait("10.0.0.0"))

	clock.advance(time.Minute) // everything refilled
	l.fail("192.0.2.1")        // the sweep frees the refilled entries
	require.Len(t, l.buckets, 1)
	require.Zero(t, l.wait("192.0.2.1"))
	require.Zero(t, l.wait("10.0.0.0"))

	require.Nil(t, newAuthLimiter(-1, 0), "a negative burst turns the limit off")
	var off *authLimiter
	off.fail("x")
	require.Zero(t, off.wait("x"))
}
