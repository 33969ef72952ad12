//go:build !linux

package kvcache

import "time"

var wallStart = time.Now()

// Only Linux gives a per-thread CPU clock through x/sys; elsewhere the
// benchmarks' CPU metrics fall back to wall time.
func threadTime() time.Duration  { return time.Since(wallStart) }
func processTime() time.Duration { return time.Since(wallStart) }
