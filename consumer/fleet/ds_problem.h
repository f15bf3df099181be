/* A data source a host was asked for that did not run, or runs without
 * part of what was asked: one "problem" shape for every program that
 * reads a host's trace (the CLI's summary and --summary-json, the
 * collector's snapshot rows, its /api/v1/hosts and its metric).
 *
 * As JSON, each problem is an object with at least
 *
 *   {"kind": "data_source", "data_source": "linux.ftrace",
 *    "code": "TG-7010", "why": "...", "reason": "not_started",
 *    "events": 2}
 *
 * "kind" is "data_source" for all of these; "code" is the notice code of
 * the reason (common/notice.h); "reason" the same as a token (the label
 * of the collector's tracegate_collector_data_source_failures_total);
 * "events" only when events were refused. Later kinds may add keys;
 * "merge" (consumer/fleet/merge_problem.h) is another kind of the same list.
 *
 * The facts come from the trace itself (linux.ftrace's setup errors,
 * consumer/fleet/ftrace_loss.h) and from what the host's service says it offers
 * (QueryServiceState): both work with Perfetto's own traced and
 * traced_probes behind a host. Text from a host is kept as its bytes cut
 * to bounds, control bytes made '?'; JSON makes it valid (common/json.h).
 */
#ifndef TRACEGATE_CLIENT_DS_PROBLEM_H
#define TRACEGATE_CLIENT_DS_PROBLEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "consumer/fleet/ftrace_loss.h"
#include "common/notice.h"
#include "pb/config/trace_config.pb-c.h"
#include "pb/common/tracing_service_state.pb-c.h"

typedef enum tg_ds_reason {
  TG_DS_NOT_STARTED = 0, /* it did not start (linux.ftrace: no ring buffer) */
  TG_DS_EVENTS_REFUSED,  /* it runs, without some events it asked for */
  TG_DS_NOT_OFFERED,     /* no producer on the host registered it */
  TG_DS_REASON_COUNT
} tg_ds_reason_t;

#define TG_DS_NAME_MAX 64
#define TG_DS_WHY_MAX 300
/* Problems kept for one host; more are counted in |omitted|. */
#define TG_DS_PROBLEMS_MAX 8

typedef struct tg_ds_problem {
  tg_ds_reason_t reason;
  char data_source[TG_DS_NAME_MAX + 1];
  char why[TG_DS_WHY_MAX + 1];
  bool has_events;
  uint64_t events; /* refused events, when |has_events| */
} tg_ds_problem_t;

/* Zeroed to begin. */
typedef struct tg_ds_problems {
  tg_ds_problem_t items[TG_DS_PROBLEMS_MAX];
  size_t n;
  uint64_t omitted;
} tg_ds_problems_t;

/* "not_started", "events_refused", "not_offered"; "?" out of range. */
const char *tg_ds_reason_name(tg_ds_reason_t r);
/* TG_N_DS_NOT_STARTED, ... */
tg_notice_t tg_ds_reason_code(tg_ds_reason_t r);
/* Whether a problem of reason |r| is a known failure: the trace shows the
 * data source did not start, or runs without events it asked for. A data
 * source no producer offered is not: the service starts it whenever one
 * registers it later (an app started after the trace, a producer that
 * runs on some hosts only), as Perfetto's CLI only warns of it. Failures
 * set `tracegate record`'s exit status 4 and make a collector's host row
 * partial; every problem is listed either way. */
bool tg_ds_reason_fails(tg_ds_reason_t r);
/* The problems of |ps| that are failures (tg_ds_reason_fails); the first
 * in *first when not NULL (NULL if none). */
size_t tg_ds_problems_failures(const tg_ds_problems_t *ps,
                               const tg_ds_problem_t **first);

/* Adds a problem: |data_source| (untrusted, cut) and the why from |fmt|
 * (cut). Past TG_DS_PROBLEMS_MAX it is counted in |omitted|. */
__attribute__((format(printf, 5, 6)))
void tg_ds_problems_add(tg_ds_problems_t *ps, tg_ds_reason_t reason,
                        const char *data_source, const uint64_t *events,
                        const char *fmt, ...);

/* The problems linux.ftrace's setup errors in |l| show: at most one
 * "not_started" (instances with no ring buffer) and one "events_refused"
 * (instances that run without some events); then a "not_started" for each
 * data source the host's service named as not started
 * (slow_starting_data_sources: its producer did not acknowledge its
 * start; linux.ftrace only when its stats did not already say so), and
 * those past the scan's bound counted in |omitted|. */
void tg_ds_problems_from_ftrace(tg_ds_problems_t *ps, const tg_ftrace_loss_t *l);

/* Adds a "not_offered" problem for each data source of |cfg| that no
 * producer registered in |st| (a host's QueryServiceState answer: its
 * bytes are untrusted, but decoded). */
void tg_ds_problems_not_offered(tg_ds_problems_t *ps,
                                const Perfetto__Protos__TraceConfig *cfg,
                                const Perfetto__Protos__TracingServiceState *st);

/* One problem as a JSON object; NULL out of memory. */
json_t *tg_ds_problem_json(const tg_ds_problem_t *p);
/* All of them as a JSON array (the omitted ones are not in it); NULL out
 * of memory. */
json_t *tg_ds_problems_json(const tg_ds_problems_t *ps);
/* The array as compact JSON text in |out| (|cap| bytes, NUL included):
 * as many problems as fit, whole, first ones first ("[]" with none).
 * Returns how many are in it, or -ENOSPC when not even "[]" fits, or
 * -ENOMEM. */
int tg_ds_problems_text(const tg_ds_problems_t *ps, char *out, size_t cap);
/* The same, with the problems of other kinds in |lead| (a JSON array of
 * objects, borrowed; NULL for none: consumer/fleet/merge_problem.h's) first. */
int tg_problems_text(json_t *lead, const tg_ds_problems_t *ps, char *out,
                     size_t cap);

/* "[TG-7010] linux.ftrace: did not start: ..." for a log or a summary
 * line, in |buf| (|cap| bytes, cut to fit). Returns |buf|. */
const char *tg_ds_problem_line(const tg_ds_problem_t *p, char *buf, size_t cap);

#endif /* TRACEGATE_CLIENT_DS_PROBLEM_H */
