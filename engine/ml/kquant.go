package ml

// SIMD kernels for the K-quant integer products. They compute exactly the
// reference arithmetic of qdot.go (dotK: exact int32 super-block sums, then
// acc + (float32(d*dx)*isum - float32(dmin*dx)*msum) in that order), on the
// Q8_K activation blocks of quantizeActQ8K, so their outputs are bitwise
// equal to matmulIntGeneric's at every batch size and thread count.
// kquant_amd64.s has the AVX2 kernels; matmulKSIMD dispatches them.
