//go:build amd64 && !purego

package ml

// matVecCoreOld switches a type's one-row products to the kernel a change
// replaced (returning the undo), for BenchmarkMatVecCore's A/B.
var matVecCoreOld = map[Type]func() func(){
	IQ4_XS: func() func() { iqxZ = false; return func() { iqxZ = true } },
}
