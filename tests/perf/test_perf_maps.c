/* /proc/PID/maps (agent/perf/perf_maps.h): every field of a line, paths
 * with spaces, anonymous and special mappings, malformed lines skipped
 * and counted, executable mappings kept in order and found by address;
 * the rate limit of rereads (a burst, then one per period). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/perf/perf_maps.h"

static const char golden_maps[] =
    "55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 1234 /tmp/work dir/w\n"
    "55d0c0a01000-55d0c0a02000 r-xp 00001000 08:01 1234 /tmp/work dir/w\n"
    "7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
    "7f1000028000-7f100019d000 r-xp 00028000 fe:00 393267                     "
    "/usr/lib/x86_64-linux-gnu/libc.so.6\n"
    "7ffd1000a000-7ffd1000c000 r-xp 00000000 00:00 0                          "
    "[vdso]\n"
    "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]\n";

static void every_field_of_a_line(void **state) {
  (void)state;
  const char *line = "7f1000028000-7f100019d000 r-xs 00028000 fe:0a 393267 "
                     "   /usr/lib/libc.so.6 (deleted)";
  tg_perf_map_t m;
  assert_int_equal(tg_perf_map_parse_line(line, strlen(line), &m), 0);
  assert_true(m.start == 0x7f1000028000ull);
  assert_true(m.end == 0x7f100019d000ull);
  assert_true(m.pgoff == 0x28000);
  assert_int_equal(m.dev_major, 0xfe);
  assert_int_equal(m.dev_minor, 0x0a);
  assert_int_equal(m.inode, 393267);
  assert_true(m.r && !m.w && m.x && m.shared);
  assert_string_equal(m.path, "/usr/lib/libc.so.6 (deleted)");
  free(m.path);
}

static void malformed_lines_are_refused(void **state) {
  (void)state;
  const char *bad[] = {
      "",
      "55d0c0a00000",
      "55d0c0a00000-55d0c0a01000",
      "55d0c0a00000-55d0c0a01000 r--p",
      "55d0c0a00000-55d0c0a01000 rxxp 00000000 08:01 1234 /x",
      "55d0c0a00000-55d0c0a01000 r-xq 00000000 08:01 1234 /x",
      "55d0c0a01000-55d0c0a00000 r-xp 00000000 08:01 1234 /x", /* end<start */
      "55d0c0a00000-55d0c0a01000 r-xp 00000000 08-01 1234 /x",
      "55d0c0a00000-55d0c0a01000 r-xp 00000000 08:01 x /x",
      "55d0c0a00000-55d0c0a01000 r-xp 00000000 08:01 12x /x",
      "11111111111111111-2 r-xp 0 0:0 0", /* 17 hex digits */
      "g-1 r-xp 0 0:0 0",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    tg_perf_map_t m;
    assert_int_equal(tg_perf_map_parse_line(bad[i], strlen(bad[i]), &m),
                     -EBADMSG);
  }
  /* A NUL inside the path. */
  const char nul[] = "1-2 r-xp 0 0:0 0 /a\0b";
  tg_perf_map_t m;
  assert_int_equal(tg_perf_map_parse_line(nul, sizeof(nul) - 1, &m), -EBADMSG);
}

static void a_file_keeps_executable_mappings_in_order(void **state) {
  (void)state;
  char text[sizeof(golden_maps) + 64];
  snprintf(text, sizeof(text), "%sgarbage line\n", golden_maps);
  tg_perf_maps_t maps = {0};
  assert_int_equal(tg_perf_maps_parse(text, strlen(text), true, &maps), 4);
  assert_int_equal(maps.bad_lines, 1);
  assert_string_equal(maps.v[0].path, "/tmp/work dir/w");
  assert_true(maps.v[0].pgoff == 0x1000);
  assert_string_equal(maps.v[1].path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  assert_string_equal(maps.v[2].path, "[vdso]");
  assert_string_equal(maps.v[3].path, "[vsyscall]");

  const tg_perf_map_t *m = tg_perf_maps_find(&maps, 0x55d0c0a01800ull);
  assert_non_null(m);
  assert_string_equal(m->path, "/tmp/work dir/w");
  assert_null(tg_perf_maps_find(&maps, 0x55d0c0a00800ull)); /* not exec */
  assert_null(tg_perf_maps_find(&maps, 0x55d0c0a02000ull)); /* end excluded */
  assert_null(tg_perf_maps_find(&maps, 0));
  assert_non_null(tg_perf_maps_find(&maps, 0xffffffffff600fffull));

  /* All of them, anonymous one included. */
  assert_int_equal(tg_perf_maps_parse(golden_maps, strlen(golden_maps), false,
                                      &maps),
                   6);
  assert_string_equal(maps.v[2].path, "");
  tg_perf_maps_free(&maps);
}

static void unsorted_lines_are_sorted(void **state) {
  (void)state;
  const char text[] = "3000-4000 r-xp 0 0:0 0 /c\n"
                      "1000-2000 r-xp 0 0:0 0 /a\n"
                      "2000-3000 r-xp 0 0:0 0 /b";
  tg_perf_maps_t maps = {0};
  assert_int_equal(tg_perf_maps_parse(text, strlen(text), true, &maps), 3);
  assert_string_equal(maps.v[0].path, "/a");
  assert_string_equal(maps.v[2].path, "/c");
  assert_string_equal(tg_perf_maps_find(&maps, 0x2fff)->path, "/b");
  tg_perf_maps_free(&maps);
}

static void overlapping_and_empty_mappings_are_dropped(void **state) {
  (void)state;
  const char text[] = "1000-3000 r-xp 0 0:0 0 /a\n"
                      "2000-4000 r-xp 0 0:0 0 /overlaps\n"
                      "4000-4000 r-xp 0 0:0 0 /empty\n"
                      "4000-5000 r-xp 0 0:0 0 /b\n";
  tg_perf_maps_t maps = {0};
  assert_int_equal(tg_perf_maps_parse(text, strlen(text), true, &maps), 2);
  assert_int_equal(maps.bad_lines, 2);
  assert_string_equal(tg_perf_maps_find(&maps, 0x2fff)->path, "/a");
  assert_string_equal(tg_perf_maps_find(&maps, 0x4000)->path, "/b");
  tg_perf_maps_free(&maps);
}

static void own_maps_hold_own_code(void **state) {
  (void)state;
  tg_perf_maps_t maps = {0};
  assert_true(tg_perf_maps_read(getpid(), NULL, true, &maps) > 0);
  const tg_perf_map_t *m =
      tg_perf_maps_find(&maps, (uint64_t)(uintptr_t)&own_maps_hold_own_code);
  assert_non_null(m);
  assert_true(m->x);
  assert_true(strstr(m->path, "test_perf_maps") != NULL);
  tg_perf_maps_free(&maps);
  assert_int_equal(tg_perf_maps_read(0, "/nonexistent/maps", true, &maps),
                   -ENOENT);
}

static void rereads_are_a_burst_then_one_per_period(void **state) {
  (void)state;
  tg_perf_reread_limit_t l;
  uint64_t t = 5000;
  tg_perf_reread_fill(&l, t);
  for (int i = 0; i < TG_PERF_MAPS_REREAD_BURST; i++)
    assert_true(tg_perf_reread_take(&l, t));
  assert_false(tg_perf_reread_take(&l, t));
  assert_false(tg_perf_reread_take(&l, t + TG_PERF_MAPS_REREAD_MS - 1));
  assert_true(tg_perf_reread_take(&l, t + TG_PERF_MAPS_REREAD_MS));
  assert_false(tg_perf_reread_take(&l, t + TG_PERF_MAPS_REREAD_MS));
  /* Two periods later: two more; a long pause earns the burst only. */
  assert_true(tg_perf_reread_take(&l, t + 3 * TG_PERF_MAPS_REREAD_MS));
  assert_true(tg_perf_reread_take(&l, t + 3 * TG_PERF_MAPS_REREAD_MS));
  assert_false(tg_perf_reread_take(&l, t + 3 * TG_PERF_MAPS_REREAD_MS));
  t += 1000000;
  for (int i = 0; i < TG_PERF_MAPS_REREAD_BURST; i++)
    assert_true(tg_perf_reread_take(&l, t));
  assert_false(tg_perf_reread_take(&l, t));
  /* A clock that goes back earns nothing and breaks nothing. */
  assert_false(tg_perf_reread_take(&l, 0));
  tg_perf_reread_fill(&l, t);
  assert_true(tg_perf_reread_take(&l, t));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rereads_are_a_burst_then_one_per_period),
      cmocka_unit_test(every_field_of_a_line),
      cmocka_unit_test(malformed_lines_are_refused),
      cmocka_unit_test(a_file_keeps_executable_mappings_in_order),
      cmocka_unit_test(unsorted_lines_are_sorted),
      cmocka_unit_test(overlapping_and_empty_mappings_are_dropped),
      cmocka_unit_test(own_maps_hold_own_code),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
