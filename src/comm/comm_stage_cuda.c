/* comm_stage_cuda: the CUDA pieces of the device communicators (CUDA builds; without CUDA the stubs at the end say
 * there is no GPU). The stager keeps staging buffers pinned (cudaMallocHost), so the copies are real DMA, and
 * runs them on a copy stream of its own, ordered against the exec's stream by events:
 *   to_host:   event on the exec's stream -> the copy stream waits for it -> D2H -> the host waits for the copy;
 *   to_device: event on the exec's stream -> the copy stream waits -> H2D -> event on the copy stream -> the exec's
 *              stream waits for it; the host waits for the copy so that the staging buffer may be reused.
 * The wait for the exec's earlier work before an H2D is needed: the destination may still be read by kernels
 * queued before (the CP ring's receive buffer held the previous block). Only this process's thread that called
 * MPI uses the stager (MPI_THREAD_FUNNELED), so the copy stream needs no lock.
 *
 * Status: compiled only; not yet run on a GPU (docs/cuda.md). */
#include "src/comm/comm_device.h"
#include "kernels/backend.h"
#include "src/comm/comm_impl.h"

#ifdef LCX_HAVE_CUDA
#include <string.h>

#include <cuda_runtime_api.h>

static cudaStream_t g_copy;          /* created on first use, on the device current then (the rank's) */
static cudaEvent_t g_before, g_after; /* exec -> copy stream, copy stream -> exec */

static lcx_status cu_fail(cudaError_t e, const char *what) {
    (void)cudaGetLastError();
    return lcx_fail(LCX_ERR_CUDA, "comm staging: %s: %s", what, cudaGetErrorString(e));
}
#define CU_TRY(call, what)                                                                                    \
    do {                                                                                                      \
        cudaError_t e_ = (call);                                                                              \
        if (e_ != cudaSuccess) return cu_fail(e_, (what));                                                    \
    } while (0)

int lcx_comm_cuda_devices(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

lcx_status lcx_comm_cuda_set_device(int device) {
    CU_TRY(cudaSetDevice(device), "cudaSetDevice");
    return LCX_OK;
}

static lcx_status ensure_stream(void) {
    if (g_copy) return LCX_OK;
    CU_TRY(cudaStreamCreateWithFlags(&g_copy, cudaStreamNonBlocking), "cudaStreamCreate (copy stream)");
    CU_TRY(cudaEventCreateWithFlags(&g_before, cudaEventDisableTiming), "cudaEventCreate");
    CU_TRY(cudaEventCreateWithFlags(&g_after, cudaEventDisableTiming), "cudaEventCreate");
    return LCX_OK;
}

/* The exec's queue as a stream: only the CUDA backend's execs reach the stager with device buffers. */
static lcx_status stream_of(const lcx_exec *x, cudaStream_t *s) {
    LCX_FAIL_IF(!x || !x->be || strcmp(x->be->name, "cuda") != 0, LCX_ERR_UNSUPPORTED,
                "comm staging: the CUDA stager moves buffers of the cuda backend, not %s",
                x && x->be ? x->be->name : "(none)");
    *s = (cudaStream_t)x->queue;
    return LCX_OK;
}

/* The staging buffers are the CUDA backend's pinned host memory (its host_alloc: cudaMallocHost). */
static lcx_status pinned_alloc(size_t bytes, void **out) {
    lcx_status st = lcx_backend_get("cuda")->host_alloc(bytes, out);
    return st == LCX_OK ? st : lcx_fail_context(st, "comm staging: ");
}

static void pinned_free(void *p) { lcx_backend_get("cuda")->host_free(p); }

/* The copy stream waits for the work queued on x's stream so far; *s = that stream. */
static lcx_status after_exec(const lcx_exec *x, cudaStream_t *s) {
    LCX_TRY(stream_of(x, s));
    LCX_TRY(ensure_stream());
    CU_TRY(cudaEventRecord(g_before, *s), "cudaEventRecord");
    CU_TRY(cudaStreamWaitEvent(g_copy, g_before, 0), "cudaStreamWaitEvent");
    return LCX_OK;
}

static lcx_status cu_to_host(lcx_exec *x, void *host, const void *dev, size_t bytes) {
    cudaStream_t s = NULL;
    LCX_TRY(after_exec(x, &s));
    CU_TRY(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, g_copy), "cudaMemcpyAsync D2H");
    CU_TRY(cudaStreamSynchronize(g_copy), "cudaStreamSynchronize (copy stream)");
    return LCX_OK;
}

static lcx_status cu_to_device(lcx_exec *x, void *dev, const void *host, size_t bytes) {
    cudaStream_t s = NULL; /* set by after_exec before use; gcc -O3 cannot see it */
    LCX_TRY(after_exec(x, &s));
    CU_TRY(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, g_copy), "cudaMemcpyAsync H2D");
    CU_TRY(cudaEventRecord(g_after, g_copy), "cudaEventRecord");
    CU_TRY(cudaStreamWaitEvent(s, g_after, 0), "cudaStreamWaitEvent");
    CU_TRY(cudaStreamSynchronize(g_copy), "cudaStreamSynchronize (copy stream)");
    return LCX_OK;
}

static const lcx_comm_stager cuda_stager = {
    .name = "cuda",
    .host_alloc = pinned_alloc,
    .host_free = pinned_free,
    .to_host = cu_to_host,
    .to_device = cu_to_device,
};

const lcx_comm_stager *lcx_comm_stager_cuda(void) { return &cuda_stager; }

#else /* no CUDA in this build */

int lcx_comm_cuda_devices(void) { return 0; }

lcx_status lcx_comm_cuda_set_device(int device) {
    return lcx_fail(LCX_ERR_UNSUPPORTED, "GPU %d: this build has no CUDA", device);
}

const lcx_comm_stager *lcx_comm_stager_cuda(void) { return NULL; }

#endif
