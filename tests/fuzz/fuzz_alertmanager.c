/* Fuzzes the collector's Alertmanager webhook parser and decision
 * (collector/daemon/alertmanager.h): tg_am_parse() over the bytes, then
 * tg_am_decide() of every alert against a small config and inventory, and
 * the repeat window with every alert's key. A client with the record role
 * sends these bytes: they must be refused with a reason or read within
 * their bounds, never crash the collector.
 *
 * The body is parsed from an exact-size copy (no NUL after it), so reads
 * past the end show up under ASan; its leak check sees what a failed
 * parse or tg_am_payload_free() would leave.
 *
 * Invariants (trap on violation):
 * - the result is 0, -EINVAL (with a reason), -E2BIG (the tree's bound,
 *   with a reason) or -ENOMEM, and a failure owns nothing;
 * - on success: at most TG_AM_ALERTS_MAX alerts; a firing alert's reason
 *   is JSON of at most TG_COLL_REASON_MAX bytes, a resolved one has none;
 *   a resolved alert decides "resolved"; a verdict to snapshot hosts
 *   flags at least one; a group verdict names "all" or a group of the
 *   config; an alert noted in the window is a repeat the moment after,
 *   and the window never holds more than TG_AM_SEEN_MAX.
 */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/catalog/catalog.h"
#include "collector/daemon/alertmanager.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok) {
  if (!ok) __builtin_trap();
}

static const char CONFIG[] =
    "hosts = h\ntrace_config = t\nstore = s\n"
    "group = db db1:7467 db2:7467\n"
    "alertmanager_host = primary db2:7467\n";

static const tg_am_inv_t INV[] = {
    {"db1:7467", "db1"},
    {"db2:7467", "db2"},
    {"[::1]:7467", "::1"},
};
#define N_INV (sizeof(INV) / sizeof(INV[0]))

static void check_alerts(const tg_am_payload_t *p, const tg_coll_config_t *cfg,
                         tg_am_seen_t *seen) {
  check(p->n_alerts <= TG_AM_ALERTS_MAX);
  for (size_t i = 0; i < p->n_alerts; i++) {
    const tg_am_alert_t *a = &p->alerts[i];
    check(a->firing == (a->reason != NULL));
    if (a->reason) {
      check(strlen(a->reason) <= TG_COLL_REASON_MAX);
      json_error_t err;
      json_t *r = json_loads(a->reason, JSON_REJECT_DUPLICATES, &err);
      check(r && json_is_object(r));
      json_decref(r);
    }
    bool hit[N_INV];
    const char *group;
    uint64_t id;
    tg_am_verdict_t v =
        tg_am_decide(a, cfg, seen, 1000 + (int64_t)i, INV, N_INV, hit, &group, &id);
    if (!a->firing) check(v == TG_AM_RESOLVED);
    if (v == TG_AM_HOSTS) {
      size_t k = 0;
      for (size_t j = 0; j < N_INV; j++) k += hit[j];
      check(k >= 1);
    }
    if (v == TG_AM_GROUP)
      check(!strcmp(group, "all") || tg_coll_config_group(cfg, group));
    if (v == TG_AM_GROUP || v == TG_AM_HOSTS) {
      tg_am_seen_note(seen, a->key, 1000 + (int64_t)i, cfg->am_repeat_window_ms,
                      i + 1);
      check(tg_am_seen_count(seen) <= TG_AM_SEEN_MAX);
      v = tg_am_decide(a, cfg, seen, 1001 + (int64_t)i, INV, N_INV, hit, &group,
                       &id);
      check(v == TG_AM_REPEAT && id == i + 1);
    }
    check(strcmp(tg_am_result_name(tg_am_result_of(v)), "?") != 0);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy) return 0;
  memcpy(copy, data, size);
  static tg_coll_config_t cfg;
  static int have_cfg;
  if (!have_cfg) {
    char err[256];
    check(tg_coll_config_parse(CONFIG, strlen(CONFIG), "f", "/", &cfg, NULL,
                               NULL, err, sizeof(err)) == 0);
    have_cfg = 1;
  }
  tg_am_payload_t p;
  const char *why = NULL;
  int rv = tg_am_parse(copy, size, "instance", "tracegate_group", &p, &why);
  check(rv == 0 || rv == -EINVAL || rv == -E2BIG || rv == -ENOMEM);
  if (rv == 0) {
    tg_am_seen_t *seen = tg_am_seen_new();
    if (seen) check_alerts(&p, &cfg, seen);
    tg_am_seen_free(seen);
  } else {
    check(why != NULL);
    check(p.doc == NULL && p.alerts == NULL && p.n_alerts == 0);
  }
  tg_am_payload_free(&p);
  free(copy);
  return 0;
}
