package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/kvwarden/kvwarden/cmd/kvwarden/internal/cli"
	"github.com/kvwarden/kvwarden/server"
)

// limitFlags are serve's flags against hostile clients: operator keys and
// connection and body limits.
type limitFlags struct {
	adminKeys     string
	bodyTimeout   time.Duration
	maxConns      int
	maxConnsPerIP int
}

func (l *limitFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.adminKeys, "admin-keys", "", "operator key `file`, one key per line: /metrics needs one of them, tenant keys get 403 there (without it and with --api-keys, /metrics is closed unless --public-metrics)")
	fs.DurationVar(&l.bodyTimeout, "body-timeout", server.DefaultBodyTimeout, "time a client has to send a request body after its headers; a slower one gets 408 and is disconnected (0: no limit)")
	fs.IntVar(&l.maxConns, "max-conns", server.DefaultMaxConns, "open connections before new ones get 503 and are closed (0: no limit)")
	fs.IntVar(&l.maxConnsPerIP, "max-conns-per-ip", server.DefaultMaxConnsPerIP, "open connections per client address (an IPv6 /64) before new ones get 503 and are closed (0: no limit; raise it behind a proxy, whose connections all share its address)")
}

// options checks the flags, loads the operator keys and sets them into o,
// whose Keys are already set.
func (l *limitFlags) options(o *server.Options) error {
	switch {
	case l.bodyTimeout < 0:
		return cli.Usagef("--body-timeout %v: must not be negative", l.bodyTimeout)
	case l.maxConns < 0:
		return cli.Usagef("--max-conns %d: must not be negative", l.maxConns)
	case l.maxConnsPerIP < 0:
		return cli.Usagef("--max-conns-per-ip %d: must not be negative", l.maxConnsPerIP)
	}
	// 0 on the command line is "no limit"; in Options that is negative.
	noLimit := func(n int) int {
		if n == 0 {
			return -1
		}
		return n
	}
	o.BodyTimeout = l.bodyTimeout
	if l.bodyTimeout == 0 {
		o.BodyTimeout = -1
	}
	o.MaxConns, o.MaxConnsPerIP = noLimit(l.maxConns), noLimit(l.maxConnsPerIP)
	if l.adminKeys == "" {
		return nil
	}
	admin, err := server.LoadAdminKeys(l.adminKeys)
	if err != nil {
		return cli.Usagef("--admin-keys: %v", err)
	}
	if o.Keys != nil && o.Keys.Shares(admin) {
		return cli.Usagef("--admin-keys %s: a key is also a tenant key in --api-keys; operator keys must be separate", l.adminKeys)
	}
	o.AdminKeys = admin
	return nil
}

// metricsAccess says who may read /metrics, for the start-up log.
func metricsAccess(o server.Options) string {
	switch {
	case o.PublicMetrics:
		return "public (--public-metrics)"
	case o.AdminKeys != nil:
		return fmt.Sprintf("%d operator keys (--admin-keys)", o.AdminKeys.Len())
	case o.Keys != nil:
		return "closed: no --admin-keys"
	}
	return "open (no --api-keys)"
}

// warnExposure logs what makes a listening server easy to abuse: no API
// keys on an address other hosts reach, and keys short enough to guess.
func warnExposure(log *slog.Logger, addr net.Addr, o server.Options, apiKeys, adminKeys string) {
	if tcp, ok := addr.(*net.TCPAddr); ok && !tcp.IP.IsLoopback() && o.Keys == nil {
		log.Warn("listening on a non-loopback address without --api-keys: anyone who reaches it can use the server, and all requests share one tenant and its prefix cache",
			"addr", addr.String())
	}
	for _, k := range []struct {
		flag, file string
		keys       *server.Keys
	}{{"--api-keys", apiKeys, o.Keys}, {"--admin-keys", adminKeys, o.AdminKeys}} {
		if k.keys != nil && len(k.keys.ShortKeyLines()) > 0 {
			log.Warn(fmt.Sprintf("%s: keys shorter than %d characters can be guessed; use long random keys (e.g. openssl rand -hex 24)", k.flag, server.RecommendedKeyLen),
				"file", k.file, "lines", fmt.Sprint(k.keys.ShortKeyLines()))
		}
	}
}
