/* lcextend: the main program. `lcextend CKPT --to N` extends a checkpoint; the other actions are subcommands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "kernels/cpu/cpu_blas.h"
#include "src/core/fileio.h"

static int lcx_cmd_version(int argc, char **argv) {
    (void)argc; (void)argv;
    printf("lcextend 0.1.0\n");
    /* what runs the CPU GEMMs: a benchmark's figures depend on it */
    const char *set = getenv("OPENBLAS_CORETYPE"), *detected = getenv("LCX_OPENBLAS_DETECTED");
    printf("cpu gemm: %s; kernels %s", lcx_cpu_blas_config(), lcx_cpu_blas_core());
    if (set && detected)
        printf(" (OPENBLAS_CORETYPE set by lcextend: OpenBLAS detected %s, older than this CPU)\n", detected);
    else
        printf(" (OPENBLAS_CORETYPE %s)\n", set ? set : "unset");
    return LCX_EXIT_OK;
}

typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"version", lcx_cmd_version, "print the version"},
    {"inspect", lcx_cmd_inspect, "show what a checkpoint holds (HF, safetensors, .lcx): arch, sizes, dtypes, rope"},
    {"score", lcx_cmd_score, "mean next-token loss and perplexity over a token-id file"},
    {"train-steps", lcx_cmd_train_steps, "run N AdamW steps on random or given tokens, print losses"},
    {"eval", lcx_cmd_eval, "perplexity by context length and passkey retrieval: tables, JSON, SVG pictures"},
    {"train", lcx_cmd_train, "train at one sequence length into a run directory (checkpoints, metrics, --resume)"},
    {"rope", lcx_cmd_rope, "show a checkpoint's rope per pair, or write a zero-shot extended copy (--to N --out DIR)"},
    {"plan", lcx_cmd_plan, "print the staged extension plan for --to N (stages, rope, steps, memory, time)"},
    {"tokenize", lcx_cmd_tokenize, "text / JSON lines -> Megatron indexed dataset (.bin/.idx)"},
    {"import", lcx_cmd_import, "HF directory / safetensors / GGUF -> .lcx checkpoint in a TP x CP layout"},
    {"export", lcx_cmd_export, ".lcx -> HF directory or GGUF file"},
    {"reshard", lcx_cmd_reshard, ".lcx -> .lcx in another TP x CP x DP layout (training state included)"},
    {"verify", lcx_cmd_verify, "check every checksum and the manifest of a .lcx checkpoint"},
};
#define N_SUBCOMMANDS (sizeof subcommands / sizeof subcommands[0])

static void usage(FILE *f) {
    fprintf(f, "usage: lcextend CKPT --to N [--recipe R] (--data PREFIX | --ids FILE) [--out RUN] [--resume] [--dry-run]\n"
               "       lcextend <command> [options]   (lcextend <command> --help for details)\n\n"
               "  CKPT --to N  extend CKPT's context to N tokens (plan, import, train stage by stage, evaluate, export);\n"
               "               'lcextend CKPT --to N --help' for the options\n\ncommands:\n");
    for (size_t i = 0; i < N_SUBCOMMANDS; i++) fprintf(f, "  %-12s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(f, "\nexamples:\n  lcextend inspect tests/fixtures/models/llama_gqa\n  lcextend inspect model.safetensors --json\n"
                 "  lcextend score tests/fixtures/models/llama_gqa --ids ids.txt\n"
                 "  lcextend rope ./Llama-3.2-1B --to 32k --method yarn --out ./Llama-3.2-1B-32k\n"
                 "  lcextend plan ./Llama-3.1-8B-base --to 128k --recipe yarn-x2\n"
                 "  lcextend import ./Llama-3.2-1B --out llama.lcx --tp 2\n  lcextend export llama.lcx --format gguf --out llama.gguf\n");
}

/* Settings that libraries read once, when they are loaded, before main: when the user has not chosen them, the
 * program sets them and re-executes itself (the exec happens before any work; if it fails we carry on).
 *   - OMP_WAIT_POLICY=passive: OpenMP threads that spin while waiting (libgomp's default) lose whole time slices on
 *     a machine with other work: a barrier then waits for a descheduled thread. Measured on 2 shared cores: 5x
 *     slower training steps than with passive waiting, which costs a few microseconds per parallel region on an
 *     idle machine.
 *   - OPENBLAS_CORETYPE: when OpenBLAS fell back to kernels older than the CPU (kernels/cpu/cpu_blas.h; 2.8x on
 *     the evaluation there). */
static void default_runtime(char **argv) {
    int again = 0;
    if (getenv("OMP_WAIT_POLICY") == NULL && setenv("OMP_WAIT_POLICY", "passive", 1) == 0) again = 1;
    const char *detected = lcx_cpu_blas_core(), *core = lcx_cpu_blas_core_better(detected, lcx_cpu_features());
    if (core && getenv("OPENBLAS_CORETYPE") == NULL && setenv("OPENBLAS_CORETYPE", core, 1) == 0) {
        setenv("LCX_OPENBLAS_DETECTED", detected, 1); /* for `lcextend version` */
        again = 1;
    }
    if (again) execv("/proc/self/exe", argv);
}

int main(int argc, char **argv) {
    default_runtime(argv);
    /* Warnings from helpers passed no reporter (a stale temporary kept beside an output) print for every command;
     * a command that makes its own reporter replaces this one. */
    static lcx_terminal warn_term;
    lcx_cli_reporter(&warn_term, 1);
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? LCX_EXIT_USAGE : LCX_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) return lcx_cmd_version(argc - 1, argv + 1);
    for (size_t i = 0; i < N_SUBCOMMANDS; i++)
        if (strcmp(argv[1], subcommands[i].name) == 0) return subcommands[i].run(argc - 1, argv + 1);
    /* `lcextend CKPT --to N ...`: a path (existing, or path-like with --to given) rather than a subcommand */
    int has_to = lcx_cli_flag_given(argc - 1, argv + 1, "--to");
    if (lcx_is_dir(argv[1]) || lcx_is_file(argv[1]) || (has_to && (strchr(argv[1], '/') || strchr(argv[1], '.'))))
        return lcx_cmd_extend(argc - 1, argv + 1);
    fprintf(stderr, "lcextend: unknown command '%s' (see 'lcextend --help')\n", argv[1]);
    return LCX_EXIT_USAGE;
}
