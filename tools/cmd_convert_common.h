/* Flags shared by import and reshard (layout, codec, threads, memory bound, quiet). */
#ifndef LCX_TOOLS_CMD_CONVERT_COMMON_H
#define LCX_TOOLS_CMD_CONVERT_COMMON_H

#include "src/convert/convert.h"

/* The whole of `lcextend import` / `lcextend reshard`: parse SRC, --out and the shared flags, run `convert` with a
 * progress bar, report. `one_only` and `missing` are the usage messages for a second or an absent SRC. */
typedef lcx_status (*lcx_convert_fn)(const char *src, const char *out, const lcx_convert_opts *o);
int lcx_cli_run_convert(const char *cmd, int argc, char **argv, void (*help)(void), lcx_convert_fn convert,
                        const char *one_only, const char *missing);

#endif
