/* run_report: events of the pipeline's runs (extension, training) built as JSON objects. */
#ifndef LCX_PIPELINE_RUN_REPORT_H
#define LCX_PIPELINE_RUN_REPORT_H

#include <jansson.h>

#include "src/core/report.h"

/* Report event `name` with object j (stolen; NULL, e.g. json_pack out of memory: nothing reported). */
void lcx_run_event(const lcx_reporter *r, const char *name, json_t *j);

/* A JSON number, or null when v is NaN or infinite (JSON has neither). New reference. */
json_t *lcx_run_json_number(double v);

#endif
