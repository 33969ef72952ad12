// Package cli holds the command-line plumbing shared by the kvwarden
// subcommands: size parsing, the common engine flags and their validation.
package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits maps a unit suffix (lower case) to its multiplier. Binary units
// (KiB, MiB, GiB, TiB) are powers of 1024; decimal ones (KB, MB, GB, TB)
// powers of 1000. A bare number is bytes; "B" is accepted as a suffix.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1000}, {"mb", 1000 * 1000}, {"gb", 1000 * 1000 * 1000}, {"tb", 1000 * 1000 * 1000 * 1000},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1},
}

// ParseSize reads a byte size such as "512MiB", "1.5GiB", "64KB", "4096"
// or "0". It refuses negative values, unknown units and overflow.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty size")
	}
	lower := strings.ToLower(t)
	mult := int64(1)
	num := lower
	for _, u := range sizeUnits {
		if strings.HasSuffix(lower, u.suffix) {
			mult = u.mult
			num = strings.TrimSpace(lower[:len(lower)-len(u.suffix)])
			break
		}
	}
	if num == "" {
		return 0, fmt.Errorf("size %q has no number", s)
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("size %q is negative", s)
		}
		if n > math.MaxInt64/mult {
			return 0, fmt.Errorf("size %q overflows", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("size %q is not a number with an optional unit (KiB, MiB, GiB, KB, MB, GB)", s)
	}
	if f < 0 {
		return 0, fmt.Errorf("size %q is negative", s)
	}
	v := f * float64(mult)
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q overflows", s)
	}
	return int64(v), nil
}

// FormatSize renders n bytes with a binary unit, e.g. "512MiB" or "1.5GiB".
func FormatSize(n int64) string {
	units := []struct {
		name string
		mult int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, u := range units {
		if n >= u.mult {
			if n%u.mult == 0 {
				return fmt.Sprintf("%d%s", n/u.mult, u.name)
			}
			f := strconv.FormatFloat(float64(n)/float64(u.mult), 'f', 2, 64)
			return strings.TrimRight(strings.TrimRight(f, "0"), ".") + u.name
		}
	}
	return fmt.Sprintf("%dB", n)
}

// SizeValue is a flag.Value holding a byte size.
type SizeValue struct {
	N     int64
	Given bool // the flag appeared on the command line
}

func (v *SizeValue) String() string {
	if v == nil || !v.Given {
		return ""
	}
	return FormatSize(v.N)
}

// Set implements flag.Value.
func (v *SizeValue) Set(s string) error {
	n, err := ParseSize(s)
	if err != nil {
		return err
	}
	v.N, v.Given = n, true
	return nil
}

// StringList is a repeatable string flag.
type StringList []string

func (l *StringList) String() string { return strings.Join(*l, ",") }

// Set implements flag.Value.
func (l *StringList) Set(s string) error { *l = append(*l, s); return nil }
