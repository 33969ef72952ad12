//go:build !amd64 || purego

package ml

var matVecCoreOld = map[Type]func() func(){}
