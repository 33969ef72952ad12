package gpu

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/cudastandin"
	"github.com/kvwarden/kvwarden/internal/device/cuda"
)

// With KVWARDEN_CUDA_STANDIN=1 the TestGPU* tests run against the GPU-free
// driver stand-in (see internal/cudastandin).
func TestMain(m *testing.M) { os.Exit(cudastandin.Main(m, cuda.StandInViolations)) }

// kernelOut asserts on what kernels computed: on the stand-in, which checks
// launches but computes nothing, the assertions are not made.
func kernelOut(t testing.TB) *require.Assertions {
	t.Helper()
	if cuda.StandIn() {
		return require.New(discard{})
	}
	return require.New(t)
}

type discard struct{}

func (discard) Errorf(string, ...any) {}
func (discard) FailNow()              {}
