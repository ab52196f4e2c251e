/* Helpers shared by the lcx reader (lcx.c) and writer (lcx_write.c); not part of the public API. */
#ifndef LCX_FORMATS_LCX_INTERNAL_H
#define LCX_FORMATS_LCX_INTERNAL_H

#include <stddef.h>

#include "src/core/tensor.h"

/* A plain file/directory name: [A-Za-z0-9._-]{1,200}, not starting with '.'. */
int lcx_ckpt_safe_name(const char *s);
/* A role: [a-z0-9_]{1,LCX_CKPT_ROLE_MAX}. */
int lcx_ckpt_valid_role(const char *s);
/* Bytes per element of a dtype storable in a checkpoint (whole bytes, scalar); 0 if not storable. */
size_t lcx_ckpt_dtype_size(lcx_dtype dt);

#endif
