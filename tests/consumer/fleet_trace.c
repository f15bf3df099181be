/* Trace files of the fleet tests (fleet_trace.h). */
#include "fleet_trace.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "pb/trace/test_event.pb-c.h"
#include "test_service.h"
#include "tracegate/pb_wire.h"

void fleet_trace_load(const char *path, fleet_trace_t *t) {
  memset(t, 0, sizeof(*t));
  size_t n = 0;
  uint8_t *buf = tg_test_read_file(path, &n);
  if (!buf) fail_msg("cannot read %s: %s", path, strerror(errno));
  assert_true(n > 0);
  size_t cap = 0;
  const uint8_t *p = buf, *end = buf + n;
  while (p < end) {
    Perfetto__Protos__TracePacket *pk = trace_file_next_packet(&p, end);
    assert_non_null(pk);
    if (t->n == cap) {
      cap = cap ? cap * 2 : 256;
      t->pk = realloc(t->pk, cap * sizeof(*t->pk));
      assert_non_null(t->pk);
    }
    t->pk[t->n++] = pk;
  }
  free(buf);
}

void fleet_trace_free(fleet_trace_t *t) {
  free_packets(t->pk, t->n);
  t->pk = NULL;
  t->n = 0;
}

bool fleet_has_tag(const Perfetto__Protos__TracePacket *pk, const char *tag) {
  if (pk->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING ||
      !pk->for_testing->str)
    return false;
  size_t l = strlen(tag);
  const char *s = pk->for_testing->str;
  return !strncmp(s, tag, l) && (s[l] == 0 || s[l] == ':');
}

size_t fleet_trace_count_tag(const fleet_trace_t *t, const char *tag) {
  size_t n = 0;
  for (size_t i = 0; i < t->n; i++) n += fleet_has_tag(t->pk[i], tag);
  return n;
}

void fleet_trace_assert_values(const fleet_trace_t *t, const char *tag,
                               uint32_t first, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < t->n; i++) {
    if (!fleet_has_tag(t->pk[i], tag)) continue;
    if (k >= n || t->pk[i]->for_testing->seq_value != first + k)
      fail_msg("'%s' packet %zu is value %u, expected %zu of %zu", tag, k,
               t->pk[i]->for_testing->seq_value, first + k, n);
    k++;
  }
  if (k != n) fail_msg("%zu '%s' packets, expected %zu", k, tag, n);
}
