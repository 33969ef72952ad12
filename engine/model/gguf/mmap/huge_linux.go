package mmap

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// adviseHuge asks for 2 MiB pages on a weight mapping. Decode streams
// every weight once per token; with 4 KiB pages that is a TLB miss every
// 64 cache lines, and the page walks showed in decode's weight bytes per
// CPU-second (about 1.2x more with the 1B Q4_K_M file's page cache in
// 2 MiB folios: bench/RESULTS.md, "Decode step overhead"). The advice
// makes the faults of a file not yet cached read it in 2 MiB folios,
// which the kernel then maps with PMD entries (ext4, XFS and other
// filesystems with large folios). It is advice only: errors are ignored.
func adviseHuge(data []byte) {
	_ = unix.Madvise(data, unix.MADV_HUGEPAGE)
}

// mapShared maps the file read-only, 2 MiB-aligned (mapAligned).
func mapShared(f *os.File, size int) ([]byte, func([]byte) error, error) {
	return mapAligned(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
}

// copyHuge reads the file into anonymous memory advised for 2 MiB pages,
// makes it read-only and drops the file's clean, unmapped page cache, so
// that the copy does not double resident memory (ModeCopy).
func copyHuge(f *os.File, size int) ([]byte, func([]byte) error, error) {
	full := (size + hugeSize - 1) &^ (hugeSize - 1)
	mem, unmap, err := mapAligned(-1, 0, full, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, nil, err
	}
	adviseHuge(mem)
	fail := func(err error) ([]byte, func([]byte) error, error) {
		_ = unmap(mem)
		return nil, nil, err
	}
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, int64(size)), mem[:size]); err != nil {
		return fail(fmt.Errorf("read: %w", err))
	}
	if err := unix.Mprotect(mem, unix.PROT_READ); err != nil {
		return fail(fmt.Errorf("mprotect: %w", err))
	}
	// Advice: pages another process maps stay, and so does the copy.
	_ = unix.Fadvise(int(f.Fd()), 0, int64(size), unix.FADV_DONTNEED)
	return mem[:size:size], func([]byte) error { return unmap(mem) }, nil
}

// mapAligned is mmap(2) at a 2 MiB-aligned address: a 2 MiB page can only
// be mapped where the virtual address and the file offset off (a multiple
// of 2 MiB) agree modulo 2 MiB, and not every filesystem's mmap aligns large mappings, nor
// every kernel's anonymous mmap (before 6.7). It reserves 2 MiB more than
// size, maps at the aligned address inside with MAP_FIXED and returns the
// slack. fd -1 with MAP_ANON maps anonymous memory. The returned unmap
// takes the slice (or any slice of the same start).
func mapAligned(fd int, off int64, size, prot, flags int) ([]byte, func([]byte) error, error) {
	if size > math.MaxInt-hugeSize { // 32-bit: no room to align
		p, err := unix.MmapPtr(fd, off, nil, uintptr(size), prot, flags)
		if err != nil {
			return nil, nil, err
		}
		return unsafe.Slice((*byte)(p), size), func([]byte) error { return unix.MunmapPtr(p, uintptr(size)) }, nil
	}
	res, err := unix.MmapPtr(-1, 0, nil, uintptr(size+hugeSize), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		return nil, nil, err
	}
	head := int((uintptr(res)+hugeSize-1)&^(hugeSize-1) - uintptr(res))
	at := unsafe.Add(res, head)
	p, err := unix.MmapPtr(fd, off, at, uintptr(size), prot, flags|unix.MAP_FIXED)
	if err != nil {
		_ = unix.MunmapPtr(res, uintptr(size+hugeSize))
		return nil, nil, err
	}
	if head > 0 {
		_ = unix.MunmapPtr(res, uintptr(head))
	}
	if tail := hugeSize - head; tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(at, size), uintptr(tail))
	}
	unmap := func([]byte) error { return unix.MunmapPtr(p, uintptr(size)) }
	return unsafe.Slice((*byte)(p), size), unmap, nil
}

// Recache drops the clean, unmapped page cache of the file at path and
// reads it back through a mapping advised for 2 MiB pages, so that later
// mappings of it (this process's and other processes') can use PMD
// entries. Pages of the file mapped elsewhere, or dirty, stay as they
// are. It costs one read of the file from storage.
func Recache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("mmap: %s is not a regular file", path)
	}
	size := st.Size()
	if size == 0 {
		return nil
	}
	if int64(int(size)) != size {
		return fmt.Errorf("mmap: %s is %d bytes, too large for this platform", path, size)
	}
	if _, err := recacheFile(f, int(size)); err != nil {
		return fmt.Errorf("mmap: %s: %w", path, err)
	}
	return nil
}

// recacheFile is Recache on an open file of size bytes.
// It returns the bytes the reading thread read from storage (-1 where the
// kernel does not account them): less than the file means pages of it
// stayed in the page cache (mapped by another process).
func recacheFile(f *os.File, size int) (int64, error) {
	// Dirty pages (a file just downloaded or copied) are not dropped:
	// write them first. An error here only means fewer pages dropped.
	_ = unix.Fdatasync(int(f.Fd()))
	if err := unix.Fadvise(int(f.Fd()), 0, int64(size), unix.FADV_DONTNEED); err != nil {
		return 0, fmt.Errorf("drop the page cache: %w", err)
	}
	data, unmap, err := mapAligned(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, err
	}
	defer unmap(data)
	adviseHuge(data)
	// The storage reads are accounted to the faulting thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	rb := threadReadBytes()
	var sink byte
	for off := 0; off < len(data); off += 4096 {
		sink ^= data[off]
	}
	runtime.KeepAlive(sink) // the reads must happen
	if rb < 0 {
		return -1, nil
	}
	return threadReadBytes() - rb, nil
}

// HugeMapped reports, for the mapping that holds b (a slice of a Region's
// Data), how many of its resident bytes are mapped with 2 MiB (PMD)
// entries and how many are resident in all, from /proc/self/smaps.
func HugeMapped(b []byte) (huge, resident int64, err error) {
	if len(b) == 0 {
		return 0, 0, nil
	}
	addr := uint64(uintptr(unsafe.Pointer(&b[0])))
	raw, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	in, found := false, false
	for sc.Scan() {
		line := sc.Bytes()
		fields := bytes.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := vmaRange(fields[0]); ok {
			in = addr >= lo && addr < hi
			found = found || in
			continue
		}
		if !in || len(fields) < 2 {
			continue
		}
		kb, perr := strconv.ParseInt(string(fields[1]), 10, 64)
		if perr != nil {
			continue
		}
		switch string(fields[0]) {
		case "Rss:":
			resident = kb << 10
		case "FilePmdMapped:", "AnonHugePages:", "ShmemPmdMapped:":
			huge += kb << 10
		}
	}
	if !found {
		return 0, 0, fmt.Errorf("mmap: no mapping holds address %#x", addr)
	}
	return huge, resident, nil
}

// vmaRange parses the "lo-hi" address range that starts a mapping's
// header line in smaps.
func vmaRange(f []byte) (lo, hi uint64, ok bool) {
	i := bytes.IndexByte(f, '-')
	if i <= 0 || bytes.HasSuffix(f, []byte(":")) {
		return 0, 0, false
	}
	lo, err1 := strconv.ParseUint(string(f[:i]), 16, 64)
	hi, err2 := strconv.ParseUint(string(f[i+1:]), 16, 64)
	return lo, hi, err1 == nil && err2 == nil
}
