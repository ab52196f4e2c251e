/* convert: checkpoint conversions — Hugging Face / GGUF -> .lcx import in any TP x CP x DP layout, .lcx -> HF
 * directory / GGUF file export, and .lcx -> .lcx resharding (training state included).
 *
 * Everything streams: a worker handles one tensor at a time and, under a memory bound, one chunk of rows of one
 * target box at a time, so peak memory is about (threads x 2 x the largest tensor) or the bound. Outputs appear
 * atomically: an .lcx is written into NAME.tmp-* and renamed at the end (no `latest`, no pruning), an HF
 * directory is written into DIR.tmp-* and renamed, a GGUF file is one atomic file. A failure leaves nothing
 * under the output name.
 *
 * Layout rules (what import/reshard store): every tensor is stored once per distinct TP box of
 * src/core/layout.h (lcx_tp_slice_of; replicas such as norms and replicated kv heads once); tensors whose name is
 * not a model weight are stored whole. Optimizer state (roles other than `param`) follows its parameter's box.
 *
 * GGUF mapping (docs/formats.md "GGUF", including "Rope metadata"): architectures `llama` (Mistral
 * is written as `llama`, as llama.cpp does), `qwen2` and `qwen3` (metadata keys prefixed with the architecture,
 * the same tensor names; only llama's q/k rows are permuted — transformers' GGUF reader un-permutes llama only).
 * Import un-permutes llama q/k rows (weights and biases, as llama.cpp's converter permutes both), dequantises Q8_0/Q4_0/Q4_1 to F32, keeps F32/F16/BF16, rebuilds config.json from
 * llama.* metadata and keeps every `tokenizer.*` KV in a small GGUF file `tokenizer.gguf` inside the .lcx (export
 * to GGUF writes them back). Export permutes q/k and writes rope metadata; llama3 rope becomes the
 * `rope_freqs.weight` tensor; dynamic and longrope rope are refused. */
#ifndef LCX_CONVERT_H
#define LCX_CONVERT_H

#include <stdint.h>

#include "formats/lcx.h"
#include "src/checkpoint/gguf_map.h" /* lcx_llama3_rope_divisors */
#include "src/rope/rope.h"
#include "src/core/status.h"
#include "src/core/tensor.h"

#define LCX_GGUF_TOKENIZER_FILE "tokenizer.gguf"

/* Progress: items (tensors) done of total and bytes written so far of the total. Called from worker threads,
 * one call at a time. */
typedef void (*lcx_progress_fn)(void *user, uint64_t done, uint64_t total, uint64_t bytes_done, uint64_t bytes_total);

typedef struct lcx_convert_opts {
    int tp, cp, dp;            /* target layout (import, reshard); default 1 x 1 x 1 */
    lcx_ckpt_write_opts write; /* codec / filter / level of the written .lcx (default zstd 1 + shuffle) */
    int threads;               /* worker threads; 0 = online CPUs, at most 8 */
    uint64_t max_memory;       /* bound on the workers' buffers in bytes; 0 = none */
    lcx_progress_fn progress;
    void *progress_user;
    lcx_rope_warn_fn warn;     /* non-fatal notes (may be NULL) */
    void *warn_user;
    /* export only */
    lcx_dtype dtype;           /* HF: BF16/F16/F32 (LCX_DTYPE_INVALID = as stored); GGUF: F32/F16/BF16/Q8_0
                                * for matrices (INVALID = as stored, F32 for others); 1-D tensors stay F32 */
    uint64_t shard_bytes;      /* HF: max bytes per safetensors shard (0 = 5 GB) */
} lcx_convert_opts;

void lcx_convert_opts_default(lcx_convert_opts *o);

/* Import src into a new checkpoint directory out (must not exist; its parent must). src: an HF model directory,
 * index .json or .safetensors file (with config.json), or a .gguf file (recognised by its magic). HF tokenizer
 * files and generation_config.json next to the source are copied in. Fails (LCX_ERR_INVALID naming the numbers)
 * when the model cannot be split over o->tp ranks. */
lcx_status lcx_import(const char *src, const char *out, const lcx_convert_opts *o);

/* Rewrite checkpoint src in layout o->tp x o->cp x o->dp as out, every tensor of every role, training state,
 * config and tokenizer files carried over. */
lcx_status lcx_reshard(const char *src, const char *out, const lcx_convert_opts *o);

/* Write the `param` tensors of checkpoint src as an HF model directory out (must not exist): config.json (rope
 * in the legacy form; dtype = o->dtype when it converts, else the stored dtype when all tensors share one float
 * dtype, else the config's), tokenizer files and generation_config.json copied through, model.safetensors or
 * shards + index by o->shard_bytes. Memory: one tensor at a time. */
lcx_status lcx_export_hf(const char *src, const char *out, const lcx_convert_opts *o);

/* Write checkpoint src as one GGUF file out (must not exist), llama metadata, tokenizer KVs: those of the source
 * GGUF when the checkpoint came from one, else converted from its tokenizer.json (byte-level BPE as "gpt2",
 * SentencePiece-style BPE as "llama"; other tokenizers are left out with a warning through o->warn). Memory: one
 * tensor at a time (read while the file is written). */
lcx_status lcx_export_gguf(const char *src, const char *out, const lcx_convert_opts *o);

/* Parse a size like "5GB", "500MB", "2GiB", "1048576" (decimal K/M/G/T, binary Ki/Mi/Gi/Ti, optional B). */
lcx_status lcx_parse_size(const char *s, uint64_t *out);

#endif
