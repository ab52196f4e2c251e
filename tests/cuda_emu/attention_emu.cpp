/* attention_emu: the CUDA attention kernels (kernels/cuda/cuda_attention_{fwd,bwd}.cu, rewritten by run.sh for
 * emu_cuda.h) against the CPU backend on the shapes of the op cases, in f32 and bf16 storage, with the op
 * tolerances of tests/unit/backend_ops_cases.h (|got - ref| <= atol + rtol |ref|; f32 rtol 64 eps, bf16 outputs
 * 2 bf16 eps; atol 1e-5 forward, 5e-5 backward). The backward gets the final o/lse of a context [0, ctx) of
 * which its key block is a slice (ctx 0: the block alone), as a ring step does. One case puts q and k 8 bytes
 * off a 16-byte boundary: the tensor-core paths (cp.async) must leave it to the scalar ones. The tensor-core backward
 * runs in its four modes: P and dS as hi + lo bf16 pairs (the default, f32 tolerances) or as one bf16 term each
 * (LCX_CUDA_ATTN_BWD_BF16=1, allowed in addition what that rounding can move each element by:
 * tests/unit/attn_ps_bounds.h), with dQ from a pass of its own (the default) or fused into the dK/dV pass and added
 * in key-block order (LCX_CUDA_ATTN_BWD_FUSED=1). The tensor-core forward runs in 128-row blocks (the default) and in
 * 64-row ones (LCX_CUDA_ATTN_FWD_ROWS64=1), which must give the same values; so must the backward's dK/dV
 * blocks of 128 keys (the default at head_dim 64 and 128) and of 64 (LCX_CUDA_ATTN_BWD_KEYS64=1). Document masks
 * (q_doc_start) in documents of a fixed length, as the op cases, and out of order: query tiles whose rows start at
 * 0, at themselves, past themselves (no visible key) or anywhere, so that a dK/dV block skips tiles between
 * others it walks.
 * Prints each case's worst error / allowed; exit 1 if any is over 1. Usage: attention_emu [CASE-INDEX | --cases]
 * (--cases: the case indices, one a line, the costliest first). */
#include "emu_cuda.h"
#include "xf_attention_fwd.cu"
#include "xf_attention_fwd_tc.cu"
#include "xf_attention_bwd.cu"
#include "xf_attention_bwd_tc.cu"
#include "tests/unit/attn_ps_bounds.h"

#include <algorithm>
#include <cstring>
#include <random>

static std::mt19937_64 rng(42);
static int fails = 0;

struct shape {
    const char *name;
    int64_t nq, nk, H, G, hd, qo, ko;
    lcx_attn_mask mask;
    float scale;
    int64_t ctx;
    int shift; /* bytes q and k sit past a 16-byte boundary (the tensor-core paths need 16: the scalar ones run) */
    int64_t doc; /* > 0: a document mask, documents of doc positions (boundaries at 3 mod doc, as the op cases);
                    DOC_SCRAMBLED: starts out of order (doc_starts) */
};

enum { DOC_SCRAMBLED = -1 };

/* Each query row's document start (global position) for shape c. DOC_SCRAMBLED: by 32-row tile (the backward's
 * query tile) t, rows that start at 0 (t % 5 = 0), at themselves (one-token documents; 1, 4), 7 past themselves
 * (no visible key under a causal mask; 2) or anywhere from 100 before themselves to 3 after (3), so that the tiles
 * a 128-key block sees are not one run (keys 0..127 of a causal block: tiles 0-3 and 5, not 4). */
static std::vector<int32_t> doc_starts(const shape &c) {
    std::vector<int32_t> doc((size_t)c.nq + 1);
    std::uniform_int_distribution<int64_t> u(-100, 3);
    for (int64_t i = 0; i < c.nq; i++) {
        const int64_t pos = c.qo + i;
        int64_t start = c.doc > 0 ? pos - (pos + c.doc - 3) % c.doc : 0;
        if (c.doc == DOC_SCRAMBLED) {
            const int64_t kind = i / 32 % 5;
            start = kind == 0 ? 0 : kind == 2 ? pos + 7 : kind == 3 ? pos + u(rng) : pos;
        }
        doc[(size_t)i] = (int32_t)(c.doc > 0 && start < 0 ? 0 : start);
    }
    return doc;
}

static void fill(std::vector<float> &v, double lo, double hi, lcx_dtype dt) {
    std::uniform_real_distribution<double> u(lo, hi);
    for (auto &x : v) {
        x = (float)u(rng);
        if (dt == LCX_BF16) x = lcx_bf16_to_f32(lcx_f32_to_bf16(x));
    }
}
/* The storage copy of values already representable in dt, `shift` bytes into the buffer. */
static std::vector<uint8_t> stored(const std::vector<float> &v, lcx_dtype dt, int shift = 0) {
    std::vector<uint8_t> b(v.size() * lcx_act_size(dt) + 4 + (size_t)shift);
    for (size_t i = 0; i < v.size(); i++)
        if (dt == LCX_F32) memcpy(&b[shift + i * 4], &v[i], 4);
        else {
            uint16_t h = lcx_f32_to_bf16(v[i]);
            memcpy(&b[shift + i * 2], &h, 2);
        }
    return b;
}
static float widen(const std::vector<uint8_t> &b, size_t i, lcx_dtype dt) {
    if (dt == LCX_F32) {
        float f;
        memcpy(&f, &b[i * 4], 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, &b[i * 2], 2);
    return lcx_bf16_to_f32(h);
}
/* |got - ref| <= atol + rtol |ref| + extra[i] (extra: an elementwise allowance, or none). */
static void compare(const char *what, const float *got, const float *ref, size_t n, double rtol, double atol,
                    const double *extra = nullptr) {
    double worst = 0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], f = ref[i], err = g == f ? 0 : (std::isnan(g) || std::isnan(f)) ? INFINITY : fabs(g - f);
        double r = err / (atol + rtol * fabs(f) + (extra ? extra[i] : 0.0));
        if (std::isnan(r)) r = INFINITY;
        if (r > worst) worst = r, wi = i;
    }
    printf("  %-4s worst %.3f of allowed", what, worst);
    if (n) printf(" at %zu (got %.9g, CPU %.9g)", wi, got[wi], ref[wi]);
    printf("\n");
    fails += worst > 1;
}

static void run(const shape &c, lcx_dtype dt) {
    printf("%s %s\n", c.name, dt == LCX_F32 ? "f32" : "bf16");
    const lcx_backend *cpu = lcx_backend_cpu();
    lcx_exec *x = NULL;
    if (lcx_exec_create(cpu, &x) != LCX_OK) abort();
    const float scale = c.scale ? c.scale : (float)(1.0 / sqrt((double)c.hd));
    const int64_t row = c.G * c.hd, n_all = c.ctx ? c.ctx : c.nk, first = c.ctx ? c.ko : 0;
    const size_t nqe = (size_t)(c.nq * c.H * c.hd), nke = (size_t)(c.nk * row), nl = (size_t)(c.nq * c.H);
    std::vector<float> q(nqe), kall((size_t)(n_all * row)), vall((size_t)(n_all * row)), g(nqe);
    std::vector<float> dq0(nqe), dk0(nke), dv0(nke);
    fill(q, -2, 2, dt), fill(kall, -2, 2, dt), fill(vall, -1, 1, dt), fill(g, -1, 1, dt);
    fill(dq0, -1, 1, LCX_F32), fill(dk0, -1, 1, LCX_F32), fill(dv0, -1, 1, LCX_F32);
    std::vector<float> k(kall.begin() + first * row, kall.begin() + first * row + (int64_t)nke);
    std::vector<float> v(vall.begin() + first * row, vall.begin() + first * row + (int64_t)nke);

    /* forward of this block: the CPU in f32 on the same values, the kernels in dt */
    lcx_attn_args a = {};
    a.dt = LCX_F32, a.n_q = c.nq, a.n_k = c.nk, a.n_heads = c.H, a.n_kv_heads = c.G, a.head_dim = c.hd;
    a.q_offset = c.qo, a.k_offset = c.ko, a.mask = c.mask, a.scale = scale;
    std::vector<int32_t> doc = doc_starts(c);
    if (c.doc) a.q_doc_start = doc.data();
    std::vector<float> o_ref(nqe + 1), lse_ref(nl + 1);
    a.q = q.data(), a.k = k.data(), a.v = v.data(), a.o = o_ref.data(), a.lse = lse_ref.data();
    if (lcx_exec_reserve(x, lcx_exec_workspace(x, LCX_OP_ATTENTION_FWD, &a)) || cpu->attention_fwd(x, &a)) abort();
    lcx_attn_args e = a;
    e.dt = dt;
    std::vector<uint8_t> qs = stored(q, dt, c.shift), ks = stored(k, dt, c.shift), vs = stored(v, dt);
    std::vector<uint8_t> os(nqe * lcx_act_size(dt) + 4, 0xff); /* NaN bytes: every element must be written */
    std::vector<float> lse(nl + 1, NAN), o(nqe);
    e.q = qs.data() + c.shift, e.k = ks.data() + c.shift, e.v = vs.data(), e.o = os.data(), e.lse = lse.data();
    if (lcx_cuda_attention_fwd_launch(NULL, &e) != cudaSuccess) abort();
    for (size_t i = 0; i < nqe; i++) o[i] = widen(os, i, dt);
    /* the tensor-core path rounds P to bf16 for P V: O moves by <= 2^-8 max |v| (cuda_attention_fwd_tc.cu), allowed */
    const int tc = lcx_cuda_attention_fwd_tc_takes(&e);
    if (tc && c.shift % 16) {
        printf("  the tensor-core forward took q, k %d bytes off 16\n", c.shift);
        fails++;
    }
    double vmax = 0;
    for (float y : v) vmax = fabs(y) > vmax ? fabs(y) : vmax;
    printf("  forward: %s\n", tc ? "tensor cores" : "scalar");
    compare("o", o.data(), o_ref.data(), nqe, dt == LCX_F32 ? 64 * 0x1p-23 : 2 * 0x1p-8, 1e-5 + (tc ? 0x1p-8 * vmax : 0));
    compare("lse", lse.data(), lse_ref.data(), nl, 64 * 0x1p-23, 1e-5);
    if (tc) { /* 64-row blocks (LCX_CUDA_ATTN_FWD_ROWS64=1): each row's arithmetic is the same, so are its values */
        std::vector<uint8_t> os64(os.size(), 0xff);
        std::vector<float> lse64(nl + 1, NAN);
        lcx_attn_args e64 = e;
        e64.o = os64.data(), e64.lse = lse64.data();
        setenv("LCX_CUDA_ATTN_FWD_ROWS64", "1", 1);
        const cudaError_t r = lcx_cuda_attention_fwd_launch(NULL, &e64);
        unsetenv("LCX_CUDA_ATTN_FWD_ROWS64");
        if (r != cudaSuccess) abort();
        size_t differ = 0;
        for (size_t i = 0; i < nqe; i++) differ += !(widen(os64, i, dt) == o[i]);
        for (size_t i = 0; i < nl; i++) differ += !(lse64[i] == lse[i]);
        printf("  forward in 64-row blocks: %zu of %zu values differ from 128-row blocks'\n", differ, nqe + nl);
        fails += differ != 0;
    }

    /* backward: o/lse final over the context (every key visible when this block's mask shows none) */
    lcx_attn_args f = a;
    f.n_k = n_all, f.k_offset = 0, f.k = kall.data(), f.v = vall.data();
    f.mask = c.mask == LCX_MASK_NONE ? LCX_MASK_FULL : c.mask;
    if (lcx_exec_reserve(x, lcx_exec_workspace(x, LCX_OP_ATTENTION_FWD, &f)) || cpu->attention_fwd(x, &f)) abort();
    for (auto &y : o_ref) y = dt == LCX_BF16 ? lcx_bf16_to_f32(lcx_f32_to_bf16(y)) : y;
    std::vector<float> dq = dq0, dk = dk0, dv = dv0;
    a.o = o_ref.data(), a.dout = g.data(), a.dq = dq.data(), a.dk = dk.data(), a.dv = dv.data();
    if (lcx_exec_reserve(x, lcx_exec_workspace(x, LCX_OP_ATTENTION_BWD, &a)) || cpu->attention_bwd(x, &a)) abort();
    std::vector<uint8_t> os2 = stored(o_ref, dt), gs = stored(g, dt);
    std::vector<float> eq = dq0, ek = dk0, ev = dv0;
    e.o = os2.data(), e.lse = lse_ref.data(), e.dout = gs.data(), e.dq = eq.data(), e.dk = ek.data(), e.dv = ev.data();
    std::vector<uint8_t> scratch(lcx_cuda_attention_bwd_ws(&e) + 4);
    const int tcb = lcx_cuda_attention_bwd_tc_takes(&e);
    printf("  backward: %s\n", tcb ? "tensor cores" : "scalar");
    if (tcb && c.shift % 16) {
        printf("  the tensor-core backward took q, k %d bytes off 16\n", c.shift);
        fails++;
    }
    if (lcx_cuda_attention_bwd_launch(NULL, &e, scratch.data()) != cudaSuccess) abort();
    compare("dq", eq.data(), dq.data(), nqe, 64 * 0x1p-23, 5e-5);
    compare("dk", ek.data(), dk.data(), nke, 64 * 0x1p-23, 5e-5);
    compare("dv", ev.data(), dv.data(), nke, 64 * 0x1p-23, 5e-5);
    if (tcb && (c.hd == 64 || c.hd == 128)) { /* dK/dV blocks of 64 keys instead of 128: each key's sums are the same */
        std::vector<float> kq = dq0, kk = dk0, kv = dv0;
        lcx_attn_args e64 = e;
        e64.dq = kq.data(), e64.dk = kk.data(), e64.dv = kv.data();
        setenv("LCX_CUDA_ATTN_BWD_KEYS64", "1", 1);
        const cudaError_t r = lcx_cuda_attention_bwd_launch(NULL, &e64, scratch.data());
        unsetenv("LCX_CUDA_ATTN_BWD_KEYS64");
        if (r != cudaSuccess) abort();
        size_t differ = 0;
        for (size_t i = 0; i < nqe; i++) differ += !(kq[i] == eq[i]);
        for (size_t i = 0; i < nke; i++) differ += !(kk[i] == ek[i]) + !(kv[i] == ev[i]);
        printf("  backward in 64-key blocks: %zu of %zu values differ from 128-key blocks'\n", differ, nqe + 2 * nke);
        fails += differ != 0;
    }
    if (tcb) { /* the tensor-core backward's other modes (cuda_attention_bwd_tc.cu) */
        std::vector<double> bq(nqe), bk(nke), bv(nke);
        attn_ps_bounds(&a, q.data(), k.data(), v.data(), o_ref.data(), lse_ref.data(), g.data(), bq.data(), bk.data(),
                       bv.data());
        for (int mode = 1; mode < 4; mode++) { /* bit 0: P and dS as one bf16 term; bit 1: dQ fused, in order */
            const bool ps = mode & 1;
            eq = dq0, ek = dk0, ev = dv0;
            setenv("LCX_CUDA_ATTN_BWD_BF16", ps ? "1" : "0", 1);
            setenv("LCX_CUDA_ATTN_BWD_FUSED", mode & 2 ? "1" : "0", 1);
            const cudaError_t r = lcx_cuda_attention_bwd_launch(NULL, &e, scratch.data());
            unsetenv("LCX_CUDA_ATTN_BWD_BF16");
            unsetenv("LCX_CUDA_ATTN_BWD_FUSED");
            if (r != cudaSuccess) abort();
            printf("  backward%s%s:\n", ps ? ", P and dS in bf16" : "", mode & 2 ? ", dQ fused" : "");
            /* P and dS in bf16: allowed in addition what that rounding can move each element by */
            compare("dq", eq.data(), dq.data(), nqe, 64 * 0x1p-23, 5e-5, ps ? bq.data() : nullptr);
            compare("dk", ek.data(), dk.data(), nke, 64 * 0x1p-23, 5e-5, ps ? bk.data() : nullptr);
            compare("dv", ev.data(), dv.data(), nke, 64 * 0x1p-23, 5e-5, ps ? bv.data() : nullptr);
        }
    }
    lcx_exec_free(x);
}

int main(int argc, char **argv) {
    const lcx_attn_mask CA = LCX_MASK_CAUSAL, FU = LCX_MASK_FULL, NO = LCX_MASK_NONE;
    const shape cases[] = {
        {"causal 127x127 h2/1 d32", 127, 127, 2, 1, 32, 0, 0, CA, 0, 0},
        {"causal 129x129 h4/2 d64", 129, 129, 4, 2, 64, 0, 0, CA, 0, 0},
        {"full 33x129 h4/4 d80", 33, 129, 4, 4, 80, 0, 0, FU, 0, 0},
        {"causal q@192 65x257 h4/1 d32 (cache)", 65, 257, 4, 1, 32, 192, 0, CA, 0, 0},
        {"causal q@299 1x300 h2/2 d64 (decode)", 1, 300, 2, 2, 64, 299, 0, CA, 0, 0},
        {"causal q@0 k@100 129x129 of 229 (masked rows)", 129, 129, 2, 1, 32, 0, 100, CA, 0, 229},
        {"ring q@128 k@0 128x129 of 256", 128, 129, 2, 1, 32, 128, 0, CA, 0, 256},
        {"ring q@128 k@129 128x127 of 256", 128, 127, 2, 1, 32, 128, 129, CA, 0, 256},
        {"full 20x70 h8/1 d128 scale 0.3", 20, 70, 8, 1, 128, 0, 0, FU, 0.3f, 0},
        {"none 17x23", 17, 23, 2, 1, 32, 0, 0, NO, 0, 0},
        {"n_q = 0", 0, 40, 2, 1, 32, 0, 0, CA, 0, 0},
        {"n_k = 0 of 40", 40, 0, 2, 1, 32, 0, 0, CA, 0, 40},
        {"causal 161x161 h4/1 d128 (GQA 4)", 161, 161, 4, 1, 128, 0, 0, CA, 0, 0},
        {"full 40x45 h3/1 d256", 40, 45, 3, 1, 256, 0, 0, FU, 0, 0},
        {"causal 65x200 h2/1 d64 (keys no query sees)", 65, 200, 2, 1, 64, 0, 0, CA, 0, 0},
        {"causal q@20 50x70 h3/3 d33 (odd head_dim)", 50, 70, 3, 3, 33, 20, 0, CA, 0, 0},
        {"full 10x10 h1/1 d1", 10, 10, 1, 1, 1, 0, 0, FU, 0, 0},
        {"causal 129x129 h4/2 d64, q and k 8 bytes off 16", 129, 129, 4, 2, 64, 0, 0, CA, 0, 0, 8},
        {"causal 160x160 h2/1 d64, documents of 70", 160, 160, 2, 1, 64, 0, 0, CA, 0, 0, 0, 70},
        {"causal 129x129 h2/1 d128, one-token documents", 129, 129, 2, 1, 128, 0, 0, CA, 0, 0, 0, 1},
        {"full q@200 150x200 of 350, documents of 90", 150, 200, 2, 1, 32, 200, 0, FU, 0, 350, 0, 90},
        {"causal q@40 97x137 h8/2 d32, documents of 25", 97, 137, 8, 2, 32, 40, 0, CA, 0, 0, 0, 25},
        {"causal 200x200 h2/1 d64, documents out of order", 200, 200, 2, 1, 64, 0, 0, CA, 0, 0, 0, DOC_SCRAMBLED},
        {"full q@256 200x256 of 456 h2/1 d128, documents out of order", 200, 256, 2, 1, 128, 256, 0, FU, 0, 456, 0,
         DOC_SCRAMBLED},
        {"causal 130x130 h3/1 d96, documents of 50", 130, 130, 3, 1, 96, 0, 0, CA, 0, 0, 0, 50},
        {"causal q@299 1x300 h2/2 d64 (decode), documents of 70", 1, 300, 2, 2, 64, 299, 0, CA, 0, 0, 0, 70},
    };
    const int n = (int)(sizeof cases / sizeof cases[0]);
    if (argc > 1 && !strcmp(argv[1], "--cases")) { /* run.sh runs the cases in parallel, one process each */
        std::vector<int> order(n);
        for (int i = 0; i < n; i++) order[i] = i;
        /* the costliest first (queries x keys x heads x head_dim), so the longest case does not start last */
        auto cost = [&](int i) { return cases[i].nq * cases[i].nk * cases[i].H * cases[i].hd; };
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return cost(a) > cost(b); });
        for (int i : order) printf("%d\n", i);
        return 0;
    }
    const int only = argc > 1 ? atoi(argv[1]) : -1;
    for (int i = 0; i < n; i++)
        if (only < 0 || i == only) run(cases[i], LCX_F32), run(cases[i], LCX_BF16);
    printf("attention_emu: %d over tolerance; largest shared memory of a launch %zu bytes\n", fails, emu_max_smem);
    return fails != 0;
}
