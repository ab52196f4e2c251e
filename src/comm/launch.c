/* launch: which launcher started this process (from its environment) and the world communicator that follows
 * from it: MPI for more than one rank, the single-rank implementation otherwise (MPI is then never touched). */
#include <stdlib.h>
#include <string.h>

#include "src/comm/comm_impl.h"

/* *out = the variable's value as an int in [lo, 2^30); 0 when unset or empty. */
static lcx_status env_int(const char *name, long lo, int *out, int *set) {
    const char *v = getenv(name);
    *set = v && *v;
    if (!*set) return LCX_OK;
    char *end;
    long r = strtol(v, &end, 10);
    LCX_FAIL_IF(*end != 0 || r < lo || r >= (1L << 30), LCX_ERR_INVALID,
                "launcher variable %s='%s' is not a number >= %ld", name, v, lo);
    *out = (int)r;
    return LCX_OK;
}

lcx_status lcx_comm_detect_launch(lcx_launch *out) {
    /* The order of lcx_launch_rank (src/core/report.c), so both name the same rank. PMIx alone does not say the
     * size: -1, MPI will. */
    static const struct { const char *launcher, *size, *rank; } vars[] = {
        {"mpirun", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
        {"pmix", NULL, "PMIX_RANK"},
        {"pmi", "PMI_SIZE", "PMI_RANK"},
        {"srun", "SLURM_NTASKS", "SLURM_PROCID"},
    };
    out->launcher = "none";
    out->rank = 0;
    out->size = 1;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        int rank = 0, size = -1, has_rank, has_size = 0;
        LCX_TRY(env_int(vars[i].rank, 0, &rank, &has_rank));
        if (vars[i].size) LCX_TRY(env_int(vars[i].size, 1, &size, &has_size));
        if (!has_rank && !has_size) continue;
        LCX_FAIL_IF(vars[i].size && has_rank != has_size, LCX_ERR_INVALID, "launcher %s: %s is set but %s is not",
                    vars[i].launcher, has_rank ? vars[i].rank : vars[i].size, has_rank ? vars[i].size : vars[i].rank);
        LCX_FAIL_IF(size > 0 && rank >= size, LCX_ERR_INVALID, "launcher %s: %s=%d is not below %s=%d",
                    vars[i].launcher, vars[i].rank, rank, vars[i].size, size);
        out->launcher = vars[i].launcher;
        out->rank = rank;
        out->size = size;
        return LCX_OK;
    }
    return LCX_OK;
}

lcx_status lcx_comm_world_init(lcx_comm **out) {
    LCX_FAIL_IF(!out, LCX_ERR_INVALID, "comm world: no output pointer");
    *out = NULL;
    lcx_launch l;
    LCX_TRY(lcx_comm_detect_launch(&l));
    if (l.size == 1) return lcx_comm_single_create(l.rank, out);
    return lcx_comm_mpi_world(l.launcher, l.size, out);
}

lcx_status lcx_comm_single(lcx_comm **out) {
    LCX_FAIL_IF(!out, LCX_ERR_INVALID, "comm single: no output pointer");
    return lcx_comm_single_create(0, out);
}

/* MPI, or a device communicator over it (comm_device.h: its state's first member is the inner communicator). */
static int on_mpi(const lcx_comm *c) {
    while (strcmp(c->impl->name, "staged") == 0 || strcmp(c->impl->name, "nccl") == 0)
        c = *(lcx_comm *const *)c->state;
    return strcmp(c->impl->name, "mpi") == 0;
}

lcx_status lcx_comm_finalize(lcx_comm *world) {
    if (!world) return LCX_OK;
    int mpi = on_mpi(world);
    world->impl->free(world);
    return mpi ? lcx_comm_mpi_finalize() : LCX_OK;
}
