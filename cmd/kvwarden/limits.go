package main

import (
	"flag"
	"math"
	"runtime/debug"
	"runtime/metrics"

	"github.com/kvwarden/kvwarden/cmd/kvwarden/internal/cli"
	"github.com/kvwarden/kvwarden/engine"
)

// memoryHeadroom is what the default memory limit of serve allows on top
// of what the loaded engine holds: requests, their tokenizing (bounded by
// the engine to a few MiB of prompt at once), HTTP buffers.
const memoryHeadroom = 512 << 20

// memoryLimit picks serve's Go memory limit (runtime/debug.SetMemoryLimit),
// which makes the process return memory to the system after a burst of
// requests: GOMEMLIMIT when set (the Go runtime has applied it already; it
// wins), else --memory-limit (0 turns the limit off), else what the Go
// runtime holds once the engine is loaded (weights read into memory, not
// the mapped model file or KV pool), plus the host tier, plus
// memoryHeadroom. set is false when GOMEMLIMIT decides.
func memoryLimit(env string, flagLimit cli.SizeValue, loaded, hostTier int64) (limit int64, source string, set bool) {
	switch {
	case env != "":
		return debug.SetMemoryLimit(-1), "GOMEMLIMIT", false
	case flagLimit.Given && flagLimit.N == 0:
		return math.MaxInt64, "--memory-limit 0 (off)", true
	case flagLimit.Given:
		return flagLimit.N, "--memory-limit", true
	}
	return loaded + hostTier + memoryHeadroom, "default (engine + host tier + 512MiB)", true
}

// goMemory is the memory the Go runtime holds from the system now.
func goMemory() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}

// tenantQuota is serve's per-tenant quota: --tenant-quota when given, else
// with API keys (several tenants) a quarter of the queue, so that one
// tenant cannot fill the queue alone; without keys (one tenant) none.
func tenantQuota(fs *flag.FlagSet, quota, maxQueue int, keys bool) int {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "tenant-quota" })
	if given || !keys {
		return quota
	}
	if maxQueue == 0 {
		maxQueue = engine.DefaultMaxQueue
	}
	return max(1, maxQueue/4)
}

// limitText shows a memory limit for the log.
func limitText(n int64) string {
	if n == math.MaxInt64 {
		return "none"
	}
	return cli.FormatSize(n)
}
