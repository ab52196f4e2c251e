/* source: the one loader for every checkpoint form lcextend reads (docs/formats.md "Checkpoint forms").
 *
 *   form          the path is                                  detected by
 *   HF_DIR        a directory with config.json + safetensors   a directory without manifest.json
 *   SAFETENSORS   one .safetensors file (config.json beside)   the name ends in .safetensors
 *   ST_INDEX      a model.safetensors.index.json               any other .json but config.json
 *   LCX           a native .lcx directory, any TP layout       a directory holding manifest.json
 *   GGUF          a .gguf file                                 the "GGUF" magic, or the name ends in .gguf
 * Content wins over names: a file starting with the GGUF magic is a GGUF whatever it is called.
 *
 * Opening gives the model config (lcx_model_config, from config.json, the .lcx manifest or the GGUF metadata),
 * its parameter table and, unless LCX_SOURCE_CONFIG_ONLY, every parameter matched to a stored tensor of the
 * right shape and a float-loadable dtype; all mismatches are reported at once (src/checkpoint/problems.h).
 * Reading gives a parameter whole, in Hugging Face layout: GGUF q/k rows un-permuted and Q8_0/Q4_0/Q4_1
 * dequantised, .lcx TP pieces gathered. A GGUF's config needs no tensor data: the file is mapped, its header
 * parsed, and only rope_freqs.weight's few values are read (llama3 rope).
 *
 * Errors are one line naming the path: "m.bin: not a checkpoint (expected ...)", "run/step-1: file
 * 'rank-00001.bin' is missing", "m.gguf: tensors do not match m.gguf (llama, 2 layers): 1 missing: ...". */
#ifndef LCX_SOURCE_H
#define LCX_SOURCE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "formats/lcx.h"
#include "src/checkpoint/catalog.h"
#include "src/checkpoint/model_params.h"
#include "src/core/status.h"

typedef enum lcx_source_form {
    LCX_SOURCE_HF_DIR = 0,
    LCX_SOURCE_SAFETENSORS,
    LCX_SOURCE_ST_INDEX,
    LCX_SOURCE_LCX,
    LCX_SOURCE_GGUF,
    LCX_SOURCE_FORM_COUNT
} lcx_source_form;

/* "Hugging Face directory", "safetensors file", "safetensors index", ".lcx checkpoint", "GGUF file". */
const char *lcx_source_form_name(lcx_source_form f);

/* Which form path is, from what is on disk (nothing is parsed beyond a GGUF magic). Fails with one line naming
 * the path and what was expected when it is none of them (LCX_ERR_NOT_FOUND when it does not exist). */
lcx_status lcx_source_detect(const char *path, lcx_source_form *form);

/* Open flags. */
#define LCX_SOURCE_CONFIG_ONLY 1u /* config (and parameter table) only: no tensor is matched or read; an HF
                                     directory's safetensors are not even opened */
#define LCX_SOURCE_CONFIG_FILE 2u /* implies CONFIG_ONLY; a .json file other than a shard index (config.json, a
                                     hand-written config) is then the config itself, standing for its directory
                                     (form HF_DIR, config_path = the file): what plan and rope --show accept */

/* The stored tensor of one parameter. */
typedef struct lcx_source_tensor {
    const char *name;   /* as stored (a GGUF name for a GGUF) */
    lcx_dtype stored;   /* storage dtype (LCX_Q8_0 / Q4_0 / Q4_1 for quantised GGUF tensors) */
    lcx_dtype dtype;    /* what lcx_source_read gives without conversion: stored, or F32 when dequantised */
    uint64_t bytes;     /* stored bytes (.lcx: raw, before compression) */
    const void *ref;    /* private: the form's tensor (lcx_st_tensor, lcx_ckpt_tensor, lcx_gguf_tensor) */
    int64_t qk_heads;   /* private: GGUF llama q/k rows permuted with this many heads (0: not permuted) */
} lcx_source_tensor;

typedef struct lcx_source {
    lcx_source_form form;
    char *path;               /* as given */
    char *config_path;        /* where cfg comes from: DIR/config.json, DIR/manifest.json or the .gguf; NULL when
                                 there is no config (a .safetensors file alone, an .lcx saved without one) */
    int has_config;
    lcx_model_config cfg;     /* valid when has_config */
    lcx_param_table params;   /* valid when has_config */
    int matched;              /* tensors matched (has_config and not LCX_SOURCE_CONFIG_ONLY): tensor_of valid */
    lcx_source_tensor *tensor_of; /* [params.n] */
    char *tokenizer_path;     /* what lcx_tokenizer_open takes for this checkpoint's tokenizer (it may be absent):
                                 the HF directory, the .lcx's tokenizer.json or tokenizer.gguf, the .gguf itself */
    size_t n_side_files;      /* tokenizer and generation files that travel with the model (full paths): the HF */
    char **side_files;        /* ones beside config.json, an .lcx's tokenizer files; none for a GGUF */
    /* The form's own reader, for form-specific views (inspect) and exports; NULL when not opened. */
    lcx_catalog *catalog;     /* HF forms (not with LCX_SOURCE_CONFIG_ONLY) */
    lcx_ckpt *ckpt;           /* LCX */
    lcx_gguf_file *gguf;      /* GGUF */
    int owns_cfg;             /* private: cfg/params are ours (else the catalog's) */
    const void *last_data;    /* private: mapped bytes of the tensor read last (lcx_source_release drops them) */
    uint64_t last_bytes;
} lcx_source;

/* Files beside an HF config.json that travel with the model (tokenizer files, generation_config.json, chat
 * templates): what import copies into an .lcx and an HF export copies out. */
extern const char *const lcx_hf_side_files[];
extern const size_t lcx_hf_n_side_files;

/* Detect path's form and open it (flags: 0 or LCX_SOURCE_CONFIG_ONLY). An HF form with no config.json beside
 * the tensors opens tensors-only (has_config 0); a directory must have one. */
lcx_status lcx_source_open(const char *path, unsigned flags, lcx_source **out);
void lcx_source_close(lcx_source *s); /* NULL ok */

/* Fails (LCX_ERR_INVALID, naming the path and `what` needs it) unless the source has a config and matched
 * tensors: what commands that build a model check first. */
lcx_status lcx_source_need_model(const lcx_source *s, const char *what);

/* Check that the .lcx checkpoint at path loads as a model (what verify and reshard run before anything else):
 * its manifest's model config passes the one config validator (lcx_config_parse) and every parameter of the
 * table it implies is stored with that shape and a float-loadable dtype, nothing extra (the matching of
 * lcx_source_open). A checkpoint saved without a config has only its manifest checked. */
lcx_status lcx_source_check_lcx(const char *path);

/* Parameter i (table order) whole, in Hugging Face layout, as dt: tensor_of[i].dtype copies the values as they
 * are, any other float dtype of lcx_convert_from_f32 (F32, BF16, F16) converts through float32. dst holds
 * params[i].numel values of dt. Memory: at most two temporary copies of the tensor. Not thread-safe for an .lcx
 * (its reader decodes into shared scratch). */
lcx_status lcx_source_read(lcx_source *s, size_t i, lcx_dtype dt, void *dst);
/* Bytes of every parameter as lcx_source_read gives it as it is (tensor_of[i].dtype): what an import into an .lcx
 * writes, before zstd. 0 when the tensors were not matched (LCX_SOURCE_CONFIG_ONLY). */
uint64_t lcx_source_native_bytes(const lcx_source *s);
/* lcx_source_read as float32. */
lcx_status lcx_source_read_f32(lcx_source *s, size_t i, float *dst);
/* Drop this process's resident pages of mapped tensor data (streaming readers call it between tensors; the
 * pages stay in the page cache). */
void lcx_source_release(lcx_source *s);

/* A GGUF's summary as one JSON object (what `lcextend inspect --json` prints for one): path, format "gguf",
 * gguf_version, the config keys of lcx_catalog_summary_json, num_parameters, num_tensors, total_bytes,
 * ggml_types {NAME: {tensors, elements, bytes}} over every stored tensor, tokenizer (tokenizer.ggml.model, or
 * null). NULL when out of memory or s is not a GGUF with a config. */
json_t *lcx_source_gguf_summary_json(const lcx_source *s);

#endif
