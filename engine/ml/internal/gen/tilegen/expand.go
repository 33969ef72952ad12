package main

// genExpand writes expand_amd64.s: the expanders of the 32-value int8
// block layouts (Q4_0, IQ4_NL, Q5_0) into Q8_0 blocks, and their 16-row
// VNNI matvecs on the blocks as they are: Q5_0's is gemvQ8VNNI's
// (q8gemv.go; exGemv16, with gemv16.go's scale gather and reduction tree),
// the layouts differing only in how a row pair's 32 values become
// unsigned bytes and in the bias correction; Q4_0's and IQ4_NL's, like
// MXFP4's, hold four rows to a register (exGemv16Quad, gemv16quad.go).
func genExpand() {
	T(exIntro)
	for i, l := range exLayouts {
		if i > 0 {
			P("")
		}
		exExpander(l)
	}
	for _, l := range exLayouts {
		P("")
		T(l.gemvData)
		if l.quad {
			exGemv16Quad(l)
		} else {
			exGemv16(l)
		}
	}
	P("")
}

// exLayout is one 32-value block layout: f16 d at byte 0, the nibbles
// at nib (16 bytes: values j and 16+j in byte j), Q5_0's high bits at 2.
type exLayout struct {
	name, label string // Go name part, label prefix of the expander
	consts      string // the expander's constants after EX_PROLOGUE
	nib, bytes  int
	// toInt8 turns the nibbles X0 (values 0..15), X1 (16..31) into int8.
	toInt8 string
	// The 16-row matvec: name, label, doc, constants and its data.
	gemv, glabel, gdoc, gconsts, gemvData string
	// gfix turns row pair k's masked nibbles Zk (rows lo, hi) into the
	// bytes VPDPBUSD takes (unsigned); exGemv16 only.
	gfix func(k, lo, hi int)
	// gbias adds the activation bias correction to the int32 sums Z16.
	gbias string
	// mask is the nibble mask's symbol; gscales gathers the rows' scales
	// (default gemv16Scales: f16 words into Y26), gfloat turns them
	// into the float32 d*dx of each row in Z26 (default: f16 to float32
	// times the activation scale).
	mask    string
	gscales func(printf)
	gfloat  string
	// quad: the matvec is exGemv16Quad's (gemv16quad.go), four rows to a
	// register; plain: its nibbles are the values (masked, not looked up
	// in the code book at Z29).
	quad, plain bool
}

func (l exLayout) gemvDefaults() exLayout {
	if l.mask == "" {
		l.mask = "g40mask"
	}
	if l.gscales == nil {
		l.gscales = gemv16Scales
	}
	if l.gfloat == "" {
		l.gfloat = "\tVCVTPH2PS       Y26, Z26\n\tVMULPS.BCST     (DI), Z26, Z26\n"
	}
	return l
}

// mxLayout is MXFP4 (17-byte blocks: an E8M0 exponent, 16 bytes of
// nibbles indexing the doubled E2M1 values): only its matvec is in this
// family, written by exGemv16Quad (gemv16quad.go);
// expandMXFP4 is part of mxIntro.
var mxLayout = exLayout{
	nib: 1, bytes: 17, quad: true,
	gemv: "gemvMXFP4VNNI", glabel: "gmxloop",
	gdoc: `// gemvIQ4NLVNNI (expand_amd64.s) for MXFP4's 17-byte blocks, four rows to
// a register (tilegen's mxGemv16): the code values come from the doubled
// E2M1 table repeated in each lane (VPERMB), and the 16 rows' E8M0 scale
// bytes become the float32 2^(e-128) exactly (ggml_e8m0_to_fp32_half:
// exponent field e-1, or the subnormal 0x00200000<<e for e < 2) before
// they multiply the activation scale.
`,
	gconsts: "\tVBROADCASTI32X4 mxKvaluesU<>(SB), Z29\n\tVPBROADCASTD    mxOne<>(SB), Z24\n\tVPBROADCASTD    mxTwo<>(SB), Z23\n\tVPBROADCASTD    mxSub<>(SB), Z22\n",
	gbias:   "\tVPADDD.BCST     4(DI), Z16, Z16\n",
	gscales: gemv16ScaleBytes,
	gfloat: `	VPSUBD          Z24, Z26, Z25
	VPSLLD          $23, Z25, Z25
	VPCMPUD         $1, Z23, Z26, K2
	VPSLLVD         Z26, Z22, K2, Z25
	VMULPS.BCST     (DI), Z25, Z26
`,
}

// genMXFP4 writes mxfp4_amd64.s: expandMXFP4 and gemvMXFP4VNNI, the
// gemv16 kernel of the MXFP4 block layout.
func genMXFP4() {
	T(mxIntro)
	exGemv16Quad(mxLayout)
}

var exLayouts = []exLayout{
	{
		name: "Q40", label: "q40", consts: "\tVMOVDQU exEights<>(SB), X14\n", nib: 2, bytes: 18,
		quad: true, plain: true,
		toInt8: "\tVPSUBB  X14, X0, X0\n\tVPSUBB  X14, X1, X1\n",
		gemv:   "gemvQ40VNNI", glabel: "g40loop",
		gdoc: `// dst[r] = the Q4_0 product of the quantized activation row x and row r of
// the 16 Q4_0 rows at w (stride rb bytes, nb blocks), for the rows r set
// in mask: gemvQ8VNNI's int32 block sums and f32 steps, on the nibbles
// (unsigned, so VPDPBUSD takes them as they are) with the activation
// block's bias/16 = -8*sum(q) as the correction for their offset 8. Four
// rows share a register (tilegen's exGemv16Quad: rows g, g+4, g+8, g+12
// in its 128-bit lanes), their low nibbles and shifted high nibbles
// masked, each against a broadcast half of the activation block. The
// same blocks pfd bytes further on are prefetched.
`,
		gemvData: "DATA g40mask<>+0(SB)/4, $0x0f0f0f0f\nGLOBL g40mask<>(SB), RODATA|NOPTR, $4\n\n",
		gbias:    "\tVPBROADCASTD    4(DI), Z17\n\tVPSRAD          $4, Z17, Z17\n\tVPADDD          Z17, Z16, Z16\n",
	},
	{
		name: "IQ4NL", label: "iq4", consts: "\tVMOVDQU exIQ4NL<>(SB), X14\n", nib: 2, bytes: 18,
		quad:   true,
		toInt8: "\tVPSHUFB X0, X14, X0\n\tVPSHUFB X1, X14, X1\n",
		gemv:   "gemvIQ4NLVNNI", glabel: "gnlloop",
		gdoc: `// gemvQ40VNNI for IQ4_NL: the nibbles index the code book repeated in
// each lane (VPERMB, which reads six bits, so no mask) before the products.
`,
		gconsts: "\tVBROADCASTI32X4 exIQ4NLu<>(SB), Z29\n",
		gemvData: `// The IQ4_NL code book plus 128 (unsigned, as VPDPBUSD takes its first
// operand; the activation bias -128*sum(q) corrects it, as for Q8_0).
DATA exIQ4NLu<>+0(SB)/8, $0x766a5d4f3f2d1801
DATA exIQ4NLu<>+8(SB)/8, $0xf1d9c5b5a6998d81
GLOBL exIQ4NLu<>(SB), RODATA|NOPTR, $16

`,
		gbias: "\tVPADDD.BCST     4(DI), Z16, Z16\n",
	},
	{
		name: "Q50", label: "q50", nib: 6, bytes: 22,
		consts: "\tVMOVDQU exSixteens<>(SB), X14\n\tVMOVDQU exQhLo<>(SB), X13\n\tVMOVDQU exQhHi<>(SB), X12\n\tVMOVDQU exBits<>(SB), X11\n",
		toInt8: `	VPBROADCASTD 2(SI), X2
	VPSHUFB X12, X2, X3
	VPSHUFB X13, X2, X2
	VPAND   X11, X2, X2
	VPAND   X11, X3, X3
	VPCMPEQB X11, X2, X2
	VPCMPEQB X11, X3, X3
	VPAND   X14, X2, X2
	VPAND   X14, X3, X3
	VPOR    X2, X0, X0
	VPOR    X3, X1, X1
	VPSUBB  X14, X0, X0
	VPSUBB  X14, X1, X1
`,
		gemv: "gemvQ50VNNI", glabel: "g50loop",
		gdoc: `// gemvQ40VNNI for Q5_0, in gemvQ8VNNI's layout (tilegen's exGemv16): each
// pair of rows is loaded into 128-bit lanes 0 and 2, the high nibbles
// rotated into lanes 1 and 3 (VALIGNQ), then masked (VPTERNLOGD), so row k
// is in the low 256 bits and row k+4 in the high; each pair's 32-bit
// high-bit words are broadcast to its two 128-bit lanes each, spread to
// bytes (VPSHUFB), tested per bit
// (VPTESTMB) and added as 16 under that mask; the unsigned 5-bit values
// then take bias/8 = -16*sum(q) as the correction for their offset 16.
`,
		gconsts: "\tVBROADCASTI64X4 exQh5<>(SB), Z28\n\tVBROADCASTI32X4 exBits<>(SB), Z29\n\tVPBROADCASTD g50sixteen<>(SB), Z24\n\tMOVL         $0xff00, AX\n\tKMOVW        AX, K3\n",
		gemvData: `DATA exQh5<>+0(SB)/8, $0x0000000000000000
DATA exQh5<>+8(SB)/8, $0x0101010101010101
DATA exQh5<>+16(SB)/8, $0x0202020202020202
DATA exQh5<>+24(SB)/8, $0x0303030303030303
GLOBL exQh5<>(SB), RODATA|NOPTR, $32

DATA g50sixteen<>+0(SB)/4, $0x10101010
GLOBL g50sixteen<>(SB), RODATA|NOPTR, $4

`,
		gfix: func(k, lo, hi int) {
			h := 22 + k%2
			P("\tVPBROADCASTD    %s, Z%d", rowAddr(lo, 2), h)
			P("\tVPBROADCASTD    %s, K3, Z%d", rowAddr(hi, 2), h)
			P("\tVPSHUFB         Z28, Z%d, Z%d", h, h)
			P("\tVPTESTMB        Z29, Z%d, K2", h)
			P("\tVPADDB          Z24, Z%d, K2, Z%d", k, k)
		},
		gbias: "\tVPBROADCASTD    4(DI), Z17\n\tVPSRAD          $3, Z17, Z17\n\tVPADDD          Z17, Z16, Z16\n",
	},
}

// exExpander writes expand<name>: rows x nb blocks, each the f16 scale
// copied and the 32 values as int8.
func exExpander(l exLayout) {
	P("// func expand%s(dst *byte, w *byte, rb int, rows int, nb int)", l.name)
	P("TEXT ·expand%s(SB), NOSPLIT, $0-40", l.name)
	P("\tEX_PROLOGUE")
	T(l.consts)
	P("")
	P("%srow:", l.label)
	P("\tTESTQ R10, R10")
	P("\tJZ    %sdone", l.label)
	P("\tMOVQ  R8, SI")
	P("\tMOVQ  nb+32(FP), CX")
	P("")
	P("%sblk:", l.label)
	P("\tMOVWLZX (SI), AX")
	P("\tMOVW    AX, (DI)")
	P("\tVMOVDQU %d(SI), X0", l.nib)
	P("\tVPSRLW  $4, X0, X1")
	P("\tVPAND   X15, X0, X0")
	P("\tVPAND   X15, X1, X1")
	T(l.toInt8)
	P("\tVMOVDQU X0, 2(DI)")
	P("\tVMOVDQU X1, 18(DI)")
	P("\tADDQ    $%d, SI", l.bytes)
	P("\tADDQ    $34, DI")
	P("\tDECQ    CX")
	P("\tJNZ     %sblk", l.label)
	P("\tADDQ    R9, R8")
	P("\tDECQ    R10")
	P("\tJMP     %srow", l.label)
	P("")
	P("%sdone:", l.label)
	P("\tRET")
}

// exGemv16 writes the 16-row VNNI matvec of layout l.
func exGemv16(l exLayout) {
	l = l.gemvDefaults()
	P("// func %s(w *byte, rb int, nb int, x *byte, dst *float32, mask uint16, pfd int)", l.gemv)
	T(l.gdoc)
	P("TEXT ·%s(SB), NOSPLIT, $0-56", l.gemv)
	T(`	MOVQ         w+0(FP), SI
	MOVQ         rb+8(FP), CX
	MOVQ         nb+16(FP), BX
	MOVQ         x+24(FP), DI
	LEAQ         (CX)(CX*2), DX
	LEAQ         (SI)(CX*4), R8
	LEAQ         (R8)(CX*4), R9
	LEAQ         (R9)(CX*4), R10
	MOVQ         pfd+48(FP), R11
`)
	P("\tVPBROADCASTD %s<>(SB), Z27", l.mask)
	P("\tVPXORD       Z31, Z31, Z31")
	T(l.gconsts)
	T(`	LEAQ         (R8)(R11*1), R12
	LEAQ         (R9)(R11*1), R13
	LEAQ         (R10)(R11*1), R14
	LEAQ         (SI)(R11*1), R11

`)
	P("%s:", l.glabel)
	// The same blocks pfd bytes on: R11..R14 are SI, R8, R9, R10 + pfd.
	// Into the L2 cache, as gemvQ8VNNI's: two tiles ahead is 49 KB of
	// MXFP4 at 2880 columns, and PREFETCHT0 that far ahead evicted lines
	// from the 32 KB L1 before they were read (one thread streaming 300 MB
	// of 2880x2880 matrices: MXFP4 13.3 to 15.1 cpu-GB/s, Q4_0 14 to 17.4).
	for r := range 16 {
		P("\tPREFETCHT1      (R%d)%s", 11+r/4, rowIdx[r%4])
	}
	l.gscales(P)
	P("\tVBROADCASTI64X4 8(DI), Z30")
	for k := range 8 {
		lo, hi := gemv16Pair(k)
		t := 18 + k%4
		P("\tVMOVDQU         %s, X%d", rowAddr(lo, l.nib), k)
		P("\tVINSERTI32X4    $2, %s, Z%d, Z%d", rowAddr(hi, l.nib), k, k)
		P("\tVPSRLW          $4, Z%d, Z%d", k, t)
		P("\tVALIGNQ         $6, Z%d, Z%d, Z%d", t, t, t)
		P("\tVPTERNLOGD      $0xa8, Z27, Z%d, Z%d", t, k)
		l.gfix(k, lo, hi)
		P("\tVPXORD          Z%d, Z%d, Z%d", 8+k, 8+k, 8+k)
		P("\tVPDPBUSD        Z30, Z%d, Z%d", k, 8+k)
	}
	gemv16Reduce(P)
	T(l.gbias)
	T(l.gfloat)
	T(`	VCVTDQ2PS       Z16, Z16
	VMULPS          Z26, Z16, Z16
	VADDPS          Z16, Z31, Z31
`)
	for _, r := range []string{"SI", "R8", "R9", "R10", "R11", "R12", "R13", "R14"} {
		P("\tADDQ            $%d, %s", l.bytes, r)
	}
	P("\tADDQ            $40, DI")
	P("\tDECQ            BX")
	P("\tJNZ             %s", l.glabel)
	T(`
	MOVQ    dst+32(FP), AX
	MOVWLZX mask+40(FP), BX
	KMOVW   BX, K1
	VMOVUPS Z31, K1, (AX)
	VZEROUPPER
	RET
`)
}
