/* source: reading a parameter whole, in Hugging Face layout, as any float dtype (source.h). Every form first
 * yields the tensor in its native dtype (mapped bytes, a decoded .lcx box, a dequantised GGUF block array), then
 * GGUF q/k rows are un-permuted, then the values are converted if another dtype was asked for. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "src/checkpoint/source.h"

lcx_status lcx_source_read(lcx_source *s, size_t i, lcx_dtype dt, void *dst) {
    LCX_FAIL_IF(!s->matched || i >= s->params.n, LCX_ERR_INVALID, "%s: no parameter %zu to read", s->path, i);
    const lcx_param_spec *p = &s->params.params[i];
    const lcx_source_tensor *t = &s->tensor_of[i];
    LCX_FAIL_IF(dt != t->dtype && dt != LCX_F32 && dt != LCX_BF16 && dt != LCX_F16, LCX_ERR_INVALID,
                "%s: tensor '%s': cannot read as %s", s->path, t->name, lcx_dtype_name(dt));
    uint64_t nbytes;
    LCX_TRY(lcx_dtype_nbytes(t->dtype, p->numel, &nbytes));
    size_t n = (size_t)p->numel;
    const void *nat = NULL;           /* the values in t->dtype */
    void *buf = NULL, *perm = NULL, *f32 = NULL; /* owned temporaries */
    lcx_status st = LCX_OK;

    if (s->form == LCX_SOURCE_LCX) {
        const lcx_ckpt_tensor *ct = t->ref;
        lcx_box full = lcx_box_full(ct->ndim, ct->shape);
        void *into = dt == t->dtype && !t->qk_heads ? dst : (buf = malloc(nbytes + 1));
        LCX_FAIL_GOTO(!into, LCX_ERR_OOM, done, "%s: tensor '%s': out of memory", s->path, t->name);
        LCX_TRY_GOTO(lcx_ckpt_read_box(s->ckpt, ct->name, ct->role, &full, into), done); /* gathers TP pieces */
        nat = into;
    } else if (s->form == LCX_SOURCE_GGUF) {
        const lcx_gguf_tensor *gt = t->ref;
        s->last_data = gt->data, s->last_bytes = gt->nbytes;
        if (t->stored == t->dtype) {
            nat = gt->data;
        } else { /* quantised: dequantised into float32 */
            buf = malloc(nbytes + 1);
            LCX_FAIL_GOTO(!buf, LCX_ERR_OOM, done, "%s: tensor '%s': out of memory", s->path, t->name);
            LCX_TRY_GOTO(lcx_gguf_tensor_to_f32(s->gguf, gt, buf), done);
            nat = buf;
        }
    } else {
        nat = ((const lcx_st_tensor *)t->ref)->data;
        s->last_data = nat, s->last_bytes = nbytes;
    }
    if (t->qk_heads) { /* llama.cpp's pair order back to Hugging Face's half split */
        void *into = dt == t->dtype ? dst : (perm = malloc(nbytes + 1));
        LCX_FAIL_GOTO(!into, LCX_ERR_OOM, done, "%s: tensor '%s': out of memory", s->path, t->name);
        size_t rows = (size_t)p->shape.dims[0], cols = rows ? n / rows : 0;
        LCX_TRY_GOTO(lcx_gguf_unpermute_qk(into, nat, rows, cols, lcx_dtype_bits(t->dtype) / 8, (size_t)t->qk_heads),
                     done);
        nat = into;
    }
    if (dt == t->dtype) {
        if (nat != dst && n) memcpy(dst, nat, (size_t)nbytes);
    } else if (dt == LCX_F32) {
        st = lcx_convert_to_f32(t->dtype, nat, dst, n);
    } else if (t->dtype == LCX_F32) { /* e.g. dequantised GGUF to bf16: no float32 copy of a float32 tensor */
        st = lcx_convert_from_f32(dt, nat, dst, n);
    } else {
        f32 = malloc(n * sizeof(float) + 1);
        LCX_FAIL_GOTO(!f32, LCX_ERR_OOM, done, "%s: tensor '%s': out of memory", s->path, t->name);
        st = lcx_convert_to_f32(t->dtype, nat, f32, n);
        if (st == LCX_OK) st = lcx_convert_from_f32(dt, f32, dst, n);
    }
    if (st != LCX_OK) lcx_fail_context(st, "%s: tensor '%s': ", s->path, t->name);
done:
    free(buf);
    free(perm);
    free(f32);
    return st;
}

lcx_status lcx_source_read_f32(lcx_source *s, size_t i, float *dst) { return lcx_source_read(s, i, LCX_F32, dst); }

uint64_t lcx_source_native_bytes(const lcx_source *s) {
    if (!s->matched) return 0;
    uint64_t n = 0;
    for (size_t i = 0; i < s->params.n; i++)
        n += s->params.params[i].numel * (lcx_dtype_bits(s->tensor_of[i].dtype) / 8);
    return n;
}

void lcx_source_release(lcx_source *s) {
    if (s->ckpt) lcx_ckpt_release(s->ckpt);
    if (s->last_data && s->last_bytes) { /* whole pages only: neighbouring tensors may share the edge pages */
        uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)s->last_data, b = a + s->last_bytes;
        a = (a + page - 1) / page * page;
        b = b / page * page;
        if (b > a) (void)madvise((void *)a, b - a, MADV_DONTNEED); /* read-only mapping: refaults from the file */
    }
    s->last_data = NULL;
    s->last_bytes = 0;
}
