package mmap

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// writeWeights writes a file of n bytes with a pattern and syncs it, so
// that its page cache is clean and, written through write(2), in small
// folios (the state of a file just downloaded or copied with cp).
func writeWeights(t *testing.T, dir string, n int) (string, []byte) {
	t.Helper()
	want := make([]byte, n)
	for i := range want {
		want[i] = byte(i*7 + i>>12)
	}
	path := filepath.Join(dir, "w.gguf")
	f, err := os.Create(path)
	require.NoError(t, err)
	// 4 KiB writes: one large write(2) can make large folios directly.
	for off := 0; off < n; off += 4096 {
		_, err = f.Write(want[off:min(off+4096, n)])
		require.NoError(t, err)
	}
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	return path, want
}

// cachedBytes is how much of the file at path is in the page cache, from
// mincore on a mapping that touches nothing (the test owns the file, so
// mincore reports the page cache, not only this process's mappings).
func cachedBytes(t testing.TB, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	st, err := f.Stat()
	require.NoError(t, err)
	data, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(data)
	vec := make([]byte, (len(data)+4095)/4096)
	// x/sys has no mincore wrapper.
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, errno, "mincore")
	var n int64
	for _, v := range vec {
		if v&1 != 0 {
			n += 4096
		}
	}
	return n
}

func needTHP(t *testing.T) {
	t.Helper()
	if s := thpSetting("/sys/kernel/mm/transparent_hugepage/enabled"); s != "always" && s != "madvise" {
		t.Skipf("transparent huge pages are %q here: no 2 MiB pages to place weights on", s)
	}
}

// hugeShare touches all of data and returns the share of it on 2 MiB
// pages.
func hugeShare(t *testing.T, data []byte) float64 {
	t.Helper()
	var sink byte
	for i := 0; i < len(data); i += 4096 {
		sink ^= data[i]
	}
	runtime.KeepAlive(sink) // the reads must happen
	huge, resident, err := HugeMapped(data)
	require.NoError(t, err)
	return float64(huge) / float64(max(resident, 1))
}

// TestAutoPlacementReal runs ModeAuto on a file just written (page cache
// in small folios) and checks that what it did holds: a recache leaves
// the file on 2 MiB pages for the next load too, which then only maps; a
// copy is on 2 MiB pages and the file's page cache is gone (resident
// memory not doubled); staying on 4 KiB pages says why.
func TestAutoPlacementReal(t *testing.T) {
	needTHP(t)
	path, want := writeWeights(t, t.TempDir(), 64<<20)
	require.NoError(t, os.Chmod(path, 0o444), "a read-only file works the same")
	r, err := MapWith(path, Options{Mode: ModeAuto})
	require.NoError(t, err)
	defer r.Close()
	pl := r.Placement
	t.Logf("first load: %v", pl)
	require.Equal(t, ModeAuto, pl.Asked)
	require.Equal(t, want, r.Data)
	share := hugeShare(t, r.Data)
	switch pl.Mode {
	case ModeRecache:
		require.True(t, pl.Huge, pl.String())
		require.Greater(t, share, 0.9, "recached weights map on 2 MiB pages")
		r2, err := MapWith(path, Options{Mode: ModeAuto})
		require.NoError(t, err)
		defer r2.Close()
		require.Equal(t, ModeMap, r2.Placement.Mode, "the next load finds the cache in 2 MiB folios: %v", r2.Placement)
		require.True(t, r2.Placement.Huge)
	case ModeCopy:
		require.True(t, pl.Huge, pl.String())
		require.Greater(t, share, 0.9, "the copy is on 2 MiB pages")
		require.Less(t, cachedBytes(t, path), int64(len(want)/8), "the page cache is dropped after the copy")
	case ModeMap:
		require.False(t, pl.Huge && share < 0.5, "a placement that says 2 MiB pages gets them: %v, %.2f", pl, share)
		require.NotEmpty(t, pl.Reason)
	default:
		t.Fatalf("auto placed as %q", pl.Mode)
	}
}

// TestCopyDropsPageCache: ModeCopy puts the bytes on 2 MiB pages and the
// file's page cache goes, so the weights are resident once, not twice.
func TestCopyDropsPageCache(t *testing.T) {
	needTHP(t)
	path, want := writeWeights(t, t.TempDir(), 48<<20)
	require.Greater(t, cachedBytes(t, path), int64(len(want)/2), "a file just written is cached")
	r, err := MapWith(path, Options{Mode: ModeCopy})
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, want, r.Data)
	require.Equal(t, ModeCopy, r.Placement.Mode)
	_, resident, err := HugeMapped(r.Data)
	require.NoError(t, err)
	require.Equal(t, int64(len(want)), resident, "the copy is resident")
	require.Less(t, cachedBytes(t, path), int64(len(want)/8), "and the page cache is not")
	t.Logf("%v, %.2f of the copy on 2 MiB pages", r.Placement, hugeShare(t, r.Data))
}

// TestAutoKeepsSharedCache: pages another mapping holds cannot be
// dropped, so auto neither recaches (it would not take) nor copies (that
// would double memory): it maps them as they are.
func TestAutoKeepsSharedCache(t *testing.T) {
	needTHP(t)
	path, want := writeWeights(t, t.TempDir(), 64<<20)
	other, err := MapWith(path, Options{Mode: ModeMap})
	require.NoError(t, err)
	defer other.Close()
	if hugeShare(t, other.Data) > 0 {
		t.Skip("this filesystem cached a written file in 2 MiB folios: nothing to decide")
	}
	r, err := MapWith(path, Options{Mode: ModeAuto})
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, want, r.Data)
	require.Equal(t, ModeMap, r.Placement.Mode, r.Placement.String())
	require.False(t, r.Placement.Huge)
	require.Contains(t, r.Placement.Reason, "cannot be dropped")
}

// TestAutoPartlySharedCache: another mapping holds the second half of
// the file. The window probe (in the first half) drops and comes back in
// a 2 MiB folio, the recache re-reads only the first half: auto must not
// copy then, which would double the half held elsewhere.
func TestAutoPartlySharedCache(t *testing.T) {
	needTHP(t)
	const size = 64 << 20
	path, want := writeWeights(t, t.TempDir(), size)
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	half, err := unix.Mmap(int(f.Fd()), size/2, size/2, unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(half)
	if hugeShare(t, half) > 0 {
		t.Skip("this filesystem cached a written file in 2 MiB folios: nothing to decide")
	}
	r, err := MapWith(path, Options{Mode: ModeAuto})
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, want, r.Data)
	t.Log(r.Placement)
	require.NotEqual(t, ModeCopy, r.Placement.Mode)
	require.False(t, r.Placement.Huge)
	if r.Placement.Mode == ModeRecache {
		require.Contains(t, r.Placement.Reason, "part of the page cache stayed")
	}
}

// TestAutoOnTmpfs: on tmpfs the page cache is the file; auto must not
// copy it.
func TestAutoOnTmpfs(t *testing.T) {
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		t.Skip("no tmpfs at /dev/shm")
	}
	dir, err := os.MkdirTemp("/dev/shm", "kvw-pages-")
	if err != nil {
		t.Skipf("/dev/shm not writable: %v", err)
	}
	defer os.RemoveAll(dir)
	path, want := writeWeights(t, dir, 40<<20)
	r, err := MapWith(path, Options{Mode: ModeAuto})
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, want, r.Data)
	require.Equal(t, ModeMap, r.Placement.Mode, r.Placement.String())
	t.Log(r.Placement)
}

func TestProbeWindows(t *testing.T) {
	for _, tc := range []struct {
		size int64
		want []int64
	}{
		{size: 2 << 20, want: nil},
		{size: 4 << 20, want: []int64{2 << 20}},
		{size: 64 << 20, want: []int64{4 << 20, 12 << 20, 20 << 20, 28 << 20, 36 << 20, 44 << 20, 52 << 20, 60 << 20}},
	} {
		p := &fileProber{size: tc.size}
		require.Equal(t, tc.want, p.windows(), "size %d", tc.size)
		for _, off := range p.windows() {
			require.Zero(t, off%hugeSize)
		}
	}
}

func TestMachineProbes(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, s string) {
		p := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
	}
	write("thp/enabled", "always [madvise] never\n")
	write("thp/hugepages-2048kB/enabled", "always [inherit] madvise never\n")
	write("proc/meminfo", "MemTotal: 24683784 kB\nMemAvailable:   8000000 kB\n")
	write("proc/self/cgroup", "4:memory:/job\n0::/\n")
	write("cg/memory/job/memory.limit_in_bytes", "4294967296\n")
	write("cg/memory/job/memory.usage_in_bytes", "3221225472\n")
	write("cg/memory/job/memory.stat", "cache 1\ntotal_inactive_file 536870912\n")
	p := &fileProber{thpDir: filepath.Join(dir, "thp"), procDir: filepath.Join(dir, "proc"), cgroupDir: filepath.Join(dir, "cg")}
	require.Equal(t, "madvise", p.anonTHP(), "inherit takes the global setting")
	require.Equal(t, int64(1<<30+512<<20), p.available(), "the cgroup's limit less usage plus inactive file cache, under MemAvailable")

	write("thp/hugepages-2048kB/enabled", "always inherit madvise [never]\n")
	require.Equal(t, "never", p.anonTHP(), "the per-size setting wins")
	write("cg/memory/job/memory.limit_in_bytes", "9223372036854771712\n")
	require.Equal(t, int64(8000000<<10), p.available(), "no cgroup limit: MemAvailable")

	write("proc/self/cgroup", "0::/svc\n")
	write("cg/svc/memory.max", "max\n")
	write("cg/svc/memory.current", "1\n")
	require.Equal(t, int64(8000000<<10), p.available(), `cgroup v2 "max" is no limit`)
	write("cg/svc/memory.max", "2147483648\n")
	write("cg/svc/memory.current", "1073741824\n")
	write("cg/svc/memory.stat", "anon 1\ninactive_file 1073741824\n")
	require.Equal(t, int64(2<<30), p.available())

	empty := &fileProber{thpDir: filepath.Join(dir, "none"), procDir: filepath.Join(dir, "none"), cgroupDir: filepath.Join(dir, "none")}
	require.Equal(t, "never", empty.anonTHP(), "a kernel without THP")
	require.Equal(t, int64(-1), empty.available(), "unknown")
}

// TestAutoToleratesOneSmallWindow: one sampled window in eight on small
// folios (a recache under fragmented memory leaves a few) still maps; two
// recache again.
func TestAutoToleratesOneSmallWindow(t *testing.T) {
	needTHP(t)
	const size = 64 << 20
	path, want := writeWeights(t, t.TempDir(), size)
	require.NoError(t, Recache(path))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	offs := (&fileProber{size: size}).windows()
	require.Len(t, offs, 8)
	// Re-read windows through read(2) in 4 KiB pieces: small folios.
	shrink := func(off int64) {
		require.NoError(t, unix.Fadvise(int(f.Fd()), off, hugeSize, unix.FADV_DONTNEED))
		buf := make([]byte, 4096)
		for o := off; o < off+hugeSize; o += 4096 {
			_, err := f.ReadAt(buf, o)
			require.NoError(t, err)
		}
	}
	shrink(offs[3])
	huge, _, err := newFileProber(f, size).touchWindow(offs[3])
	require.NoError(t, err)
	require.False(t, huge, "the window re-read through read(2) is on small pages")
	r, err := MapWith(path, Options{Mode: ModeAuto})
	require.NoError(t, err)
	if share := hugeShare(t, r.Data); share < 0.9 {
		t.Skipf("the recache got %.2f of the file in 2 MiB folios here", share)
	}
	require.Equal(t, ModeMap, r.Placement.Mode, r.Placement.String())
	require.True(t, r.Placement.Huge)
	require.NoError(t, r.Close())

	shrink(offs[3])
	shrink(offs[5])
	r, err = MapWith(path, Options{Mode: ModeAuto})
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, want, r.Data)
	require.Equal(t, ModeRecache, r.Placement.Mode, r.Placement.String())
}
