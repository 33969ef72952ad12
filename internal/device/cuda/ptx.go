// Package cuda is kvwarden's CUDA backend. Nothing CUDA is needed to build
// it: libcuda.so.1 and cuBLAS are opened at run time through purego, and the
// kernels (kernels/*.cu) are compiled by clang-16 to PTX that is committed
// under ptx/ and embedded here. One binary runs with and without a GPU;
// Available reports why CUDA cannot be used on a machine without one.
//
// The kernels load from the embedded PTX, or, where the driver cannot
// compile PTX, from a cubin in $KVWARDEN_CUDA_CUBIN_DIR (bench/gpu/build.sh
// assembles them); KVWARDEN_CUDA_MODULE=ptx|cubin forces one. Without a GPU,
// tests run against a host-only driver stand-in (testdata/standin,
// internal/cudastandin) that checks every call but computes no kernel.
//
// All GPU work runs on one goroutine locked to its OS thread (the Device's
// worker), where the CUDA context is current. Arena operations and forward
// steps are submitted to it. Asynchronous work returns a Completion backed
// by a CUDA event; callers release whatever the work used (page leases)
// from its OnComplete hook, never earlier.
package cuda

import _ "embed"

//go:generate bash ../../../kernels/build-ptx.sh ptx

// PTX for compute capability 8.x (sm_80) and 9.x and later (sm_90); the
// driver JIT-compiles it for the actual GPU.
var (
	//go:embed ptx/kvwarden_sm80.ptx
	ptxSM80 []byte
	//go:embed ptx/kvwarden_sm90.ptx
	ptxSM90 []byte
)

// PTX returns the embedded PTX for sm_80 and sm_90 (for tests and tools).
func PTX() (sm80, sm90 []byte) { return ptxSM80, ptxSM90 }
