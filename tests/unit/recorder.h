/* A reporter that records what the library reports (lines with their level, events, table titles, progress
 * calls), and look-ups over the record, for tests of library calls without a terminal. */
#ifndef LCX_TEST_RECORDER_H
#define LCX_TEST_RECORDER_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/core/report.h"
#include "tests/test_util.h"

enum { MAX_RECORDS = 512 };

typedef struct record {
    char kind;              /* 'l' line, 'e' event, 't' table */
    lcx_report_level level; /* of a line */
    char *name;             /* of an event */
    char *text;             /* line text, event JSON, table title */
    int rows;               /* of a table */
} record;

enum { MAX_STATES = 1024 };

/* A progress state as reported (the end of a progress, a NULL state, is not kept). */
typedef struct state {
    char what[32];
    int64_t done, total;
    double rate, eta_s;
} state;

typedef struct recorder {
    record r[MAX_RECORDS];
    int n, progress;
    state st[MAX_STATES];
    int n_states;
} recorder;

static inline record *recorder_add(recorder *rc, char kind, const char *name, const char *text) {
    if (rc->n == MAX_RECORDS) return NULL;
    record *x = &rc->r[rc->n++];
    memset(x, 0, sizeof *x);
    x->kind = kind;
    x->name = name ? strdup(name) : NULL;
    x->text = strdup(text ? text : "");
    return x;
}
static inline void rec_line(void *u, lcx_report_level level, const char *text) {
    record *x = recorder_add(u, 'l', NULL, text);
    if (x) x->level = level;
}
static inline void rec_progress(void *u, const lcx_progress *p) {
    recorder *rc = u;
    rc->progress++;
    if (!p || rc->n_states == MAX_STATES) return;
    state *x = &rc->st[rc->n_states++];
    snprintf(x->what, sizeof x->what, "%s", p->what ? p->what : "");
    x->done = p->done, x->total = p->total, x->rate = p->rate, x->eta_s = p->eta_s;
}
static inline void rec_event(void *u, const char *name, const char *json) { recorder_add(u, 'e', name, json); }
static inline void rec_table(void *u, const lcx_table *t) {
    record *x = recorder_add(u, 't', NULL, t->title);
    if (x) x->rows = t->n_rows;
}
static inline lcx_reporter recording(recorder *rc) {
    memset(rc, 0, sizeof *rc);
    return (lcx_reporter){.line = rec_line, .progress = rec_progress, .event = rec_event, .table = rec_table,
                          .user = rc};
}
static inline void recorder_free(recorder *rc) {
    for (int i = 0; i < rc->n; i++) free(rc->r[i].name), free(rc->r[i].text);
    rc->n = 0;
}

/* Index of the first event `name` at or after `from` (-1: none). */
static inline int find_event(const recorder *rc, const char *name, int from) {
    for (int i = from < 0 ? 0 : from; i < rc->n; i++)
        if (rc->r[i].kind == 'e' && strcmp(rc->r[i].name, name) == 0) return i;
    return -1;
}
static inline int count_events(const recorder *rc, const char *name) {
    int n = 0;
    for (int i = 0; i < rc->n; i++) n += rc->r[i].kind == 'e' && strcmp(rc->r[i].name, name) == 0;
    return n;
}
static inline json_int_t event_int(const recorder *rc, int i, const char *key) {
    json_t *j = json_loads(rc->r[i].text, 0, NULL);
    CHECK_MSG(j != NULL, "event %s: not JSON: %s", rc->r[i].name, rc->r[i].text);
    json_int_t v = json_integer_value(json_object_get(j, key));
    json_decref(j);
    return v;
}
static inline int event_true(const recorder *rc, int i, const char *key) {
    json_t *j = json_loads(rc->r[i].text, 0, NULL);
    int v = json_is_true(json_object_get(j, key));
    json_decref(j);
    return v;
}
/* The first line at level starting with prefix (-1: none). */
static inline int find_line(const recorder *rc, lcx_report_level level, const char *prefix) {
    for (int i = 0; i < rc->n; i++)
        if (rc->r[i].kind == 'l' && rc->r[i].level == level && strncmp(rc->r[i].text, prefix, strlen(prefix)) == 0)
            return i;
    return -1;
}
static inline int count_lines(const recorder *rc, lcx_report_level level) {
    int n = 0;
    for (int i = 0; i < rc->n; i++) n += rc->r[i].kind == 'l' && rc->r[i].level == level;
    return n;
}

#endif
