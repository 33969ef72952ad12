package mmap

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeProber answers decideAuto's probes from fields and records which
// were asked, so each decision is checked together with its cost.
type fakeProber struct {
	sample, dropped, refault, recached, allDropped bool
	sampleErr, windowErr, recacheErr               error
	thp                                            string
	avail                                          int64
	asked                                          []string
}

func (f *fakeProber) sampleHuge() (bool, error) {
	f.asked = append(f.asked, "sample")
	return f.sample, f.sampleErr
}

func (f *fakeProber) recacheWindow() (bool, bool, error) {
	f.asked = append(f.asked, "window")
	return f.dropped, f.refault, f.windowErr
}

func (f *fakeProber) recache() (bool, bool, error) {
	f.asked = append(f.asked, "recache")
	return f.recached, f.allDropped, f.recacheErr
}

func (f *fakeProber) anonTHP() string {
	f.asked = append(f.asked, "thp")
	return f.thp
}

func (f *fakeProber) available() int64 {
	f.asked = append(f.asked, "mem")
	return f.avail
}

func TestDecideAuto(t *testing.T) {
	const size = 1 << 30
	enough := int64(size + copyReserve)
	for _, tc := range []struct {
		name   string
		size   int64
		p      fakeProber
		mode   Mode
		huge   bool
		reason string
		asked  []string
	}{
		{name: "small file", size: minHugeFile - 1, mode: ModeMap, reason: "TLB covers it"},
		{name: "cache already in 2 MiB folios", size: size, p: fakeProber{sample: true},
			mode: ModeMap, huge: true, reason: "maps on 2 MiB pages", asked: []string{"sample"}},
		{name: "probe fails", size: size, p: fakeProber{sampleErr: errors.New("no smaps")},
			mode: ModeMap, reason: "probe failed: no smaps", asked: []string{"sample"}},
		{name: "4 KiB folios, fs has large folios", size: size, p: fakeProber{dropped: true, refault: true, recached: true, allDropped: true},
			mode: ModeRecache, huge: true, reason: "re-read in 2 MiB folios", asked: []string{"sample", "window", "recache"}},
		{name: "recache got small folios: copy", size: size, p: fakeProber{dropped: true, refault: true, allDropped: true, thp: "madvise", avail: enough},
			mode: ModeCopy, huge: true, reason: "got 4 KiB folios (memory fragmented); copied", asked: []string{"sample", "window", "recache", "thp", "mem"}},
		{name: "recache got small folios, memory tight", size: size, p: fakeProber{dropped: true, refault: true, allDropped: true, thp: "madvise", avail: 1 << 20},
			mode: ModeRecache, reason: "got 4 KiB folios (memory fragmented) and a copy needs", asked: []string{"sample", "window", "recache", "thp", "mem"}},
		{name: "recache kept part of the cache: no copy", size: size, p: fakeProber{dropped: true, refault: true, allDropped: false, thp: "madvise", avail: enough},
			mode: ModeRecache, reason: "part of the page cache stayed", asked: []string{"sample", "window", "recache"}},
		{name: "recache fails", size: size, p: fakeProber{dropped: true, refault: true, recacheErr: errors.New("EIO")},
			mode: ModeMap, reason: "recache failed: EIO", asked: []string{"sample", "window", "recache"}},
		{name: "cache held elsewhere or tmpfs", size: size, p: fakeProber{dropped: false, thp: "always", avail: enough},
			mode: ModeMap, reason: "cannot be dropped", asked: []string{"sample", "window"}},
		{name: "window probe fails", size: size, p: fakeProber{windowErr: errors.New("fadvise: EBADF")},
			mode: ModeMap, reason: "probe failed: fadvise", asked: []string{"sample", "window"}},
		{name: "fs without large folios: copy", size: size, p: fakeProber{dropped: true, thp: "madvise", avail: enough},
			mode: ModeCopy, huge: true, reason: "copied to anonymous 2 MiB pages", asked: []string{"sample", "window", "thp", "mem"}},
		{name: "THP always: copy", size: size, p: fakeProber{dropped: true, thp: "always", avail: enough},
			mode: ModeCopy, huge: true, reason: "copied", asked: []string{"sample", "window", "thp", "mem"}},
		{name: "THP never", size: size, p: fakeProber{dropped: true, thp: "never", avail: enough},
			mode: ModeMap, reason: `anonymous THP is "never"`, asked: []string{"sample", "window", "thp"}},
		{name: "memory tight", size: size, p: fakeProber{dropped: true, thp: "madvise", avail: enough - 1},
			mode: ModeMap, reason: "a copy needs 2048 MiB, 2047 MiB available", asked: []string{"sample", "window", "thp", "mem"}},
		{name: "memory unknown", size: size, p: fakeProber{dropped: true, thp: "madvise", avail: -1},
			mode: ModeMap, reason: "memory available for a copy is unknown", asked: []string{"sample", "window", "thp", "mem"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := decideAuto(tc.size, &tc.p)
			require.Equal(t, tc.mode, pl.Mode)
			require.Equal(t, ModeAuto, pl.Asked)
			require.Equal(t, tc.huge, pl.Huge)
			require.Contains(t, pl.Reason, tc.reason)
			require.Equal(t, tc.asked, tc.p.asked, "the probes run in cost order and stop at the decision")
		})
	}
}

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Mode
		err  string
	}{
		{"", ModeAuto, ""},
		{"auto", ModeAuto, ""},
		{"map", ModeMap, ""},
		{"mmap", ModeMap, ""},
		{"recache", ModeRecache, ""},
		{"copy", ModeCopy, ""},
		{"hugetlb", "", `weight placement "hugetlb": want auto, map, recache or copy`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			m, err := ParseMode(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, m)
		})
	}
}

func TestOptionsModeFromEnv(t *testing.T) {
	t.Setenv(ModeEnv, "copy")
	m, err := Options{}.mode()
	require.NoError(t, err)
	require.Equal(t, ModeCopy, m, "the environment fills an empty Mode")
	m, err = Options{Mode: ModeMap}.mode()
	require.NoError(t, err)
	require.Equal(t, ModeMap, m, "an explicit Mode wins over the environment")
	t.Setenv(ModeEnv, "bogus")
	_, err = Options{}.mode()
	require.ErrorContains(t, err, ModeEnv+`: mmap: weight placement "bogus"`)
}

func TestPlacementString(t *testing.T) {
	require.Equal(t, "2 MiB pages (recache: why)", Placement{Mode: ModeRecache, Huge: true, Reason: "why"}.String())
	require.Equal(t, "4 KiB pages (map: why)", Placement{Mode: ModeMap, Reason: "why"}.String())
}
