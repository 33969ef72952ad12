package cuda

// The test stand-in (testdata/standin, built by internal/cudastandin) is a
// host-only libcuda.so.1 that checks every call the backend makes but
// computes no kernel. It exports a few extra kvw_standin_* symbols; their
// presence is how the backend knows it is talking to the stand-in, and the
// only thing the backend does differently there is report each launch's
// argument sizes, which the stand-in checks against the PTX.
type standInAPI struct {
	violations func() int64
	take       func() int64
	queued     func() int64
	argSizes   func(sizes *byte, n uint32)
	failLaunch func(kernel *byte, nth int32)
	rejectPTX  func(on int32)
}

func bindStandIn(h uintptr) *standInAPI {
	if _, err := dlsym(h, "kvw_standin"); err != nil {
		return nil
	}
	s := &standInAPI{}
	if err := bindAll(h, map[string]any{
		"kvw_standin_violations": &s.violations, "kvw_standin_take_violations": &s.take,
		"kvw_standin_queued":    &s.queued,
		"kvw_standin_arg_sizes": &s.argSizes, "kvw_standin_fail_launch": &s.failLaunch,
		"kvw_standin_reject_ptx": &s.rejectPTX,
	}); err != nil {
		return nil
	}
	return s
}

// StandIn reports whether the loaded driver is kvwarden's GPU-free test
// stand-in: kernels are checked but not computed, so tests skip comparing
// what kernels produced.
func StandIn() bool {
	_, err := loadDriver()
	return err == nil && drv.standIn != nil
}

// StandInViolations is the number of checks the stand-in has failed (0 when
// the driver is not the stand-in).
func StandInViolations() int {
	if !StandIn() {
		return 0
	}
	return int(drv.standIn.violations())
}

// StandInTakeViolations returns the violation count and resets it (tests
// that provoke violations on purpose).
func StandInTakeViolations() int {
	if !StandIn() {
		return 0
	}
	return int(drv.standIn.take())
}

// StandInQueued is the number of operations queued on the stand-in's
// streams that no synchronization has covered yet: 0 means the device is
// done with everything submitted so far.
func StandInQueued() int {
	if !StandIn() {
		return 0
	}
	return int(drv.standIn.queued())
}

// StandInFailLaunch makes the nth next launch of kernel fail with
// CUDA_ERROR_LAUNCH_FAILED ("cublas" for the nth next cuBLAS GEMM, which
// then fails with CUBLAS_STATUS_EXECUTION_FAILED). It does nothing on a real
// driver.
func StandInFailLaunch(kernel string, nth int) {
	if !StandIn() {
		return
	}
	b := append([]byte(kernel), 0)
	drv.standIn.failLaunch(&b[0], int32(nth))
}

// StandInRejectPTX makes the stand-in refuse PTX modules as a driver
// without libnvidia-ptxjitcompiler does (CUDA_ERROR_JIT_COMPILER_NOT_FOUND).
func StandInRejectPTX(on bool) {
	if !StandIn() {
		return
	}
	v := int32(0)
	if on {
		v = 1
	}
	drv.standIn.rejectPTX(v)
}
