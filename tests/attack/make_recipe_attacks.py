#!/usr/bin/env python3
"""Write the broken recipes of tests/attack/recipes/ and expected.tsv (stdlib only; run from anywhere).

Each case is a small YAML text, the 1-based line the error must point at, and a fragment the one-line message
must contain. The lines and messages are derived by hand from the text (recipes/README.md is the spec), not
copied from the parser's output. tests/unit/test_recipe.c parses every file with divisor 8 and checks that the
message starts with "<path>:<line>: " and contains the fragment.
"""
import os

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "recipes")

# name: (text, line, fragment)
CASES = {
    "typo_key": ("name: t\nstages:\n  - seq_len: 16k\n    setps: 100\n", 4,
                 "key 'setps': unknown key in stages[0] (did you mean 'steps'?)"),
    "typo_top_key": ("name: t\nstage:\n  - {seq_len: 16k, steps: 10}\n", 2,
                     "key 'stage': unknown key in the recipe (did you mean 'stages'?)"),
    "wrong_type_steps": ("stages:\n  - seq_len: 16k\n    steps: [1, 2]\n", 3,
                         "key 'steps': expected an integer, got a list"),
    "wrong_type_lr_peak": ("defaults:\n  lr:\n    peak: fast\nstages:\n  - {seq_len: 16k, steps: 10}\n", 3,
                           "key 'lr.peak': expected a number, got 'fast'"),
    "quoted_steps": ("stages:\n  - seq_len: 16k\n    steps: \"100\"\n", 3,
                     "key 'steps': expected an integer, got the quoted string \"100\""),
    "negative_steps": ("stages:\n  - seq_len: 16k\n    steps: -5\n", 3, "key 'steps': must be >= 1, got -5"),
    "lr_zero": ("defaults:\n  lr: 0\nstages:\n  - {seq_len: 16k, steps: 10}\n", 2, "key 'lr': must be > 0, got 0"),
    "lr_peak_negative": ("defaults:\n  lr: {peak: -1e-5}\nstages:\n  - {seq_len: 16k, steps: 10}\n", 2,
                         "key 'lr.peak': must be > 0"),
    "bad_length_kk": ("stages:\n  - seq_len: 12kk\n    steps: 10\n", 2, "key 'seq_len': '12kk' is not a length"),
    "length_zero": ("defaults:\n  tokens_per_batch: 0\nstages:\n  - {seq_len: 16k, steps: 10}\n", 2,
                    "key 'tokens_per_batch': length '0' must be positive"),
    "length_overflow": ("stages:\n  - seq_len: 99999999999999999999\n    steps: 10\n", 2,
                        "key 'seq_len': length '99999999999999999999' is too large"),
    "duplicate_key": ("stages:\n  - seq_len: 16k\n    steps: 10\n    steps: 20\n", 4,
                      "key 'steps': duplicate key (first at line 3)"),
    "duplicate_top_key": ("name: a\nname: b\nstages:\n  - {seq_len: 16k, steps: 10}\n", 2,
                          "key 'name': duplicate key (first at line 1)"),
    "lengths_not_increasing": ("stages:\n  - {seq_len: 32k, steps: 10}\n  - {seq_len: 16k, steps: 10}\n", 3,
                               "key 'seq_len': stage lengths must increase: 16384 after 32768 (line 2)"),
    "auto_not_last": ("stages:\n  - {seq_len: auto, steps: 10}\n  - {seq_len: 64k, steps: 10}\n", 2,
                      "key 'seq_len': 'auto' must be the last stage"),
    "method_unknown": ("defaults:\n  method: rope-magic\nstages:\n  - {seq_len: 16k, steps: 10}\n", 2,
                       "key 'method': unknown method 'rope-magic'"),
    "method_dynamic": ("stages:\n  - {seq_len: 16k, steps: 10, method: dynamic}\n", 2,
                       "key 'method': method 'dynamic' is for evaluation only"),
    "factor_below_1": ("stages:\n  - seq_len: 16k\n    steps: 10\n    factor: 0.5\n", 4,
                       "key 'factor': must be >= 1 (or auto), got 0.5"),
    "factor_with_abf": ("stages:\n  - seq_len: 16k\n    steps: 10\n    method: abf\n    factor: 2\n", 5,
                        "key 'factor': method abf (line 4) has no factor"),
    "theta_with_yarn": ("stages:\n  - seq_len: 16k\n    steps: 10\n    method: yarn\n    theta: 1e6\n", 5,
                        "key 'theta': method yarn (line 4) takes no theta"),
    "seq_not_divisible": ("stages:\n  - seq_len: 1020\n    steps: 10\n", 2,
                          "key 'seq_len': 1020 is not a multiple of 8"),
    "steps_and_tokens": ("stages:\n  - seq_len: 16k\n    steps: 10\n    tokens: 1000000\n", 4,
                         "key 'tokens': give steps or tokens, not both (steps at line 3)"),
    "no_budget": ("stages:\n  - seq_len: 16k\n", 2, "key 'steps': stages[0] has no training budget"),
    "warmup_exceeds_steps": ("defaults:\n  lr: {warmup_steps: 50}\nstages:\n  - {seq_len: 16k, steps: 10}\n", 2,
                             "key 'lr.warmup_steps': stages[0]: 50 warm-up steps exceed its 10 steps"),
    "min_lr_above_peak": ("defaults:\n  lr: {peak: 1e-5, min_lr: 1e-4}\nstages:\n  - {seq_len: 16k, steps: 10}\n", 2,
                          "key 'lr.min_lr': min_lr 0.0001 is above peak 1e-05"),
    "schedule_unknown": ("defaults:\n  lr: {schedule: linear}\nstages:\n  - {seq_len: 16k, steps: 10}\n", 2,
                         "key 'lr.schedule': unknown schedule 'linear'"),
    "activation_unknown": ("defaults:\n  activation: sometimes\nstages:\n  - {seq_len: 16k, steps: 10}\n", 2,
                           "key 'activation': unknown policy 'sometimes'"),
    "save_interval_negative": ("defaults:\n  save_interval: -1\nstages:\n  - {seq_len: 16k, steps: 10}\n", 2,
                               "key 'save_interval': must be >= 0"),
    "seq_len_in_defaults": ("defaults:\n  seq_len: 16k\nstages:\n  - {seq_len: 16k, steps: 10}\n", 2,
                            "key 'seq_len': belongs in a stage, not in defaults"),
    "stages_not_list": ("stages:\n  seq_len: 16k\n", 2, "key 'stages': expected a list of stages, got a mapping"),
    "stages_missing": ("name: t\n", 1, "key 'stages': missing"),
    "tab_indent": ("stages:\n  - seq_len: 16k\n\tsteps: 10\n", 3,
                   "yaml: found a tab character that violates indentation"),
    "bad_indent": ("stages:\n  - seq_len: 16k\n     steps: 10\n", 3, "yaml: mapping values are not allowed"),
    "empty": ("", 1, "empty recipe"),
    "comments_only": ("# nothing here\n", 1, "empty recipe"),
    "not_mapping": ("- a\n- b\n", 1, "a recipe must be a mapping"),
    "two_documents": ("stages:\n  - {seq_len: 16k, steps: 10}\n---\nstages: []\n", 4,
                      "more than one YAML document"),
    "llama3_key_with_pi": ("defaults:\n  method: pi\n  low_freq_factor: 1\nstages:\n  - {seq_len: 16k, steps: 10}\n",
                           3, "key 'low_freq_factor': method pi (line 2) takes no low_freq_factor"),
    "longrope_without_lists": ("stages:\n  - {seq_len: 16k, steps: 10, method: longrope}\n", 2,
                               "key 'method': stages[0]: longrope needs short_factor and long_factor lists"),
    "activation_list_bad": ("defaults:\n  activation: [keep, sometimes]\nstages:\n  - {seq_len: 16k, steps: 10}\n",
                            2, "key 'activation': layer 1: expected keep, recompute, offload or recompute+offload, got 'sometimes'"),
    "eval_lengths_bad": ("defaults:\n  eval_lengths: [4k, -1]\nstages:\n  - {seq_len: 16k, steps: 10}\n", 2,
                         "key 'eval_lengths': '-1' is not a length"),
    "number_nan": ("defaults:\n  clip_norm: .nan\nstages:\n  - {seq_len: 16k, steps: 10}\n", 2,
                   "key 'clip_norm': expected a number, got '.nan'"),
    "null_value": ("defaults:\n  steps:\nstages:\n  - {seq_len: 16k, steps: 10}\n", 2,
                   "key 'steps': expected an integer, got no value"),
    "unknown_lr_key": ("defaults:\n  lr: {peak: 1e-5, warmpu_steps: 3}\nstages:\n  - {seq_len: 16k, steps: 10}\n", 2,
                       "key 'warmpu_steps': unknown key in lr (did you mean 'warmup_steps'?)"),
    # parser bounds (issue 18): depth 17 under the limit of 16; 65 keys in one mapping over the limit of 64
    "too_deep": ("stages:\n  - {seq_len: 16k, steps: 10}\ndefaults:\n  x: " + "[" * 15 + "]" * 15 + "\n", 4,
                 "nesting deeper than 16 levels (the limit for a recipe)"),
    "too_many_keys": ("stages:\n  - {seq_len: 16k, steps: 10}\ndefaults:\n" +
                      "".join(f"  k{i}: 1\n" for i in range(65)), 4,
                      "key 'defaults': defaults has 65 keys, more than the limit of 64"),
    "non_scalar_key": ("stages:\n  - {seq_len: 16k, steps: 10, [a]: 1}\n", 2,
                       "key 'stages': stages[0] keys must be plain names, got a list"),
    "attention_mask_typo": ("stages:\n  - seq_len: 16k\n    steps: 10\n    atention_mask: document\n", 4,
                            "key 'atention_mask': unknown key in stages[0] (did you mean 'attention_mask'?)"),
    "attention_mask_unknown": ("stages:\n  - seq_len: 16k\n    steps: 10\n    attention_mask: documents\n", 4,
                               "key 'attention_mask': expected causal or document, got 'documents'"),
    "long_doc_repeat_zero": ("stages:\n  - seq_len: 16k\n    steps: 10\n    long_doc_repeat: 0\n", 4,
                             "key 'long_doc_repeat': must be in [1, 1000] (times a long document is drawn per "
                             "epoch), got 0"),
    "decay_fraction_zero": ("stages:\n  - seq_len: 16k\n    steps: 10\n    lr:\n      schedule: wsd\n"
                            "      decay_fraction: 0\n", 6, "key 'lr.decay_fraction': must be in (0, 1], got 0"),
    "decay_type_unknown": ("defaults:\n  lr: {schedule: wsd, decay_type: sqrt}\n"
                           "stages:\n  - {seq_len: 16k, steps: 10}\n", 2, "key 'lr.decay_type': unknown decay 'sqrt' (expected cosine, linear or 1-sqrt)"),
    "decay_without_wsd": ("defaults:\n  lr: {schedule: cosine}\nstages:\n  - seq_len: 16k\n    steps: 10\n"
                          "    lr: {decay_fraction: 0.1}\n", 6,
                          "key 'lr.decay_fraction': stages[0]: only the wsd schedule has a decay phase (its schedule "
                          "is cosine)"),
    "schedule_typo_wsd": ("stages:\n  - seq_len: 16k\n    steps: 10\n    lr: {schedule: wds}\n", 4,
                         "key 'lr.schedule': unknown schedule 'wds' (expected cosine, constant or wsd)"),
}


def main():
    os.makedirs(HERE, exist_ok=True)
    rows = []
    for name in sorted(CASES):
        text, line, frag = CASES[name]
        with open(os.path.join(HERE, name + ".yaml"), "w", newline="\n") as f:
            f.write(text)
        assert "\t" not in frag
        rows.append(f"{name}.yaml\t{line}\t{frag}\n")
    with open(os.path.join(HERE, "expected.tsv"), "w", newline="\n") as f:
        f.writelines(rows)
    print(f"wrote {len(rows)} cases to {HERE}")


if __name__ == "__main__":
    main()
