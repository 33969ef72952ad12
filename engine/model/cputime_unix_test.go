//go:build linux || darwin || freebsd || openbsd

package model

import "golang.org/x/sys/unix"

// processCPU is the process's CPU time in seconds.
func processCPU() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}
