/* backend registry: name -> table. The CUDA table registers here once kernels/cuda implements the whole
 * contract; until then only the CPU reference is offered (the CUDA build has the cast kernels alone). */
#include "kernels/backend.h"

#include <string.h>

const lcx_backend *lcx_backend_get(const char *name) {
    if (name && strcmp(name, "cpu") == 0) return lcx_backend_cpu();
    lcx_fail(LCX_ERR_NOT_FOUND, "unknown backend '%s' (available: cpu)", name ? name : "(null)");
    return NULL;
}
