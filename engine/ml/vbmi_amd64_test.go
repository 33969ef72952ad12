//go:build amd64 && !purego

package ml

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// vbmiKernels are the assembly functions that use AVX512_VBMI
// instructions. Some AVX-512 VNNI CPUs (Cascade Lake, Cooper Lake) lack
// VBMI and fault on them, so each is dispatched only under useVBMI; a
// kernel that starts using VBMI must be added here and guarded.
var vbmiKernels = []string{
	"gemvIQ4NLVNNI", "gemvMXFP4VNNI",
	"kqIQ4XSDot4VNNIA", "kqIQ4XSDot4VNNIM", "kqIQ4XSDot8VNNIA",
}

// TestVBMIKernelsListed finds every function of the package's .s files
// that executes a VBMI instruction, directly or through its macros, and
// requires the list to be vbmiKernels: this machine has VBMI, so no test
// run here would fault on a missing guard.
func TestVBMIKernelsListed(t *testing.T) {
	found := kernelsUsing(t, regexp.MustCompile(`\b(VPERMB|VPERMI2B|VPERMT2B|VPMULTISHIFTQB)\b`))
	want := slices.Clone(vbmiKernels)
	slices.Sort(want)
	require.Equal(t, want, found, "functions executing AVX512_VBMI instructions: list them in vbmiKernels and dispatch them only under useVBMI")
}

// kernelsUsing returns, sorted, the functions of the package's .s files
// that execute an instruction matching re, directly or through their
// macros.
func kernelsUsing(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	define := regexp.MustCompile(`^#define\s+(\w+)`)
	text := regexp.MustCompile(`^TEXT\s+·(\w+)`)
	files, err := filepath.Glob("*_amd64.s")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var found []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		lines := strings.Split(string(raw), "\n")
		code := func(l string) string { return strings.Split(l, "//")[0] }
		// Macro bodies (continued lines), then which macros use VBMI,
		// through other macros too.
		bodies := map[string]string{}
		for i := 0; i < len(lines); i++ {
			m := define.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			var b strings.Builder
			b.WriteString(strings.TrimPrefix(code(lines[i]), m[0]) + "\n") // the name is not its own use
			for ; i < len(lines) && strings.HasSuffix(strings.TrimRight(lines[i], " \t"), "\\"); i++ {
				b.WriteString(code(lines[i+1]) + "\n")
			}
			bodies[m[1]] = b.String()
		}
		uses := map[string]bool{}
		for changed := true; changed; {
			changed = false
			for name, body := range bodies {
				if uses[name] {
					continue
				}
				hit := re.MatchString(body)
				for other := range bodies {
					if other != name && uses[other] && regexp.MustCompile(`\b`+other+`\b`).MatchString(body) {
						hit = true
					}
				}
				if hit {
					uses[name], changed = true, true
				}
			}
		}
		fn, inMacro := "", false
		for _, l := range lines {
			if define.MatchString(l) || inMacro {
				inMacro = strings.HasSuffix(strings.TrimRight(l, " \t"), "\\")
				continue
			}
			if m := text.FindStringSubmatch(l); m != nil {
				fn = m[1]
				continue
			}
			c := code(l)
			hit := re.MatchString(c)
			for name := range uses {
				if regexp.MustCompile(`\b` + name + `\b`).MatchString(c) {
					hit = true
				}
			}
			if fn != "" && hit && !slices.Contains(found, fn) {
				found = append(found, fn)
			}
		}
	}
	slices.Sort(found)
	return found
}

// TestNoVBMIFallback runs the products of the types with VBMI kernels as
// a VNNI CPU without VBMI does (their other paths), and requires the
// reference's bits, as with VBMI.
func TestNoVBMIFallback(t *testing.T) {
	if !useQ8VNNI() {
		t.Skip("no AVX-512 VNNI: the VBMI kernels are not reachable anyway")
	}
	saved := hasVBMI
	defer func() { hasVBMI = saved }()
	hasVBMI = false
	require.False(t, useVBMI())
	t.Run("KQuant", TestKQuantKernelsMatchGeneric)
	t.Run("MXFP4", TestMXFP4MatMulBits)
}
