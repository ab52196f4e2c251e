/* hf_config: parsing rules (both rope forms, aliases, defaults, per-arch bias rules), every validation error,
 * and the writer (byte-identical to Python's json.dumps(indent=2, sort_keys=True), see
 * tests/fixtures/config/make_config_fixtures.py) with a write + reload round trip. Expected values are derived
 * by hand from transformers' config classes and modeling_rope_utils (cited per case). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/hf_config.h"
#include "src/core/fileio.h"
#include "test_util.h"

/* A minimal valid llama config with `extra` spliced in (",\"key\": value" pieces; later duplicates are not
 * allowed, so tests that change a base key use base_without). */
#define BASE_LLAMA                                                                                                 \
    "\"model_type\": \"llama\", \"vocab_size\": 256, \"hidden_size\": 64, \"intermediate_size\": 160, "          \
    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"max_position_embeddings\": 2048"

static lcx_status parse_str(const char *text, lcx_model_config *cfg) {
    return lcx_config_parse("config.json", text, strlen(text), cfg);
}

/* Parse "{BASE_LLAMA, extra}" and keep the result in *cfg (caller frees). */
static lcx_status parse_llama(const char *extra, lcx_model_config *cfg) {
    char buf[8192];
    snprintf(buf, sizeof buf, "{" BASE_LLAMA "%s%s}", extra[0] ? ", " : "", extra);
    return parse_str(buf, cfg);
}

static lcx_status parse_fail(const char *text) {
    lcx_model_config cfg;
    lcx_status st = parse_str(text, &cfg);
    if (st == LCX_OK) lcx_config_free(&cfg);
    else CHECK(cfg.json == NULL); /* nothing leaks or dangles on failure */
    return st;
}

static lcx_status llama_fail(const char *extra) {
    lcx_model_config cfg;
    lcx_status st = parse_llama(extra, &cfg);
    if (st == LCX_OK) lcx_config_free(&cfg);
    return st;
}

static void test_defaults(void) {
    lcx_model_config c;
    CHECK_OK(parse_llama("", &c));
    CHECK(c.arch == LCX_ARCH_LLAMA);
    CHECK(c.vocab_size == 256 && c.hidden_size == 64 && c.intermediate_size == 160 && c.num_hidden_layers == 2);
    CHECK(c.num_attention_heads == 4);
    CHECK(c.num_key_value_heads == 4); /* absent -> heads (LlamaConfig.__post_init__) */
    CHECK(c.head_dim == 16 && !c.head_dim_explicit);
    CHECK(c.rms_norm_eps == 1e-6);     /* LlamaConfig default */
    CHECK(!c.tie_word_embeddings && !c.qkv_bias && !c.o_bias && !c.mlp_bias && !c.qk_norm);
    CHECK(c.dtype == LCX_F32);
    CHECK(c.bos_token_id == -1 && c.n_eos == 0);
    CHECK(c.sliding_window == 0);
    CHECK(!strcmp(c.rope.type, "default"));
    CHECK(c.rope.theta == 10000.0 && c.rope.partial_rotary_factor == 1.0);
    CHECK(!c.rope.has_factor && !c.rope.has_original_max && !c.rope.has_truncate && c.rope.n_long_factor == 0);
    CHECK(c.json && json_is_object(c.json));
    lcx_config_free(&c);
    lcx_config_free(&c); /* second free is harmless (json reset to NULL) */
    lcx_config_free(NULL);
}

static void test_fields(void) {
    lcx_model_config c;
    CHECK_OK(parse_llama("\"num_key_value_heads\": null, \"head_dim\": null, \"rms_norm_eps\": 1e-05, "
                         "\"hidden_act\": \"silu\", \"tie_word_embeddings\": true, \"attention_bias\": true, "
                         "\"mlp_bias\": true, \"torch_dtype\": \"bfloat16\", \"bos_token_id\": 1, "
                         "\"eos_token_id\": [2, 255], \"pad_token_id\": null",
                         &c));
    CHECK(c.num_key_value_heads == 4 && c.head_dim == 16);
    CHECK(c.rms_norm_eps == 1e-5 && c.tie_word_embeddings && c.qkv_bias && c.o_bias && c.mlp_bias);
    CHECK(c.dtype == LCX_BF16 && c.bos_token_id == 1 && c.n_eos == 2);
    CHECK(c.eos_token_ids[0] == 2 && c.eos_token_ids[1] == 255);
    lcx_config_free(&c);

    /* v5 "dtype" wins over "torch_dtype"; eos as a plain int; an integer rms_norm_eps is a number */
    CHECK_OK(parse_llama("\"dtype\": \"float16\", \"torch_dtype\": \"float32\", \"eos_token_id\": 7, "
                         "\"rms_norm_eps\": 1",
                         &c));
    CHECK(c.dtype == LCX_F16 && c.n_eos == 1 && c.eos_token_ids[0] == 7 && c.rms_norm_eps == 1.0);
    lcx_config_free(&c);

    /* explicit head_dim is honoured even when hidden/heads differs (and does not divide) */
    CHECK_OK(parse_str("{\"model_type\": \"qwen3\", \"architectures\": [\"Qwen3ForCausalLM\"], \"vocab_size\": 100, "
                       "\"hidden_size\": 60, \"intermediate_size\": 96, \"num_hidden_layers\": 1, "
                       "\"num_attention_heads\": 8, \"num_key_value_heads\": 2, \"head_dim\": 32, "
                       "\"max_position_embeddings\": 40960, \"attention_bias\": false}",
                       &c));
    CHECK(c.arch == LCX_ARCH_QWEN3 && c.head_dim == 32 && c.head_dim_explicit && c.num_key_value_heads == 2);
    CHECK(c.qk_norm && !c.qkv_bias && !c.o_bias && !c.mlp_bias);
    lcx_config_free(&c);
}

static void test_arch_rules(void) {
    lcx_model_config c;
    /* qwen2: q/k/v bias always (Qwen2Attention bias=True), never o bias, attention_bias ignored */
    CHECK_OK(parse_str("{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", \"vocab_size\": 10, "
                       "\"hidden_size\": 8, \"intermediate_size\": 8, \"num_hidden_layers\": 1, "
                       "\"num_attention_heads\": 2, \"max_position_embeddings\": 64, \"attention_bias\": false, "
                       "\"mlp_bias\": true}",
                       &c));
    CHECK(c.arch == LCX_ARCH_QWEN2 && c.qkv_bias == 1 && c.o_bias == 0 && c.mlp_bias == 0 && !c.qk_norm);
    lcx_config_free(&c);
    /* qwen3 with attention_bias: q/k/v/o bias */
    CHECK_OK(parse_str("{\"model_type\": \"qwen3\", \"vocab_size\": 10, \"hidden_size\": 8, \"intermediate_size\": 8, "
                       "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"max_position_embeddings\": 64, "
                       "\"attention_bias\": true}",
                       &c));
    /* no head_dim: Qwen3Config defaults to 128 (not hidden/heads = 4), as transformers does */
    CHECK(c.arch == LCX_ARCH_QWEN3 && c.qkv_bias && c.o_bias && c.qk_norm && c.head_dim == 128 &&
          !c.head_dim_explicit);
    lcx_config_free(&c);
    /* mistral: bias-free whatever the config says (MistralAttention bias=False); null window = none */
    CHECK_OK(parse_str("{\"model_type\": \"mistral\", \"vocab_size\": 10, \"hidden_size\": 8, \"intermediate_size\": 8, "
                       "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"max_position_embeddings\": 64, "
                       "\"attention_bias\": true, \"sliding_window\": null}",
                       &c));
    CHECK(c.arch == LCX_ARCH_MISTRAL && !c.qkv_bias && !c.o_bias && c.sliding_window == 0);
    lcx_config_free(&c);
    /* architectures alone is enough */
    CHECK_OK(parse_str("{\"architectures\": [\"MistralForCausalLM\"], \"vocab_size\": 10, \"hidden_size\": 8, "
                       "\"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
                       "\"max_position_embeddings\": 64, \"sliding_window\": 64}",
                       &c));
    CHECK(c.arch == LCX_ARCH_MISTRAL && c.sliding_window == 64); /* window == M: recorded, not active inside M */
    lcx_config_free(&c);
    /* qwen2: window only with use_sliding_window, and only if some layer >= max_window_layers slides */
    const char *qwen = "{\"model_type\": \"qwen2\", \"vocab_size\": 10, \"hidden_size\": 8, \"intermediate_size\": 8, "
                       "\"num_hidden_layers\": 4, \"num_attention_heads\": 2, \"max_position_embeddings\": 64, "
                       "\"sliding_window\": 16%s}";
    char buf[1024];
    snprintf(buf, sizeof buf, qwen, ", \"use_sliding_window\": false");
    CHECK_OK(parse_str(buf, &c));
    CHECK(c.sliding_window == 0);
    lcx_config_free(&c);
    snprintf(buf, sizeof buf, qwen, ", \"use_sliding_window\": true, \"max_window_layers\": 4");
    CHECK_OK(parse_str(buf, &c));
    CHECK(c.sliding_window == 0);
    lcx_config_free(&c);
    snprintf(buf, sizeof buf, qwen, ", \"use_sliding_window\": true, \"max_window_layers\": 3");
    CHECK_FAILS(parse_fail(buf), LCX_ERR_UNSUPPORTED, "key 'sliding_window'");
    snprintf(buf, sizeof buf, qwen, ", \"use_sliding_window\": true, \"layer_types\": [\"full_attention\"]");
    CHECK_OK(parse_str(buf, &c));
    CHECK(c.sliding_window == 0);
    lcx_config_free(&c);
    snprintf(buf, sizeof buf, qwen, ", \"use_sliding_window\": true, \"layer_types\": [\"sliding_attention\"]");
    CHECK_FAILS(parse_fail(buf), LCX_ERR_UNSUPPORTED, "sliding-window attention (window 16 < max_position_embeddings 64)");
    /* mistral without the key: MistralConfig's default window 4096 applies */
    CHECK_FAILS(parse_fail("{\"model_type\": \"mistral\", \"vocab_size\": 10, \"hidden_size\": 8, "
                           "\"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
                           "\"max_position_embeddings\": 32768}"),
                LCX_ERR_UNSUPPORTED, "window 4096 < max_position_embeddings 32768");
    /* llama ignores sliding_window keys */
    CHECK_OK(parse_llama("\"sliding_window\": 16", &c));
    CHECK(c.sliding_window == 0);
    lcx_config_free(&c);
}

static void test_rope_forms(void) {
    lcx_model_config c;
    /* legacy: top-level rope_theta + rope_scaling with rope_type; integers accepted where floats expected */
    CHECK_OK(parse_llama("\"rope_theta\": 500000, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, "
                         "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                         "\"original_max_position_embeddings\": 8192}",
                         &c));
    CHECK(!strcmp(c.rope.type, "llama3") && c.rope.theta == 500000.0);
    CHECK(c.rope.has_factor && c.rope.factor == 8.0);
    CHECK(c.rope.has_low_freq_factor && c.rope.low_freq_factor == 1.0);
    CHECK(c.rope.has_high_freq_factor && c.rope.high_freq_factor == 4.0);
    CHECK(c.rope.has_original_max && c.rope.original_max_position_embeddings == 8192);
    CHECK(!c.rope.has_beta_fast && !c.rope.has_attention_factor);
    lcx_config_free(&c);
    /* older alias `type` */
    CHECK_OK(parse_llama("\"rope_scaling\": {\"type\": \"linear\", \"factor\": 4.0}", &c));
    CHECK(!strcmp(c.rope.type, "linear") && c.rope.factor == 4.0 && c.rope.theta == 10000.0);
    lcx_config_free(&c);
    /* both names agreeing is fine; disagreeing is an error */
    CHECK_OK(parse_llama("\"rope_scaling\": {\"type\": \"yarn\", \"rope_type\": \"yarn\", \"factor\": 4.0, "
                         "\"beta_fast\": 32, \"beta_slow\": 1, \"truncate\": false, \"attention_factor\": 1.2, "
                         "\"mscale\": 0.707, \"mscale_all_dim\": 1.0}",
                         &c));
    CHECK(!strcmp(c.rope.type, "yarn") && c.rope.has_beta_fast && c.rope.beta_fast == 32 && c.rope.beta_slow == 1);
    CHECK(c.rope.has_truncate && c.rope.truncate == 0 && c.rope.attention_factor == 1.2);
    CHECK(c.rope.has_mscale && c.rope.mscale == 0.707 && c.rope.has_mscale_all_dim && c.rope.mscale_all_dim == 1.0);
    CHECK(!c.rope.has_original_max); /* absent: src/rope defaults it to max_position_embeddings */
    lcx_config_free(&c);
    CHECK_FAILS(llama_fail("\"rope_scaling\": {\"type\": \"linear\", \"rope_type\": \"yarn\", \"factor\": 2.0}"),
                LCX_ERR_INVALID, "config.json: key 'rope_scaling.type': 'linear' disagrees with rope_type 'yarn'");

    /* v5: rope_parameters holds theta, type and partial_rotary_factor */
    CHECK_OK(parse_llama("\"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 1000000.0, \"factor\": 4.0, "
                         "\"original_max_position_embeddings\": 32768, \"partial_rotary_factor\": 0.5}",
                         &c));
    CHECK(!strcmp(c.rope.type, "yarn") && c.rope.theta == 1e6 && c.rope.factor == 4.0);
    CHECK(c.rope.original_max_position_embeddings == 32768 && c.rope.partial_rotary_factor == 0.5);
    lcx_config_free(&c);
    /* v5 default */
    CHECK_OK(parse_llama("\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1000000.0}", &c));
    CHECK(!strcmp(c.rope.type, "default") && c.rope.theta == 1e6 && !c.rope.has_factor);
    lcx_config_free(&c);
    /* per-layer-type form */
    CHECK_OK(parse_llama("\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"linear\", \"factor\": 2.0, "
                         "\"rope_theta\": 20000.0}}",
                         &c));
    CHECK(!strcmp(c.rope.type, "linear") && c.rope.factor == 2.0 && c.rope.theta == 20000.0);
    lcx_config_free(&c);

    /* a non-null rope_scaling wins; theta then comes from the top level */
    CHECK_OK(parse_llama("\"rope_theta\": 5e5, \"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 2.0}, "
                         "\"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 7.0, \"factor\": 9.0}",
                         &c));
    CHECK(!strcmp(c.rope.type, "dynamic") && c.rope.factor == 2.0 && c.rope.theta == 5e5);
    lcx_config_free(&c);
    /* a null or empty rope_scaling does not win (transformers: `rope_scaling or rope_parameters`) */
    CHECK_OK(parse_llama("\"rope_scaling\": null, \"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 3.0}",
                         &c));
    CHECK(!strcmp(c.rope.type, "linear") && c.rope.factor == 3.0);
    lcx_config_free(&c);
    CHECK_OK(parse_llama("\"rope_scaling\": {}, \"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 3.0}", &c));
    CHECK(!strcmp(c.rope.type, "linear"));
    lcx_config_free(&c);
    /* theta inside rope_parameters wins over the top-level one */
    CHECK_OK(parse_llama("\"rope_theta\": 1.0, \"rope_parameters\": {\"rope_theta\": 2.5}", &c));
    CHECK(c.rope.theta == 2.5 && !strcmp(c.rope.type, "default"));
    lcx_config_free(&c);
    /* top-level partial_rotary_factor applies when the object has none */
    CHECK_OK(parse_llama("\"partial_rotary_factor\": 0.25", &c));
    CHECK(c.rope.partial_rotary_factor == 0.25);
    lcx_config_free(&c);
    /* a top-level original_max_position_embeddings has priority for llama3/yarn/longrope (standardize_rope_params) */
    CHECK_OK(parse_llama("\"original_max_position_embeddings\": 4096, \"rope_scaling\": {\"rope_type\": \"longrope\", "
                         "\"original_max_position_embeddings\": 1024, \"short_factor\": [1, 1.5], "
                         "\"long_factor\": [2.0, 4]}",
                         &c));
    CHECK(c.rope.has_original_max && c.rope.original_max_position_embeddings == 4096);
    CHECK(c.rope.n_short_factor == 2 && c.rope.short_factor[1] == 1.5);
    CHECK(c.rope.n_long_factor == 2 && c.rope.long_factor[0] == 2.0 && c.rope.long_factor[1] == 4.0);
    lcx_config_free(&c);
    /* ... but not for linear */
    CHECK_OK(parse_llama("\"original_max_position_embeddings\": 4096, \"rope_scaling\": {\"rope_type\": \"linear\", "
                         "\"factor\": 2.0}",
                         &c));
    CHECK(!c.rope.has_original_max);
    lcx_config_free(&c);
    /* an unknown rope type is stored as given (src/rope names it in its error) */
    CHECK_OK(parse_llama("\"rope_scaling\": {\"rope_type\": \"su\", \"factor\": 2.0}", &c));
    CHECK(!strcmp(c.rope.type, "su"));
    lcx_config_free(&c);
}

static void test_errors(void) {
    /* syntax: line and column */
    CHECK_FAILS(parse_fail("{\n  \"model_type\": \"llama\",\n  \"vocab_size\": 12,,\n}"), LCX_ERR_FORMAT,
                "config.json: invalid JSON at line 3, column");
    CHECK_FAILS(parse_fail(""), LCX_ERR_FORMAT, "config.json: invalid JSON at line");
    CHECK_FAILS(parse_fail("[1, 2]"), LCX_ERR_FORMAT, "expected a JSON object at the top level, got an array");
    CHECK_FAILS(parse_fail("{\"model_type\": \"llama\", \"model_type\": \"llama\"}"), LCX_ERR_FORMAT, "duplicate");
    /* missing / wrong type / out of range */
    CHECK_FAILS(parse_fail("{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 160, "
                           "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"max_position_embeddings\": 2048}"),
                LCX_ERR_FORMAT, "config.json: required key 'vocab_size' is missing");
    CHECK_FAILS(parse_fail("{\"vocab_size\": 3}"), LCX_ERR_FORMAT, "required key 'model_type' is missing");
    CHECK_FAILS(parse_fail("{\"model_type\": \"llama\", \"vocab_size\": \"256\"}"), LCX_ERR_FORMAT,
                "config.json: key 'vocab_size': expected an integer, got a string");
    CHECK_FAILS(parse_fail("{\"model_type\": \"llama\", \"vocab_size\": 256.0}"), LCX_ERR_FORMAT,
                "key 'vocab_size': expected an integer, got a real number");
    CHECK_FAILS(parse_fail("{\"model_type\": \"llama\", \"vocab_size\": null}"), LCX_ERR_FORMAT,
                "required key 'vocab_size' is missing");
    CHECK_FAILS(parse_fail("{\"model_type\": \"llama\", \"vocab_size\": 10, \"hidden_size\": -64}"), LCX_ERR_INVALID,
                "key 'hidden_size': must be positive, got -64");
    CHECK_FAILS(parse_fail("{\"model_type\": \"llama\", \"vocab_size\": 10, \"hidden_size\": 0}"), LCX_ERR_INVALID,
                "key 'hidden_size': must be positive");
    CHECK_FAILS(parse_fail("{\"model_type\": \"llama\", \"vocab_size\": 10, \"hidden_size\": 9223372036854775807}"),
                LCX_ERR_INVALID, "key 'hidden_size': 9223372036854775807 is larger than the supported maximum");
    CHECK_FAILS(parse_fail("{\"model_type\": \"llama\", \"vocab_size\": 99999999999999999999}"), LCX_ERR_FORMAT,
                "invalid JSON"); /* jansson: integer overflow */
    CHECK_FAILS(llama_fail("\"num_key_value_heads\": 3"), LCX_ERR_INVALID,
                "key 'num_key_value_heads': 3 does not divide num_attention_heads 4");
    CHECK_FAILS(llama_fail("\"num_key_value_heads\": 0"), LCX_ERR_INVALID, "key 'num_key_value_heads': must be positive");
    CHECK_FAILS(llama_fail("\"head_dim\": -1"), LCX_ERR_INVALID, "key 'head_dim': must be positive");
    /* what a later command would refuse (rope plan, tokenize) is refused by the validator (issue 18) */
    CHECK_FAILS(llama_fail("\"rope_theta\": -10000.0"), LCX_ERR_INVALID, "key 'rope_theta': must be positive, got -10000");
    CHECK_FAILS(llama_fail("\"rope_theta\": 0"), LCX_ERR_INVALID, "key 'rope_theta': must be positive, got 0");
    CHECK_FAILS(llama_fail("\"partial_rotary_factor\": 1.5"), LCX_ERR_INVALID, "key 'partial_rotary_factor': 1.5 is not in (0, 1]");
    CHECK_FAILS(llama_fail("\"head_dim\": 6, \"partial_rotary_factor\": 0.5"), LCX_ERR_INVALID,
                "rotary dimension 3 (head_dim 6 x 0.5) must be even and >= 2");
    CHECK_FAILS(llama_fail("\"bos_token_id\": 256"), LCX_ERR_INVALID, "key 'bos_token_id': 256 is not below vocab_size 256");
    CHECK_FAILS(llama_fail("\"eos_token_id\": [1, 4294967296]"), LCX_ERR_INVALID,
                "key 'eos_token_id': 4294967296 is not below vocab_size 256");
    CHECK_FAILS(parse_fail("{\"model_type\": \"llama\", \"vocab_size\": 256, \"hidden_size\": 64, "
                           "\"intermediate_size\": 160, \"num_hidden_layers\": 2, \"num_attention_heads\": 5, "
                           "\"max_position_embeddings\": 2048}"),
                LCX_ERR_INVALID, "key 'hidden_size': 64 is not divisible by num_attention_heads 5");
    CHECK_FAILS(llama_fail("\"rms_norm_eps\": \"1e-5\""), LCX_ERR_FORMAT, "key 'rms_norm_eps': expected a number, got a string");
    CHECK_FAILS(llama_fail("\"rms_norm_eps\": 0"), LCX_ERR_INVALID, "key 'rms_norm_eps': must be positive");
    CHECK_FAILS(llama_fail("\"hidden_act\": \"gelu\""), LCX_ERR_UNSUPPORTED, "key 'hidden_act': activation 'gelu'");
    CHECK_FAILS(llama_fail("\"tie_word_embeddings\": 1"), LCX_ERR_FORMAT, "key 'tie_word_embeddings': expected true or false");
    CHECK_FAILS(llama_fail("\"torch_dtype\": \"int8\""), LCX_ERR_UNSUPPORTED, "key 'torch_dtype': unsupported dtype 'int8'");
    CHECK_FAILS(llama_fail("\"eos_token_id\": \"</s>\""), LCX_ERR_FORMAT, "key 'eos_token_id': expected an integer or a list");
    CHECK_FAILS(llama_fail("\"eos_token_id\": [1, 2.5]"), LCX_ERR_FORMAT, "key 'eos_token_id[1]': expected an integer");
    CHECK_FAILS(llama_fail("\"eos_token_id\": [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]"), LCX_ERR_UNSUPPORTED,
                "key 'eos_token_id': 17 ids");
    /* architecture */
    CHECK_FAILS(parse_fail("{\"model_type\": \"gpt2\"}"), LCX_ERR_UNSUPPORTED,
                "key 'model_type': unsupported architecture 'gpt2' (supported: llama (LlamaForCausalLM), mistral");
    CHECK_FAILS(parse_fail("{\"architectures\": [\"GPT2LMHeadModel\"]}"), LCX_ERR_UNSUPPORTED,
                "key 'architectures': unsupported architecture 'GPT2LMHeadModel'");
    CHECK_FAILS(parse_fail("{\"model_type\": \"llama\", \"architectures\": [\"Qwen2ForCausalLM\"]}"), LCX_ERR_INVALID,
                "key 'architectures': Qwen2ForCausalLM does not match model_type 'llama'");
    CHECK_FAILS(parse_fail("{\"model_type\": \"llama\", \"architectures\": \"LlamaForCausalLM\"}"), LCX_ERR_FORMAT,
                "key 'architectures': expected an array, got a string");
    CHECK_FAILS(parse_fail("{\"model_type\": 3}"), LCX_ERR_FORMAT, "key 'model_type': expected a string, got an integer");
    /* rope */
    CHECK_FAILS(llama_fail("\"rope_scaling\": \"yarn\""), LCX_ERR_FORMAT,
                "key 'rope_scaling': expected an object or null, got a string");
    CHECK_FAILS(llama_fail("\"rope_parameters\": [1]"), LCX_ERR_FORMAT, "key 'rope_parameters': expected an object");
    CHECK_FAILS(llama_fail("\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": \"4\"}"), LCX_ERR_FORMAT,
                "key 'rope_scaling.factor': expected a number, got a string");
    CHECK_FAILS(llama_fail("\"rope_scaling\": {\"rope_type\": 4}"), LCX_ERR_FORMAT,
                "key 'rope_scaling.rope_type': expected a string");
    CHECK_FAILS(llama_fail("\"rope_theta\": \"1e4\""), LCX_ERR_FORMAT, "key 'rope_theta': expected a number");
    CHECK_FAILS(llama_fail("\"rope_scaling\": {\"rope_type\": \"yarn\", \"original_max_position_embeddings\": 8192.5}"),
                LCX_ERR_FORMAT, "key 'rope_scaling.original_max_position_embeddings': expected an integer");
    CHECK_FAILS(llama_fail("\"rope_scaling\": {\"rope_type\": \"yarn\", \"truncate\": 0}"), LCX_ERR_FORMAT,
                "key 'rope_scaling.truncate': expected true or false");
    CHECK_FAILS(llama_fail("\"rope_scaling\": {\"rope_type\": \"longrope\", \"long_factor\": [1, \"x\"]}"),
                LCX_ERR_FORMAT, "key 'rope_scaling.long_factor[1]': expected a number");
    CHECK_FAILS(llama_fail("\"rope_scaling\": {\"rope_type\": \"\"}"), LCX_ERR_UNSUPPORTED, "unsupported rope type");
    {
        /* a list longer than the supported number of pairs */
        size_t cap = 16 * (LCX_ROPE_MAX_PAIRS + 2) + 256;
        char *big = malloc(cap);
        size_t n = (size_t)snprintf(big, cap, "\"rope_scaling\": {\"rope_type\": \"longrope\", \"short_factor\": [1");
        for (int i = 0; i < LCX_ROPE_MAX_PAIRS; i++) n += (size_t)snprintf(big + n, cap - n, ",1");
        snprintf(big + n, cap - n, "]}");
        char *doc = malloc(cap + 512);
        snprintf(doc, cap + 512, "{" BASE_LLAMA ", %s}", big);
        CHECK_FAILS(parse_fail(doc), LCX_ERR_INVALID, "key 'rope_scaling.short_factor': 1025 entries");
        free(big);
        free(doc);
    }
    /* file errors name the path */
    lcx_model_config c;
    CHECK_FAILS(lcx_config_load("/nonexistent/dir/config.json", &c), LCX_ERR_NOT_FOUND, "/nonexistent/dir/config.json");
}

static char *slurp(const char *path) {
    char *buf = NULL;
    size_t len = 0;
    if (lcx_read_file(path, 1 << 20, &buf, &len) != LCX_OK) return NULL;
    return buf;
}

static void test_write(void) {
    char in[512], want[512], out[512];
    snprintf(in, sizeof in, "%s/tests/fixtures/config/roundtrip_in.json", LCX_SOURCE_DIR);
    snprintf(want, sizeof want, "%s/tests/fixtures/config/roundtrip_expected.json", LCX_SOURCE_DIR);
    snprintf(out, sizeof out, "%s/test_hf_config_out_%d.json", LCX_BINARY_DIR, (int)getpid());
    lcx_model_config c, r;
    CHECK_OK(lcx_config_load(in, &c));
    CHECK(c.rope.has_original_max && c.rope.original_max_position_embeddings == 8192 && c.n_eos == 3);
    CHECK_OK(lcx_config_write(&c, out));
    char *got = slurp(out), *exp = slurp(want);
    CHECK(got && exp);
    if (got && exp) {
        CHECK_MSG(strcmp(got, exp) == 0, "writer output differs from Python's json.dumps:\n%s", got);
    }
    free(got);
    free(exp);

    /* change typed fields, write, reload: typed fields come back, unknown fields survive */
    c.rope.factor = 16.0;
    c.max_position_embeddings = 131072 * 2;
    c.tie_word_embeddings = 1;
    c.n_eos = 1;
    c.eos_token_ids[0] = 5;
    CHECK_OK(lcx_config_write(&c, out));
    CHECK_OK(lcx_config_load(out, &r));
    CHECK(r.rope.factor == 16.0 && !strcmp(r.rope.type, "llama3") && r.rope.theta == 500000.0);
    CHECK(r.max_position_embeddings == 262144 && r.tie_word_embeddings == 1);
    CHECK(r.n_eos == 1 && r.eos_token_ids[0] == 5);
    CHECK(r.rope.low_freq_factor == 1.0 && r.rope.high_freq_factor == 4.0);
    json_t *u = json_object_get(r.json, "zz_unknown");
    CHECK(json_equal(u, json_object_get(c.json, "zz_unknown")));
    CHECK(json_is_string(json_object_get(r.json, "unicode_note")) &&
          json_equal(json_object_get(r.json, "unicode_note"), json_object_get(c.json, "unicode_note")));
    lcx_config_free(&r);
    lcx_config_free(&c);

    /* v5 form in, legacy form out (docs/rope.md "Export form") with the same meaning */
    CHECK_OK(parse_llama("\"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 1000000, \"factor\": 4, "
                         "\"original_max_position_embeddings\": 512, \"beta_fast\": 32.0, \"beta_slow\": 1.0}, "
                         "\"custom\": {\"x\": 1}",
                         &c));
    CHECK_OK(lcx_config_write(&c, out));
    CHECK_OK(lcx_config_load(out, &r));
    CHECK(!json_object_get(r.json, "rope_parameters"));
    json_t *rs = json_object_get(r.json, "rope_scaling");
    CHECK(json_is_object(rs) && !strcmp(json_string_value(json_object_get(rs, "type")), "yarn"));
    CHECK(json_is_real(json_object_get(rs, "factor")) && json_is_real(json_object_get(r.json, "rope_theta")));
    CHECK(!strcmp(r.rope.type, "yarn") && r.rope.theta == 1e6 && r.rope.factor == 4.0);
    CHECK(r.rope.original_max_position_embeddings == 512 && r.rope.beta_fast == 32.0 && r.rope.beta_slow == 1.0);
    CHECK(json_integer_value(json_object_get(json_object_get(r.json, "custom"), "x")) == 1);
    lcx_config_free(&r);
    lcx_config_free(&c);
    unlink(out);

    /* (found by fuzz_config) a rope object without a type is "default" but its parameters survive a write */
    CHECK_OK(parse_llama("\"rope_scaling\": {\"factor\": 4.0, \"original_max_position_embeddings\": 64}", &c));
    CHECK(!strcmp(c.rope.type, "default") && c.rope.has_factor && c.rope.has_original_max);
    CHECK_OK(lcx_config_write(&c, out));
    CHECK_OK(lcx_config_load(out, &r));
    CHECK(!strcmp(r.rope.type, "default") && r.rope.has_factor && r.rope.factor == 4.0 && r.rope.has_original_max);
    lcx_config_free(&r);
    lcx_config_free(&c);
    unlink(out);

    /* writing into a missing directory fails cleanly */
    CHECK_OK(parse_llama("", &c));
    CHECK_FAILS(lcx_config_write(&c, "/nonexistent/dir/config.json"), LCX_ERR_IO, "/nonexistent/dir");
    lcx_config_free(&c);
}

/* Python float repr corner cases through the public dumper. */
static void test_dumps(void) {
    static const struct { double x; const char *s; } cases[] = {
        {1e-6, "1e-06"}, {1e-5, "1e-05"}, {0.0001, "0.0001"}, {10000.0, "10000.0"}, {1e16, "1e+16"},
        {1e15, "1000000000000000.0"}, {0.1, "0.1"}, {-2.5, "-2.5"}, {123456.789, "123456.789"},
        {1.7976931348623157e308, "1.7976931348623157e+308"}, {5e-324, "5e-324"}, {0.3, "0.3"},
        {2.0 / 3.0, "0.6666666666666666"}, {1234567890123456789.0, "1.2345678901234568e+18"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *v = json_real(cases[i].x);
        char *s = lcx_json_dumps_hf(v);
        CHECK_MSG(s && !strcmp(s, cases[i].s), "%.17g -> %s, want %s", cases[i].x, s ? s : "(null)", cases[i].s);
        free(s);
        json_decref(v);
    }
}

int main(void) {
    test_defaults();
    test_fields();
    test_arch_rules();
    test_rope_forms();
    test_errors();
    test_write();
    test_dumps();
    return test_summary("test_hf_config");
}
