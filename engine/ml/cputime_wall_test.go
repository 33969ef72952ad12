//go:build !(linux || darwin || freebsd || openbsd)

package ml

import "time"

// No CPU-time clock through golang.org/x/sys/unix here (Windows, NetBSD,
// ...): the benchmarks' cpu- metrics fall back to wall time, so they equal
// the wall-time metrics instead of dividing by zero.
var wallStart = time.Now()

func threadCPU() float64 { return time.Since(wallStart).Seconds() }

func processCPU() float64 { return time.Since(wallStart).Seconds() }
