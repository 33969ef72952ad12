// Host build of kernels/xxh3.h for TestChecksumHostC: for each file named
// on the command line prints "<xxh3-64 of the bytes> <page checksum>" in
// hex, the page checksum computed chunk by chunk exactly as kv_checksum does.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "xxh3.h"

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    FILE* f = fopen(argv[i], "rb");
    if (!f) return 1;
    std::vector<u8> b;
    int c;
    while ((c = fgetc(f)) != EOF) b.push_back((u8)c);
    fclose(f);
    const u8* p = b.empty() ? (const u8*)"" : b.data();
    u64 n = b.size();
    u64 chunks = (n + KV_CHECKSUM_CHUNK - 1) / KV_CHECKSUM_CHUNK;
    std::vector<u64> dg(chunks + 1);
    for (u64 k = 0; k < chunks; k++) {
      u64 off = k * KV_CHECKSUM_CHUNK;
      u64 len = n - off < KV_CHECKSUM_CHUNK ? n - off : KV_CHECKSUM_CHUNK;
      dg[k] = kv_xxh3_64(p + off, len);
    }
    u64 sum = kv_xxh3_64((const u8*)dg.data(), chunks * 8);
    printf("%016llx %016llx\n", kv_xxh3_64(p, n), sum);
  }
  return 0;
}
