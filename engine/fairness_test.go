package engine

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTenantFairness: one tenant's flood does not starve another. With 200
// requests of tenant A queued ahead of one of tenant B, B's request is
// placed second (right after the request A had placed first), where FCFS
// placed it last; A's own requests keep their order.
func TestTenantFairness(t *testing.T) {
	cfg := echoConfig(t, 32, 16)
	// One running at a time: the first step places A's first request
	// alone, and every other request is queued before the next placement.
	cfg.MaxSeqs = 1
	var (
		mu     sync.Mutex
		order  []uint64 // request ids as they are first placed
		seen   = map[uint64]bool{}
		gate   = make(chan struct{})
		closed bool
	)
	// The scheduler is held at its first state change (A's first request
	// entering the queue, perhaps with a few more taken in with it) until
	// every request is submitted: all of them are queued before the second
	// placement.
	cfg.th().Faults = &Faults{AbortAt: func(id uint64, st State) bool {
		<-gate
		if st == StatePrefilling {
			mu.Lock()
			if !seen[id] {
				seen[id] = true
				order = append(order, id)
			}
			mu.Unlock()
		}
		return false
	}}
	e := newEcho(t, cfg)
	release := func() {
		if !closed {
			closed = true
			close(gate)
		}
	}
	t.Cleanup(release)

	var streams []*Stream
	var aIDs []uint64
	for range 200 {
		st, err := e.Submit(t.Context(), Request{Prompt: "aaaa", Tenant: "A", MaxTokens: 2})
		require.NoError(t, err)
		streams = append(streams, st)
		aIDs = append(aIDs, st.ID())
	}
	b, err := e.Submit(t.Context(), Request{Prompt: "bb", Tenant: "B", MaxTokens: 2})
	require.NoError(t, err)
	streams = append(streams, b)
	release()
	for _, st := range streams {
		require.NoError(t, st.Wait().Err)
	}

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, order, 201)
	pos := 0
	for i, id := range order {
		if id == b.ID() {
			pos = i + 1
		}
	}
	t.Logf("B's request placed %d of 201", pos)
	require.Equal(t, []uint64{aIDs[0], b.ID()}, order[:2], "B's request is placed right after A's first, not after A's 200")
	var aOrder []uint64
	for _, id := range order {
		if id != b.ID() {
			aOrder = append(aOrder, id)
		}
	}
	require.Equal(t, aIDs, aOrder, "FCFS within a tenant")
}

// TestTenantRoundRobin: new requests are placed round-robin over the
// tenants with requests waiting, the tenant served longest ago (or never)
// first, FCFS within a tenant.
func TestTenantRoundRobin(t *testing.T) {
	cfg := echoConfig(t, 32, 16)
	cfg.MaxSeqs = 1
	var (
		mu    sync.Mutex
		order []string
		gate  = make(chan struct{})
		once  sync.Once
	)
	tenantOf := map[uint64]string{}
	cfg.th().Faults = &Faults{AbortAt: func(id uint64, st State) bool {
		<-gate
		if st == StatePrefilling {
			mu.Lock()
			order = append(order, tenantOf[id])
			mu.Unlock()
		}
		return false
	}}
	e := newEcho(t, cfg)
	release := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	var streams []*Stream
	for _, r := range []struct {
		tenant string
		n      int
	}{{"A", 4}, {"B", 4}, {"C", 1}} {
		for i := range r.n {
			st, err := e.Submit(t.Context(), Request{Prompt: "xy", Tenant: r.tenant, MaxTokens: 1})
			require.NoError(t, err)
			mu.Lock()
			tenantOf[st.ID()] = fmt.Sprintf("%s%d", r.tenant, i+1)
			mu.Unlock()
			streams = append(streams, st)
		}
	}
	release()
	for _, st := range streams {
		require.NoError(t, st.Wait().Err)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"A1", "B1", "C1", "A2", "B2", "A3", "B3", "A4", "B4"}, order)
}
