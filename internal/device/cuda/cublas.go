package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"unsafe"
)

// cuBLAS enums in use.
const (
	cublasOpN         = 0
	cublasOpT         = 1
	cudaR32F          = 0
	cudaR16F          = 2
	cublasCompute32F  = 68
	cublasGemmDefault = -1
)

var cublasStatusNames = map[uint32]string{
	0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
	7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED",
	16: "CUBLAS_STATUS_LICENSE_ERROR",
}

// blas is a cuBLAS handle bound to the device's compute stream. It is used
// only on the device's worker thread.
type blas struct {
	path      string
	handle    uintptr
	create    func(h *uintptr) result
	destroy   func(h uintptr) result
	setStream func(h uintptr, s uintptr) result
	sgemm     func(h uintptr, ta, tb, m, n, k int32, alpha *float32, a uint64, lda int32, b uint64, ldb int32, beta *float32, c uint64, ldc int32) result
	gemmEx    uintptr        // called through callN: 19 arguments
	scalars   unsafe.Pointer // pinned: alpha, beta for gemmEx
}

func cublasCandidates() []string {
	if p := os.Getenv("KVWARDEN_CUBLAS_LIB"); p != "" {
		return []string{p}
	}
	names := []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so"}
	c := append([]string(nil), names...)
	dirs := []string{"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
		"/usr/local/cuda/targets/sbsa-linux/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64"}
	if m, _ := filepath.Glob("/usr/local/cuda-*/lib64"); len(m) > 0 {
		dirs = append(dirs, m...)
	}
	for _, d := range dirs {
		for _, n := range names {
			c = append(c, filepath.Join(d, n))
		}
	}
	return c
}

// openBLAS loads cuBLAS and creates a handle on stream. It runs on the
// worker thread with the context current.
func openBLAS(stream uintptr, scalars unsafe.Pointer) (*blas, error) {
	b := &blas{scalars: scalars}
	var gemmEx uintptr
	path, err := openFirst("cuBLAS (libcublas.so.13/.12; set KVWARDEN_CUBLAS_LIB)", cublasCandidates(), func(h uintptr) error {
		if err := bindAll(h, map[string]any{
			"cublasCreate_v2": &b.create, "cublasDestroy_v2": &b.destroy,
			"cublasSetStream_v2": &b.setStream, "cublasSgemm_v2": &b.sgemm,
		}); err != nil {
			return err
		}
		a, err := dlsym(h, "cublasGemmEx")
		if err != nil {
			return fmt.Errorf("symbol cublasGemmEx missing")
		}
		gemmEx = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	b.path, b.gemmEx = path, gemmEx
	if err := blasCheck("cublasCreate_v2", b.create(&b.handle)); err != nil {
		return nil, err
	}
	if err := blasCheck("cublasSetStream_v2", b.setStream(b.handle, stream)); err != nil {
		b.destroy(b.handle)
		return nil, err
	}
	return b, nil
}

func blasCheck(call string, r result) error {
	if r == 0 {
		return nil
	}
	name, ok := cublasStatusNames[r]
	if !ok {
		name = "CUBLAS_STATUS_UNKNOWN"
	}
	return &Error{Call: call, Code: r, Name: name}
}

// gemmF32 computes y[n][out] = x[n][in] · w[out][in]ᵀ + beta·y, all f32,
// row-major, on the compute stream.
func (b *blas) gemmF32(y, x, w uint64, n, out, in int, beta float32) error {
	alpha := float32(1)
	// Column-major view: Y(out×n) = Wᵀ(out×in) · X(in×n).
	r := b.sgemm(b.handle, cublasOpT, cublasOpN, int32(out), int32(n), int32(in), &alpha, w, int32(in), x, int32(in), &beta, y, int32(out))
	runtime.KeepAlive(&alpha)
	return blasCheck("cublasSgemm_v2", r)
}

// canGemmEx says whether the f16 path through callN is available.
func (b *blas) canGemmEx() bool { return b.gemmEx != 0 && runtime.GOARCH == "amd64" }

// gemmF16 is gemmF32 with f16 x and w, f32 y and f32 accumulation.
func (b *blas) gemmF16(y, xh, wh uint64, n, out, in int, beta float32) error {
	s := unsafe.Slice((*float32)(b.scalars), 2)
	s[0], s[1] = 1, beta
	alpha, betaP := uint64(uintptr(b.scalars)), uint64(uintptr(b.scalars)+4)
	gemmDefault := int32(cublasGemmDefault)
	r, err := callN(b.gemmEx, uint64(b.handle), cublasOpT, cublasOpN, uint64(out), uint64(n), uint64(in),
		alpha, wh, cudaR16F, uint64(in), xh, cudaR16F, uint64(in), betaP, y, cudaR32F, uint64(out),
		cublasCompute32F, uint64(uint32(gemmDefault)))
	if err != nil {
		return err
	}
	return blasCheck("cublasGemmEx", uint32(r))
}
