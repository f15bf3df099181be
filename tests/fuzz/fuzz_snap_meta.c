/* Fuzzes the snapshot sidecar parser (collector/store/snap_meta.h): a sidecar is
 * read back from a bucket another writer may share, and what it says
 * becomes a catalog row at a rebuild.
 *
 * Input: the sidecar's bytes.
 *
 * Invariants (trap on violation): a parsed sidecar has 1..
 * TG_COLL_META_HOSTS_MAX hosts, text within the catalog's caps, a live
 * state; made again (tg_coll_meta_format) from what was parsed, it parses
 * back to the same id, state, counts and hosts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/store/snap_meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok) {
  if (!ok) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_coll_meta_t m;
  char why[256];
  if (tg_coll_meta_parse((const char *)data, size, &m, why, sizeof why) != 0) {
    check(why[0] != '\0');
    return 0;
  }
  check(m.n_hosts >= 1 && m.n_hosts <= TG_COLL_META_HOSTS_MAX);
  check(m.state == TG_COLL_COMPLETE || m.state == TG_COLL_PARTIAL);
  check(strlen(m.trigger) >= 1 && strlen(m.trigger) <= TG_COLL_TRIGGER_MAX);
  check(strlen(m.reason) <= TG_COLL_REASON_MAX);
  for (size_t i = 0; i < m.n_hosts; i++) {
    check(strlen(m.hosts[i].host) >= 1 &&
          strlen(m.hosts[i].host) <= TG_COLL_HOST_MAX);
    check(strlen(m.hosts[i].problems) <= TG_COLL_PROBLEMS_MAX);
  }
  tg_coll_begin_t b = {m.trigger, m.reason, m.origin};
  tg_coll_finish_t f = {.bytes = m.bytes, .crc32 = m.crc32,
                        .packets = m.packets, .hosts = m.hosts,
                        .n_hosts = m.n_hosts, .finished_ms = m.finished_ms};
  tg_coll_meta_in_t in = {.id = m.id, .pinned = m.pinned,
                          .started_ms = m.started_ms, .begin = &b,
                          .finish = &f, .etag = m.etag, .index = m.index};
  char *text = NULL;
  size_t len = 0;
  check(tg_coll_meta_format(&in, &text, &len) == 0);
  tg_coll_meta_t again;
  check(tg_coll_meta_parse(text, len, &again, why, sizeof why) == 0);
  check(again.id == m.id && again.state == m.state &&
        again.bytes == m.bytes && again.crc32 == m.crc32 &&
        again.loss == m.loss && again.n_hosts == m.n_hosts &&
        again.pinned == m.pinned && !strcmp(again.trigger, m.trigger) &&
        !strcmp(again.etag, m.etag));
  for (size_t i = 0; i < m.n_hosts; i++)
    check(!strcmp(again.hosts[i].host, m.hosts[i].host) &&
          again.hosts[i].outcome == m.hosts[i].outcome &&
          again.hosts[i].loss == m.hosts[i].loss);
  tg_coll_meta_free(&again);
  free(text);
  tg_coll_meta_free(&m);
  return 0;
}
