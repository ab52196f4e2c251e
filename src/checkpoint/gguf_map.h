/* gguf_map: how a GGUF file maps onto a Hugging Face checkpoint (docs/formats.md "GGUF"): tensor names both
 * ways, which rows llama.cpp permuted, the config.json a GGUF's metadata implies, and llama3 rope as llama.cpp's
 * rope_freqs.weight. Shared by the checkpoint loader (src/checkpoint/source.h), GGUF import and GGUF export. */
#ifndef LCX_GGUF_MAP_H
#define LCX_GGUF_MAP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/gguf.h"
#include "src/core/status.h"

/* HF name -> GGUF name ("model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight") and back. 1 when the
 * name is one of the llama tensors and its mapping fits in cap bytes, else 0. */
int lcx_hf_to_gguf_name(const char *hf, char *out, size_t cap);
int lcx_gguf_to_hf_name(const char *gguf, char *out, size_t cap);

/* q/k weights and biases are row-permuted by llama.cpp (llama architecture only): the head count to (un)permute
 * an HF tensor with (nh for q, ng for k), else 0. */
int64_t lcx_gguf_qk_heads(const char *hf_name, int64_t nh, int64_t ng);

/* The config.json that f's metadata implies, for architectures llama, qwen2 and qwen3: sizes from the
 * <arch>.* keys and token_embd.weight's shape, tie_word_embeddings from output.weight's absence, biases from
 * blk.0's tensors, rope from <arch>.rope.* keys or rope_freqs.weight (llama3), bos/eos from tokenizer.ggml.*,
 * torch_dtype from token_embd.weight (F16/BF16 kept, else float32). Reads no tensor data but rope_freqs.weight's
 * few values. *permuted: 1 when llama q/k rows are in llama.cpp's pair order. Errors name the file and key. */
lcx_status lcx_gguf_config_json(const lcx_gguf_file *f, json_t **out, int *permuted);

/* llama3 rope as llama.cpp's rope_freqs.weight: per-pair divisor of the default frequency (1 kept, factor
 * interpolated, 1/((1-t)/factor + t) between), n_pairs = rot_dim/2 entries, computed in double. */
void lcx_llama3_rope_divisors(double theta, int64_t rot_dim, double factor, double low_freq_factor,
                              double high_freq_factor, int64_t original_max, float *div);

#endif
