package ml

import (
	"runtime"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// sysCPU adds one CPU's topology files to m.
func sysCPU(m fstest.MapFS, cpu, pkg, core string) {
	d := "sys/devices/system/cpu/cpu" + cpu + "/topology/"
	m[d+"physical_package_id"] = &fstest.MapFile{Data: []byte(pkg + "\n")}
	m[d+"core_id"] = &fstest.MapFile{Data: []byte(core + "\n")}
}

func TestPhysicalCores(t *testing.T) {
	smt := fstest.MapFS{} // 2 cores, 2 threads each
	sysCPU(smt, "0", "0", "0")
	sysCPU(smt, "1", "0", "1")
	sysCPU(smt, "2", "0", "0")
	sysCPU(smt, "3", "0", "1")
	twoSockets := fstest.MapFS{} // core ids repeat across packages
	sysCPU(twoSockets, "0", "0", "0")
	sysCPU(twoSockets, "1", "1", "0")
	offline := fstest.MapFS{}
	sysCPU(offline, "0", "0", "0")
	sysCPU(offline, "1", "0", "1")
	offline["sys/devices/system/cpu/cpu1/online"] = &fstest.MapFile{Data: []byte("0\n")}
	cpuinfo := fstest.MapFS{"proc/cpuinfo": &fstest.MapFile{Data: []byte(
		"processor\t: 0\nphysical id\t: 0\ncore id\t\t: 0\n\n" +
			"processor\t: 1\nphysical id\t: 0\ncore id\t\t: 0\n\n" +
			"processor\t: 2\nphysical id\t: 0\ncore id\t\t: 1\n\n" +
			"processor\t: 3\nphysical id\t: 0\ncore id\t\t: 1\n")}}
	noCoreIDs := fstest.MapFS{"proc/cpuinfo": &fstest.MapFile{Data: []byte("processor\t: 0\nBogoMIPS\t: 50\n\n")}}

	for _, tc := range []struct {
		name string
		root fstest.MapFS
		ncpu int
		want int
	}{
		{"sys with SMT", smt, 4, 2},
		{"two sockets", twoSockets, 2, 2},
		{"offline CPU skipped", offline, 2, 1},
		{"affinity caps it", smt, 1, 1},
		{"cpuinfo fallback", cpuinfo, 4, 2},
		{"nothing readable: NumCPU", fstest.MapFS{}, 3, 3},
		{"cpuinfo without core ids: NumCPU", noCoreIDs, 8, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, physicalCores(tc.root, tc.ncpu))
		})
	}
}

func TestPhysicalCoresOnThisMachine(t *testing.T) {
	n := PhysicalCores()
	require.GreaterOrEqual(t, n, 1)
	require.LessOrEqual(t, n, runtime.NumCPU())
}

func TestSetThreads(t *testing.T) {
	defer SetThreads(Threads())
	SetThreads(1)
	require.Equal(t, 1, Threads())
	SetThreads(0)
	require.Equal(t, PhysicalCores(), Threads(), "n < 1 means the physical cores")
}
