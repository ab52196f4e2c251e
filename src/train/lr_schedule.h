/* lr_schedule: the learning rate at an optimizer step: linear warm-up, then cosine decay, constant, or
 * warm-up-stable-decay (WSD).
 *
 * Same convention as Hugging Face's get_cosine_schedule_with_warmup / get_constant_schedule_with_warmup (and
 * get_cosine_with_min_lr_schedule_with_warmup for min_lr > 0): `step` counts the optimizer steps already taken,
 * so the first update uses lr_at(0) (= 0 when warmup_steps > 0, exactly as HF's LambdaLR does).
 *   warm-up (step < W):    lr = peak * step / max(1, W)
 *   cosine  (step >= W):   p = min(1, (step - W) / max(1, T - W));  lr = min + (peak - min) * 0.5 * (1 + cos(pi p))
 *   constant (step >= W):  lr = peak
 * T = total_steps. With min_lr = 0 the cosine branch is HF's max(0, 0.5 (1 + cos(pi * 2 * 0.5 * p))). Past T HF's
 * cosine would rise again (cos beyond pi); here p is clamped, so the rate stays at min_lr.
 *
 * WSD is Hugging Face's get_wsd_schedule (warmup_type linear, num_stable_steps = T - W - D for D decay steps,
 * m = min_lr / peak), the schedule of MiniCPM and of Hagele et al. 2024: the rate holds at the peak and falls
 * only in the last D steps, so a run can be stopped or extended at any step of the stable phase:
 *   warm-up (step < W):          lr = peak * (m + (1 - m) * step / max(1, W))
 *   stable  (step < T - D):      lr = peak
 *   decay   (step < T):          p = (step - (T - D)) / max(1, D);  lr = peak * (m + (1 - m) * f(p)) with
 *                                f = 0.5 (1 + cos(pi p)) (cosine), 1 - p (linear) or 1 - sqrt(p) (1-sqrt)
 *   after   (step >= T):         lr = min_lr */
#ifndef LCX_LR_SCHEDULE_H
#define LCX_LR_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

typedef enum lcx_lr_kind { LCX_LR_COSINE = 0, LCX_LR_CONSTANT, LCX_LR_WSD, LCX_LR_KIND_COUNT } lcx_lr_kind;
/* The shape of WSD's decay phase. */
typedef enum lcx_lr_decay { LCX_DECAY_COSINE = 0, LCX_DECAY_LINEAR, LCX_DECAY_SQRT, LCX_DECAY_COUNT } lcx_lr_decay;

typedef struct lcx_lr_schedule {
    lcx_lr_kind kind;
    double peak;          /* > 0 */
    double min_lr;        /* cosine and WSD floor, 0 <= min_lr <= peak; ignored by constant */
    int64_t warmup_steps; /* >= 0 */
    int64_t total_steps;  /* > 0, the stage's optimizer steps */
    int64_t decay_steps;  /* WSD: the last steps that decay, warmup_steps + decay_steps <= total_steps */
    lcx_lr_decay decay;   /* WSD: the decay's shape */
} lcx_lr_schedule;

/* Learning rate for the update that follows `step` completed steps (step < 0 is treated as 0). */
double lcx_lr_at(const lcx_lr_schedule *s, int64_t step);

const char *lcx_lr_kind_name(lcx_lr_kind k); /* "cosine", "constant", "wsd" ("?" out of range) */
/* 0 on success, -1 when the name is not a schedule. */
int lcx_lr_kind_parse(const char *name, lcx_lr_kind *out);
const char *lcx_lr_decay_name(lcx_lr_decay d); /* "cosine", "linear", "1-sqrt" ("?" out of range) */
/* 0 on success, -1 when the name is not a decay shape. */
int lcx_lr_decay_parse(const char *name, lcx_lr_decay *out);

/* Whether a and b give the same rate at every step (kind, peak and min_lr to 1e-12 relative, warm-up, and for
 * WSD the decay; total_steps is not compared). */
int lcx_lr_same(const lcx_lr_schedule *a, const lcx_lr_schedule *b);
/* "lr 0.001 wsd, warm-up 3, min_lr 0.0001, decay 6 linear" into buf (truncated to cap); returns buf. */
const char *lcx_lr_describe(const lcx_lr_schedule *s, char *buf, size_t cap);

/* WSD's default share of a stage's steps that decay: the last fifth (Hagele et al. 2024: 10-20% match cosine). */
#define LCX_LR_WSD_DECAY_FRACTION 0.2

/* WSD's decay steps for a fraction of a stage of `total` steps after `warmup` warm-up steps: round(fraction x
 * total), at least 1, at most total - warmup (0 when the warm-up is the whole stage). */
int64_t lcx_lr_decay_steps(double fraction, int64_t total, int64_t warmup);

#endif
