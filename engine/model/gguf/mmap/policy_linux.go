package mmap

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// fileProber measures, for decideAuto, how a file's page cache maps and
// what the machine allows. Each probe maps 2 MiB windows of the file on
// their own (at 2 MiB-aligned addresses, so that a 2 MiB folio can be
// mapped with one PMD entry, as the weight mapping is: mapAligned) and
// reads the result from smaps; a probe touches at most eight windows and
// one of them again (18 MiB), which a load reads anyway.
type fileProber struct {
	f    *os.File
	size int64
	// small is the offset of a sampled window not on 2 MiB pages, -1
	// before sampling or when all were.
	small int64
	// sysfs and procfs roots, replaced in tests.
	thpDir, procDir, cgroupDir string
}

func newFileProber(f *os.File, size int64) *fileProber {
	return &fileProber{f: f, size: size, small: -1, thpDir: "/sys/kernel/mm/transparent_hugepage", procDir: "/proc", cgroupDir: "/sys/fs/cgroup"}
}

// windows are the file offsets of the sampled windows: eight, spread
// evenly (a page cache can be part in 2 MiB folios, part not), none at
// the start of the file, whose header the loader read through read(2).
func (p *fileProber) windows() []int64 {
	var offs []int64
	for i := int64(0); i < 8; i++ {
		off := (p.size * (2*i + 1) / 16) &^ (hugeSize - 1)
		if off > 0 && off+hugeSize <= p.size && (len(offs) == 0 || offs[len(offs)-1] != off) {
			offs = append(offs, off)
		}
	}
	return offs
}

// touchWindow maps the window at off at a 2 MiB-aligned address, advised
// MADV_HUGEPAGE, reads one byte of every 4 KiB page and reports whether
// it is PMD-mapped and whether the touch read from storage (reads > 0:
// major faults, or bytes read by this thread).
func (p *fileProber) touchWindow(off int64) (huge bool, reads int64, err error) {
	data, unmap, err := mapAligned(int(p.f.Fd()), off, hugeSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return false, 0, fmt.Errorf("map a probe window: %w", err)
	}
	defer unmap(data)
	adviseHuge(data)
	// Major faults are counted per thread: the touch must run on one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before, after unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &before); err != nil {
		return false, 0, fmt.Errorf("getrusage: %w", err)
	}
	rb := threadReadBytes()
	var sink byte
	for i := 0; i < len(data); i += 4096 {
		sink ^= data[i]
	}
	runtime.KeepAlive(sink)
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &after); err != nil {
		return false, 0, fmt.Errorf("getrusage: %w", err)
	}
	reads = int64(after.Majflt - before.Majflt)
	if rb >= 0 && threadReadBytes() > rb {
		// The fault that reads a 2 MiB folio is not always counted
		// major; the thread's storage reads (task I/O accounting) are.
		reads++
	}
	h, _, err := HugeMapped(data)
	if err != nil {
		return false, 0, err
	}
	return h == hugeSize, reads, nil
}

// threadReadBytes is read_bytes of /proc/thread-self/io, the bytes this
// thread had read from storage, or -1 where the kernel does not account
// them.
func threadReadBytes() int64 {
	raw, err := os.ReadFile("/proc/thread-self/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "read_bytes: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// sampleHuge allows one window in eight on small pages: a page cache
// rebuilt while memory was fragmented keeps a few small folios (3% in
// bench/RESULTS.md, "Weight pages by default"), which cost decode
// nothing measurable, and a recache at every load would not remove them.
func (p *fileProber) sampleHuge() (bool, error) {
	offs := p.windows()
	small := 0
	for _, off := range offs {
		huge, _, err := p.touchWindow(off)
		if err != nil {
			return false, err
		}
		if !huge {
			if small == 0 {
				p.small = off
			}
			small++
			if small*8 > len(offs) {
				return false, nil
			}
		}
	}
	return len(offs) > 0, nil
}

func (p *fileProber) recacheWindow() (dropped, huge bool, err error) {
	off := p.small
	if off < 0 {
		offs := p.windows()
		if len(offs) == 0 {
			return false, false, fmt.Errorf("file of %d bytes has no 2 MiB window", p.size)
		}
		off = offs[len(offs)/2]
	}
	// Dirty pages (a file just downloaded or copied) are not dropped:
	// write them first.
	_ = unix.SyncFileRange(int(p.f.Fd()), off, hugeSize, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
	// A drop shows as reads from storage on the way back in: pages that stay
	// (mapped by another process, or tmpfs, whose page cache is the file)
	// fault in as minor ones. mincore would not say: it reports the page
	// cache only of files the caller may write. A page can also be held
	// for a moment (the filesystem's journal, another CPU's LRU batch, a
	// writeback just finished): a few tries tell that from a mapping.
	for try := 0; try < 3; try++ {
		if err := unix.Fadvise(int(p.f.Fd()), off, hugeSize, unix.FADV_DONTNEED); err != nil {
			return false, false, fmt.Errorf("drop a window's page cache: %w", err)
		}
		huge, reads, err := p.touchWindow(off)
		if err != nil || reads > 0 {
			return reads > 0, huge, err
		}
	}
	return false, false, nil
}

func (p *fileProber) recache() (huge, dropped bool, err error) {
	read, err := recacheFile(p.f, int(p.size))
	if err != nil {
		return false, false, err
	}
	// Readahead may skip a little, never a whole 1/8 of the file.
	dropped = read >= p.size-p.size/8
	huge, err = p.sampleHuge()
	return huge, dropped, err
}

// anonTHP reads the THP setting that governs anonymous 2 MiB pages: the
// per-size one (kernels 6.8+) unless it says inherit, else the global one.
func (p *fileProber) anonTHP() string {
	if s := thpSetting(filepath.Join(p.thpDir, "hugepages-2048kB", "enabled")); s != "" && s != "inherit" {
		return s
	}
	if s := thpSetting(filepath.Join(p.thpDir, "enabled")); s != "" {
		return s
	}
	return "never" // no THP in this kernel
}

// thpSetting is the bracketed choice of a sysfs THP file ("always
// [madvise] never" says madvise), or "" when it cannot be read.
func thpSetting(path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := string(raw)
	i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if i < 0 || j < i {
		return ""
	}
	return s[i+1 : j]
}

// available is MemAvailable, lowered to what the process's memory cgroup
// (v1 or v2) still allows: its limit less its usage plus its inactive
// file cache, which the kernel reclaims before failing an allocation.
func (p *fileProber) available() int64 {
	avail := meminfoAvailable(filepath.Join(p.procDir, "meminfo"))
	if c, ok := p.cgroupAvailable(); ok && (avail < 0 || c < avail) {
		avail = c
	}
	return avail
}

func meminfoAvailable(path string) int64 {
	raw, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				return kb << 10
			}
		}
	}
	return -1
}

func (p *fileProber) cgroupAvailable() (int64, bool) {
	raw, err := os.ReadFile(filepath.Join(p.procDir, "self", "cgroup"))
	if err != nil {
		return 0, false
	}
	type files struct{ dir, limit, usage, inactive string }
	var tries []files
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			for _, d := range []string{filepath.Join(p.cgroupDir, parts[2]), p.cgroupDir} {
				tries = append(tries, files{d, "memory.max", "memory.current", "inactive_file"})
			}
		case strings.Contains(","+parts[1]+",", ",memory,"):
			for _, d := range []string{filepath.Join(p.cgroupDir, "memory", parts[2]), filepath.Join(p.cgroupDir, "memory")} {
				tries = append(tries, files{d, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"})
			}
		}
	}
	for _, t := range tries {
		limit, err1 := readInt(filepath.Join(t.dir, t.limit))
		usage, err2 := readInt(filepath.Join(t.dir, t.usage))
		if err1 != nil || err2 != nil {
			continue // "max" (no limit) or not visible from here
		}
		if limit >= 1<<60 { // v1 spells "no limit" as a huge number
			return 0, false
		}
		return limit - usage + statField(filepath.Join(t.dir, "memory.stat"), t.inactive), true
	}
	return 0, false
}

func readInt(path string) (int64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
}

func statField(path, name string) int64 {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == name {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// place decides how to place a file of size bytes asked as mode, and does
// the recache that a ModeRecache placement needs before the mapping.
func place(f *os.File, size int, mode Mode) (Placement, error) {
	p := newFileProber(f, int64(size))
	pl := Placement{Mode: mode, Asked: mode, Reason: "asked for"}
	if mode == ModeAuto {
		pl = decideAuto(int64(size), p)
	}
	switch {
	case pl.Mode == ModeCopy:
		return pl, nil // placed measures the copy
	case mode == ModeRecache: // auto's recache is done
		if _, err := recacheFile(f, size); err != nil {
			return pl, fmt.Errorf("recache: %w", err)
		}
	}
	// What the mapping will get, from the sample (cached now: it costs no
	// further read); a file too small to sample stays on 4 KiB pages.
	if int64(size) >= 2*hugeSize {
		huge, err := p.sampleHuge()
		pl.Huge = err == nil && huge
	}
	return pl, nil
}

// placed records the page size a copy got: at least half of it on 2 MiB
// pages counts (the tail past the last whole 2 MiB page never is).
func placed(pl Placement, data []byte) Placement {
	huge, resident, err := HugeMapped(data)
	pl.Huge = err == nil && huge > 0 && 2*huge >= resident
	return pl
}
