/* bench_ring_transfer: the time the CP ring's messages of one training step take when nothing overlaps them, the
 * baseline against which bench/cp_train.sh turns a step's ring_wait_s into the share of the ring hidden behind
 * compute. Run under mpirun with CP ranks (the world is the CP group):
 *
 *   mpirun -np CP bench_ring_transfer SEQ LAYERS KV_HEADS HEAD_DIM [ACT_BYTES=4] [REPS=7]
 *
 * One step's ring as src/model/model_ring.c runs it for one sequence of SEQ tokens (--policy keep: one forward
 * and one backward per layer): per layer the forward steps (schedule of lcx_cp_ring_step) post the receive of the
 * next K | V block and the send of the held one, the backward steps the same for K | V | dK | dV (the last one
 * dK | dV only); message sizes from lcx_cp_ring_msg_bytes, sent as 16-bit words over lcx_comm as the model does.
 * Here each exchange is posted and at once waited for: the time from the posts to the end of the waits, summed
 * over the step, is the blocking transfer time. A barrier starts each repetition; the first is warm-up. Prints
 * rank 0's median over the other repetitions (the rank whose metrics.jsonl cp_train.sh reads) and the max over
 * ranks of that median, in seconds:
 *   blocking_s RANK0 MAX_RANK bytes_sent_per_rank N */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/comm/comm.h"
#include "src/core/clock.h"
#include "src/core/cp_ring.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One exchange: post the receive and the send, wait for both. */
static lcx_status exchange(lcx_comm *c, char *snd, char *rcv, uint64_t bytes, int to, int from, int tag) {
    lcx_comm_request *rq[2] = {NULL, NULL};
    int64_t words = (int64_t)(bytes / 2);
    lcx_status st = lcx_comm_irecv(c, NULL, rcv, words, LCX_BF16, from, tag, &rq[0]);
    if (st == LCX_OK) st = lcx_comm_isend(c, NULL, snd, words, LCX_BF16, to, tag, &rq[1]);
    lcx_status sw = lcx_comm_waitall(c, rq[1] ? 2 : rq[0] ? 1 : 0, rq);
    return st != LCX_OK ? st : sw;
}

/* One training step's ring: seconds spent in the exchanges, bytes this rank sent. */
static lcx_status ring_step(lcx_comm *c, int64_t seq, int layers, int64_t kvh, int64_t hd, lcx_dtype adt,
                            char *buf[2], double *secs, uint64_t *sent) {
    const int cp = c->size, r = c->rank;
    const int64_t block = seq / cp;
    *secs = 0, *sent = 0;
    for (int l = 0; l < layers; l++)
        for (int dir = 0; dir < 2; dir++)
            for (int s = 0; s < cp; s++) {
                lcx_cp_step st;
                LCX_TRY(lcx_cp_ring_step(seq, cp, r, s, dir ? LCX_CP_BACKWARD : LCX_CP_FORWARD, &st));
                if (st.send == LCX_CP_SEND_NONE) continue;
                uint64_t bytes = 0;
                LCX_TRY(lcx_cp_ring_msg_bytes(st.send, kvh, hd, block, adt, &bytes));
                double t0 = lcx_clock_s();
                LCX_TRY(exchange(c, buf[0], buf[1], bytes, st.send_to, st.recv_from, 1301 + dir));
                *secs += lcx_clock_s() - t0;
                *sent += bytes;
            }
    return LCX_OK;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: mpirun -np CP %s SEQ LAYERS KV_HEADS HEAD_DIM [ACT_BYTES=4] [REPS=7]\n", argv[0]);
        return 2;
    }
    const int64_t seq = atoll(argv[1]), kvh = atoll(argv[3]), hd = atoll(argv[4]);
    const int layers = atoi(argv[2]), act = argc > 5 ? atoi(argv[5]) : 4, reps = argc > 6 ? atoi(argv[6]) : 7;
    lcx_comm *w = NULL;
    if (lcx_comm_world_init(&w) != LCX_OK) {
        fprintf(stderr, "bench_ring_transfer: %s\n", lcx_last_error());
        return 1;
    }
    const int cp = w->size;
    if (seq < 2 * cp || seq % (2 * cp) || layers < 1 || kvh < 1 || hd < 1 || (act != 2 && act != 4) || reps < 2) {
        fprintf(stderr, "bench_ring_transfer: bad arguments (SEQ a multiple of 2 x %d ranks, ACT_BYTES 2 or 4, "
                        "REPS >= 2)\n", cp);
        lcx_comm_finalize(w);
        return 2;
    }
    const lcx_dtype adt = act == 2 ? LCX_BF16 : LCX_F32;
    uint64_t largest = 0; /* the K | V | dK | dV message */
    lcx_status st = lcx_cp_ring_msg_bytes(LCX_CP_SEND_KV_DKV, kvh, hd, seq / cp, adt, &largest);
    char *buf[2] = {calloc(1, largest + 2), calloc(1, largest + 2)};
    double *t = calloc((size_t)reps, sizeof *t), mine = 0, worst = 0;
    uint64_t sent = 0;
    if (!buf[0] || !buf[1] || !t) st = lcx_fail(LCX_ERR_OOM, "out of memory");
    for (int i = 0; i < reps && st == LCX_OK; i++) {
        st = lcx_comm_barrier(w, NULL);
        if (st == LCX_OK) st = ring_step(w, seq, layers, kvh, hd, adt, buf, &t[i], &sent);
    }
    if (st == LCX_OK && cp > 1) {
        qsort(t + 1, (size_t)(reps - 1), sizeof *t, cmp_double); /* t[0]: warm-up */
        mine = t[1 + (reps - 1) / 2];
        worst = mine;
        st = lcx_comm_all_reduce(w, NULL, &worst, &worst, 1, LCX_F64, LCX_COMM_MAX);
    }
    if (st != LCX_OK) fprintf(stderr, "bench_ring_transfer: rank %d: %s\n", w->rank, lcx_last_error());
    else if (w->rank == 0)
        printf("blocking_s %.6f %.6f bytes_sent_per_rank %llu\n", mine, worst, (unsigned long long)sent);
    free(buf[0]);
    free(buf[1]);
    free(t);
    lcx_comm_finalize(w);
    return st == LCX_OK ? 0 : 1;
}
