/* Alertmanager's webhook on the collector (docs/collector.md,
 * "Alertmanager"): the pure half. alertmanager.c, the route's handler,
 * reads the body with tg_am_parse(), asks tg_am_decide() what each alert
 * calls for, triggers the snapshots (trigger.c, the "alertmanager"
 * budget) and notes them in the repeat window (tg_am_seen_*). Nothing
 * here does I/O or logs: tests/collector/test_collector_alertmanager.c
 * drives it, tests/fuzz/fuzz_alertmanager.c fuzzes the parser.
 *
 * The payload is Alertmanager's webhook_configs body, version "4":
 *
 *   {"version":"4", "groupKey":"{}:{alertname=\"X\"}", "status":"firing",
 *    "receiver":"tracegate", "truncatedAlerts":0, "externalURL":"...",
 *    "groupLabels":{..}, "commonLabels":{..}, "commonAnnotations":{..},
 *    "alerts":[{"status":"firing", "labels":{"alertname":"X",
 *               "instance":"db1:9100"}, "annotations":{..},
 *               "startsAt":"...", "endsAt":"...", "generatorURL":"...",
 *               "fingerprint":"..."}]}
 *
 * Every field read, and every field of that list when present, has its
 * type checked (labels and annotations: objects of strings); duplicate
 * keys, bytes that are not UTF-8, another version, and more than
 * TG_AM_ALERTS_MAX alerts or TG_AM_LABELS_MAX labels in one alert refuse
 * the whole payload (400: nothing done). Fields not listed are ignored (a
 * newer Alertmanager may add some).
 *
 * Memory. What a payload costs is bounded by its size, whoever sends it:
 * jansson's tree of it by TG_AM_TREE_PER_BYTE times its size plus
 * TG_AM_TREE_BASE (tg_json_load; past it the payload is refused whole,
 * -E2BIG: 413), each alert's repeat key by a fixed-size digest, each
 * reason by TG_COLL_REASON_MAX and by its alert's own text. Nothing of a
 * payload outlives its request but the digests of the alerts that
 * snapshotted, in the repeat window (TG_AM_SEEN_MAX of them, each for
 * the window's time at most).
 *
 * What an alert calls for (tg_am_decide), in order:
 *   resolved       its status is "resolved": nothing;
 *   no_alertname   no "alertname" label, or one empty or over
 *                  TG_COLL_TRIGGER_MAX bytes (it names the snapshot's
 *                  trigger): nothing;
 *   repeat         the same alert (same groupKey, same labels) snapshotted
 *                  within the repeat window: nothing;
 *   group          the group label names "all" or a group of the config:
 *                  that group; no_group when it names none;
 *   hosts          else the host label's value names inventory hosts:
 *                  an alertmanager_host line whose VALUE it is (exactly),
 *                  else the host whose spec it is ("db1:7467"), else
 *                  every host whose inventory name is its host part
 *                  ("db1" of "db1:9100"); no_host when it names none of
 *                  this collector's shard, no_label when the alert has
 *                  neither label.
 * Every comparison is of exact bytes, and only with what the operator
 * wrote (the inventory, the alertmanager_host mappings): never with what
 * a host says of itself (its reported hostname), which a host that is not
 * db1 could set to "db1" to be snapshotted, and spoil the file, whenever
 * db1 alerts.
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_ALERTMANAGER_H
#define TRACEGATE_COLLECTOR_DAEMON_ALERTMANAGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/config/config.h"

#define TG_AM_ALERTS_MAX 1000 /* alerts in one payload */
#define TG_AM_LABELS_MAX 256  /* labels, and annotations, of one alert */
/* jansson's tree of a payload of N bytes may take TG_AM_TREE_PER_BYTE * N
 * + TG_AM_TREE_BASE bytes (malloc_usable_size of every block). Alertmanager's
 * own payloads take about 6 times their text; the base covers the fixed
 * cost of 1000 small alerts (about 700 bytes each); a document of empty
 * objects or arrays (40 to 75 times) is refused. */
#define TG_AM_TREE_PER_BYTE 16u
#define TG_AM_TREE_BASE (1u << 20)
/* An answer's row lists at most this many of the hosts its alert named
 * (then "hosts_more" counts the others), so that 1000 alerts naming a
 * mapping of many hosts do not make an answer of a million names. */
#define TG_AM_ANSWER_HOSTS_MAX 32
/* An alert's identity in the repeat window: SHA-256 over the SHA-256 of
 * the groupKey, then the labels as JSON with sorted keys. */
#define TG_AM_KEY_LEN 32
/* The repeat window holds at most this many alerts (a fixed table, about
 * 200 KiB), each no longer than the window: an entry older is dropped
 * when the next is noted, and when the table is full the oldest goes. */
#define TG_AM_SEEN_MAX 4096

typedef struct tg_am_alert {
  bool firing; /* status "firing" (else "resolved") */
  /* The labels' values, NULL when absent; borrowed from the payload. */
  const char *alertname;
  const char *host;  /* the host label's (alertmanager_host_label) */
  const char *group; /* the group label's (alertmanager_group_label) */
  /* The repeat window's identity (TG_AM_KEY_LEN above): two alerts have
   * the same key when they have the same groupKey and the same labels
   * (SHA-256's collision resistance: no sender can make two that differ
   * share one). */
  uint8_t key[TG_AM_KEY_LEN];
  /* A firing alert's snapshot reason: {"labels":{..},"annotations":{..}}
   * as JSON with sorted keys, at most TG_COLL_REASON_MAX bytes: when the
   * whole does not fit, the annotations go ("cut":true), then the labels
   * but alertname, then that too. The payload's; NULL when resolved. */
  char *reason;
} tg_am_alert_t;

typedef struct tg_am_payload {
  void *doc; /* the parsed document (jansson's), the strings' owner */
  const char *receiver;
  const char *group_key;
  bool firing; /* the group's status */
  size_t n_alerts;
  tg_am_alert_t *alerts; /* |n_alerts|, owned */
} tg_am_payload_t;

/* Parses the |len| bytes at |body_untrusted| (no NUL needed) into *out,
 * taking the labels named |host_label| and |group_label| (borrowed for the
 * call). 0, and the caller frees *out with tg_am_payload_free(); or
 * -EINVAL (malformed: |why|, static text, says what), -E2BIG (its tree
 * would take more than the bound above: |why| says so) or -ENOMEM, with
 * *out owning nothing. */
int tg_am_parse(const uint8_t *body_untrusted, size_t len,
                const char *host_label, const char *group_label,
                tg_am_payload_t *out, const char **why);
/* NULL-safe; safe to call twice. */
void tg_am_payload_free(tg_am_payload_t *p);

/* One host of the collector's shard, as matching sees it (borrowed):
 * only what the operator wrote. */
typedef struct tg_am_inv {
  const char *spec; /* as the inventory spells it: "db1.example:7467" */
  const char *host; /* its host part: "db1.example" */
} tg_am_inv_t;

/* Which of |inv| (|n|) the host label's |value| names (above), as flags
 * in |hit| (|n|, all written). Returns how many. */
size_t tg_am_match(const tg_coll_config_t *cfg, const char *value,
                   const tg_am_inv_t *inv, size_t n, bool *hit);

/* The repeat window: which alerts snapshotted when. */
typedef struct tg_am_seen tg_am_seen_t;

/* NULL when out of memory. */
tg_am_seen_t *tg_am_seen_new(void);
void tg_am_seen_free(tg_am_seen_t *s); /* NULL-safe */
/* Whether |key| was noted within |window_ms| before |now_ms| (an entry
 * from after |now_ms|, a clock that went back, is not): then *id is the
 * snapshot it was noted with (0: queued, its id unknown then). */
bool tg_am_seen_recent(const tg_am_seen_t *s, const uint8_t key[TG_AM_KEY_LEN],
                       int64_t now_ms, int64_t window_ms, uint64_t *id);
/* Notes that |key| snapshotted (|id|) at |now_ms|, in place of what was
 * noted of it before; first forgets every entry not recent at |now_ms|
 * within |window_ms|, then, when the table is full, the oldest. */
void tg_am_seen_note(tg_am_seen_t *s, const uint8_t key[TG_AM_KEY_LEN],
                     int64_t now_ms, int64_t window_ms, uint64_t id);
/* Entries held (for tests). */
size_t tg_am_seen_count(const tg_am_seen_t *s);

typedef enum tg_am_verdict {
  TG_AM_GROUP,        /* snapshot the group *|group| names */
  TG_AM_HOSTS,        /* snapshot the hosts |hit| flags */
  TG_AM_RESOLVED,
  TG_AM_NO_ALERTNAME,
  TG_AM_REPEAT,       /* *|repeat_id| is the earlier snapshot (0: queued) */
  TG_AM_NO_GROUP,
  TG_AM_NO_HOST,
  TG_AM_NO_LABEL,
} tg_am_verdict_t;

/* What |a| calls for (above) at |now_ms|, against |seen| (may be NULL:
 * no window), the config's groups and alertmanager_* keys, and the
 * shard's hosts |inv| (|n|; |hit| their flags, written for TG_AM_HOSTS).
 * *|group| (TG_AM_GROUP) points into |a| or is "all". */
tg_am_verdict_t tg_am_decide(const tg_am_alert_t *a,
                             const tg_coll_config_t *cfg,
                             const tg_am_seen_t *seen, int64_t now_ms,
                             const tg_am_inv_t *inv, size_t n, bool *hit,
                             const char **group, uint64_t *repeat_id);

/* What became of an alert: the answer's "result", the metric's label. */
typedef enum tg_am_result {
  TG_AM_R_SNAPSHOT, /* begun, or served by a snapshot under way */
  TG_AM_R_QUEUED,   /* it begins when one under way ends */
  TG_AM_R_REFUSED,  /* over the webhook's budget */
  TG_AM_R_ERROR,    /* the snapshot could not begin (the store) */
  TG_AM_R_RESOLVED, /* and the verdicts that snapshot nothing */
  TG_AM_R_NO_ALERTNAME,
  TG_AM_R_REPEAT,
  TG_AM_R_NO_GROUP,
  TG_AM_R_NO_HOST,
  TG_AM_R_NO_LABEL,
  TG_AM_R_COUNT
} tg_am_result_t;

/* The result of |v|, a verdict that snapshots nothing (TG_AM_GROUP and
 * TG_AM_HOSTS give TG_AM_R_ERROR: the caller's to say). */
tg_am_result_t tg_am_result_of(tg_am_verdict_t v);
/* "snapshot", "queued", "refused", "error", "resolved", "no_alertname",
 * "repeat", "no_group", "no_host", "no_label" (a static string). */
const char *tg_am_result_name(tg_am_result_t r);

#endif /* TRACEGATE_COLLECTOR_DAEMON_ALERTMANAGER_H */
