package cpu

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/device"
)

// TestAccess: Access runs f over exactly the bytes asked for, in place
// (what f writes is in the arena), with a capacity that ends there (an
// append cannot reach the next bytes); a range outside the arena or a
// freed arena is refused without calling f; f's error comes back.
func TestAccess(t *testing.T) {
	a, err := Backend{}.NewArena(64)
	require.NoError(t, err)
	require.NoError(t, a.Upload(0, []byte("0123456789")))
	ca := a.(*Arena)

	require.NoError(t, ca.Access(2, 4, func(b []byte) error {
		require.Equal(t, []byte("2345"), b)
		require.Equal(t, 4, cap(b))
		b[0] = 'x'
		return nil
	}))
	got := make([]byte, 10)
	require.NoError(t, a.Download(got, 0))
	require.Equal(t, []byte("01x3456789"), got)

	boom := errors.New("boom")
	require.ErrorIs(t, ca.Access(0, 1, func([]byte) error { return boom }), boom)

	for _, c := range []struct{ off, n int64 }{{-1, 1}, {60, 5}, {0, 65}, {65, 0}, {0, -1}} {
		called := false
		err := ca.Access(c.off, c.n, func([]byte) error { called = true; return nil })
		require.ErrorIs(t, err, device.ErrOutOfRange, "[%d, +%d)", c.off, c.n)
		require.False(t, called)
	}
	require.NoError(t, a.Free())
	require.ErrorIs(t, ca.Access(0, 1, func([]byte) error { return nil }), device.ErrFreed)
}
