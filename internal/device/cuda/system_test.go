package cuda

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/device"
)

// Off Linux the backend does not try to load anything: it reports CUDA as
// unavailable on this system, which --device auto takes as "use the CPU"
// and --device cuda reports as it is.
func TestSystemSupported(t *testing.T) {
	for _, tc := range []struct {
		goos string
		ok   bool
	}{
		{"linux", true},
		{"windows", false},
		{"darwin", false},
		{"freebsd", false},
	} {
		t.Run(tc.goos, func(t *testing.T) {
			err := systemSupported(tc.goos)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, device.ErrUnavailable)
			require.ErrorContains(t, err, "CUDA is not supported on this system ("+tc.goos+")")
		})
	}
}
