/* extend_report: events as JSON objects (src/pipeline/extend_job.h). */
#include <math.h>
#include <stdlib.h>

#include "src/pipeline/extend_job.h"

void extend_event(const lcx_reporter *r, const char *name, json_t *j) {
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (text) lcx_report_event(r, name, "%s", text);
    free(text);
}

json_t *extend_number(double v) { return isfinite(v) ? json_real(v) : json_null(); }
