#include "tok_internal.h"
lcx_status lcx_tokenizer_from_gguf(const lcx_gguf_vocab *v, const char *name, lcx_tokenizer **out) { (void)v; (void)name; *out = NULL; return lcx_fail(LCX_ERR_UNSUPPORTED, "todo"); }
lcx_status lcx_tokenizer_load_gguf(const char *path, lcx_tokenizer **out) { (void)path; *out = NULL; return lcx_fail(LCX_ERR_UNSUPPORTED, "todo"); }
