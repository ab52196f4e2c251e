/* run_report: see run_report.h. */
#include "src/pipeline/run_report.h"

#include <math.h>
#include <stdlib.h>

void lcx_run_event(const lcx_reporter *r, const char *name, json_t *j) {
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (text) lcx_report_event(r, name, "%s", text);
    free(text);
}

json_t *lcx_run_json_number(double v) { return isfinite(v) ? json_real(v) : json_null(); }
