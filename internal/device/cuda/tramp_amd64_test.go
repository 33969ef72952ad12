//go:build !windows

package cuda

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestCallNTrampoline(t *testing.T) {
	libc, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW)
	require.NoError(t, err)
	snprintf, err := purego.Dlsym(libc, "snprintf")
	require.NoError(t, err)
	// C memory for the buffer and the format: the callee sees no Go memory.
	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	require.NoError(t, err)
	defer unix.Munmap(mem)
	format := strings.Repeat("%ld ", 20)
	copy(mem[2048:], format)
	args := []uint64{uint64(uintptr(unsafe.Pointer(&mem[0]))), 2048, uint64(uintptr(unsafe.Pointer(&mem[2048])))}
	var want []string
	for i := range 20 {
		v := uint64(1000+i) * 0x10001
		if i == 7 {
			v = uint64(1<<64 - 5) // -5: full 64-bit slots reach the callee
		}
		args = append(args, v)
		want = append(want, fmt.Sprint(int64(v)))
	}
	r, err := callN(snprintf, args...)
	require.NoError(t, err)
	got := string(mem[:bytes.IndexByte(mem, 0)])
	require.Equal(t, strings.Join(want, " ")+" ", got)
	require.Equal(t, uint64(len(got)), r)
	_, err = callN(snprintf, make([]uint64, 25)...)
	require.Error(t, err)
}
