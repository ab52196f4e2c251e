/* emu_runtime.cpp: the host implementation of emu_runtime.h (see there) and of the CUDA backend's entry points
 * that exist in every build (kernels/cuda/cuda_runtime_info.h): one emulated device. Copies check their kind
 * against what the pointers are: a "device" side must lie inside one cudaMalloc block, a host side outside every
 * one, so a host pointer handed to the device (or the reverse) stops the run with a message naming the copy. */
#include "emu_runtime.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <iterator>
#include <map>
#include <mutex>

#include "kernels/cuda/cuda_runtime_info.h"
#include "src/core/tensor.h"

struct emu_event {
    int timed, recorded;
    double t;
    long nccl_mark; /* emu_nccl.cpp's transfers up to this one must complete first */
};

/* emu_nccl.cpp, when it is linked (weak: absent otherwise) */
extern "C" __attribute__((weak)) long emu_nccl_in_flight_mark(void);
extern "C" __attribute__((weak)) int emu_nccl_done_through(long mark);
extern "C" __attribute__((weak)) void emu_nccl_wait_through(long mark);

static int emu_devices(void) {
    const char *v = getenv("LCX_EMU_DEVICES");
    const int n = v && *v ? atoi(v) : 1;
    return n > 0 ? n : 1;
}

static std::mutex mu;
static std::map<uintptr_t, size_t> device_blocks; /* start -> bytes */
static int stream_token;

/* Whether [p, p + n) lies inside one device block. */
static bool on_device(const void *p, size_t n) {
    std::lock_guard<std::mutex> g(mu);
    const uintptr_t a = (uintptr_t)p;
    auto it = device_blocks.upper_bound(a);
    if (it == device_blocks.begin()) return false;
    --it;
    return a >= it->first && a + n <= it->first + (it->second ? it->second : 1);
}
/* Whether [p, p + n) touches no device block. */
static bool off_device(const void *p, size_t n) {
    std::lock_guard<std::mutex> g(mu);
    const uintptr_t a = (uintptr_t)p;
    auto it = device_blocks.lower_bound(a + (n ? n : 1));
    if (it == device_blocks.begin()) return true;
    --it;
    return it->first + it->second <= a;
}
static void die(const char *what, const void *dst, const void *src, size_t n) {
    fprintf(stderr, "emu_runtime: %s (dst %p, src %p, %zu bytes)\n", what, dst, src, n);
    abort();
}

extern "C" {

cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    default: return "unknown error";
    }
}
cudaError_t cudaGetDeviceCount(int *n) {
    *n = emu_devices();
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
    return device >= 0 && device < emu_devices() ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaMalloc(void **p, size_t bytes) {
    void *q = NULL; /* the exact size, so that AddressSanitizer sees a kernel reading past it */
    if (posix_memalign(&q, 256, bytes ? bytes : 1)) return cudaErrorMemoryAllocation;
    memset(q, 0xA5, bytes); /* cudaMalloc does not zero: neither does this */
    std::lock_guard<std::mutex> g(mu);
    device_blocks[(uintptr_t)q] = bytes;
    *p = q;
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
    if (!p) return cudaSuccess;
    {
        std::lock_guard<std::mutex> g(mu);
        if (!device_blocks.erase((uintptr_t)p)) die("cudaFree of a pointer cudaMalloc did not return", p, NULL, 0);
    }
    free(p);
    return cudaSuccess;
}
/* An 80 GiB device of which the blocks alive are in use (no context: the emulation has none). */
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    const size_t total = (size_t)80 << 30;
    size_t used = 0;
    std::lock_guard<std::mutex> g(mu);
    for (const auto &b : device_blocks) used += b.second;
    *total_bytes = total;
    *free_bytes = used < total ? total - used : 0;
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t bytes) {
    return posix_memalign(p, 256, bytes ? bytes : 1) ? cudaErrorMemoryAllocation : cudaSuccess;
}
cudaError_t cudaFreeHost(void *p) {
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t) {
    if (n == 0) return cudaSuccess;
    const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (dst_dev ? !on_device(dst, n) : !off_device(dst, n))
        die(dst_dev ? "copy to the device: the destination is not inside one device block"
                    : "copy to the host: the destination is device memory", dst, src, n);
    if (src_dev ? !on_device(src, n) : !off_device(src, n))
        die(src_dev ? "copy from the device: the source is not inside one device block"
                    : "copy from the host: the source is device memory", dst, src, n);
    memmove(dst, src, n);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t) {
    if (n && !on_device(dst, n)) die("cudaMemsetAsync outside device memory", dst, NULL, n);
    memset(dst, value, n);
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *s) {
    *s = &stream_token;
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { return cudaStreamCreate(s); }
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) {
    if (emu_nccl_wait_through) emu_nccl_wait_through(emu_nccl_in_flight_mark());
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t e, unsigned) {
    return e ? cudaSuccess : cudaErrorInvalidResourceHandle;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    *e = (cudaEvent_t)calloc(1, sizeof(emu_event));
    if (!*e) return cudaErrorMemoryAllocation;
    (*e)->timed = !(flags & cudaEventDisableTiming);
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    free(e);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    e->recorded = 1;
    e->t = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    e->nccl_mark = emu_nccl_in_flight_mark ? emu_nccl_in_flight_mark() : 0;
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
    if (!e) return cudaErrorInvalidResourceHandle;
    return !emu_nccl_done_through || emu_nccl_done_through(e->nccl_mark) ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!e) return cudaErrorInvalidResourceHandle;
    if (emu_nccl_wait_through) emu_nccl_wait_through(e->nccl_mark);
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    if (!a || !b || !a->timed || !b->timed || !a->recorded || !b->recorded) return cudaErrorInvalidResourceHandle;
    *ms = (float)((b->t - a->t) * 1e3);
    return cudaSuccess;
}

/* kernels/cuda/cuda_runtime_info.h: LCX_EMU_DEVICES devices; the casts on the host (the GPU casts are
 * cuda_cast.cu's, which the emulation leaves out) */
int lcx_cuda_device_count(void) { return emu_devices(); }
int lcx_cuda_cast_f32_to_bf16_host(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = lcx_f32_to_bf16(src[i]);
    return 0;
}
int lcx_cuda_cast_f32_to_f16_host(const float *, uint16_t *, size_t) { return -1; }

} /* extern "C" */
