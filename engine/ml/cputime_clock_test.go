//go:build linux || darwin || freebsd || openbsd

package ml

import "golang.org/x/sys/unix"

// threadCPU returns this OS thread's CPU time in seconds. Single-threaded
// kernel benchmarks divide by it rather than wall time so that a busy
// shared machine (time slices lost to other processes) does not distort
// the compute rate.
func threadCPU() float64 { return clockSeconds(unix.CLOCK_THREAD_CPUTIME_ID) }

// processCPU is the process's CPU time in seconds.
func processCPU() float64 { return clockSeconds(unix.CLOCK_PROCESS_CPUTIME_ID) }

func clockSeconds(id int32) float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(id, &ts); err != nil {
		return 0
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}
