/* Shared pieces of src/checkpoint/source*.c (the form-specific openers). Not API. */
#ifndef LCX_SOURCE_INTERNAL_H
#define LCX_SOURCE_INTERNAL_H

#include "src/checkpoint/source.h"

/* Parse a config held as JSON (the .lcx manifest's, a GGUF's rebuilt one) into s->cfg and build s->params;
 * label names it in errors. */
lcx_status lcx_source_config_from_json(lcx_source *s, const json_t *j, const char *label);
/* Allocate s->tensor_of for s->params. */
lcx_status lcx_source_alloc_tensors(lcx_source *s);
/* Append a full path to s->side_files. */
lcx_status lcx_source_add_side_file(lcx_source *s, char *path_owned);

/* The form-specific halves of lcx_source_open (s->form and s->path are set). */
lcx_status lcx_source_open_lcx(lcx_source *s, unsigned flags);
lcx_status lcx_source_open_gguf(lcx_source *s, unsigned flags);

#endif
