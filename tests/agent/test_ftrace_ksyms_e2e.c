/* linux.ftrace's kernel addresses end to end: a real tracegate-probes
 * recording workqueue events for a real tracegated writes indices, never
 * addresses, named by kernel_symbols interned from /proc/kallsyms, and
 * says in its end-of-trace FtraceStats how many symbols it parsed.
 *
 * Needs root and tracefs (probes_e2e.h: skipped without them, unless
 * TG_REQUIRE_FTRACE is set), and a kernel with workqueue events whose
 * kallsyms shows addresses (skipped otherwise).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/probes/ftrace_kaddr.h"
#include "agent/sys/ftrace_ksyms.h"
#include "agent/probes/ftrace_tracefs.h"
#include "probes_e2e.h"
#include "test_proc.h"

/* Every varint and fixed64 in |p|, and in whatever of its length-delimited
 * fields parses as a message, checked against the kernel's function
 * addresses. Returns false where |p| is not a message. */
static bool no_kernel_address(const uint8_t *p, size_t n, const tg_ksyms_t *ks,
                              unsigned depth, size_t *values) {
  size_t i = 0;
  while (i < n) {
    uint64_t key = 0;
    unsigned shift = 0;
    do {
      if (i == n || shift > 63) return false;
      key |= (uint64_t)(p[i] & 0x7f) << shift;
      shift += 7;
    } while (p[i++] & 0x80);
    uint64_t v = 0;
    switch (key & 7) {
      case 0:
        shift = 0;
        do {
          if (i == n || shift > 63) return false;
          v |= (uint64_t)(p[i] & 0x7f) << shift;
          shift += 7;
        } while (p[i++] & 0x80);
        break;
      case 1:
        if (n - i < 8) return false;
        memcpy(&v, p + i, 8);
        i += 8;
        break;
      case 5:
        if (n - i < 4) return false;
        i += 4;
        continue;
      case 2: {
        uint64_t len = 0;
        shift = 0;
        do {
          if (i == n || shift > 63) return false;
          len |= (uint64_t)(p[i] & 0x7f) << shift;
          shift += 7;
        } while (p[i++] & 0x80);
        if (len > n - i) return false;
        if (depth < 8) no_kernel_address(p + i, (size_t)len, ks, depth + 1, values);
        i += (size_t)len;
        continue;
      }
      default:
        return false;
    }
    (*values)++;
    size_t l;
    const char *name = tg_ksyms_lookup(ks, v, &l);
    /* A value equal to a function's own address would be the address. */
    if (name) {
      size_t at = tg__addr_strs_search(&ks->syms, v);
      if (at != TG__ADDR_STRS_NONE && tg__addr_strs_addr(&ks->syms, at) == v)
        fail_msg("field %llu carries %#llx, the address of %.*s",
                 (unsigned long long)(key >> 3), (unsigned long long)v, (int)l,
                 name);
    }
  }
  return true;
}

typedef struct wq_seen {
  size_t starts, named, unnamed, symbols, cleared, generic;
} wq_seen_t;

/* Follows the packets as trace_processor does: kernel_symbols accumulate
 * along the sequence and SEQ_INCREMENTAL_STATE_CLEARED drops them; each
 * workqueue_execute_start's function is looked up in what its packet (or an
 * earlier one) interned. */
static void check_workqueue(const e2e_packets_t *p, wq_seen_t *seen) {
  memset(seen, 0, sizeof(*seen));
  static char *names[TG_FTRACE_KADDRS_CAP + 1];
  memset(names, 0, sizeof(names));
  bool first_interned = true;
  for (size_t i = 0; i < p->n; i++) {
    const Perfetto__Protos__TracePacket *pk = p->pk[i];
    bool cleared =
        pk->has_sequence_flags &&
        (pk->sequence_flags &
         PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_INCREMENTAL_STATE_CLEARED);
    if (cleared) {
      seen->cleared++;
      for (size_t k = 0; k <= TG_FTRACE_KADDRS_CAP; k++) {
        free(names[k]);
        names[k] = NULL;
      }
    }
    if (pk->interned_data && pk->interned_data->n_kernel_symbols) {
      /* The first names of the sequence clear the state first. */
      if (first_interned) assert_true(cleared);
      first_interned = false;
      for (size_t k = 0; k < pk->interned_data->n_kernel_symbols; k++) {
        const Perfetto__Protos__InternedString *s =
            pk->interned_data->kernel_symbols[k];
        assert_true(s->iid > 0 && s->iid <= TG_FTRACE_KADDRS_CAP);
        assert_true(s->str.len > 0);
        assert_null(names[s->iid]); /* an index is named once per state */
        names[s->iid] = strndup((const char *)s->str.data, s->str.len);
        seen->symbols++;
      }
    }
    const Perfetto__Protos__FtraceEventBundle *b = e2e_bundle_of(pk);
    for (size_t k = 0; b && k < b->n_event; k++) {
      const Perfetto__Protos__FtraceEvent *e = b->event[k];
      if (e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_GENERIC) {
        seen->generic++;
        continue;
      }
      if (e->event_case !=
          PERFETTO__PROTOS__FTRACE_EVENT__EVENT_WORKQUEUE_EXECUTE_START)
        continue;
      const Perfetto__Protos__WorkqueueExecuteStartFtraceEvent *w =
          e->workqueue_execute_start;
      assert_true(w->has_function && w->has_work);
      /* Indices, never addresses. */
      assert_true(w->function <= TG_FTRACE_KADDRS_CAP);
      assert_true(w->work <= TG_FTRACE_KADDRS_CAP);
      seen->starts++;
      if (w->function && names[w->function] && names[w->function][0])
        seen->named++;
      else
        seen->unnamed++;
    }
  }
  for (size_t k = 0; k <= TG_FTRACE_KADDRS_CAP; k++) free(names[k]);
}

static void ftrace_kernel_addresses_are_indices_named_by_kallsyms(void **state) {
  e2e_require_ftrace();
  test_service_t *ts = *state;
  char path[TG_TRACEFS_PATH_MAX + 64];
  snprintf(path, sizeof(path),
           "%s/events/workqueue/workqueue_execute_start/format",
           e2e_tracefs_root());
  if (access(path, R_OK) != 0) {
    print_message("skipped: this kernel has no workqueue events (%s)\n", path);
    skip();
  }
  tg_ksyms_t ks;
  int nsyms = tg_ksyms_load(&ks, "/proc/kallsyms");
  if (nsyms <= 0) {
    print_message("skipped: /proc/kallsyms gives no function addresses (%s)\n",
                  nsyms < 0 ? strerror(-nsyms) : "all read as 0: kptr_restrict");
    tg_ksyms_free(&ks);
    skip();
  }
  char err_path[160];
  pid_t probes = e2e_start_probes(ts, err_path, sizeof(err_path),
                                  "probes.err", false, 3);

  char *events[] = {"workqueue/*", "timer/hrtimer_start", "sched/sched_switch"};
  e2e_session_t a;
  e2e_session_config(&a, events, 3, true);
  a.fc.has_symbolize_ksyms = true;
  a.fc.symbolize_ksyms = true;
  e2e_session_enable(&a, ts);
  e2e_wait_started(&a);

  /* Work items run on their own; writeback on sync() adds some. Wait for
   * named ones, across several drains (each starts the indices again). */
  wq_seen_t s;
  memset(&s, 0, sizeof(s));
  int64_t end = tg_test_now_ms() + E2E_WAIT_MS;
  while (tg_test_now_ms() < end && (s.named < 5 || s.cleared < 2)) {
    sync();
    e2e_sleep_ms(100);
    e2e_flush(&a.c);
    e2e_read_more(&a.c, &a.got);
    check_workqueue(&a.got, &s);
  }
  assert_int_equal(raw_consumer_disable(&a.c, E2E_WAIT_MS), 0);
  e2e_read_more(&a.c, &a.got);
  check_workqueue(&a.got, &s);
  print_message("%zu workqueue_execute_start, %zu named, %zu not; %zu symbols "
                "interned, %zu state clears, %zu generic\n",
                s.starts, s.named, s.unnamed, s.symbols, s.cleared, s.generic);
  if (s.starts == 0) {
    print_message("skipped: no work item ran in %d ms\n", E2E_WAIT_MS);
  } else {
    assert_true(s.named > 0);
    assert_true(s.cleared > 0);
  }
  size_t values = 0;
  for (size_t i = 0; i < a.got.n; i++) {
    size_t len = perfetto__protos__trace_packet__get_packed_size(a.got.pk[i]);
    uint8_t *buf = malloc(len ? len : 1);
    assert_non_null(buf);
    perfetto__protos__trace_packet__pack(a.got.pk[i], buf);
    assert_true(no_kernel_address(buf, len, &ks, 0, &values));
    free(buf);
  }
  assert_true(values > 0);
  /* The end-of-trace stats say how many symbols named the addresses, as
   * traced_probes' do (Perfetto's KernelAddressSymbolization reads it). */
  const Perfetto__Protos__FtraceStats *fs = e2e_find_stats(&a.got, 2);
  assert_non_null(fs);
  uint32_t parsed = fs->has_kernel_symbols_parsed ? fs->kernel_symbols_parsed
                                                  : 0;
  print_message("end-of-trace stats: %u kernel symbols parsed (%d here)\n",
                parsed, nsyms);
  assert_true(parsed > 100);
  e2e_session_close(&a);
  e2e_stop_probes(probes, err_path);
  tg_ksyms_free(&ks);
  if (s.starts == 0) skip();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          ftrace_kernel_addresses_are_indices_named_by_kallsyms,
          test_service_setup, test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
