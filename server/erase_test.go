package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine"
)

// del sends DELETE path with key ("" : none).
func (ts *testServer) del(t *testing.T, path, key string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodDelete, ts.url+path, nil)
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

// TestEraseTenantKV: DELETE /v1/admin/tenants/{tenant}/kv needs an
// operator key; it erases that tenant's cached prefix (its next identical
// prompt is a miss, with the same output) and reports what it erased;
// another tenant keeps its hits; /metrics counts it.
func TestEraseTenantKV(t *testing.T) {
	const aliceKey, bobKey, adminKey = "alice-key-0123456789", "bob-key-0123456789", "admin-key-0123456789"
	admins, err := ParseAdminKeys(strings.NewReader(adminKey+"\n"), "admin")
	require.NoError(t, err)
	ts := start(t, setup{echo: true, keys: aliceKey + " alice\n" + bobKey + " bob\n",
		cfg:  engine.Config{KVPages: 32, MaxContext: 128, HostTierBytes: 1 << 20},
		opts: func(o *Options) { o.AdminKeys = admins }})
	prompt := tokPrompt(strings.Repeat("the long shared system prompt ", 2))
	complete := func(key string) (string, int) {
		t.Helper()
		resp, raw := ts.post(t, "/v1/completions", key, map[string]any{"prompt": prompt, "max_tokens": 3})
		require.Equal(t, 200, resp.StatusCode, "%s", raw)
		var out struct {
			Choices []struct{ Text string }
			Usage   usage
		}
		require.NoError(t, json.Unmarshal(raw, &out))
		cached := 0
		if d := out.Usage.PromptTokensDetails; d != nil {
			cached = d.CachedTokens
		}
		return out.Choices[0].Text, cached
	}
	textA, _ := complete(aliceKey)
	_, cached := complete(aliceKey)
	require.Positive(t, cached, "alice's second request hits her prefix")
	complete(bobKey)
	_, bobCached := complete(bobKey)
	require.Positive(t, bobCached)

	for _, tc := range []struct {
		key    string
		status int
	}{{"", 401}, {aliceKey, 403}} {
		resp, raw := ts.del(t, "/v1/admin/tenants/alice/kv", tc.key)
		require.Equal(t, tc.status, resp.StatusCode, "%s", raw)
	}
	resp, raw := ts.del(t, "/v1/admin/tenants/alice/kv", adminKey)
	require.Equal(t, 200, resp.StatusCode, "%s", raw)
	var res struct {
		Object            string `json:"object"`
		Tenant            string `json:"tenant"`
		Epoch             uint64 `json:"key_epoch"`
		PrefixDevicePages int    `json:"prefix_device_pages"`
	}
	require.NoError(t, json.Unmarshal(raw, &res))
	require.Equal(t, "tenant.kv.erasure", res.Object)
	require.Equal(t, "alice", res.Tenant)
	require.Equal(t, uint64(2), res.Epoch)
	require.GreaterOrEqual(t, res.PrefixDevicePages, cached/16, "every cached page of alice's prompt: %s", raw)

	text, cached := complete(aliceKey)
	require.Zero(t, cached, "erased: a miss")
	require.Equal(t, textA, text)
	_, cached = complete(bobKey)
	require.Equal(t, bobCached, cached, "bob is not affected")

	resp, raw = ts.get(t, "/metrics", adminKey)
	require.Equal(t, 200, resp.StatusCode)
	require.Contains(t, string(raw), "kvwarden_kv_tenant_erasures_total 1")
	require.Contains(t, string(raw), "kvwarden_kv_seal_failures_total")
}
