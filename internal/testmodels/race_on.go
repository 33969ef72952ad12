//go:build race

package testmodels

// Race reports whether the binary was built with the race detector, which
// slows the plain-Go numeric fallbacks by an order of magnitude. Tests of
// numerics alone may run a subset under it; scripts/test.sh runs them in
// full without it.
const Race = true
