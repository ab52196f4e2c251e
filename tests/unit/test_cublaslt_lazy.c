/* cuBLASLt is opened on first use, not at start (kernels/cuda/cublaslt_lazy.c): in a CUDA build, with or without a
 * device, the library is not mapped until lcx_cublaslt_load, which then resolves every forwarded function from the
 * library CMake found; the forwarding reaches the real one (its status strings). Exit 77 in builds without CUDA. */
#include <stdio.h>
#include <string.h>

#include "test_util.h"
#ifdef LCX_HAVE_CUDA
#include "rss_util.h"
#include <cublasLt.h>

#include "kernels/cuda/cublaslt_lazy.h"

/* Whether a mapping of this process names `lib`. */
static int mapped(const char *lib) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, lib) != NULL;
    fclose(f);
    return found;
}

int main(void) {
    const uint64_t before = rss_now();
    CHECK_MSG(mapped("libcublasLt") == 0, "libcublasLt is mapped before its first use");
    const char *why = NULL;
    CHECK_MSG(lcx_cublaslt_load(&why) == 1, "lcx_cublaslt_load: %s", why ? why : "?");
    CHECK(why == NULL);
    CHECK(mapped("libcublasLt") == 1);
    CHECK(lcx_cublaslt_load(NULL) == 1); /* once: the second call finds it loaded */
    /* the forwarded functions reach the library's own: its own words for two statuses (cuBLASLt 13: "success",
     * "the requested functionality is not supported"), not the loader's message */
    const char *ok = cublasLtGetStatusString(CUBLAS_STATUS_SUCCESS);
    const char *no = cublasLtGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(ok && no && *ok && *no && strcmp(ok, no) != 0 && !strstr(ok, "could not be loaded"));
    printf("cuBLASLt's status strings: \"%s\", \"%s\"\n", ok ? ok : "(null)", no ? no : "(null)");
    cublasLtMatrixLayout_t lay = NULL; /* host-side descriptors need no device */
    CHECK(cublasLtMatrixLayoutCreate(&lay, CUDA_R_32F, 4, 3, 4) == CUBLAS_STATUS_SUCCESS && lay != NULL);
    if (lay) CHECK(cublasLtMatrixLayoutDestroy(lay) == CUBLAS_STATUS_SUCCESS);
    printf("cuBLASLt loaded on first use: resident memory %llu -> %llu KiB\n", (unsigned long long)(before >> 10),
           (unsigned long long)(rss_now() >> 10));
    return test_summary("test_cublaslt_lazy");
}
#else
int main(void) {
    printf("test_cublaslt_lazy: no CUDA in this build: skipped\n");
    return 77;
}
#endif
