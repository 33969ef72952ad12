//go:build !linux

package ml

// hugeAlloc returns ordinary heap memory: only Linux advises anonymous
// memory onto 2 MiB pages, so KVW_BENCH_HUGE measures nothing else here.
func hugeAlloc(size int) ([]byte, error) { return make([]byte, size), nil }
