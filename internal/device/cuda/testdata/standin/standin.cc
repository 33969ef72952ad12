// kvwarden's GPU-free CUDA driver stand-in: a host-only libcuda.so.1 that
// also exports the cuBLAS entry points kvwarden uses. The tests build it
// (internal/cudastandin) and point KVWARDEN_CUDA_LIB and KVWARDEN_CUBLAS_LIB
// at it, so the host side of every TestGPU* runs through the real Go code on
// machines without a GPU.
//
// It computes no kernel except the integrity ones (kv_checksum, kv_fill32,
// kv_scrub_pages), which it runs on the host so the KV cache's checksum and
// scrub paths work end to end. "Device" memory is host memory, so uploads
// and downloads round-trip; other kernels' outputs stay as they were. What it checks,
// failing the call and counting a violation (kvw_standin_violations) on a
// breach:
//   - every launch against the kernel's parameter list parsed from the PTX
//     the module was loaded from: the argument count and each argument's
//     size (reported by the Go side through kvw_standin_arg_sizes);
//   - the sm_90 launch limits: block <= 1024 threads (x, y <= 1024, z <= 64),
//     grid.y and grid.z <= 65535, dynamic shared memory <= 48 KiB unless the
//     kernel's attribute allows more, and <= 227 KiB in any case;
//   - every pointer argument a kernel converts to a global address, and every
//     device range a copy, memset or GEMM touches, lies in a live allocation;
//   - the calling OS thread has the context current (thread-local, as in CUDA);
//   - asynchronous copies use pinned host memory (cuMemHostAlloc);
//   - pinned memory is not freed while a queued copy still uses it.
// It also keeps count of queued operations that no synchronization has
// covered yet (kvw_standin_queued), so tests can prove that a step waited for
// the device, and can fail the nth launch of a kernel
// (kvw_standin_fail_launch) to drive error paths.
#include <chrono>
#include <thread>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "xxh3.h"  // kernels/xxh3.h: the page checksum, host build

typedef uint32_t CUresult;
enum : CUresult {
  OK = 0,
  INVALID_VALUE = 1,
  OUT_OF_MEMORY = 2,
  NOT_INITIALIZED = 3,
  INVALID_IMAGE = 200,
  INVALID_CONTEXT = 201,
  JIT_COMPILER_NOT_FOUND = 221,
  INVALID_HANDLE = 400,
  NOT_FOUND = 500,
  NOT_READY = 600,
  ILLEGAL_ADDRESS = 700,
  LAUNCH_OUT_OF_RESOURCES = 701,
  LAUNCH_FAILED = 719,
};

namespace {

struct Kernel {
  std::string name;
  std::vector<int> sizes;    // bytes per parameter, from the PTX
  std::vector<bool> global;  // parameter is converted to a global address
  int maxDynShared = 48 << 10;
};

struct Op {  // a queued operation
  uint64_t seq;
  uintptr_t hostLo, hostHi;  // pinned range it uses, or 0, 0
};

typedef std::chrono::steady_clock Clock;

// A stream is busy until busyUntil: kv_spin holds it for its argument in
// nanoseconds, so work queued behind a spin is observably in flight.
struct Stream {
  std::vector<Op> ops;
  uint64_t seq = 0;
  Clock::time_point busyUntil;
};

struct Event {
  Stream* stream = nullptr;
  uint64_t seq = 0;
  int queries = 0;
  bool recorded = false;
  Clock::time_point readyAt;
};

std::mutex mu;
int initialized;
const uintptr_t kCtx = 0xC0C0;
thread_local uintptr_t current;
std::map<uintptr_t, size_t> devAllocs;   // base -> bytes
std::map<uintptr_t, size_t> hostAllocs;  // base -> bytes (pinned)
std::map<uintptr_t, Stream*> streams;
std::map<uintptr_t, Event*> events;
std::map<uintptr_t, std::vector<Kernel*>> modules;
std::vector<uint8_t> argSizes;
long violations;
std::string failKernel;
int failNth;
int rejectPTX;
Stream nullStream;
std::map<std::string, long> launched;  // per kernel

// With KVWARDEN_STANDIN_TRACE=<file>, the name of each kernel is appended
// to the file at its first launch (which kernels a test run exercised).
void trace(const std::string& name) {
  if (launched[name]++ > 0) return;
  const char* f = getenv("KVWARDEN_STANDIN_TRACE");
  if (!f || !*f) return;
  if (FILE* o = fopen(f, "a")) {
    fprintf(o, "%s\n", name.c_str());
    fclose(o);
  }
}

void violation(const char* fmt, ...) {
  violations++;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "kvwarden stand-in: VIOLATION: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

bool ctxCurrent(const char* call) {
  if (current == kCtx) return true;
  violation("%s called on a thread without the context current", call);
  return false;
}

// inRange reports whether [p, p+n) lies within one allocation of m.
bool inRange(const std::map<uintptr_t, size_t>& m, uintptr_t p, size_t n) {
  auto it = m.upper_bound(p);
  if (it == m.begin()) return false;
  --it;
  return p >= it->first && p + n <= it->first + it->second && p + n >= p;
}

bool devRange(const char* call, uint64_t p, size_t n) {
  if (inRange(devAllocs, p, n ? n : 1)) return true;
  violation("%s: device range [0x%llx, +%zu) is not inside a live allocation", call, (unsigned long long)p, n);
  return false;
}

Stream* stream(uintptr_t s) {
  if (s == 0) return &nullStream;
  auto it = streams.find(s);
  return it == streams.end() ? nullptr : it->second;
}

void enqueue(Stream* s, uintptr_t lo = 0, uintptr_t hi = 0) { s->ops.push_back(Op{++s->seq, lo, hi}); }

// waitUntil sleeps (without the lock's help: callers hold it, which is
// fine, the stand-in has no device thread) until t.
void waitUntil(Clock::time_point t) {
  auto now = Clock::now();
  if (t > now) std::this_thread::sleep_for(t - now);
}

void complete(Stream* s, uint64_t upto) {
  std::vector<Op> keep;
  for (auto& o : s->ops)
    if (o.seq > upto) keep.push_back(o);
  s->ops.swap(keep);
}

void completeAll() {
  waitUntil(nullStream.busyUntil);
  complete(&nullStream, UINT64_MAX);
  for (auto& kv : streams) {
    waitUntil(kv.second->busyUntil);
    complete(kv.second, UINT64_MAX);
  }
}

// ---- PTX parsing: ".visible .entry name( .param .u64 name_param_0, ... )"
// and, per entry, which u64 parameters reach a cvta.to.global.
int sizeOf(const std::string& ty) {
  if (ty == ".u64" || ty == ".s64" || ty == ".b64" || ty == ".f64") return 8;
  if (ty == ".u32" || ty == ".s32" || ty == ".b32" || ty == ".f32") return 4;
  if (ty == ".u16" || ty == ".s16" || ty == ".b16" || ty == ".f16") return 2;
  if (ty == ".u8" || ty == ".s8" || ty == ".b8") return 1;
  return -1;
}

std::vector<Kernel*> parsePTX(const std::string& ptx) {
  std::vector<Kernel*> out;
  size_t pos = 0;
  const std::string tag = ".entry ";
  while ((pos = ptx.find(tag, pos)) != std::string::npos) {
    size_t nameStart = pos + tag.size();
    size_t paren = ptx.find('(', nameStart);
    if (paren == std::string::npos) break;
    auto* k = new Kernel;
    k->name = ptx.substr(nameStart, paren - nameStart);
    while (!k->name.empty() && (k->name.back() == ' ' || k->name.back() == '\t')) k->name.pop_back();
    size_t close = ptx.find(')', paren);
    std::string params = ptx.substr(paren + 1, close - paren - 1);
    size_t p = 0;
    while ((p = params.find(".param", p)) != std::string::npos) {
      p += 6;
      while (p < params.size() && (params[p] == ' ' || params[p] == '\t')) p++;
      size_t e = p;
      while (e < params.size() && params[e] != ' ' && params[e] != '\t') e++;
      std::string ty = params.substr(p, e - p);
      int sz = sizeOf(ty);
      if (sz < 0 && ty == ".align") sz = 8;  // .param .align N .b8 x[M]: not used by kvwarden
      k->sizes.push_back(sz);
      k->global.push_back(false);
    }
    // The body: from the '{' after the parameter list to the next entry.
    size_t body = ptx.find('{', close);
    size_t next = ptx.find(tag, close);
    std::string b = ptx.substr(body, (next == std::string::npos ? ptx.size() : next) - body);
    // Map "ld.param.u64 %rdX, [name_param_i]" and look for "cvta.to.global.u64 %rdY, %rdX;".
    for (size_t i = 0; i < k->sizes.size(); i++) {
      if (k->sizes[i] != 8) continue;
      std::string pname = "[" + k->name + "_param_" + std::to_string(i) + "]";
      size_t q = 0;
      while ((q = b.find(pname, q)) != std::string::npos) {
        size_t ls = b.rfind('\n', q);
        std::string line = b.substr(ls + 1, q - ls - 1);
        size_t r = line.find("%rd");
        if (line.find("ld.param.u64") != std::string::npos && r != std::string::npos) {
          size_t re = r;
          while (re < line.size() && line[re] != ',') re++;
          std::string reg = line.substr(r, re - r);
          if (b.find(", " + reg + ";") != std::string::npos) {
            size_t c = 0;
            while ((c = b.find(", " + reg + ";", c)) != std::string::npos) {
              size_t cs = b.rfind('\n', c);
              if (b.substr(cs + 1, c - cs).find("cvta.to.global") != std::string::npos) {
                k->global[i] = true;
                break;
              }
              c++;
            }
          }
        }
        q++;
      }
    }
    out.push_back(k);
    pos = close;
  }
  return out;
}

const char* errName(CUresult r) {
  switch (r) {
    case OK: return "CUDA_SUCCESS";
    case INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
    case INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case JIT_COMPILER_NOT_FOUND: return "CUDA_ERROR_JIT_COMPILER_NOT_FOUND";
    case INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case NOT_READY: return "CUDA_ERROR_NOT_READY";
    case ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case LAUNCH_OUT_OF_RESOURCES: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case LAUNCH_FAILED: return "CUDA_ERROR_LAUNCH_FAILED";
  }
  return nullptr;
}

template <class T>
T arg(void** params, int i) {
  T v;
  memcpy(&v, params[i], sizeof v);
  return v;
}

// hostCompute runs the integrity kernels on the host, exactly as
// kernels/kvwarden.cu defines them (pointers were checked by the caller).
void hostCompute(Kernel* k, unsigned gx, unsigned gy, void** params) {
  if (k->name == "kv_checksum") {
    auto base = arg<const u8*>(params, 0);
    auto offs = arg<const u64*>(params, 1);
    auto lens = arg<const u64*>(params, 2);
    auto scratch = arg<u64*>(params, 3);
    auto stride = arg<u64>(params, 4);
    auto out = arg<u64*>(params, 5);
    for (unsigned rg = 0; rg < gx; rg++) {
      const u8* p = base + offs[rg];
      u64 n = lens[rg], chunks = (n + KV_CHECKSUM_CHUNK - 1) / KV_CHECKSUM_CHUNK;
      u64* dg = scratch + (u64)rg * stride;
      for (u64 c = 0; c < chunks; c++) {
        u64 off = c * KV_CHECKSUM_CHUNK;
        dg[c] = kv_xxh3_64(p + off, n - off < KV_CHECKSUM_CHUNK ? n - off : KV_CHECKSUM_CHUNK);
      }
      out[rg] = kv_xxh3_64((const u8*)dg, chunks * 8);
    }
  } else if (k->name == "kv_fill32") {
    auto p = arg<uint32_t*>(params, 0);
    auto n = arg<int64_t>(params, 1);
    auto w = arg<uint32_t>(params, 2);
    if (!devRange("kv_fill32", (uintptr_t)p, (size_t)n * 4)) return;
    for (int64_t i = 0; i < n; i++) p[i] = w;
  } else if (k->name == "kv_scrub_pages") {
    auto arena = arg<uint32_t*>(params, 0);
    auto pages = arg<const uint32_t*>(params, 1);
    auto words = arg<int64_t>(params, 2);
    auto w = arg<uint32_t>(params, 3);
    unsigned npages = gy;
    if (k->sizes.size() > 4) npages = arg<uint32_t>(params, 4);
    for (unsigned i = 0; i < npages; i++) {
      uint32_t* p = arena + (int64_t)pages[i] * words;
      if (!devRange("kv_scrub_pages", (uintptr_t)p, (size_t)words * 4)) return;
      for (int64_t j = 0; j < words; j++) p[j] = w;
    }
  }
}

#define LOCK std::lock_guard<std::mutex> lock(mu)
#define NEED_CTX(call) \
  if (!ctxCurrent(call)) return INVALID_CONTEXT

}  // namespace

extern "C" {

// ---- stand-in controls (not part of CUDA)
int kvw_standin(void) { return 1; }
long kvw_standin_violations(void) {
  LOCK;
  return violations;
}
long kvw_standin_take_violations(void) {
  LOCK;
  long n = violations;
  violations = 0;
  return n;
}
long kvw_standin_queued(void) {
  LOCK;
  long n = (long)nullStream.ops.size();
  for (auto& kv : streams) n += (long)kv.second->ops.size();
  return n;
}
void kvw_standin_arg_sizes(const uint8_t* sizes, uint32_t n) {
  LOCK;
  argSizes.assign(sizes, sizes + n);
}
void kvw_standin_reject_ptx(int on) {
  LOCK;
  rejectPTX = on;
}
void kvw_standin_fail_launch(const char* kernel, int nth) {
  LOCK;
  failKernel = kernel ? kernel : "";
  failNth = nth;
}

// ---- driver
CUresult cuInit(unsigned) {
  LOCK;
  initialized = 1;
  return OK;
}
CUresult cuDriverGetVersion(int* v) {
  *v = 13000;
  return OK;
}
CUresult cuGetErrorName(CUresult r, const char** s) {
  *s = errName(r);
  return *s ? OK : INVALID_VALUE;
}
CUresult cuDeviceGetCount(int* n) {
  *n = initialized ? 1 : 0;
  return initialized ? OK : NOT_INITIALIZED;
}
CUresult cuDeviceGet(int* d, int ordinal) {
  if (ordinal != 0) return INVALID_VALUE;
  *d = 0;
  return OK;
}
CUresult cuDeviceGetName(char* name, int n, int) {
  snprintf(name, n, "kvwarden stand-in (sm_90, no compute)");
  return OK;
}
CUresult cuDeviceGetAttribute(int* v, int attr, int) {
  switch (attr) {
    case 75: *v = 9; return OK;    // compute capability major
    case 76: *v = 0; return OK;    // minor
    case 16: *v = 132; return OK;  // multiprocessors
  }
  return INVALID_VALUE;
}
CUresult cuDeviceTotalMem_v2(size_t* b, int) {
  *b = size_t(1) << 32;
  return OK;
}
CUresult cuDevicePrimaryCtxRetain(uintptr_t* ctx, int) {
  *ctx = kCtx;
  return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(int) { return OK; }
CUresult cuCtxSetCurrent(uintptr_t ctx) {
  if (ctx != 0 && ctx != kCtx) return INVALID_CONTEXT;
  current = ctx;
  return OK;
}
CUresult cuCtxSynchronize(void) {
  LOCK;
  NEED_CTX("cuCtxSynchronize");
  completeAll();
  return OK;
}
CUresult cuMemGetInfo_v2(size_t* free_, size_t* total) {
  LOCK;
  NEED_CTX("cuMemGetInfo");
  size_t used = 0;
  for (auto& kv : devAllocs) used += kv.second;
  *total = size_t(1) << 32;
  *free_ = used < *total ? *total - used : 0;
  return OK;
}
CUresult cuMemAlloc_v2(uint64_t* p, size_t n) {
  LOCK;
  NEED_CTX("cuMemAlloc");
  if (n == 0) return INVALID_VALUE;
  size_t used = 0;
  for (auto& kv : devAllocs) used += kv.second;
  if (used + n > (size_t(1) << 32)) return OUT_OF_MEMORY;
  void* m = aligned_alloc(256, (n + 255) & ~size_t(255));
  if (!m) return OUT_OF_MEMORY;
  memset(m, 0, n);
  devAllocs[(uintptr_t)m] = n;
  *p = (uintptr_t)m;
  return OK;
}
CUresult cuMemFree_v2(uint64_t p) {
  LOCK;
  NEED_CTX("cuMemFree");
  auto it = devAllocs.find(p);
  if (it == devAllocs.end()) {
    violation("cuMemFree of 0x%llx, which is not a live allocation", (unsigned long long)p);
    return INVALID_VALUE;
  }
  completeAll();  // cuMemFree synchronizes
  free((void*)p);
  devAllocs.erase(it);
  return OK;
}
CUresult cuMemHostAlloc(void** p, size_t n, unsigned) {
  LOCK;
  NEED_CTX("cuMemHostAlloc");
  void* m = aligned_alloc(4096, (n + 4095) & ~size_t(4095));
  if (!m) return OUT_OF_MEMORY;
  memset(m, 0, n);
  hostAllocs[(uintptr_t)m] = n;
  *p = m;
  return OK;
}
CUresult cuMemFreeHost(void* p) {
  LOCK;
  NEED_CTX("cuMemFreeHost");
  auto it = hostAllocs.find((uintptr_t)p);
  if (it == hostAllocs.end()) {
    violation("cuMemFreeHost of %p, which is not pinned memory", p);
    return INVALID_VALUE;
  }
  uintptr_t lo = it->first, hi = it->first + it->second;
  auto busy = [&](Stream* s) {
    for (auto& o : s->ops)
      if (o.hostLo < hi && o.hostHi > lo) return true;
    return false;
  };
  bool inUse = busy(&nullStream);
  for (auto& kv : streams) inUse = inUse || busy(kv.second);
  if (inUse) {
    violation("cuMemFreeHost of %p while a queued copy still uses it", p);
    return INVALID_VALUE;
  }
  free(p);
  hostAllocs.erase(it);
  return OK;
}
CUresult cuMemsetD32Async(uint64_t p, unsigned v, size_t n, uintptr_t s) {
  LOCK;
  NEED_CTX("cuMemsetD32Async");
  Stream* st = stream(s);
  if (!st) return INVALID_HANDLE;
  if (!devRange("cuMemsetD32Async", p, n * 4)) return ILLEGAL_ADDRESS;
  for (size_t i = 0; i < n; i++) ((uint32_t*)p)[i] = v;
  enqueue(st);
  return OK;
}
static CUresult copyAsync(const char* call, void* host, uint64_t dev, size_t n, uintptr_t s, bool toDev) {
  LOCK;
  NEED_CTX(call);
  Stream* st = stream(s);
  if (!st) return INVALID_HANDLE;
  if (!inRange(hostAllocs, (uintptr_t)host, n ? n : 1)) {
    violation("%s: host range [%p, +%zu) is not pinned memory (asynchronous copies need cuMemHostAlloc)", call, host, n);
    return INVALID_VALUE;
  }
  if (!devRange(call, dev, n)) return ILLEGAL_ADDRESS;
  if (toDev)
    memcpy((void*)dev, host, n);
  else
    memcpy(host, (void*)dev, n);
  enqueue(st, (uintptr_t)host, (uintptr_t)host + n);
  return OK;
}
CUresult cuMemcpyHtoDAsync_v2(uint64_t dst, void* src, size_t n, uintptr_t s) {
  return copyAsync("cuMemcpyHtoDAsync", src, dst, n, s, true);
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, uint64_t src, size_t n, uintptr_t s) {
  return copyAsync("cuMemcpyDtoHAsync", dst, src, n, s, false);
}
CUresult cuMemcpyDtoDAsync_v2(uint64_t dst, uint64_t src, size_t n, uintptr_t s) {
  LOCK;
  NEED_CTX("cuMemcpyDtoDAsync");
  Stream* st = stream(s);
  if (!st) return INVALID_HANDLE;
  if (!devRange("cuMemcpyDtoDAsync (dst)", dst, n) || !devRange("cuMemcpyDtoDAsync (src)", src, n)) return ILLEGAL_ADDRESS;
  memmove((void*)dst, (void*)src, n);
  enqueue(st);
  return OK;
}
CUresult cuStreamCreate(uintptr_t* s, unsigned) {
  LOCK;
  NEED_CTX("cuStreamCreate");
  auto* st = new Stream;
  streams[(uintptr_t)st] = st;
  *s = (uintptr_t)st;
  return OK;
}
CUresult cuStreamDestroy_v2(uintptr_t s) {
  LOCK;
  NEED_CTX("cuStreamDestroy");
  auto it = streams.find(s);
  if (it == streams.end()) return INVALID_HANDLE;
  delete it->second;
  streams.erase(it);
  return OK;
}
CUresult cuStreamSynchronize(uintptr_t s) {
  LOCK;
  NEED_CTX("cuStreamSynchronize");
  Stream* st = stream(s);
  if (!st) return INVALID_HANDLE;
  waitUntil(st->busyUntil);
  complete(st, UINT64_MAX);
  return OK;
}
CUresult cuStreamWaitEvent(uintptr_t s, uintptr_t e, unsigned) {
  LOCK;
  NEED_CTX("cuStreamWaitEvent");
  if (!stream(s) || !events.count(e)) return INVALID_HANDLE;
  Stream* st = stream(s);
  st->busyUntil = std::max(st->busyUntil, events[e]->readyAt);
  enqueue(st);
  return OK;
}
CUresult cuEventCreate(uintptr_t* e, unsigned) {
  LOCK;
  NEED_CTX("cuEventCreate");
  auto* ev = new Event;
  events[(uintptr_t)ev] = ev;
  *e = (uintptr_t)ev;
  return OK;
}
CUresult cuEventDestroy_v2(uintptr_t e) {
  LOCK;
  NEED_CTX("cuEventDestroy");
  auto it = events.find(e);
  if (it == events.end()) return INVALID_HANDLE;
  delete it->second;
  events.erase(it);
  return OK;
}
CUresult cuEventRecord(uintptr_t e, uintptr_t s) {
  LOCK;
  NEED_CTX("cuEventRecord");
  auto it = events.find(e);
  Stream* st = stream(s);
  if (it == events.end() || !st) return INVALID_HANDLE;
  it->second->stream = st;
  it->second->seq = st->seq;
  it->second->queries = 0;
  it->second->recorded = true;
  it->second->readyAt = st->busyUntil;
  return OK;
}
// An event is reached at its second query (the first says NOT_READY, so the
// asynchronous paths are exercised) or when synchronized.
CUresult cuEventQuery(uintptr_t e) {
  LOCK;
  NEED_CTX("cuEventQuery");
  auto it = events.find(e);
  if (it == events.end()) return INVALID_HANDLE;
  Event* ev = it->second;
  if (!ev->recorded) return OK;
  if (ev->queries++ == 0 || Clock::now() < ev->readyAt) return NOT_READY;
  if (streams.count((uintptr_t)ev->stream) || ev->stream == &nullStream) complete(ev->stream, ev->seq);
  return OK;
}
CUresult cuEventSynchronize(uintptr_t e) {
  LOCK;
  NEED_CTX("cuEventSynchronize");
  auto it = events.find(e);
  if (it == events.end()) return INVALID_HANDLE;
  Event* ev = it->second;
  waitUntil(ev->readyAt);
  if (ev->recorded && (streams.count((uintptr_t)ev->stream) || ev->stream == &nullStream)) complete(ev->stream, ev->seq);
  ev->queries = 1;
  return OK;
}
CUresult cuEventElapsedTime(float* ms, uintptr_t a, uintptr_t b) {
  LOCK;
  NEED_CTX("cuEventElapsedTime");
  if (!events.count(a) || !events.count(b)) return INVALID_HANDLE;
  *ms = 0.001f;
  return OK;
}
CUresult cuModuleLoadDataEx(uintptr_t* m, const void* image, unsigned, void*, void*) {
  LOCK;
  NEED_CTX("cuModuleLoadDataEx");
  const char* text = (const char*)image;
  bool elf = memcmp(text, "\x7f" "ELF", 4) == 0;
  if (!elf && rejectPTX) return JIT_COMPILER_NOT_FOUND;  // a driver without libnvidia-ptxjitcompiler
  // A "cubin" for the stand-in is "\x7fELF" followed by NUL-terminated PTX
  // (it cannot read a real cubin's parameter list).
  std::string ptx(elf ? text + 4 : text);
  if (ptx.find(".version") == std::string::npos || ptx.find(".target") == std::string::npos) {
    // Not PTX: the stand-in cannot read a cubin's parameter list.
    return INVALID_IMAGE;
  }
  auto ks = parsePTX(ptx);
  if (ks.empty()) return INVALID_IMAGE;
  auto* handle = new int;
  modules[(uintptr_t)handle] = ks;
  *m = (uintptr_t)handle;
  return OK;
}
CUresult cuModuleUnload(uintptr_t m) {
  LOCK;
  NEED_CTX("cuModuleUnload");
  auto it = modules.find(m);
  if (it == modules.end()) return INVALID_HANDLE;
  for (auto* k : it->second) delete k;
  delete (int*)m;
  modules.erase(it);
  return OK;
}
CUresult cuModuleGetFunction(uintptr_t* f, uintptr_t m, const char* name) {
  LOCK;
  NEED_CTX("cuModuleGetFunction");
  auto it = modules.find(m);
  if (it == modules.end()) return INVALID_HANDLE;
  for (auto* k : it->second)
    if (k->name == name) {
      *f = (uintptr_t)k;
      return OK;
    }
  return NOT_FOUND;
}
static Kernel* kernel(uintptr_t f) {
  for (auto& kv : modules)
    for (auto* k : kv.second)
      if ((uintptr_t)k == f) return k;
  return nullptr;
}
CUresult cuFuncSetAttribute(uintptr_t f, int attr, int v) {
  LOCK;
  NEED_CTX("cuFuncSetAttribute");
  Kernel* k = kernel(f);
  if (!k) return INVALID_HANDLE;
  if (attr != 8) return INVALID_VALUE;
  if (v < 0 || v > 227 * 1024) {
    violation("cuFuncSetAttribute: %s max dynamic shared memory %d exceeds sm_90's 227 KiB", k->name.c_str(), v);
    return INVALID_VALUE;
  }
  k->maxDynShared = v;
  return OK;
}
CUresult cuLaunchKernel(uintptr_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, uintptr_t s, void** params, void** extra) {
  LOCK;
  NEED_CTX("cuLaunchKernel");
  Kernel* k = kernel(f);
  Stream* st = stream(s);
  if (!k || !st) return INVALID_HANDLE;
  const char* n = k->name.c_str();
  if (extra) {
    violation("%s: launched with extra (kvwarden passes kernelParams only)", n);
    return INVALID_VALUE;
  }
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 || gx > 0x7fffffffu || gy > 65535 ||
      gz > 65535) {
    violation("%s: grid (%u, %u, %u) outside sm_90 limits (x < 2^31, y and z <= 65535, none 0)", n, gx, gy, gz);
    return INVALID_VALUE;
  }
  if (bx > 1024 || by > 1024 || bz > 64 || (uint64_t)bx * by * bz > 1024) {
    violation("%s: block (%u, %u, %u) outside sm_90 limits (<= 1024 threads)", n, bx, by, bz);
    return INVALID_VALUE;
  }
  if ((int)shmem > k->maxDynShared) {
    violation("%s: %u bytes of dynamic shared memory, the kernel allows %d", n, shmem, k->maxDynShared);
    return INVALID_VALUE;
  }
  size_t np = k->sizes.size();
  if (argSizes.size() != np) {
    violation("%s: launched with %zu arguments, the PTX declares %zu", n, argSizes.size(), np);
    return INVALID_VALUE;
  }
  for (size_t i = 0; i < np; i++) {
    if ((int)argSizes[i] != k->sizes[i]) {
      violation("%s: argument %zu is %d bytes, the PTX declares %d", n, i, argSizes[i], k->sizes[i]);
      return INVALID_VALUE;
    }
    if (!params || !params[i]) {
      violation("%s: argument %zu has no value pointer", n, i);
      return INVALID_VALUE;
    }
    if (k->global[i]) {
      uint64_t p;
      memcpy(&p, params[i], 8);
      if (p != 0 && !inRange(devAllocs, p, 1)) {
        violation("%s: pointer argument %zu (0x%llx) is not inside a live allocation", n, i, (unsigned long long)p);
        return ILLEGAL_ADDRESS;
      }
    }
  }
  argSizes.clear();  // each launch reports its own
  if (k->name == "kv_spin") {
    auto ns = arg<uint64_t>(params, 0);
    st->busyUntil = std::max(st->busyUntil, Clock::now()) + std::chrono::nanoseconds(ns);
  }
  hostCompute(k, gx, gy, params);
  if (!failKernel.empty() && failKernel == k->name && --failNth == 0) {
    failKernel.clear();
    return LAUNCH_FAILED;
  }
  trace(k->name);
  enqueue(st);
  return OK;
}

// ---- cuBLAS (the same library serves as libcublas)
struct BlasHandle {
  uintptr_t stream;
};
uint32_t cublasCreate_v2(uintptr_t* h) {
  LOCK;
  if (!ctxCurrent("cublasCreate")) return 1;
  *h = (uintptr_t) new BlasHandle{0};
  return 0;
}
uint32_t cublasDestroy_v2(uintptr_t h) {
  delete (BlasHandle*)h;
  return 0;
}
uint32_t cublasSetStream_v2(uintptr_t h, uintptr_t s) {
  LOCK;
  if (!stream(s)) return 7;
  ((BlasHandle*)h)->stream = s;
  return 0;
}
// C = op(A) op(B), column-major; kvwarden calls it with A transposed.
static uint32_t gemm(const char* call, uintptr_t h, int ta, int tb, int m, int n, int k, uint64_t a, int lda,
                     size_t ea, uint64_t b, int ldb, size_t eb, uint64_t c, int ldc, size_t ec) {
  LOCK;
  if (!ctxCurrent(call)) return 1;
  Stream* st = stream(((BlasHandle*)h)->stream);
  if (!st) return 7;
  if (m <= 0 || n <= 0 || k <= 0) {
    violation("%s: m=%d n=%d k=%d", call, m, n, k);
    return 7;
  }
  size_t acols = ta ? m : k, bcols = tb ? k : n;
  if (!devRange(call, a, ((size_t)lda * (acols - 1) + (ta ? k : m)) * ea) ||
      !devRange(call, b, ((size_t)ldb * (bcols - 1) + (tb ? n : k)) * eb) ||
      !devRange(call, c, ((size_t)ldc * (n - 1) + m) * ec))
    return 14;
  if (!failKernel.empty() && failKernel == "cublas" && --failNth == 0) {
    failKernel.clear();
    return 13;  // CUBLAS_STATUS_EXECUTION_FAILED
  }
  enqueue(st);
  return 0;
}
uint32_t cublasSgemm_v2(uintptr_t h, int ta, int tb, int m, int n, int k, const float*, uint64_t a, int lda,
                        uint64_t b, int ldb, const float*, uint64_t c, int ldc) {
  return gemm("cublasSgemm", h, ta, tb, m, n, k, a, lda, 4, b, ldb, 4, c, ldc, 4);
}
static size_t typeSize(int t) { return t == 0 ? 4 : t == 2 ? 2 : t == 14 ? 2 : 0; }
uint32_t cublasGemmEx(uintptr_t h, int ta, int tb, int m, int n, int k, const void* alpha, uint64_t a, int at,
                      int lda, uint64_t b, int bt, int ldb, const void* beta, uint64_t c, int ct, int ldc, int,
                      int) {
  {
    LOCK;
    if (!inRange(hostAllocs, (uintptr_t)alpha, 4) || !inRange(hostAllocs, (uintptr_t)beta, 4)) {
      violation("cublasGemmEx: alpha/beta are not in C (pinned) memory");
      return 7;
    }
  }
  if (!typeSize(at) || !typeSize(bt) || !typeSize(ct)) return 7;
  return gemm("cublasGemmEx", h, ta, tb, m, n, k, a, lda, typeSize(at), b, ldb, typeSize(bt), c, ldc, typeSize(ct));
}

}  // extern "C"
