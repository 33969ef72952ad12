package ml

import (
	"bufio"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// PhysicalCores is the default number of compute threads: the physical
// cores of the machine (hyper-threads share a core's vector units, so a
// second thread per core mostly contends), at most runtime.NumCPU() (which
// honours the process's CPU affinity). It reads the Linux CPU topology in
// /sys, else /proc/cpuinfo, and falls back to runtime.NumCPU().
func PhysicalCores() int {
	return physicalCores(os.DirFS("/"), runtime.NumCPU())
}

// physicalCores counts distinct (package, core) pairs under root, capped at
// ncpu; ncpu when the topology cannot be read.
func physicalCores(root fs.FS, ncpu int) int {
	n := coresFromSys(root)
	if n == 0 {
		n = coresFromCPUInfo(root)
	}
	if n <= 0 || n > ncpu {
		return max(ncpu, 1)
	}
	return n
}

func coresFromSys(root fs.FS) int {
	cpus, err := fs.Glob(root, "sys/devices/system/cpu/cpu[0-9]*")
	if err != nil || len(cpus) == 0 {
		return 0
	}
	seen := map[[2]string]bool{}
	for _, dir := range cpus {
		if on, err := fs.ReadFile(root, dir+"/online"); err == nil && strings.TrimSpace(string(on)) == "0" {
			continue // offline CPUs keep a topology directory on some kernels
		}
		pkg, err1 := fs.ReadFile(root, dir+"/topology/physical_package_id")
		core, err2 := fs.ReadFile(root, dir+"/topology/core_id")
		if err1 != nil || err2 != nil {
			return 0
		}
		seen[[2]string{strings.TrimSpace(string(pkg)), strings.TrimSpace(string(core))}] = true
	}
	return len(seen)
}

// coresFromCPUInfo counts distinct "physical id"/"core id" pairs of
// /proc/cpuinfo (x86); 0 when it has none.
func coresFromCPUInfo(root fs.FS) int {
	f, err := root.Open("proc/cpuinfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	seen := map[[2]string]bool{}
	var pkg, core string
	flush := func() {
		if core != "" {
			seen[[2]string{pkg, core}] = true
		}
		pkg, core = "", ""
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			flush() // a blank line ends one processor's block
			continue
		}
		switch strings.TrimSpace(k) {
		case "physical id":
			pkg = strings.TrimSpace(v)
		case "core id":
			core = strings.TrimSpace(v)
			if _, err := strconv.Atoi(core); err != nil {
				core = ""
			}
		}
	}
	flush()
	return len(seen)
}
