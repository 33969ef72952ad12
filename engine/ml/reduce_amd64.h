// Float reductions and the tail mask shared by the AVX-512 float and
// attention kernels (kernels, floatmm, f16mv, f16, attnf16x4, attnq and
// silu_attn): one definition, so every kernel that promises another's bits
// reduces in the same order.

// Horizontal reduction of four zmm accumulators (registers 0..15) to one
// xmm [sum(a), sum(b), sum(c), sum(d)] left in xa. Clobbers Y16/X16 and b,c,d.
#define REDUCE4(za, zb, zc, zd, ya, yb, yc, yd, xa, xb, xc, xd) \
	VEXTRACTF64X4 $1, za, Y16 \
	VADDPS        Y16, ya, ya \
	VEXTRACTF64X4 $1, zb, Y16 \
	VADDPS        Y16, yb, yb \
	VEXTRACTF64X4 $1, zc, Y16 \
	VADDPS        Y16, yc, yc \
	VEXTRACTF64X4 $1, zd, Y16 \
	VADDPS        Y16, yd, yd \
	VEXTRACTF32X4 $1, ya, X16 \
	VADDPS        X16, xa, xa \
	VEXTRACTF32X4 $1, yb, X16 \
	VADDPS        X16, xb, xb \
	VEXTRACTF32X4 $1, yc, X16 \
	VADDPS        X16, xc, xc \
	VEXTRACTF32X4 $1, yd, X16 \
	VADDPS        X16, xd, xd \
	VHADDPS       xb, xa, xa  \
	VHADDPS       xd, xc, xc  \
	VHADDPS       xc, xa, xa

// Reduce one zmm accumulator (0..15) to its scalar sum in the low lane of x.
#define REDUCE1(z, y, x) \
	VEXTRACTF64X4 $1, z, Y16 \
	VADDPS        Y16, y, y  \
	VEXTRACTF32X4 $1, y, X16 \
	VADDPS        X16, x, x  \
	VHADDPS       x, x, x    \
	VHADDPS       x, x, x

// Build K1 = mask of the low (CX & 15) lanes. Clobbers CX, BX.
#define TAILMASK \
	ANDQ  $15, CX \
	MOVL  $1, BX  \
	SHLL  CX, BX  \
	DECL  BX      \
	KMOVW BX, K1
