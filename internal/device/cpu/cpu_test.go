package cpu

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwarden/kvwarden/internal/device"
)

func TestArena(t *testing.T) {
	b := New()
	require.Equal(t, "cpu", b.Name())
	for _, n := range []int64{0, -4, 6} {
		_, err := b.NewArena(n)
		require.Error(t, err, "size %d", n)
	}
	da, err := b.NewArena(1 << 12)
	require.NoError(t, err)
	a := da.(*Arena)
	require.Equal(t, int64(4096), a.Len())
	require.Len(t, a.Float32s(), 1024)
	require.Len(t, a.Bytes(), 4096)

	a.Float32s()[3] = 1.5
	require.Equal(t, []byte{0, 0, 0xc0, 0x3f}, a.Bytes()[12:16], "float32 and byte views alias")

	require.NoError(t, a.Fill(16, 64, math.Float32bits(2)))
	for _, x := range a.Float32s()[4:20] {
		require.Equal(t, float32(2), x)
	}
	require.Equal(t, float32(0), a.Float32s()[20])
	require.NoError(t, a.Fill(16, 64, 0))
	require.Equal(t, float32(0), a.Float32s()[4])

	require.NoError(t, a.Upload(100, []byte{1, 2, 3}))
	got := make([]byte, 3)
	require.NoError(t, a.Download(got, 100))
	require.Equal(t, []byte{1, 2, 3}, got)
	require.NoError(t, a.Copy(200, 100, 3))
	require.NoError(t, a.Download(got, 200))
	require.Equal(t, []byte{1, 2, 3}, got)

	sum, err := a.Checksum(0, 4096)
	require.NoError(t, err)
	require.Equal(t, device.Checksum(a.Bytes()), sum)

	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"copy past end", func() error { return a.Copy(4090, 0, 8) }},
		{"copy negative", func() error { return a.Copy(-1, 0, 8) }},
		{"copy overlap", func() error { return a.Copy(4, 0, 8) }},
		{"fill unaligned", func() error { return a.Fill(2, 8, 0) }},
		{"fill past end", func() error { return a.Fill(4092, 8, 0) }},
		{"checksum past end", func() error { _, err := a.Checksum(1, 4096); return err }},
		{"download past end", func() error { return a.Download(make([]byte, 8), 4092) }},
		{"upload past end", func() error { return a.Upload(4095, []byte{1, 2}) }},
		{"upload huge offset", func() error { return a.Upload(math.MaxInt64, []byte{1}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.call(), device.ErrOutOfRange)
		})
	}

	require.NoError(t, a.Free())
	require.ErrorIs(t, a.Free(), device.ErrFreed)
	require.ErrorIs(t, a.Upload(0, []byte{1}), device.ErrFreed)
	_, err = a.Checksum(0, 4)
	require.ErrorIs(t, err, device.ErrFreed)
	require.Nil(t, a.Float32s())
	require.Zero(t, a.Len())
}

func TestChecksumChunking(t *testing.T) {
	buf := make([]byte, 3*device.ChecksumChunk+17)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	seen := map[uint64]int{}
	for _, n := range []int{0, 1, device.ChecksumChunk - 1, device.ChecksumChunk, device.ChecksumChunk + 1, len(buf)} {
		s := device.Checksum(buf[:n])
		_, dup := seen[s]
		require.False(t, dup, "length %d collides", n)
		seen[s] = n
	}
	s := device.Checksum(buf)
	for _, i := range []int{0, device.ChecksumChunk, len(buf) - 1} {
		buf[i] ^= 1
		require.NotEqual(t, s, device.Checksum(buf), "flip at %d", i)
		buf[i] ^= 1
	}
	require.NotEqual(t, device.CombineChecksums([]uint64{1, 2}), device.CombineChecksums([]uint64{2, 1}))
}

// TestScrubPages: the listed pages, and only they, hold the word afterwards;
// a bad index or page size scrubs nothing.
func TestScrubPages(t *testing.T) {
	const pageBytes, pages = 64, 6
	a, err := NewArena(pageBytes * pages)
	require.NoError(t, err)
	defer a.Free()
	b := a.Bytes()
	for i := range b {
		b[i] = 0xA5
	}
	before := append([]byte(nil), b...)

	_, err = a.ScrubPages([]uint32{1, pages}, pageBytes, 0)
	require.ErrorIs(t, err, device.ErrOutOfRange)
	_, err = a.ScrubPages([]uint32{1}, 6, 0)
	require.ErrorIs(t, err, device.ErrOutOfRange)
	require.Equal(t, before, b, "a refused batch writes nothing")

	f, err := a.ScrubPages([]uint32{4, 1}, pageBytes, 0)
	require.NoError(t, err)
	require.Nil(t, f, "the CPU pass is synchronous")
	nan := math.Float32bits(float32(math.NaN()))
	_, err = a.ScrubPages([]uint32{2}, pageBytes, nan)
	require.NoError(t, err)
	for p := range pages {
		page := b[p*pageBytes : (p+1)*pageBytes]
		switch p {
		case 1, 4:
			require.Equal(t, make([]byte, pageBytes), page, "page %d", p)
		case 2:
			for _, x := range a.Float32s()[p*pageBytes/4 : (p+1)*pageBytes/4] {
				require.Equal(t, nan, math.Float32bits(x))
			}
		default:
			require.Equal(t, before[p*pageBytes:(p+1)*pageBytes], page, "page %d is not listed", p)
		}
	}
}
