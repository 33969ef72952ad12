package mmap

import (
	"fmt"
	"os"
)

// Mode says how Map places a file's bytes in memory. Decode reads every
// weight once per token; with 4 KiB pages that is a TLB miss every 64
// cache lines, and one-sequence decode ran 1.2-1.4x slower per CPU-second
// than on 2 MiB pages (bench/RESULTS.md, "Decode step overhead"). A
// mapped file is on 2 MiB pages only where its page cache holds 2 MiB
// folios, which a file just downloaded or copied does not: the modes are
// the ways to get there, and ModeAuto picks one by probing.
type Mode string

const (
	// ModeAuto (the default) probes the file and the machine at load
	// (decideAuto) and then maps, recaches or copies, or stays on 4 KiB
	// pages where nothing else is safe.
	ModeAuto Mode = "auto"
	// ModeMap maps the file (advised MADV_HUGEPAGE) and leaves the page
	// cache as it is: 2 MiB pages where it holds 2 MiB folios already or
	// the file is read from storage through the mapping, else 4 KiB.
	ModeMap Mode = "map"
	// ModeRecache drops the file's clean, unmapped page cache and reads it
	// back through a huge-advised mapping (Recache) before mapping it: one
	// read of the file from storage, after which every mapping of the file,
	// other processes' included, can use 2 MiB pages. Needs a filesystem
	// with large folios (ext4 and XFS on recent kernels).
	ModeRecache Mode = "recache"
	// ModeCopy reads the file into anonymous read-only memory advised for
	// 2 MiB pages and then drops the file's clean, unmapped page cache, so
	// the copy does not double resident memory. The copy is private: other
	// processes mapping the same file do not share it, and the next load
	// reads the file from storage again.
	ModeCopy Mode = "copy"
)

// ModeEnv names the environment variable that chooses the Mode when the
// caller leaves Options.Mode empty: auto (the default), map, recache or
// copy ("mmap" is taken as map).
const ModeEnv = "KVWARDEN_WEIGHTS"

// ParseMode reads a mode name; "" is ModeAuto and "mmap" ModeMap.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", ModeAuto:
		return ModeAuto, nil
	case ModeMap, "mmap":
		return ModeMap, nil
	case ModeRecache, ModeCopy:
		return Mode(s), nil
	}
	return "", fmt.Errorf("mmap: weight placement %q: want auto, map, recache or copy", s)
}

// Options tune MapWith.
type Options struct {
	// Mode is the placement; "" means the ModeEnv environment variable,
	// and ModeAuto when that is unset.
	Mode Mode
}

func (o Options) mode() (Mode, error) {
	if o.Mode != "" {
		return ParseMode(string(o.Mode))
	}
	m, err := ParseMode(os.Getenv(ModeEnv))
	if err != nil {
		return "", fmt.Errorf("%s: %w", ModeEnv, err)
	}
	return m, nil
}

// Placement says what MapWith did with a file and why, for one log line
// at load.
type Placement struct {
	// Mode is what was done: ModeMap, ModeRecache or ModeCopy (never
	// ModeAuto).
	Mode Mode
	// Huge is whether the bytes are expected on 2 MiB pages (measured on
	// a sample of the file for a mapping, on all of it for a copy).
	Huge bool
	// Asked is the mode that was asked for (ModeAuto unless set).
	Asked Mode
	// Reason is why, in a few words.
	Reason string
}

// PageSize is "2 MiB" or "4 KiB".
func (p Placement) PageSize() string {
	if p.Huge {
		return "2 MiB"
	}
	return "4 KiB"
}

func (p Placement) String() string {
	return fmt.Sprintf("%s pages (%s: %s)", p.PageSize(), p.Mode, p.Reason)
}

// hugeSize is the PMD page size that decode wants (x86-64 and arm64 with
// 4 KiB base pages).
const hugeSize = 2 << 20

// minHugeFile is the smallest file worth probing: below it the second
// level TLB (1.5-2k entries of 4 KiB: 6-8 MiB) covers the weights anyway.
const minHugeFile = 32 << 20

// prober is what decideAuto measures, behind an interface so that the
// decision is tested with every answer (policy_test.go) and measured on
// the real machine (policy_linux.go).
type prober interface {
	// sampleHuge maps a few 2 MiB windows of the file as its page cache
	// holds them now (reading from storage what is not cached) and says
	// whether they mapped on 2 MiB pages (all but one in eight).
	sampleHuge() (bool, error)
	// recacheWindow drops one window's page cache and reads it back
	// through a huge-advised mapping: dropped says whether the drop
	// happened (it does not for pages that another process maps, that
	// are dirty, or on tmpfs, where the page cache is the file), huge
	// whether the window then mapped on 2 MiB pages.
	recacheWindow() (dropped, huge bool, err error)
	// recache re-reads the whole file in 2 MiB folios (recacheFile) and
	// says whether the sample then maps on 2 MiB pages (huge: the window
	// probe can succeed and the whole file still get small folios where
	// memory is too fragmented for the page cache's cheap allocations),
	// and whether the whole file was dropped and read again (dropped: not
	// where another process maps part of it; then a copy would double
	// that part).
	recache() (huge, dropped bool, err error)
	// anonTHP is the THP setting for anonymous 2 MiB pages: always,
	// madvise or never.
	anonTHP() string
	// available is the memory this process can still take without
	// swapping or hitting its cgroup limit, in bytes (-1: unknown).
	available() int64
}

// copyReserve is what a copy must leave available, besides its own size,
// for the KV pool, the runtime and the rest of the machine.
const copyReserve = 1 << 30

// decideAuto picks the placement of a file of size bytes. The order is
// the cost order: a mapping that is already on 2 MiB pages costs
// nothing; a recache costs one read from storage once, and then serves
// every later load and every process sharing the file; a copy costs a
// read and 2 MiB page faults (with compaction) at every load, and loses
// the sharing of the page cache; 4 KiB pages cost 1.2-1.4x in decode but
// are the only safe choice when the cache cannot be dropped (a copy would
// then double resident memory), when THP is off, or when memory is
// tight.
func decideAuto(size int64, p prober) Placement {
	pl := func(m Mode, huge bool, format string, args ...any) Placement {
		return Placement{Mode: m, Huge: huge, Asked: ModeAuto, Reason: fmt.Sprintf(format, args...)}
	}
	if size < minHugeFile {
		return pl(ModeMap, false, "file under %d MiB: the TLB covers it", minHugeFile>>20)
	}
	huge, err := p.sampleHuge()
	switch {
	case err != nil:
		return pl(ModeMap, false, "probe failed: %v", err)
	case huge:
		return pl(ModeMap, true, "the page cache maps on 2 MiB pages")
	}
	dropped, huge, err := p.recacheWindow()
	switch {
	case err != nil:
		return pl(ModeMap, false, "probe failed: %v", err)
	case !dropped:
		return pl(ModeMap, false, "the page cache cannot be dropped (tmpfs, or mapped by another process): a copy would double memory")
	case huge:
		huge, dropped, err := p.recache()
		switch {
		case err != nil:
			return pl(ModeMap, false, "recache failed: %v", err)
		case huge:
			return pl(ModeRecache, true, "the page cache was in 4 KiB folios; re-read in 2 MiB folios")
		case !dropped:
			return pl(ModeRecache, false, "re-read, but part of the page cache stayed (mapped by another process): a copy would double it")
		}
		return copyOr(size, p, pl(ModeRecache, false, "re-read, but the page cache got 4 KiB folios (memory fragmented)"))
	}
	return copyOr(size, p, pl(ModeMap, false, "the filesystem caches in 4 KiB folios"))
}

// copyOr copies where anonymous THP is on and memory allows, and
// otherwise keeps the mapping placed as stay says.
func copyOr(size int64, p prober, stay Placement) Placement {
	if thp := p.anonTHP(); thp != "always" && thp != "madvise" {
		stay.Reason += fmt.Sprintf(" and anonymous THP is %q", thp)
		return stay
	}
	avail, need := p.available(), size+copyReserve
	if avail < 0 {
		stay.Reason += " and the memory available for a copy is unknown"
		return stay
	}
	if avail < need {
		stay.Reason += fmt.Sprintf(" and a copy needs %d MiB, %d MiB available", need>>20, avail>>20)
		return stay
	}
	stay.Mode, stay.Huge = ModeCopy, true
	stay.Reason += "; copied to anonymous 2 MiB pages, page cache dropped"
	return stay
}
