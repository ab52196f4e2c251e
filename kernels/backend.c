/* backend registry: name -> table. CUDA registers here when the build has it. */
#include "kernels/backend.h"

#include <string.h>

#ifdef LCX_HAVE_CUDA
const lcx_backend *lcx_backend_cuda(void);
#endif

const lcx_backend *lcx_backend_get(const char *name) {
    if (name && strcmp(name, "cpu") == 0) return lcx_backend_cpu();
#ifdef LCX_HAVE_CUDA
    if (name && strcmp(name, "cuda") == 0) return lcx_backend_cuda();
    lcx_fail(LCX_ERR_NOT_FOUND, "unknown backend '%s' (available: cpu, cuda)", name ? name : "(null)");
#else
    lcx_fail(LCX_ERR_NOT_FOUND, "unknown backend '%s' (available: cpu; this build has no CUDA)",
             name ? name : "(null)");
#endif
    return NULL;
}
