package ml

// kernels_arm64.s is generated (its go:generate line is here, in a file
// every GOARCH builds, so go generate regenerates it on any host);
// TestNEONKernelsGenerated requires the committed file to be what
// neongen prints.
//
//go:generate go run ./internal/gen/neongen -o kernels_arm64.s
