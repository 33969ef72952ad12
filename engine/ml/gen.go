package ml

// The generated amd64 kernels: each file's first line names its generator
// (internal/gen/tilegen), and TestTileKernelsGenerated requires the
// committed files to be what it prints. A hand-written .s file's first
// line says why it is not generated (TestAsmFileHeaders).

//go:generate go run ./internal/gen/tilegen -kind q8 -o kernels_q8_amd64.s
//go:generate go run ./internal/gen/tilegen -kind q4k -o q4kgemm_amd64.s
//go:generate go run ./internal/gen/tilegen -kind q6k -o q6kgemm_amd64.s
//go:generate go run ./internal/gen/tilegen -kind quantk -o quantk_amd64.s
//go:generate go run ./internal/gen/tilegen -kind iq4xs -o iq4xsgemm_amd64.s
//go:generate go run ./internal/gen/tilegen -kind q41 -o q41gemm_amd64.s
//go:generate go run ./internal/gen/tilegen -kind attnqg -o attnqg_amd64.s
//go:generate go run ./internal/gen/tilegen -kind kquant -o kquant_amd64.s
//go:generate go run ./internal/gen/tilegen -kind expand -o expand_amd64.s
//go:generate go run ./internal/gen/tilegen -kind kquantlow -o kquant_low_amd64.s
//go:generate go run ./internal/gen/tilegen -kind q41dot -o q41_amd64.s
//go:generate go run ./internal/gen/tilegen -kind mxfp4 -o mxfp4_amd64.s
//go:generate go run ./internal/gen/tilegen -kind floatmm -o floatmm_amd64.s
//go:generate go run ./internal/gen/tilegen -kind iq4xsdot -o iq4xs_amd64.s
//go:generate go run ./internal/gen/tilegen -kind kqfew -o kqfew_amd64.s
