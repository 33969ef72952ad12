package model

import (
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/engine/ml"
)

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	require.NoError(t, c.Validate())
	require.Equal(t, 259, c.Vocab)
	require.Equal(t, 256, c.Dim)
	require.Equal(t, 2048, c.MaxContext)
	require.Equal(t, 1, c.BOS)
	require.Equal(t, 2, c.EOS)
	require.NoError(t, Stories110MConfig().Validate())
}

func TestSyntheticDeterministic(t *testing.T) {
	a, err := Synthetic(DefaultConfig(), 1, ml.F32)
	require.NoError(t, err)
	require.Equal(t, SyntheticName, a.Name)
	require.Same(t, a.Embed, a.Output)
	require.NoError(t, a.Close())

	prev := runtime.GOMAXPROCS(1)
	b, err := Synthetic(DefaultConfig(), 1, ml.F32)
	runtime.GOMAXPROCS(prev)
	require.NoError(t, err)
	require.Equal(t, a.Embed.Data, b.Embed.Data, "independent of GOMAXPROCS")
	require.Equal(t, a.Layers[3].Down.Data, b.Layers[3].Down.Data)

	c, err := Synthetic(DefaultConfig(), 2, ml.F32)
	require.NoError(t, err)
	require.NotEqual(t, a.Embed.Data, c.Embed.Data)
	require.NotEqual(t, a.Layers[0].Q.Data[:64], a.Layers[0].K.Data[:64], "every matrix has its own stream")
}

func TestSyntheticStatistics(t *testing.T) {
	w, err := Synthetic(DefaultConfig(), DefaultSeed, ml.F32)
	require.NoError(t, err)
	for _, m := range []*ml.Matrix{w.Embed, w.Layers[0].Q, w.Layers[2].Down} {
		v := ml.BytesF32(m.Data)
		var sum, sq float64
		for _, x := range v {
			sum += float64(x)
			sq += float64(x) * float64(x)
		}
		n := float64(len(v))
		mean, std := sum/n, math.Sqrt(sq/n-(sum/n)*(sum/n))
		want := 1 / math.Sqrt(float64(m.Cols))
		require.InDelta(t, 0, mean, 0.01*want, "mean")
		require.InDelta(t, want, std, 0.01*want, "std")
	}
	for _, x := range w.Layers[1].FFNNorm {
		require.Equal(t, float32(1), x)
	}
}

func TestSyntheticTypes(t *testing.T) {
	ref, err := Synthetic(DefaultConfig(), 7, ml.F32)
	require.NoError(t, err)
	refQ := ml.BytesF32(ref.Layers[0].Q.Data)
	for _, tc := range []struct {
		typ ml.Type
		tol float64 // relative to the standard deviation
	}{{ml.F16, 1e-3}, {ml.BF16, 1e-2}, {ml.Q8_0, 2e-2}, {ml.Q4_0, 0.3}} {
		w, err := Synthetic(DefaultConfig(), 7, tc.typ)
		require.NoError(t, err, tc.typ.String())
		require.Equal(t, tc.typ, w.Embed.Type)
		require.Equal(t, tc.typ, w.Layers[3].Down.Type)
		row := make([]float32, w.Config.Dim)
		var maxErr float64
		for r := 0; r < 8; r++ {
			ml.Dequantize(row, w.Layers[0].Q, r)
			for i, x := range row {
				maxErr = max(maxErr, math.Abs(float64(x-refQ[r*w.Config.Dim+i])))
			}
		}
		require.Less(t, maxErr, tc.tol*4/16, tc.typ.String()) // 4 sigma, sigma = 1/16
	}
}

func TestSyntheticErrors(t *testing.T) {
	_, err := Synthetic(Config{}, 1, ml.F32)
	require.ErrorContains(t, err, "non-positive dimension")
	c := DefaultConfig()
	c.Dim, c.HeadDim, c.RopeDim = 48*8, 48, 48
	_, err = Synthetic(c, 1, ml.Q4_K)
	require.ErrorContains(t, err, "Q4_K")
	c = DefaultConfig()
	c.Vocab = 1 << 30
	_, err = Synthetic(c, 1, ml.F32)
	require.ErrorContains(t, err, "too large")
}

func BenchmarkSynthetic110M(b *testing.B) {
	for _, typ := range []ml.Type{ml.F32, ml.Q8_0} {
		b.Run(typ.String(), func(b *testing.B) {
			for range b.N {
				if _, err := Synthetic(Stories110MConfig(), 1, typ); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
