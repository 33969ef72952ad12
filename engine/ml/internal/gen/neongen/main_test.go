package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNEONEncodings assembles every WORD-encoded instruction with llvm-mc
// and requires the generator's encoding to be the assembler's.
func TestNEONEncodings(t *testing.T) {
	var mc string
	for _, name := range []string{"llvm-mc", "llvm-mc-16", "llvm-mc-17", "llvm-mc-18", "llvm-mc-19"} {
		if p, err := exec.LookPath(name); err == nil {
			mc = p
			break
		}
	}
	if mc == "" {
		t.Skip("no llvm-mc to check the encodings against")
	}
	enc := regexp.MustCompile(`encoding: \[0x([0-9a-f]{2}),0x([0-9a-f]{2}),0x([0-9a-f]{2}),0x([0-9a-f]{2})\]`)
	for asm, want := range encodings() {
		cmd := exec.Command(mc, "-triple=aarch64", "-mattr=+dotprod", "-show-encoding")
		cmd.Stdin = strings.NewReader(asm + "\n")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "llvm-mc %q: %s", asm, out)
		m := enc.FindStringSubmatch(string(out))
		require.NotNil(t, m, "llvm-mc %q printed no encoding: %s", asm, out)
		got := m[4] + m[3] + m[2] + m[1]
		require.Equal(t, got, fmt.Sprintf("%08x", want), "encoding of %q", asm)
	}
}
