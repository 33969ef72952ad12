// Command mkembed writes the random-weight embedding model files of
// package embedtest into a directory, for tests outside Go (the C tests):
// bert-rank.gguf (a BERT cross-encoder, pooling rank) and bert-cls.gguf
// (a BERT embedding model, pooling cls).
//
//	go run ./internal/embedtest/mkembed -dir DIR
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kvwarden/kvwarden/internal/embedtest"
)

func main() {
	dir := flag.String("dir", "", "output directory")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "mkembed: -dir is required")
		os.Exit(2)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "mkembed:", err)
		os.Exit(1)
	}
	for name, spec := range map[string]embedtest.BERTSpec{
		"bert-rank.gguf": {Pooling: 4, Rank: true, Lower: true},
		"bert-cls.gguf":  {Pooling: 2, Lower: true},
	} {
		if err := embedtest.WriteBERTFile(filepath.Join(*dir, name), spec); err != nil {
			fmt.Fprintln(os.Stderr, "mkembed:", err)
			os.Exit(1)
		}
	}
}
