package ml_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
	"github.com/kvwarden/kvwarden/engine/model/gguf"
	"github.com/kvwarden/kvwarden/internal/testmodels"
)

// goldenQuantFiles are the quantized golden files made by llama.cpp's
// llama-quantize: the copies of the Llama 3.2-shaped model and gpt-oss's
// MXFP4_MOE mixture (MXFP4 experts, 3-D tensors); together they hold
// every quantized type ml supports.
var goldenQuantFiles = []string{
	"llama32.Q8_0", "llama32.Q6_K", "llama32.Q5_K_M", "llama32.Q4_K_M", "llama32.Q4_K_S", "llama32.Q3_K_M", "llama32.Q2_K",
	"llama32.Q5_0", "llama32.Q5_1", "llama32.Q4_0", "llama32.Q4_1", "llama32.IQ4_NL", "llama32.IQ4_XS",
	"gptoss.MXFP4_MOE",
}

type dequantCheck struct {
	Type   string    `json:"type"`
	SHA256 string    `json:"sha256_f32le"`
	Sum    float64   `json:"sum"`
	First8 []float32 `json:"first8"`
}

// TestDequantizeGolden decodes every quantized tensor of the golden files
// and requires the float32 data to be identical to ggml's dequantization
// (sha256 of the little-endian values, recorded by llama.cpp's tools).
func TestDequantizeGolden(t *testing.T) {
	seen := map[string]bool{}
	for _, name := range goldenQuantFiles {
		t.Run(name, func(t *testing.T) {
			js, err := os.ReadFile(testmodels.Golden(t, "arch/"+name+".json"))
			require.NoError(t, err)
			var meta struct {
				Checks map[string]dequantCheck `json:"dequantized_tensor_checks"`
			}
			require.NoError(t, json.Unmarshal(js, &meta))
			require.NotEmpty(t, meta.Checks)
			f, err := gguf.Open(testmodels.Golden(t, "arch/"+name+".gguf"))
			require.NoError(t, err)
			defer f.Close()
			for tname, want := range meta.Checks {
				ti, ok := f.Tensor(tname)
				require.True(t, ok, tname)
				require.Equal(t, want.Type, ti.Type.String(), tname)
				require.True(t, ti.Type.Supported(), tname)
				cols, rows := int(ti.Dims[0]), int(ti.Elements/ti.Dims[0])
				m, err := ml.NewMatrix(ti.Type, rows, cols, ti.Data)
				require.NoError(t, err, tname)
				out := make([]float32, rows*cols)
				for r := 0; r < rows; r++ {
					ml.Dequantize(out[r*cols:(r+1)*cols], m, r)
				}
				var sum float64
				for _, v := range out {
					sum += float64(v)
				}
				require.Equal(t, want.First8, out[:8], "%s %s first values", name, tname)
				require.InDelta(t, want.Sum, sum, 1e-6*max(1, abs(want.Sum)), "%s %s sum", name, tname)
				h := sha256.Sum256(ml.F32Bytes(out))
				require.Equal(t, want.SHA256, hex.EncodeToString(h[:]), "%s %s (%v) sha256", name, tname, ti.Type)
				seen[want.Type] = true
			}
		})
	}
	if !t.Failed() && len(seen) > 0 {
		for _, ty := range ml.SupportedTypes() {
			switch ty {
			case ml.F32, ml.F16, ml.BF16:
				continue
			}
			require.True(t, seen[ty.String()], "no golden tensor of type %v", ty)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
