//go:build !linux

package main

// hugeFloats: only Linux advises anonymous memory onto 2 MiB pages.
func hugeFloats(int) ([]float32, bool) { return nil, false }
