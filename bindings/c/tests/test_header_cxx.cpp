// The header must also compile as C++ (extern "C", no C-only constructs).
#include <kvwarden.h>

#include <cstdio>
#include <cstring>

int main() {
    kvw_request_params p = kvw_request_default_params();
    kvw_engine* e = nullptr;
    int32_t st = kvw_engine_close(e);
    if (st != KVW_ERR_INVALID_ARGUMENT || p.struct_size != sizeof p ||
        std::strcmp(kvw_version(), KVW_VERSION_STRING) != 0) {
        std::fprintf(stderr, "test_header_cxx: unexpected %s\n", kvw_status_string(st));
        return 1;
    }
    std::printf("test_header_cxx: ok\n");
    return 0;
}
