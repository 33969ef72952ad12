// XXH3-64 (seed 0, default secret) and the project's page checksum, written
// once for the device and the host. The page checksum (device.Checksum in
// Go) hashes each 4 KiB chunk with XXH3-64 and then the little-endian chunk
// digests with XXH3-64 again. The Go test TestChecksumHostC compiles this
// file for the host and compares it with device.Checksum on random inputs.
#pragma once
#include "common.h"

#define KV_CHECKSUM_CHUNK 4096

#ifdef KV_DEVICE_PASS
__constant__ u8 kv_xxh3_secret[192] = {
#else
static const u8 kv_xxh3_secret[192] = {
#endif
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
};

#define KV_P32_1 2654435761ULL
#define KV_P32_2 2246822519ULL
#define KV_P32_3 3266489917ULL
#define KV_P64_1 11400714785074694791ULL
#define KV_P64_2 14029467366897019727ULL
#define KV_P64_3 1609587929392839161ULL
#define KV_P64_4 9650029242287828579ULL
#define KV_P64_5 2870177450012600261ULL

// Little-endian loads of unaligned bytes (both targets are little-endian).
KV_HD u64 kv_rd64(const u8* p) {
  if ((((u64)p) & 7) == 0) return *(const u64*)p;
  u64 v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
KV_HD u32 kv_rd32(const u8* p) {
  if ((((u64)p) & 3) == 0) return *(const u32*)p;
  return (u32)p[0] | (u32)p[1] << 8 | (u32)p[2] << 16 | (u32)p[3] << 24;
}
KV_HD u64 kv_key64(int off) { return kv_rd64(kv_xxh3_secret + off); }

KV_HD u64 kv_mulfold64(u64 a, u64 b) {
#ifdef KV_DEVICE_PASS
  return (a * b) ^ __nvvm_mulhi_ull(a, b);
#else
  unsigned __int128 r = (unsigned __int128)a * b;
  return (u64)r ^ (u64)(r >> 64);
#endif
}
KV_HD u64 kv_avalanche(u64 x) {
  x ^= x >> 37;
  x *= 0x165667919e3779f9ULL;
  x ^= x >> 32;
  return x;
}
KV_HD u64 kv_rotl64(u64 x, int r) { return (x << r) | (x >> (64 - r)); }
KV_HD u64 kv_rrmxmx(u64 h, u64 len) {
  h ^= kv_rotl64(h, 49) ^ kv_rotl64(h, 24);
  h *= 0x9fb21c651e98df25ULL;
  h ^= (h >> 35) + len;
  h *= 0x9fb21c651e98df25ULL;
  h ^= h >> 28;
  return h;
}
KV_HD u64 kv_mix16(const u8* p, int keyoff) {
  return kv_mulfold64(kv_rd64(p) ^ kv_key64(keyoff), kv_rd64(p + 8) ^ kv_key64(keyoff + 8));
}
KV_HD void kv_accum_stripe(u64* acc, const u8* p, int keyoff) {
#pragma unroll
  for (int i = 0; i < 8; i++) {
    u64 dv = kv_rd64(p + 8 * i);
    u64 dk = dv ^ kv_key64(keyoff + 8 * i);
    acc[i ^ 1] += dv;
    acc[i] += (dk & 0xffffffffULL) * (dk >> 32);
  }
}

// kv_xxh3_64 is XXH3_64bits(p, len).
KV_HD u64 kv_xxh3_64(const u8* p, u64 len) {
  if (len <= 16) {
    if (len > 8) {
      u64 lo = kv_rd64(p) ^ (kv_key64(24) ^ kv_key64(32));
      u64 hi = kv_rd64(p + len - 8) ^ (kv_key64(40) ^ kv_key64(48));
      u64 lor = __builtin_bswap64(lo);
      return kv_avalanche(len + lor + hi + kv_mulfold64(lo, hi));
    }
    if (len > 3) {
      u64 in1 = kv_rd32(p), in2 = kv_rd32(p + len - 4);
      u64 in64 = in2 + (in1 << 32);
      return kv_rrmxmx(in64 ^ (kv_key64(8) ^ kv_key64(16)), len);
    }
    if (len == 0) return 0x2d06800538d394c2ULL;
    u64 c1 = p[0], c2 = p[len >> 1], c3 = p[len - 1];
    u64 comb = (c1 << 16) | (c2 << 24) | c3 | (len << 8);
    u64 acc = comb ^ (u64)(kv_rd32(kv_xxh3_secret) ^ kv_rd32(kv_xxh3_secret + 4));
    acc ^= acc >> 33;
    acc *= KV_P64_2;
    acc ^= acc >> 29;
    acc *= KV_P64_3;
    acc ^= acc >> 32;
    return acc;
  }
  if (len <= 128) {
    u64 acc = len * KV_P64_1;
    if (len > 32) {
      if (len > 64) {
        if (len > 96) {
          acc += kv_mix16(p + 48, 96);
          acc += kv_mix16(p + len - 64, 112);
        }
        acc += kv_mix16(p + 32, 64);
        acc += kv_mix16(p + len - 48, 80);
      }
      acc += kv_mix16(p + 16, 32);
      acc += kv_mix16(p + len - 32, 48);
    }
    acc += kv_mix16(p, 0);
    acc += kv_mix16(p + len - 16, 16);
    return kv_avalanche(acc);
  }
  if (len <= 240) {
    u64 acc = len * KV_P64_1;
    for (int i = 0; i < 8; i++) acc += kv_mix16(p + 16 * i, 16 * i);
    acc = kv_avalanche(acc);
    int rounds = (int)(len / 16);
    for (int i = 8; i < rounds; i++) acc += kv_mix16(p + 16 * i, 16 * (i - 8) + 3);
    acc += kv_mix16(p + len - 16, 136 - 17);
    return kv_avalanche(acc);
  }
  u64 acc[8] = {KV_P32_3, KV_P64_1, KV_P64_2, KV_P64_3, KV_P64_4, KV_P32_2, KV_P64_5, KV_P32_1};
  const u64 block = 1024;  // (192 - 64) / 8 stripes of 64 bytes
  u64 nblocks = (len - 1) / block;
  for (u64 b = 0; b < nblocks; b++) {
    const u8* bp = p + b * block;
    for (int s = 0; s < 16; s++) kv_accum_stripe(acc, bp + 64 * s, 8 * s);
    for (int i = 0; i < 8; i++) {
      acc[i] ^= acc[i] >> 47;
      acc[i] ^= kv_key64(128 + 8 * i);
      acc[i] *= KV_P32_1;
    }
  }
  u64 nstripes = ((len - 1) - block * nblocks) / 64;
  const u8* lp = p + nblocks * block;
  for (u64 s = 0; s < nstripes; s++) kv_accum_stripe(acc, lp + 64 * s, (int)(8 * s));
  kv_accum_stripe(acc, p + len - 64, 192 - 64 - 7);
  u64 r = len * KV_P64_1;
  for (int i = 0; i < 4; i++) r += kv_mulfold64(acc[2 * i] ^ kv_key64(11 + 16 * i), acc[2 * i + 1] ^ kv_key64(11 + 16 * i + 8));
  return kv_avalanche(r);
}
