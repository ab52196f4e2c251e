/* cublaslt_lazy: cuBLASLt is opened on first use instead of linked (cublaslt_lazy.c says why). */
#ifndef LCX_KERNELS_CUDA_CUBLASLT_LAZY_H
#define LCX_KERNELS_CUDA_CUBLASLT_LAZY_H

/* Load cuBLASLt now if not yet (thread-safe, once per process): 1 when every function it forwards resolved; 0
 * otherwise, with *why (when why is not NULL) saying what failed. */
int lcx_cublaslt_load(const char **why);

#endif /* LCX_KERNELS_CUDA_CUBLASLT_LAZY_H */
