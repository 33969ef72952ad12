//go:build tools

// This file pins dependencies that packages under construction will import.
package tools

import (
	_ "github.com/ebitengine/purego"
	_ "github.com/klauspost/compress/s2"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/stretchr/testify/require"
	_ "github.com/zeebo/xxh3"
	_ "golang.org/x/sys/cpu"
)
