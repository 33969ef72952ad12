package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestByteProgress(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	clock := func() time.Time { return now }
	const total = 100 << 20

	var tty strings.Builder
	p := &ByteProgress{W: &tty, TTY: true, Label: "m.gguf", Now: clock}
	now = start.Add(2 * time.Second)
	p.Update(40<<20, total, 20<<20, start, false) // 20 MiB new in 2 s: 10 MiB/s, 60 MiB left
	require.Equal(t, "\rm.gguf [=========               ]  40% 40MiB / 100MiB  10MiB/s  ETA 6s", tty.String())
	now = start.Add(8 * time.Second)
	p.Update(total, total, 20<<20, start, true)
	last := tty.String()[strings.LastIndex(tty.String(), "\r"):]
	// The shorter last line blanks what the longer one before it left.
	require.Equal(t, "\rm.gguf [========================] 100% 100MiB / 100MiB  10MiB/s       \n", last)

	var plain strings.Builder
	p = &ByteProgress{W: &plain, Label: "m.gguf", Now: clock}
	now = start
	p.Update(0, total, 0, start, false)
	for i := int64(1); i <= 100; i++ {
		now = start.Add(time.Duration(i) * 100 * time.Millisecond)
		p.Update(i<<20, total, 0, start, false)
	}
	p.Update(total, total, 0, start, true)
	lines := strings.Split(strings.TrimSpace(plain.String()), "\n")
	require.Equal(t, "m.gguf: 100MiB", lines[0])
	require.Len(t, lines, 12, "a first line, one per tenth, a last line: %q", lines)
	require.Equal(t, "m.gguf: 50% (50MiB of 100MiB, 10MiB/s)", lines[5])
	require.Equal(t, "m.gguf: done, 100MiB in 10.0s (10MiB/s)", lines[11])
	require.NotContains(t, plain.String(), "\r")
}
