/* cublaslt_lazy: cuBLASLt loaded when the CUDA backend first asks for it, not when lcextend starts. A linked
 * libcublasLt costs every process ~150 MB of resident memory at start, CPU runs included: its ~6,500 static
 * initializers and its relocations run at load (dlopen of libcublasLt.so.13 alone takes a process from 1 to
 * 153 MB). So lcextend does not link it: the cuBLASLt functions cuda_matmul.c calls are defined here, each
 * forwarding to the library's own, which the first call loads with dlopen (the soname, then the file CMake found)
 * and dlsym. If it cannot be loaded, every call returns CUBLAS_STATUS_NOT_INITIALIZED and
 * cublasLtGetStatusString says why, so the CUDA backend fails with that one line (cuda_matmul.c's lt_check). */
#include "kernels/cuda/cublaslt_lazy.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include <cublasLt.h>

/* X(name): every function forwarded (all that cuda_matmul.c calls). */
#define LT_FUNCTIONS(X)                                                                                          \
    X(cublasLtCreate)                                                                                            \
    X(cublasLtDestroy)                                                                                           \
    X(cublasLtGetStatusString)                                                                                   \
    X(cublasLtMatmul)                                                                                            \
    X(cublasLtMatmulAlgoGetHeuristic)                                                                            \
    X(cublasLtMatmulDescCreate)                                                                                  \
    X(cublasLtMatmulDescDestroy)                                                                                 \
    X(cublasLtMatmulDescSetAttribute)                                                                            \
    X(cublasLtMatmulPreferenceCreate)                                                                            \
    X(cublasLtMatmulPreferenceDestroy)                                                                           \
    X(cublasLtMatmulPreferenceSetAttribute)                                                                      \
    X(cublasLtMatrixLayoutCreate)                                                                                \
    X(cublasLtMatrixLayoutDestroy)                                                                               \
    X(cublasLtMatrixLayoutSetAttribute)

static struct {
#define LT_POINTER(name) __typeof__(&name) name;
    LT_FUNCTIONS(LT_POINTER)
#undef LT_POINTER
} lt;

static pthread_once_t lt_once = PTHREAD_ONCE_INIT;
static int lt_ok;
static char lt_why[512];

static void lt_load(void) {
    void *h = dlopen(LCX_CUBLASLT_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen(LCX_CUBLASLT_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(lt_why, sizeof lt_why, "cuBLASLt could not be loaded (%s, then %s): %s", LCX_CUBLASLT_SONAME,
                 LCX_CUBLASLT_PATH, dlerror());
        return;
    }
#define LT_RESOLVE(name)                                                                                         \
    *(void **)&lt.name = dlsym(h, #name);                                                                        \
    if (!lt.name) {                                                                                              \
        snprintf(lt_why, sizeof lt_why, "cuBLASLt (%s) has no %s", LCX_CUBLASLT_SONAME, #name);                \
        return;                                                                                                  \
    }
    LT_FUNCTIONS(LT_RESOLVE)
#undef LT_RESOLVE
    lt_ok = 1; /* the handle stays open: the functions are used until exit */
}

int lcx_cublaslt_load(const char **why) {
    pthread_once(&lt_once, lt_load);
    if (why) *why = lt_ok ? NULL : lt_why;
    return lt_ok;
}

#define LT_READY(fail)                                                                                           \
    if (!lcx_cublaslt_load(NULL)) return fail

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t *h) {
    LT_READY(CUBLAS_STATUS_NOT_INITIALIZED);
    return lt.cublasLtCreate(h);
}

cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t h) {
    LT_READY(CUBLAS_STATUS_NOT_INITIALIZED);
    return lt.cublasLtDestroy(h);
}

const char *CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status) {
    LT_READY(lt_why);
    return lt.cublasLtGetStatusString(status);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha,
                                           const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                                           cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                                           cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                                           const cublasLtMatmulAlgo_t *algo, void *workspace, size_t ws_bytes,
                                           cudaStream_t stream) {
    LT_READY(CUBLAS_STATUS_NOT_INITIALIZED);
    return lt.cublasLtMatmul(h, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
                             ws_bytes, stream);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t desc,
                                                           cublasLtMatrixLayout_t Adesc,
                                                           cublasLtMatrixLayout_t Bdesc,
                                                           cublasLtMatrixLayout_t Cdesc,
                                                           cublasLtMatrixLayout_t Ddesc,
                                                           cublasLtMatmulPreference_t pref, int requested,
                                                           cublasLtMatmulHeuristicResult_t results[],
                                                           int *returned) {
    LT_READY(CUBLAS_STATUS_NOT_INITIALIZED);
    return lt.cublasLtMatmulAlgoGetHeuristic(h, desc, Adesc, Bdesc, Cdesc, Ddesc, pref, requested, results,
                                             returned);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t compute,
                                                     cudaDataType_t scale) {
    LT_READY(CUBLAS_STATUS_NOT_INITIALIZED);
    return lt.cublasLtMatmulDescCreate(desc, compute, scale);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
    LT_READY(CUBLAS_STATUS_NOT_INITIALIZED);
    return lt.cublasLtMatmulDescDestroy(desc);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                                           cublasLtMatmulDescAttributes_t attr, const void *buf,
                                                           size_t size) {
    LT_READY(CUBLAS_STATUS_NOT_INITIALIZED);
    return lt.cublasLtMatmulDescSetAttribute(desc, attr, buf, size);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
    LT_READY(CUBLAS_STATUS_NOT_INITIALIZED);
    return lt.cublasLtMatmulPreferenceCreate(pref);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    LT_READY(CUBLAS_STATUS_NOT_INITIALIZED);
    return lt.cublasLtMatmulPreferenceDestroy(pref);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                                 cublasLtMatmulPreferenceAttributes_t attr,
                                                                 const void *buf, size_t size) {
    LT_READY(CUBLAS_STATUS_NOT_INITIALIZED);
    return lt.cublasLtMatmulPreferenceSetAttribute(pref, attr, buf, size);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type,
                                                       uint64_t rows, uint64_t cols, int64_t ld) {
    LT_READY(CUBLAS_STATUS_NOT_INITIALIZED);
    return lt.cublasLtMatrixLayoutCreate(layout, type, rows, cols, ld);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
    LT_READY(CUBLAS_STATUS_NOT_INITIALIZED);
    return lt.cublasLtMatrixLayoutDestroy(layout);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                             cublasLtMatrixLayoutAttribute_t attr, const void *buf,
                                                             size_t size) {
    LT_READY(CUBLAS_STATUS_NOT_INITIALIZED);
    return lt.cublasLtMatrixLayoutSetAttribute(layout, attr, buf, size);
}
