// Hand-written: two short loops, nothing to generate.

//go:build amd64 && !purego

#include "textflag.h"

// func prefetchLines(p *byte, n int)
// PREFETCHT0 of every 64-byte line of p[:n] (n > 0). A prefetch never
// faults, so a range past the end of a mapping is harmless.
TEXT ·prefetchLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	LEAQ (SI)(CX*1), CX

pfl:
	PREFETCHT0 (SI)
	ADDQ       $64, SI
	CMPQ       SI, CX
	JLT        pfl
	RET

// func prefetchLinesL2(p *byte, n int)
// PREFETCHT1 of every 64-byte line of p[:n] (n > 0): into the L2 cache,
// for data needed far enough ahead that the L1 would evict it first.
TEXT ·prefetchLinesL2(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	LEAQ (SI)(CX*1), CX

pfl2:
	PREFETCHT1 (SI)
	ADDQ       $64, SI
	CMPQ       SI, CX
	JLT        pfl2
	RET
