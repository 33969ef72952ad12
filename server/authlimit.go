package server

import (
	"math"
	"net/http"
	"sync"
	"time"
)

// Defaults of the limit on failed authentications per client address
// (Options.AuthFailBurst, AuthFailEvery when 0).
const (
	// DefaultAuthFailBurst is how many failed authentications a client
	// address may make in a row before it gets 429.
	DefaultAuthFailBurst = 10
	// DefaultAuthFailEvery is how often one more failure is allowed after
	// that (the bucket's refill).
	DefaultAuthFailEvery = 6 * time.Second
	// authLimitEntries bounds the addresses tracked at once, so the
	// limiter itself cannot be grown into a memory exhaustion.
	authLimitEntries = 4096
)

// authLimiter is a token bucket per client address, spent by failed
// authentications (401). An address whose bucket is empty gets 429 with
// Retry-After on every request that needs a key, valid or not, until the
// bucket refills: answering a valid key while refusing invalid ones would
// not slow a guesser down.
type authLimiter struct {
	burst float64
	every time.Duration
	now   func() time.Time // the clock; tests replace it

	mu       sync.Mutex
	buckets  map[string]*bucket
	overflow bucket // shared by addresses that found the map full
}

type bucket struct {
	tokens float64
	at     time.Time // when tokens was computed
}

// newAuthLimiter returns nil (no limit) for burst < 0.
func newAuthLimiter(burst int, every time.Duration) *authLimiter {
	if burst < 0 {
		return nil
	}
	if burst == 0 {
		burst = DefaultAuthFailBurst
	}
	if every <= 0 {
		every = DefaultAuthFailEvery
	}
	return &authLimiter{burst: float64(burst), every: every, now: time.Now, buckets: map[string]*bucket{},
		overflow: bucket{tokens: float64(burst)}}
}

// refill brings b up to now.
func (l *authLimiter) refill(b *bucket, now time.Time) {
	if !b.at.IsZero() && now.After(b.at) {
		b.tokens = math.Min(l.burst, b.tokens+float64(now.Sub(b.at))/float64(l.every))
	}
	b.at = now
}

// setClock replaces the clock (tests).
func (l *authLimiter) setClock(now func() time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.now = now
}

// wait is how long key must wait before its next authentication; 0: now.
func (l *authLimiter) wait(key string) time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) < authLimitEntries {
			return 0 // a full bucket, not stored
		}
		b = &l.overflow
	}
	now := l.now()
	l.refill(b, now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) * float64(l.every))
}

// fail spends a token of key.
func (l *authLimiter) fail(key string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= authLimitEntries {
			l.sweep(now)
		}
		if len(l.buckets) < authLimitEntries {
			b = &bucket{tokens: l.burst, at: now}
			l.buckets[key] = b
		} else {
			b = &l.overflow
		}
	}
	l.refill(b, now)
	b.tokens = math.Max(0, b.tokens-1)
}

// sweep forgets the addresses whose bucket refilled: they are the same as
// addresses never seen.
func (l *authLimiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if l.refill(b, now); b.tokens >= l.burst {
			delete(l.buckets, k)
		}
	}
}

// tooManyFailures is the answer to an address that must wait d.
func tooManyFailures(d time.Duration) *apiError {
	return &apiError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: strp("too_many_auth_failures"),
		Reason: "auth_rate_limited", RetryAfter: int(math.Ceil(d.Seconds())),
		Message: "too many requests with a missing or invalid API key from this address; retry later"}
}
