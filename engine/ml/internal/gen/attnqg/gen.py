# Usage: python3 gen.py engine/ml/attnqg_amd64.s
# Generates engine/ml/attnqg_amd64.s: grouped (GQA) variants of the fused
# q8_0/q4_0 attention kernels.
def q8x(o):
    return f"""\tVPBROADCASTW {o}(R12), Y5
\tVCVTPH2PS    Y5, Z5
\tVPMOVSXBD    {o+2}(R12), Z6
\tVPMOVSXBD    {o+18}(R12), Z7
\tVCVTDQ2PS    Z6, Z6
\tVCVTDQ2PS    Z7, Z7
\tVMULPS       Z5, Z6, Z6
\tVMULPS       Z5, Z7, Z7
"""
def q4x(o):
    return f"""\tVPBROADCASTW {o}(R12), Y5
\tVCVTPH2PS    Y5, Z5
\tVPMOVZXBD    {o+2}(R12), Z6
\tVPSRLD       $4, Z6, Z7
\tVPANDD       Z28, Z6, Z6
\tVPSUBD       Z29, Z6, Z6
\tVPSUBD       Z29, Z7, Z7
\tVCVTDQ2PS    Z6, Z6
\tVCVTDQ2PS    Z7, Z7
\tVMULPS       Z5, Z6, Z6
\tVMULPS       Z5, Z7, Z7
"""
Q8 = """\tVPBROADCASTW (R12), Y5
\tVCVTPH2PS    Y5, Z5
\tVPMOVSXBD    2(R12), Z6
\tVPMOVSXBD    18(R12), Z7
\tVCVTDQ2PS    Z6, Z6
\tVCVTDQ2PS    Z7, Z7
\tVMULPS       Z5, Z6, Z6
\tVMULPS       Z5, Z7, Z7
"""
Q4 = """\tVPBROADCASTW (R12), Y5
\tVCVTPH2PS    Y5, Z5
\tVPMOVZXBD    2(R12), Z6
\tVPSRLD       $4, Z6, Z7
\tVPANDD       Z28, Z6, Z6
\tVPSUBD       Z29, Z6, Z6
\tVPSUBD       Z29, Z7, Z7
\tVCVTDQ2PS    Z6, Z6
\tVCVTDQ2PS    Z7, Z7
\tVMULPS       Z5, Z6, Z6
\tVMULPS       Z5, Z7, Z7
"""
Q4C = """\tMOVL         $15, AX
\tVPBROADCASTD AX, Z28
\tMOVL         $8, AX
\tVPBROADCASTD AX, Z29
"""
def acc(h, k): return "Z%d" % (8 + 2*h + k)
def reduce(h):
    return f"""\tVADDPS        {acc(h,1)}, {acc(h,0)}, Z0
\tVEXTRACTF64X4 $1, Z0, Y30
\tVADDPS        Y30, Y0, Y0
\tVEXTRACTF32X4 $1, Y0, X30
\tVADDPS        X30, X0, X0
\tVHADDPS       X0, X0, X0
\tVHADDPS       X0, X0, X0
\tVMULSS        X31, X0, X0
\tVMOVSS        X0, {4*h}(R15)
"""
def scores(q, bb, g):
    name = f"sg{'8' if q else '4'}x{g}"
    fn = f"attnScores{'Q8' if q else 'Q4'}x{g}AVX512"
    s = f"""// func {fn}(dst, q *float32, kv *byte, offs *int, n, nb int, scale float32)
// {g} query heads against one KV head: q is [block][head][32], dst
// [t][head]; each head's operations are attnScoresQ{'8' if q else '4'}AVX512's.
TEXT ·{fn}(SB), NOSPLIT, $0-52
\tMOVQ         dst+0(FP), R15
\tMOVQ         q+8(FP), SI
\tMOVQ         kv+16(FP), R8
\tMOVQ         offs+24(FP), R10
\tMOVQ         n+32(FP), R11
\tMOVQ         nb+40(FP), R9
\tVBROADCASTSS scale+48(FP), Z31
"""
    if not q: s += Q4C
    s += f"""\tXORQ         DX, DX

{name}_t:
\tCMPQ       DX, R11
\tJGE        {name}_done
\tLEAQ       2(DX), R12
\tCMPQ       R12, R11
\tJGE        {name}_nopf
\tMOVQ       (R10)(R12*8), R12
\tADDQ       R8, R12
\tPREFETCHT0 (R12)
\tPREFETCHT0 64(R12)
\tPREFETCHT0 128(R12)

{name}_nopf:
\tMOVQ (R10)(DX*8), R12
\tADDQ R8, R12
"""
    for h in range(g):
        s += f"\tVPXORD {acc(h,0)}, {acc(h,0)}, {acc(h,0)}\n\tVPXORD {acc(h,1)}, {acc(h,1)}, {acc(h,1)}\n"
    s += f"""\tMOVQ SI, R13
\tMOVQ R9, CX

{name}_b:
"""
    s += Q8 if q else Q4
    for h in range(g):
        s += f"\tVFMADD231PS {h*128}(R13), Z6, {acc(h,0)}\n\tVFMADD231PS {h*128+64}(R13), Z7, {acc(h,1)}\n"
    s += f"""\tADDQ ${128*g}, R13
\tADDQ ${bb}, R12
\tDECQ CX
\tJNZ  {name}_b
"""
    for h in range(g): s += reduce(h)
    s += f"""\tADDQ ${4*g}, R15
\tINCQ DX
\tJMP  {name}_t

{name}_done:
\tVZEROUPPER
\tRET

"""
    return s

def accum(q, bb, g, P):
    name = f"ag{'8' if q else '4'}x{g}p{P}"
    fn = f"attnAccum{'Q8' if q else 'Q4'}x{g}p{P}AVX512"
    s = f"""// func {fn}(out, w *float32, kv *byte, offs *int, n, nb int)
// {g} query head(s)' value sums over one KV head, {P} block(s) per pass over
// the rows (nb a multiple of {P}): out is [block][head][32], w [t][head];
// each element is one FMA chain over t, as in attnAccumAVX512.
TEXT ·{fn}(SB), NOSPLIT, $0-48
\tMOVQ out+0(FP), DI
\tMOVQ w+8(FP), SI
\tMOVQ kv+16(FP), R8
\tMOVQ offs+24(FP), R10
\tMOVQ n+32(FP), R11
\tMOVQ nb+40(FP), R9
"""
    if not q: s += Q4C
    s += f"""\tXORQ BX, BX

{name}_blk:
\tCMPQ R9, $0
\tJLE  {name}_done
"""
    def a(p, h, k): return "Z%d" % (8 + (p*g + h)*2 + k)
    for p in range(P):
        for h in range(g):
            s += f"\tVMOVUPS {(p*g+h)*128}(DI), {a(p,h,0)}\n\tVMOVUPS {(p*g+h)*128+64}(DI), {a(p,h,1)}\n"
    s += f"""\tXORQ DX, DX
\tMOVQ SI, R15

{name}_t:
\tCMPQ       DX, R11
\tJGE        {name}_st
\tLEAQ       4(DX), R12
\tCMPQ       R12, R11
\tJGE        {name}_nopf
\tMOVQ       (R10)(R12*8), R12
\tADDQ       R8, R12
\tPREFETCHT0 (R12)(BX*1)
\tPREFETCHT0 64(R12)(BX*1)
"""
    if P*bb > 128:
        s += "\tPREFETCHT0 128(R12)(BX*1)\n"
    s += f"""
{name}_nopf:
\tMOVQ (R10)(DX*8), R12
\tADDQ R8, R12
\tADDQ BX, R12
"""
    for p in range(P):
        s += q8x(p*bb) if q else q4x(p*bb)
        for h in range(g):
            s += f"\tVBROADCASTSS {4*h}(R15), Z24\n\tVFMADD231PS  Z6, Z24, {a(p,h,0)}\n\tVFMADD231PS  Z7, Z24, {a(p,h,1)}\n"
    s += f"""\tADDQ ${4*g}, R15
\tINCQ DX
\tJMP  {name}_t

{name}_st:
"""
    for p in range(P):
        for h in range(g):
            s += f"\tVMOVUPS {a(p,h,0)}, {(p*g+h)*128}(DI)\n\tVMOVUPS {a(p,h,1)}, {(p*g+h)*128+64}(DI)\n"
    s += f"""\tADDQ ${128*g*P}, DI
\tADDQ ${bb*P}, BX
\tSUBQ ${P}, R9
\tJMP  {name}_blk

{name}_done:
\tVZEROUPPER
\tRET

"""
    return s

# Blocks per pass of the accumulation kernels: 2*g*P accumulators in
# Z8..Z23.
ACCUM = [(g, P) for g in (1, 2, 4, 8) for P in (1, 2, 4) if 2*g*P <= 16]

out = """// Code generated by engine/ml/internal/gen/attnqg/gen.py; DO NOT EDIT.

//go:build amd64 && !purego

#include "textflag.h"

// Grouped-query variants of attnq_amd64.s: the query heads that share one
// KV head expand each block once and use it for all of them.

"""
for q, bb in ((True, 34), (False, 18)):
    for g in (2, 4, 8):
        out += scores(q, bb, g)
    for g, P in ACCUM:
        out += accum(q, bb, g, P)
open(__import__('sys').argv[1], 'w').write(out.rstrip() + "\n")
