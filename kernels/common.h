// Common definitions for the kvwarden CUDA kernels. The kernels are compiled
// by clang without the CUDA headers (-nocudainc -nocudalib), so qualifiers,
// types and conversions are defined here from clang builtins and inline PTX.
// KV_HD functions also compile for the host (see xxh3.h and the host test of
// the checksum in internal/device/cuda).
#pragma once

#if defined(__CUDA__) && defined(__CUDA_ARCH__)
#define KV_DEVICE_PASS 1
#endif

#ifdef __CUDA__
#include <__clang_cuda_builtin_vars.h>
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define KV_HD __attribute__((host)) __attribute__((device)) inline
#define KV_D __attribute__((device)) __attribute__((always_inline)) inline
#else
#define KV_HD static inline
#endif

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

#ifdef KV_DEVICE_PASS
KV_D float h2f(u16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
KV_D u16 f2h(float f) {
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
KV_D float bf2f(u16 h) { return __builtin_bit_cast(float, (u32)h << 16); }
// Round to nearest even, NaNs kept quiet: the same as ml.F32ToBF16.
KV_D u16 f2bf(float f) {
  u32 u = __builtin_bit_cast(u32, f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 64);
  return (u16)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}
KV_D float kv_exp(float x) { return __nvvm_ex2_approx_f(x * 1.4426950408889634f); }
KV_D float kv_max(float a, float b) { return __builtin_fmaxf(a, b); }
// tanh from the exponential: 1 - 2/(e^2x + 1), exact limits +-1 for large
// |x|; absolute error about 1e-7 (the soft-caps multiply it by the cap).
KV_D float kv_tanh(float x) { return 1.f - __nvvm_div_rn_f(2.f, kv_exp(2.f * x) + 1.f); }
KV_D float shfl_xor(float v, int m) { return __nvvm_shfl_sync_bfly_f32(0xffffffffu, v, m, 0x1f); }
KV_D float warp_sum(float v) {
  for (int m = 16; m > 0; m >>= 1) v += shfl_xor(v, m);
  return v;
}
KV_D float warp_max(float v) {
  for (int m = 16; m > 0; m >>= 1) v = kv_max(v, shfl_xor(v, m));
  return v;
}

// Element storage types: load as f32, store from f32.
struct F32T {
  typedef float T;
  static KV_D float load(const float* p, i64 i) { return p[i]; }
  static KV_D void store(float* p, i64 i, float v) { p[i] = v; }
};
struct F16T {
  typedef u16 T;
  static KV_D float load(const u16* p, i64 i) { return h2f(p[i]); }
  static KV_D void store(u16* p, i64 i, float v) { p[i] = f2h(v); }
};
struct BF16T {
  typedef u16 T;
  static KV_D float load(const u16* p, i64 i) { return bf2f(p[i]); }
  static KV_D void store(u16* p, i64 i, float v) { p[i] = f2bf(v); }
};
#endif
