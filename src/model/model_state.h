/* model_state: the whole training state of a model (fp32 master weights, AdamW moments, optimizer step) in and
 * out of host memory, so a training run can save it and continue bit-exactly (src/train/train.h). */
#ifndef LCX_MODEL_STATE_H
#define LCX_MODEL_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "src/model/model.h"

/* Host copies (float32) of parameter i's AdamW first / second moments: the rows this rank holds
 * (lcx_model_moment_rows: every row of its buffer, numel floats, without ZeRO-1; rows x row length with it). Fails
 * when the model was not built for training. */
lcx_status lcx_model_get_moments(const lcx_model *m, size_t i, float *adam_m, float *adam_v);
/* The rows of parameter i's local buffer whose fp32 master values this rank holds: its moment rows
 * (lcx_model_moment_rows) when ZeRO-1 shards them (bf16 parameters), else every row. lcx_model_get_master_rows
 * copies those values (rows x row length floats); lcx_model_get_master, the whole buffer, fails when sharded. */
lcx_status lcx_model_master_rows(const lcx_model *m, size_t i, uint64_t *row0, uint64_t *rows);
/* 1 when this rank holds only its moment rows of the master (ZeRO-1 with bf16 parameters). */
int lcx_model_master_sharded(const lcx_model *m);
lcx_status lcx_model_get_master_rows(const lcx_model *m, size_t i, float *dst);
/* Overwrite parameter i: master (the whole local buffer, of which a sharded master keeps this rank's rows; and the
 * stored value: f32 copy, or bf16 round-to-nearest-even of the master, exactly what an optimizer step writes) and,
 * when non-NULL, its moments (training models only; the rows this rank holds, as lcx_model_get_moments gives
 * them). */
lcx_status lcx_model_set_state(lcx_model *m, size_t i, const float *master, const float *adam_m,
                               const float *adam_v);
/* Optimizer steps taken (AdamW bias correction uses it); set it when restoring a saved state. */
int64_t lcx_model_step_count(const lcx_model *m);
void lcx_model_set_step_count(lcx_model *m, int64_t step);

#endif
