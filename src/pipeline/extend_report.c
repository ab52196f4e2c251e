/* extend_report: events as JSON objects, and the filter --quiet puts between training and the caller's reporter
 * (src/pipeline/extend_job.h). */
#include <math.h>
#include <stdlib.h>

#include "src/pipeline/extend_job.h"

void extend_event(const lcx_reporter *r, const char *name, json_t *j) {
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (text) lcx_report_event(r, name, "%s", text);
    free(text);
}

static void quiet_line(void *user, lcx_report_level level, const char *text) {
    const lcx_reporter *in = user;
    if (level == LCX_REPORT_RESULT || level == LCX_REPORT_WARN) lcx_report(in, level, "%s", text);
}

static void quiet_event(void *user, const char *name, const char *json) {
    lcx_report_event(user, name, "%s", json);
}

static void quiet_table(void *user, const lcx_table *t) { lcx_report_table(user, t); }

lcx_reporter extend_quiet_reporter(const lcx_reporter *inner) {
    /* the reporter API takes a mutable user pointer; the filter only reads through it */
    return (lcx_reporter){.line = quiet_line, .progress = NULL, .event = quiet_event, .table = quiet_table,
                          .user = (void *)inner};
}

json_t *extend_number(double v) { return isfinite(v) ? json_real(v) : json_null(); }
