package gpu

import (
	"os"
	"testing"

	"github.com/kvwarden/kvwarden/internal/cudastandin"
	"github.com/kvwarden/kvwarden/internal/cudastandin/kernelout"
	"github.com/kvwarden/kvwarden/internal/device/cuda"
)

// With KVWARDEN_CUDA_STANDIN=1 the TestGPU* tests run against the GPU-free
// driver stand-in (see internal/cudastandin).
func TestMain(m *testing.M) { os.Exit(cudastandin.Main(m, cuda.StandInViolations)) }

// kernelOut asserts on what kernels computed (nothing on the stand-in).
var kernelOut = kernelout.Require
