/* test_backend_ops on the CUDA backend (label cuda): the same cases, against the CPU in float32. Exits 77
 * (skipped) while no "cuda" table is registered (kernels/backend.c) or no device is visible. */
#define BACKEND_OPS_DEFAULT "cuda"
#include "test_backend_ops.c"
