// kvwarden CUDA kernels. Compiled to PTX by clang-16 without the CUDA SDK
// (see scripts/check-ptx.sh); the PTX is embedded in internal/device/cuda and
// loaded by the driver at run time. All kernels are extern "C" so their
// names in the PTX are the names below.
//
// Conventions: activations are f32, row-major [rows][cols]. Weights are f32
// or f16 (u16 bits). KV pages follow kvcache.Geometry: page p holds
// [layer][K|V][slot][kvHeads*headDim] elements of the KV dtype (f32, f16 or
// bf16), so the element offset of K for (page, layer, slot) is
// p*pageElems + (layer*2*pageSize + slot)*kvDim and V is pageSize*kvDim
// further. Kernels index the arena only through page indices and spans the
// host computed from page tables; a span never exceeds the row's written
// positions plus the token being processed.
#include "common.h"
#include "xxh3.h"

#define EXT extern "C" __global__

// ---------------------------------------------------------------- helpers

KV_D float block_sum(float v, float* sh) {
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) sh[w] = v;
  __syncthreads();
  float t = 0.f;
  for (int i = 0; i < nw; i++) t += sh[i];
  return t;
}

// ---------------------------------------------------------------- embedding

template <class W>
KV_D void embed(float* x, const typename W::T* table, const int* tokens, int dim) {
  int row = blockIdx.x;
  i64 base = (i64)tokens[row] * dim;
  for (int j = threadIdx.x; j < dim; j += blockDim.x) x[(i64)row * dim + j] = W::load(table, base + j);
}
EXT void kv_embed_f32(float* x, const float* table, const int* tokens, int dim) { embed<F32T>(x, table, tokens, dim); }
EXT void kv_embed_f16(float* x, const u16* table, const int* tokens, int dim) { embed<F16T>(x, table, tokens, dim); }

// ---------------------------------------------------------------- RMSNorm
// out[r] = w * (x[src] * 1/sqrt(mean(x[src]^2) + eps)), src = rows ? rows[r] : r.
// One block per output row.

template <class O>
KV_D void rmsnorm(typename O::T* out, const float* x, const float* w, const int* rows, int dim, float eps) {
  __shared__ float sh[32];
  int r = blockIdx.x;
  int src = rows ? rows[r] : r;
  const float* xr = x + (i64)src * dim;
  float s = 0.f;
  for (int j = threadIdx.x; j < dim; j += blockDim.x) s += xr[j] * xr[j];
  s = block_sum(s, sh);
  float ss = __nvvm_div_rn_f(s, (float)dim) + eps;
  ss = __nvvm_div_rn_f(1.f, __nvvm_sqrt_rn_f(ss));
  for (int j = threadIdx.x; j < dim; j += blockDim.x) O::store(out, (i64)r * dim + j, __nvvm_mul_rn_f(w[j], __nvvm_mul_rn_f(ss, xr[j])));
}
EXT void kv_rmsnorm_f32(float* out, const float* x, const float* w, const int* rows, int dim, float eps) {
  rmsnorm<F32T>(out, x, w, rows, dim, eps);
}
EXT void kv_rmsnorm_f16(u16* out, const float* x, const float* w, const int* rows, int dim, float eps) {
  rmsnorm<F16T>(out, x, w, rows, dim, eps);
}

// ---------------------------------------------------------------- RoPE
// Rotates adjacent pairs (i, i+1), i < ropeDim, of the first nHeads heads of
// each row of v (row stride `stride` floats) by the cos/sin in cs, a table
// [position][ropeDim] holding cos at even and sin at odd indices, computed on
// the host exactly as ml.RoPE computes them. One block per row.
EXT void kv_rope(float* v, const float* cs, const int* pos, int stride, int nHeads, int headDim, int ropeDim) {
  int r = blockIdx.x;
  const float* c = cs + (i64)pos[r] * ropeDim;
  float* row = v + (i64)r * stride;
  int half = ropeDim / 2;
  for (int u = threadIdx.x; u < nHeads * half; u += blockDim.x) {
    int h = u / half, i = 2 * (u % half);
    float* hv = row + (i64)h * headDim;
    float fcr = c[i], fci = c[i + 1];
    float v0 = hv[i], v1 = hv[i + 1];
    hv[i] = __nvvm_add_rn_f(__nvvm_mul_rn_f(v0, fcr), -__nvvm_mul_rn_f(v1, fci));
    hv[i + 1] = __nvvm_add_rn_f(__nvvm_mul_rn_f(v0, fci), __nvvm_mul_rn_f(v1, fcr));
  }
}

// NeoX RoPE: rotates the pairs (i, i + ropeDim/2), i < ropeDim/2, with the
// same table (cos at cs[2i], sin at cs[2i+1]); Qwen, Phi-3, Gemma.
EXT void kv_rope_neox(float* v, const float* cs, const int* pos, int stride, int nHeads, int headDim, int ropeDim) {
  int r = blockIdx.x;
  const float* c = cs + (i64)pos[r] * ropeDim;
  float* row = v + (i64)r * stride;
  int half = ropeDim / 2;
  for (int u = threadIdx.x; u < nHeads * half; u += blockDim.x) {
    int h = u / half, i = u % half;
    float* hv = row + (i64)h * headDim;
    float fcr = c[2 * i], fci = c[2 * i + 1];
    float v0 = hv[i], v1 = hv[i + half];
    hv[i] = __nvvm_add_rn_f(__nvvm_mul_rn_f(v0, fcr), -__nvvm_mul_rn_f(v1, fci));
    hv[i + half] = __nvvm_add_rn_f(__nvvm_mul_rn_f(v0, fci), __nvvm_mul_rn_f(v1, fcr));
  }
}

// Per-head RMSNorm in place (Qwen3/Gemma 3 Q/K norm): head h of row r is
// the headDim values at row r*stride + col + h*headDim; every head uses
// the same weights w[headDim]. Grid (rows, nHeads), one warp per head.
EXT void kv_head_rmsnorm(float* v, const float* w, int stride, int col, int headDim, float eps) {
  float* x = v + (i64)blockIdx.x * stride + col + (i64)blockIdx.y * headDim;
  float s = 0.f;
  for (int j = threadIdx.x; j < headDim; j += 32) s += x[j] * x[j];
  s = warp_sum(s);
  float ss = __nvvm_div_rn_f(s, (float)headDim) + eps;
  ss = __nvvm_div_rn_f(1.f, __nvvm_sqrt_rn_f(ss));
  for (int j = threadIdx.x; j < headDim; j += 32) x[j] = __nvvm_mul_rn_f(w[j], __nvvm_mul_rn_f(ss, x[j]));
}

// x[r*stride + j] += b[j] for j < width, r < rows (Q/K/V and output biases).
EXT void kv_bias_add(float* x, const float* b, int rows, int width, int stride) {
  i64 total = (i64)rows * width;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
    i64 r = i / width, j = i % width;
    x[r * stride + j] += b[j];
  }
}

// ---------------------------------------------------------------- K/V write
// Scatters row r's K (columns kCol..kCol+kvDim of qkv) and V (vCol..) into
// the arena at koff[r] + layer*layerStride and that plus vDelta. koff is the
// element offset of the row's slot in layer 0 (page*pageElems + slot*kvDim).
template <class K>
KV_D void kvwrite(typename K::T* arena, const float* qkv, const i64* koff, int stride, int kCol, int vCol,
                               int kvDim, i64 layerStride, i64 vDelta, int layer) {
  int r = blockIdx.x;
  i64 ko = koff[r] + (i64)layer * layerStride;
  const float* row = qkv + (i64)r * stride;
  for (int j = threadIdx.x; j < kvDim; j += blockDim.x) {
    K::store(arena, ko + j, row[kCol + j]);
    K::store(arena, ko + vDelta + j, row[vCol + j]);
  }
}
EXT void kv_write_f32(float* a, const float* qkv, const i64* koff, int stride, int kCol, int vCol, int kvDim, i64 ls, i64 vd, int layer) {
  kvwrite<F32T>(a, qkv, koff, stride, kCol, vCol, kvDim, ls, vd, layer);
}
EXT void kv_write_f16(u16* a, const float* qkv, const i64* koff, int stride, int kCol, int vCol, int kvDim, i64 ls, i64 vd, int layer) {
  kvwrite<F16T>(a, qkv, koff, stride, kCol, vCol, kvDim, ls, vd, layer);
}
EXT void kv_write_bf16(u16* a, const float* qkv, const i64* koff, int stride, int kCol, int vCol, int kvDim, i64 ls, i64 vd, int layer) {
  kvwrite<BF16T>(a, qkv, koff, stride, kCol, vCol, kvDim, ls, vd, layer);
}

// ---------------------------------------------------------------- attention
// Paged attention with online softmax for decode and chunked prefill. Grid
// (rows, kvHeads), ATT_WARPS warps per block. Row r attends over positions
// [0, span[r]) of its own sequence (the last `window` of them when window >
// 0: sliding-window layers), scores soft-capped as softcap*tanh(s/softcap)
// when softcap > 0, whose pages are pages[pageOff[r] ...
// pageOff[r]+npages[r]); positions past npages*pageSize are never read. The
// group = heads/kvHeads query heads sharing the KV head are handled by one
// block so K and V are read once per group. headDim <= 256, group <= 16.
// sinks, when not null, holds one logit per query head that joins the
// softmax's denominator without a value (gpt-oss's attention sinks,
// ml.SoftmaxSink).
#define ATT_WARPS 4
#define ATT_MAXD 8   // head dims per lane: headDim <= 256
#define ATT_MAXG 16  // query heads per KV head

template <class K, class O>
KV_D void attention(typename O::T* out, const float* qkv, const typename K::T* arena, const int* span,
                                 const int* pageOff, const int* npages, const u32* pages, int stride, int heads,
                                 int kvHeads, int headDim, int pageSize, i64 pageElems, int layer, float scale,
                                 float softcap, int window, const float* sinks) {
  extern __shared__ float smem[];
  int r = blockIdx.x, kvh = blockIdx.y;
  int group = heads / kvHeads;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int kvDim = kvHeads * headDim;
  float* q = smem;                                  // [group][headDim]
  float* red = smem + group * headDim;              // [ATT_WARPS][group][headDim + 2]
  const float* qrow = qkv + (i64)r * stride + (i64)kvh * group * headDim;
  for (int j = threadIdx.x; j < group * headDim; j += blockDim.x) q[j] = qrow[j] * scale;
  __syncthreads();

  int n = span[r];
  int maxPos = npages[r] * pageSize;
  if (n > maxPos) n = maxPos;
  // A local layer attends over the last `window` positions only.
  int t0 = window > 0 && n > window ? n - window : 0;
  const u32* pl = pages + pageOff[r];

  float m[ATT_MAXG], l[ATT_MAXG], acc[ATT_MAXG][ATT_MAXD];
#pragma unroll
  for (int g = 0; g < ATT_MAXG; g++) {
    m[g] = -__builtin_inff();
    l[g] = 0.f;
#pragma unroll
    for (int d = 0; d < ATT_MAXD; d++) acc[g][d] = 0.f;
  }
  for (int t = t0 + warp; t < n; t += ATT_WARPS) {
    i64 base = (i64)pl[t / pageSize] * pageElems + ((i64)layer * 2 * pageSize + t % pageSize) * kvDim + (i64)kvh * headDim;
    const typename K::T* kp = arena + base;
    const typename K::T* vp = kp + (i64)pageSize * kvDim;
    float kv[ATT_MAXD], vv[ATT_MAXD];
#pragma unroll
    for (int d = 0; d < ATT_MAXD; d++) {
      int j = lane + 32 * d;
      kv[d] = j < headDim ? K::load(kp, j) : 0.f;
      vv[d] = j < headDim ? K::load(vp, j) : 0.f;
    }
#pragma unroll
    for (int g = 0; g < ATT_MAXG; g++) {
      if (g < group) {
        float s = 0.f;
#pragma unroll
        for (int d = 0; d < ATT_MAXD; d++) {
          int j = lane + 32 * d;
          if (j < headDim) s += q[g * headDim + j] * kv[d];
        }
        s = warp_sum(s);
        if (softcap > 0.f) s = softcap * kv_tanh(__nvvm_div_rn_f(s, softcap));
        float mn = kv_max(m[g], s);
        float corr = kv_exp(m[g] - mn);
        float p = kv_exp(s - mn);
        l[g] = l[g] * corr + p;
#pragma unroll
        for (int d = 0; d < ATT_MAXD; d++) acc[g][d] = acc[g][d] * corr + p * vv[d];
        m[g] = mn;
      }
    }
  }
  // Combine the warps' partial softmax states.
  int w2 = headDim + 2;
#pragma unroll
  for (int g = 0; g < ATT_MAXG; g++) {
    if (g < group) {
      float* dst = red + ((i64)warp * group + g) * w2;
#pragma unroll
      for (int d = 0; d < ATT_MAXD; d++) {
        int j = lane + 32 * d;
        if (j < headDim) dst[j] = acc[g][d];
      }
      if (lane == 0) {
        dst[headDim] = m[g];
        dst[headDim + 1] = l[g];
      }
    }
  }
  __syncthreads();
  i64 orow = (i64)r * heads * headDim + (i64)kvh * group * headDim;
  for (int u = threadIdx.x; u < group * headDim; u += blockDim.x) {
    int g = u / headDim, j = u % headDim;
    float M = -__builtin_inff();
    for (int w = 0; w < ATT_WARPS; w++) M = kv_max(M, red[((i64)w * group + g) * w2 + headDim]);
    float L = 0.f, o = 0.f;
    if (sinks) {
      float sk = sinks[kvh * group + g];
      M = kv_max(M, sk);
      L = kv_exp(sk - M);
    }
    for (int w = 0; w < ATT_WARPS; w++) {
      const float* src = red + ((i64)w * group + g) * w2;
      float mw = src[headDim];
      if (mw == -__builtin_inff()) continue;
      float f = kv_exp(mw - M);
      L += src[headDim + 1] * f;
      o += src[j] * f;
    }
    O::store(out, orow + u, L > 0.f ? __nvvm_div_rn_f(o, L) : 0.f);
  }
}

#define ATT(KN, KT, ON, OT)                                                                                              \
  EXT void kv_attention_##KN##_##ON(OT::T* out, const float* qkv, const KT::T* arena, const int* span,                 \
                                    const int* pageOff, const int* npages, const u32* pages, int stride, int heads,     \
                                    int kvHeads, int headDim, int pageSize, i64 pageElems, int layer, float scale,      \
                                    float softcap, int window, const float* sinks) {                                    \
    attention<KT, OT>(out, qkv, arena, span, pageOff, npages, pages, stride, heads, kvHeads, headDim, pageSize,         \
                      pageElems, layer, scale, softcap, window, sinks);                                                 \
  }
ATT(f32, F32T, f32, F32T)
ATT(f32, F32T, f16, F16T)
ATT(f16, F16T, f32, F32T)
ATT(f16, F16T, f16, F16T)
ATT(bf16, BF16T, f32, F32T)
ATT(bf16, BF16T, f16, F16T)

// ---------------------------------------------------------------- MLP and elementwise
// out[r][j] = silu(gu[r][j]) * gu[r][hidden + j]; gu holds gate then up per row.
template <class O>
KV_D void silumul(typename O::T* out, const float* gu, int n, int hidden) {
  i64 total = (i64)n * hidden;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
    i64 r = i / hidden, j = i % hidden;
    float g = gu[r * 2 * hidden + j], u = gu[r * 2 * hidden + hidden + j];
    float s = g * __nvvm_div_rn_f(1.f, 1.f + kv_exp(-g));
    O::store(out, i, s * u);
  }
}
EXT void kv_silu_mul_f32(float* out, const float* gu, int n, int hidden) { silumul<F32T>(out, gu, n, hidden); }
EXT void kv_silu_mul_f16(u16* out, const float* gu, int n, int hidden) { silumul<F16T>(out, gu, n, hidden); }

// out[r][j] = gelu_tanh(gu[r][j]) * gu[r][hidden + j] (GeGLU, Gemma).
template <class O>
KV_D void gelumul(typename O::T* out, const float* gu, int n, int hidden) {
  i64 total = (i64)n * hidden;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
    i64 r = i / hidden, j = i % hidden;
    float g = gu[r * 2 * hidden + j], u = gu[r * 2 * hidden + hidden + j];
    float t = kv_tanh(0.7978845608028654f * (g + 0.044715f * g * g * g));
    O::store(out, i, 0.5f * g * (1.f + t) * u);
  }
}
EXT void kv_gelu_mul_f32(float* out, const float* gu, int n, int hidden) { gelumul<F32T>(out, gu, n, hidden); }
EXT void kv_gelu_mul_f16(u16* out, const float* gu, int n, int hidden) { gelumul<F16T>(out, gu, n, hidden); }

// gpt-oss's clamped SwiGLU (ggml's swiglu_oai, ml.SwiGLUOAIMul):
// out[r][j] = g*sigmoid(alpha*g)*(u+1), g = min(gate, limit),
// u = clamp(up, -limit, limit); gu holds gate then up per row.
template <class O>
KV_D void swigluoai(typename O::T* out, const float* gu, int n, int hidden, float alpha, float limit) {
  i64 total = (i64)n * hidden;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
    i64 r = i / hidden, j = i % hidden;
    float g = __builtin_fminf(gu[r * 2 * hidden + j], limit);
    float u = __builtin_fmaxf(-limit, __builtin_fminf(gu[r * 2 * hidden + hidden + j], limit));
    float s = g * __nvvm_div_rn_f(1.f, 1.f + kv_exp(-alpha * g));
    O::store(out, i, s * (u + 1.f));
  }
}
EXT void kv_swiglu_oai_mul_f32(float* out, const float* gu, int n, int hidden, float alpha, float limit) {
  swigluoai<F32T>(out, gu, n, hidden, alpha, limit);
}
EXT void kv_swiglu_oai_mul_f16(u16* out, const float* gu, int n, int hidden, float alpha, float limit) {
  swigluoai<F16T>(out, gu, n, hidden, alpha, limit);
}

// ---------------------------------------------------------------- mixture of experts
// The host routes the tokens (engine/model/gpu/moe.go) and groups the
// (token, choice) pairs by expert; y holds the experts' outputs, one row
// per pair in that grouped order. out[t][j] = sum_{i<k} w[t*k+i] *
// y[slot[t*k+i]][j]: each token's choices summed in selection order, as
// model.Runner's moeFFN sums them.
EXT void kv_moe_combine(float* out, const float* y, const int* slot, const float* w, int n, int k, int dim) {
  i64 total = (i64)n * dim;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
    i64 t = i / dim, j = i % dim;
    float s = 0.f;
    for (int c = 0; c < k; c++) s += w[t * k + c] * y[(i64)slot[t * k + c] * dim + j];
    out[i] = s;
  }
}

// out[t][j] += sigmoid(g[t]) * y[t][j] (g null: += y[t][j]): the shared
// expert's output added with its gate (Qwen2-MoE) or without (GLM-4.5).
EXT void kv_moe_shared_add(float* out, const float* y, const float* g, int n, int dim) {
  i64 total = (i64)n * dim;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
    float s = 1.f;
    if (g) s = __nvvm_div_rn_f(1.f, 1.f + kv_exp(-g[i / dim]));
    out[i] += s * y[i];
  }
}

// x = cap * tanh(x / cap) (Gemma 2's final logit soft-cap).
EXT void kv_softcap(float* x, i64 n, float cap) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
    x[i] = cap * kv_tanh(__nvvm_div_rn_f(x[i], cap));
}

// x *= s (Gemma's embedding scale).
EXT void kv_scale(float* x, i64 n, float s) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) x[i] *= s;
}

EXT void kv_add(float* x, const float* y, i64 n) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) x[i] += y[i];
}
EXT void kv_f32_to_f16(u16* out, const float* in, i64 n) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) out[i] = f2h(in[i]);
}
EXT void kv_f16_to_f32(float* out, const u16* in, i64 n) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) out[i] = h2f(in[i]);
}
EXT void kv_f32_to_bf16(u16* out, const float* in, i64 n) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) out[i] = f2bf(in[i]);
}
EXT void kv_bf16_to_f32(float* out, const u16* in, i64 n) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) out[i] = bf2f(in[i]);
}

// ---------------------------------------------------------------- scrub and fill
EXT void kv_fill32(u32* p, i64 n, u32 word) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) p[i] = word;
}
// Scrubs whole pages: grid (blocksPerPage, npages).
EXT void kv_scrub_pages(u32* arena, const u32* pages, i64 pageWords, u32 word) {
  u32* p = arena + (i64)pages[blockIdx.y] * pageWords;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < pageWords; i += (i64)gridDim.x * blockDim.x) p[i] = word;
}

// ---------------------------------------------------------------- checksum
// device.Checksum of nranges byte ranges of base, one block per range: the
// block's threads hash 4 KiB chunks into scratch (scratchStride digests per
// range), then thread 0 hashes the digests. out[range] receives the value.
EXT void kv_checksum(const u8* base, const u64* offs, const u64* lens, u64* scratch, u64 scratchStride, u64* out) {
  int rg = blockIdx.x;
  const u8* p = base + offs[rg];
  u64 n = lens[rg];
  u64 chunks = (n + KV_CHECKSUM_CHUNK - 1) / KV_CHECKSUM_CHUNK;
  u64* dg = scratch + (u64)rg * scratchStride;
  for (u64 c = threadIdx.x; c < chunks; c += blockDim.x) {
    u64 off = c * KV_CHECKSUM_CHUNK;
    u64 len = n - off < KV_CHECKSUM_CHUNK ? n - off : KV_CHECKSUM_CHUNK;
    dg[c] = kv_xxh3_64(p + off, len);
  }
  __syncthreads();
  if (threadIdx.x == 0) out[rg] = kv_xxh3_64((const u8*)dg, chunks * 8);
}

// ---------------------------------------------------------------- argmax
// out[r] = the first index of the largest logit of row r. One block per row.
EXT void kv_argmax(int* out, const float* logits, int vocab) {
  __shared__ float sv[32];
  __shared__ int si[32];
  const float* x = logits + (i64)blockIdx.x * vocab;
  float best = -__builtin_inff();
  int bi = 0x7fffffff;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
    float v = x[j];
    if (v > best) best = v, bi = j;  // j increases per thread: first max kept
  }
  for (int m = 16; m > 0; m >>= 1) {
    float ov = shfl_xor(best, m);
    int oi = __nvvm_shfl_sync_bfly_i32(0xffffffffu, bi, m, 0x1f);
    if (ov > best || (ov == best && oi < bi)) best = ov, bi = oi;
  }
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  if (lane == 0) sv[w] = best, si[w] = bi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 1; i < nw; i++)
      if (sv[i] > best || (sv[i] == best && si[i] < bi)) best = sv[i], bi = si[i];
    out[blockIdx.x] = bi == 0x7fffffff ? 0 : bi;
  }
}

// ---------------------------------------------------------------- GEMM fallback
// y[i][o] = beta*y[i][o] + sum_k x[i][k] * w[o][k] for n rows; a 16x16 tiled
// kernel used when cuBLAS is unavailable and as a test reference.
#define GT 16
template <class W>
KV_D void gemm(float* y, const float* x, const typename W::T* w, int n, int out, int in, float beta) {
  __shared__ float xs[GT][GT + 1], ws[GT][GT + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * GT + ty;  // activation row
  int col = blockIdx.x * GT + tx;  // output feature
  float s = 0.f;
  for (int k0 = 0; k0 < in; k0 += GT) {
    int kx = k0 + tx;
    xs[ty][tx] = (row < n && kx < in) ? x[(i64)row * in + kx] : 0.f;
    int wr = blockIdx.x * GT + ty;
    ws[ty][tx] = (wr < out && kx < in) ? W::load(w, (i64)wr * in + kx) : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < GT; k++) s += xs[ty][k] * ws[tx][k];
    __syncthreads();
  }
  if (row < n && col < out) {
    i64 i = (i64)row * out + col;
    y[i] = beta == 0.f ? s : beta * y[i] + s;
  }
}
EXT void kv_gemm_f32(float* y, const float* x, const float* w, int n, int out, int in, float beta) { gemm<F32T>(y, x, w, n, out, in, beta); }
EXT void kv_gemm_f16(float* y, const float* x, const u16* w, int n, int out, int in, float beta) { gemm<F16T>(y, x, w, n, out, in, beta); }

// ---------------------------------------------------------------- synthetic weights and tests
KV_D u64 splitmix(u64 x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
// Uniform values in [-scale, scale) from a hash of (seed, index): the same
// bytes for the same seed on every GPU.
EXT void kv_rand_f16(u16* p, i64 n, u64 seed, float scale) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
    float u = (float)(splitmix(seed ^ (u64)i * 0xd1342543de82ef95ULL) >> 40) * (1.f / 16777216.f);
    p[i] = f2h((2.f * u - 1.f) * scale);
  }
}
EXT void kv_rand_f32(float* p, i64 n, u64 seed, float scale) {
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
    float u = (float)(splitmix(seed ^ (u64)i * 0xd1342543de82ef95ULL) >> 40) * (1.f / 16777216.f);
    p[i] = (2.f * u - 1.f) * scale;
  }
}
// Busy-waits ns nanoseconds on the global timer: tests use it to hold a
// stream so that work queued behind it is observably in flight.
EXT void kv_spin(u64 ns) {
  u64 t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}
