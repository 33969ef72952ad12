//go:build amd64 && !purego

package ml

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMXFP4F16Scales checks the expansion's scale table: the f16 of every
// E8M0 scale f16 can hold exactly (normals and subnormals), the marker
// for the others.
func TestMXFP4F16Scales(t *testing.T) {
	held := 0
	for e, h := range mxfp4F16Scale {
		if h == 0xffff {
			require.True(t, e < 104 || e > 143, "e=%d", e)
			continue
		}
		held++
		require.Equal(t, e8m0Half(byte(e)), F16ToF32(h), "e=%d", e)
	}
	require.Equal(t, 40, held)
}
