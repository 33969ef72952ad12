package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Defaults of the connection and body limits (Options.BodyTimeout,
// MaxConns, MaxConnsPerIP when 0).
const (
	// DefaultBodyTimeout is how long a client has to send a request body,
	// counted from the end of its headers.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultHeaderTimeout is how long a client has to send request headers.
	DefaultHeaderTimeout = 10 * time.Second
	// DefaultMaxConns caps the open connections Serve accepts.
	DefaultMaxConns = 4096
	// DefaultMaxConnsPerIP caps the open connections of one client
	// address (an IPv6 client: its /64).
	DefaultMaxConnsPerIP = 512
)

// refusedBodyGrace is how long the server still reads the body of a
// request it refused without reading it (401, 405, 503, ...): a client
// that sent it whole keeps its connection; one that stalls is closed.
const refusedBodyGrace = time.Second

func (o Options) bodyTimeout() time.Duration {
	switch {
	case o.BodyTimeout < 0:
		return 0
	case o.BodyTimeout == 0:
		return DefaultBodyTimeout
	}
	return o.BodyTimeout
}

func (o Options) maxConns() (total, perIP int) {
	total, perIP = o.MaxConns, o.MaxConnsPerIP
	if total == 0 {
		total = DefaultMaxConns
	}
	if perIP == 0 {
		perIP = DefaultMaxConnsPerIP
	}
	return max(total, 0), max(perIP, 0)
}

// bodyWatch notes how reading a request body ended.
type bodyWatch struct {
	io.ReadCloser
	eof bool
	err error
}

func (b *bodyWatch) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil:
		b.err = err
	}
	return n, err
}

// guardBody bounds the time to read r's body: a read deadline of
// BodyTimeout from now on the connection (the server clears it itself
// once the body is read, so a long streaming response is not cut). The
// returned finish runs after the handler: a body the handler left unread
// (a request refused before its body mattered) gets only refusedBodyGrace
// more, so a stalled client cannot hold the connection (and delay its
// 401) until the deadline.
func (s *Server) guardBody(w http.ResponseWriter, r *http.Request) (*http.Request, func()) {
	if r.Body == nil || r.Body == http.NoBody {
		return r, func() {}
	}
	rc := http.NewResponseController(w)
	if s.bodyTimeout > 0 {
		// Not supported (a wrapping ResponseWriter without Unwrap):
		// the embedding server's own timeouts apply.
		_ = rc.SetReadDeadline(time.Now().Add(s.bodyTimeout))
	}
	watch := &bodyWatch{ReadCloser: r.Body}
	r2 := r.WithContext(r.Context())
	r2.Body = watch
	return r2, func() {
		switch {
		case watch.eof:
		case watch.err != nil:
			_ = rc.SetReadDeadline(time.Now()) // already failed: close now
		default:
			grace := refusedBodyGrace
			if s.bodyTimeout > 0 {
				grace = min(grace, s.bodyTimeout)
			}
			_ = rc.SetReadDeadline(time.Now().Add(grace))
		}
	}
}

// bodyReadError maps an error reading a request body: a deadline is 408.
func bodyReadError(err error) *apiError {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return &apiError{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: strp("request_timeout"),
			Reason: "body_timeout", Message: "the request body did not arrive in time"}
	}
	return badRequest("", "", "reading the request body: %v", err)
}

// clientKey is the address a client is counted under: its IP, or the /64
// of an IPv6 address (one host usually holds a whole /64).
func clientKey(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}

// connLimiter is a net.Listener that caps open connections, in all and
// per client address. A connection over a cap is answered with a bare 503
// and closed, without reading its request, so a flood of idle connections
// cannot exhaust file descriptors. Accepted connections are handed to the
// http.Server as they are (a *tls.Conn stays one); its ConnState hook
// gives their slot back when they close or are hijacked.
type connLimiter struct {
	net.Listener
	max, perIP int // 0: no cap
	log        *slog.Logger
	refused    func(why string)

	mu    sync.Mutex
	total int
	byIP  map[string]int
}

func newConnLimiter(ln net.Listener, total, perIP int, log *slog.Logger, refused func(string)) *connLimiter {
	return &connLimiter{Listener: ln, max: total, perIP: perIP, log: log, refused: refused, byIP: map[string]int{}}
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := clientKey(c.RemoteAddr().String())
		if why := l.admit(key); why != "" {
			l.refused(why)
			l.log.Debug("connection refused", "remote", c.RemoteAddr().String(), "reason", why)
			go refuseConn(c, why)
			continue
		}
		return c, nil
	}
}

// connState is the http.Server's ConnState hook: a connection that closed
// or left the server (hijacked) frees its slot. The server reports exactly
// one of the two for every connection Accept returned.
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	if st == http.StateClosed || st == http.StateHijacked {
		l.release(clientKey(c.RemoteAddr().String()))
	}
}

// admit counts a new connection of key, or says why it may not open.
func (l *connLimiter) admit(key string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.max > 0 && l.total >= l.max:
		return "too_many_connections"
	case l.perIP > 0 && l.byIP[key] >= l.perIP:
		return "too_many_connections_per_client"
	}
	l.total++
	l.byIP[key]++
	return ""
}

func (l *connLimiter) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.byIP[key]--; l.byIP[key] <= 0 {
		delete(l.byIP, key) // the map holds open connections only
	}
}

// open reports the open connections, in all and of key.
func (l *connLimiter) open(key string) (int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.byIP[key]
}

// refuseConn answers c with 503 and closes it.
func refuseConn(c net.Conn, why string) {
	body := fmt.Sprintf(`{"error":{"message":"too many open connections (%s); retry later","type":"server_error","param":null,"code":%q}}`+"\n", why, why)
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	_ = c.Close()
}
