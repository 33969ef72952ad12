//go:build !(linux || darwin || freebsd || openbsd)

package model

import "time"

var wallStart = time.Now()

// processCPU falls back to wall time where x/sys has no CPU-time clock
// (Windows, NetBSD): the per-CPU-second metrics then equal the wall ones.
func processCPU() float64 { return time.Since(wallStart).Seconds() }
