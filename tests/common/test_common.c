/* common/: error table, growable buffer, intrusive list, logger. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "tracegate/error.h"
#include "common/list.h"
#include "common/log.h"
#include "common/notice.h"

static void strerror_covers_errno_and_project_codes(void **state) {
  (void)state;
  assert_string_equal(tg_strerror(0), "success");
  assert_string_equal(tg_strerror(TG_EFRAME_TOO_LARGE),
                      "IPC frame larger than the 131068-byte cap");
  assert_string_equal(tg_err_name(TG_EFRAME_TOO_LARGE), "TG_EFRAME_TOO_LARGE");
  assert_string_equal(tg_err_name(-ENOMEM), "ENOMEM");
  assert_string_equal(tg_strerror(-ENOENT), strerror(ENOENT));
  assert_string_equal(tg_strerror(-999999), "unknown error");
}

/* A tag is its table number; a prefix goes before the text and cuts its
 * end, never the tag, and leaves a buffer too small for it alone. */
static void notice_tags_and_prefixes(void **state) {
  (void)state;
  assert_string_equal(tg_notice_tag(TG_N_SERVICE_UNREACHABLE), "[TG-1001]");
  assert_string_equal(tg_notice_tag(TG_N_TLS_CRL_FOREIGN), "[TG-7004]");
  assert_string_equal(tg_notice_tag((tg_notice_t)999999), "[TG-0000]");
  char buf[32] = "the reason";
  tg_notice_prefix(buf, sizeof(buf), TG_N_STOPPING);
  assert_string_equal(buf, "[TG-1003] the reason");
  char cut[16] = "0123456789";
  tg_notice_prefix(cut, sizeof(cut), TG_N_STOPPING);
  assert_string_equal(cut, "[TG-1003] 01234"); /* 15 bytes and the NUL */
  char tiny[8] = "abc";
  tg_notice_prefix(tiny, sizeof(tiny), TG_N_STOPPING);
  assert_string_equal(tiny, "abc");
  char empty[16] = "";
  tg_notice_prefix(empty, sizeof(empty), TG_N_ABORTED);
  assert_string_equal(empty, "[TG-1004] ");
  /* tg_notice_coded: the tag, a space and the text, cut to fit. */
  char coded[16];
  assert_ptr_equal(tg_notice_coded(coded, sizeof(coded), TG_N_STOPPING, "why"),
                   coded);
  assert_string_equal(coded, "[TG-1003] why");
  tg_notice_coded(coded, sizeof(coded), TG_N_STOPPING, "0123456789");
  assert_string_equal(coded, "[TG-1003] 01234");
  assert_string_equal(tg_notice_coded(coded, 0, TG_N_STOPPING, "why"), "");
}

static void buf_grows_consumes_and_compacts(void **state) {
  (void)state;
  tg_buf_t b;
  tg_buf_init(&b, 0);
  uint8_t chunk[1000];
  for (int i = 0; i < 1000; i++) chunk[i] = (uint8_t)i;
  for (int i = 0; i < 10; i++) assert_int_equal(tg_buf_append(&b, chunk, 1000), 0);
  assert_int_equal(tg_buf_size(&b), 10000);
  tg_buf_consume(&b, 9500);
  assert_int_equal(tg_buf_size(&b), 500);
  assert_int_equal(tg_buf_begin(&b)[0], (uint8_t)(9500 % 1000));
  size_t cap = b.cap;
  /* Reserving what compaction can provide does not reallocate. */
  assert_non_null(tg_buf_reserve(&b, cap - 600));
  assert_int_equal(b.cap, cap);
  assert_int_equal(b.off, 0);
  assert_int_equal(tg_buf_begin(&b)[0], (uint8_t)(9500 % 1000));
  tg_buf_consume(&b, 500);
  assert_int_equal(tg_buf_size(&b), 0);
  tg_buf_free(&b);
}

static void buf_enforces_its_cap(void **state) {
  (void)state;
  tg_buf_t b;
  tg_buf_init(&b, 100);
  uint8_t x[60] = {0};
  assert_int_equal(tg_buf_append(&b, x, 60), 0);
  assert_int_equal(tg_buf_append(&b, x, 60), -ENOBUFS);
  assert_int_equal(tg_buf_size(&b), 60); /* unchanged by the failure */
  tg_buf_consume(&b, 60);
  assert_int_equal(tg_buf_append(&b, x, 60), 0);
  tg_buf_free(&b);
}

typedef struct item {
  int v;
  tg_list_t node;
} item_t;

static void list_insert_remove_iterate(void **state) {
  (void)state;
  tg_list_t head;
  tg_list_init(&head);
  item_t items[4];
  for (int i = 0; i < 4; i++) {
    items[i].v = i;
    tg_list_init(&items[i].node);
    tg_list_insert_tail(&head, &items[i].node);
  }
  tg_list_remove(&items[1].node);
  tg_list_remove(&items[1].node); /* idempotent */
  int seen[4], n = 0;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &head) {
    item_t *x = TG_CONTAINER_OF(it, item_t, node);
    seen[n++] = x->v;
    tg_list_remove(it);
  }
  assert_int_equal(n, 3);
  assert_int_equal(seen[0], 0);
  assert_int_equal(seen[1], 2);
  assert_int_equal(seen[2], 3);
  assert_true(tg_list_empty(&head));
}

static char last_line[TG_LOG_LINE_MAX + 8];
static int lines;
static void sink(void *ctx, tg_log_level_t level, const char *line) {
  (void)ctx;
  (void)level;
  lines++;
  snprintf(last_line, sizeof(last_line), "%s", line);
}

static void log_is_level_checked_bounded_and_single_line(void **state) {
  (void)state;
  tg_log_set_sink(sink, NULL);
  tg_log_set_prefix("unit");
  tg_log_set_level(TG_LOG_WARN);
  lines = 0;
  TG_INFO("hidden %d", 1);
  assert_int_equal(lines, 0);
  TG_WARN("evil\nforged line");
  assert_int_equal(lines, 1);
  assert_non_null(strstr(last_line, " unit warn "));
  assert_null(strchr(last_line, '\n'));
  char big[3000];
  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = 0;
  TG_ERROR("%s", big);
  assert_int_equal(strlen(last_line), TG_LOG_LINE_MAX - 1);
  assert_string_equal(last_line + TG_LOG_LINE_MAX - 4, "...");
  tg_log_level_t lv;
  assert_int_equal(tg_log_parse_level("debug", &lv), 0);
  assert_int_equal(lv, TG_LOG_DEBUG);
  assert_int_equal(tg_log_parse_level("loud", &lv), -EINVAL);
  tg_log_set_sink(NULL, NULL);
}

/* Swapping the sink while other threads log: once tg_log_set_sink
 * returns, no thread is in the old sink, so its ctx may be freed (ASan
 * sees a thread still using it; TSan the unsynchronised sink). */
typedef struct swap_ctx {
  _Atomic long lines;
} swap_ctx_t;

static void counting_sink(void *ctx, tg_log_level_t level, const char *line) {
  (void)level;
  (void)line;
  atomic_fetch_add(&((swap_ctx_t *)ctx)->lines, 1);
}

static _Atomic bool swap_stop;

static void *log_loop(void *arg) {
  (void)arg;
  while (!atomic_load(&swap_stop)) TG_WARN("a line from another thread");
  return NULL;
}

static void log_sink_swap_waits_for_lines_in_flight(void **state) {
  (void)state;
  tg_log_set_level(TG_LOG_WARN);
  swap_ctx_t *c = calloc(1, sizeof(*c));
  assert_non_null(c);
  tg_log_set_sink(counting_sink, c);
  atomic_store(&swap_stop, false);
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&t[i], NULL, log_loop, NULL), 0);
  while (atomic_load(&c->lines) < 2) sched_yield();
  long total = 0;
  for (int i = 0; i < 200; i++) {
    swap_ctx_t *n = calloc(1, sizeof(*n));
    assert_non_null(n);
    tg_log_set_sink(counting_sink, n);
    total += atomic_load(&c->lines);
    free(c);
    c = n;
  }
  atomic_store(&swap_stop, true);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  tg_log_set_sink(NULL, NULL);
  free(c);
  assert_true(total >= 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(strerror_covers_errno_and_project_codes),
      cmocka_unit_test(log_sink_swap_waits_for_lines_in_flight),
      cmocka_unit_test(notice_tags_and_prefixes),
      cmocka_unit_test(buf_grows_consumes_and_compacts),
      cmocka_unit_test(buf_enforces_its_cap),
      cmocka_unit_test(list_insert_remove_iterate),
      cmocka_unit_test(log_is_level_checked_bounded_and_single_line),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
