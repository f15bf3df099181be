/* Write-behind (common/write_behind.c): what a trace file's writer drops
 * from the page cache, and what it must leave there.
 *
 * Residency is read with mincore() on a mapping of the file. The test
 * makes each write clean (fdatasync) before telling the helper about it,
 * so that whether a page is dropped depends on the helper alone and not on
 * how fast the disk is. The files live in the working directory (the build
 * tree), not /tmp: tmpfs pages cannot be dropped. Where the file system
 * keeps pages that POSIX_FADV_DONTNEED asked it to drop, the tests that
 * need dropping are skipped, and say so.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/write_behind.h"

#define MIB (1u << 20)
#define WRITE_SIZE (1u * MIB)
/* Past the lag by eight steps: the first 32 MiB must go, the last 64 stay. */
#define TOTAL (TG_WRITE_BEHIND_LAG + 8 * TG_WRITE_BEHIND_STEP)

typedef struct fixture {
  char path[64];
  int fd;
  uint8_t *chunk;
} fixture_t;

static int setup(void **state) {
  fixture_t *fx = calloc(1, sizeof(*fx));
  if (!fx) return -1;
  snprintf(fx->path, sizeof(fx->path), "./test-write-behind-XXXXXX");
  fx->fd = mkstemp(fx->path);
  fx->chunk = malloc(WRITE_SIZE);
  if (fx->fd < 0 || !fx->chunk) return -1;
  memset(fx->chunk, 0x5a, WRITE_SIZE);
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fixture_t *fx = *state;
  close(fx->fd);
  unlink(fx->path);
  free(fx->chunk);
  free(fx);
  return 0;
}

/* Writes |n| bytes, clean on disk before |wb| (if any) hears of them. */
static void write_clean(fixture_t *fx, tg_write_behind_t *wb, size_t n) {
  for (size_t done = 0; done < n; done += WRITE_SIZE) {
    assert_int_equal(write(fx->fd, fx->chunk, WRITE_SIZE), WRITE_SIZE);
    assert_int_equal(fdatasync(fx->fd), 0);
    if (wb) tg_write_behind_wrote(wb, WRITE_SIZE);
  }
}

/* Pages of [from, to) in the page cache, in per cent. */
static unsigned resident_pct(int fd, size_t from, size_t to) {
  long page = sysconf(_SC_PAGESIZE);
  size_t len = to - from, pages = (len + (size_t)page - 1) / (size_t)page;
  void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)from);
  assert_true(m != MAP_FAILED);
  unsigned char *vec = malloc(pages);
  assert_non_null(vec);
  assert_int_equal(mincore(m, len, vec), 0);
  size_t in = 0;
  for (size_t i = 0; i < pages; i++) in += vec[i] & 1;
  free(vec);
  munmap(m, len);
  return (unsigned)(100 * in / pages);
}

/* Whether this file system drops clean pages when asked. Leaves the file
 * empty again. */
static bool drops_pages(fixture_t *fx) {
  write_clean(fx, NULL, 4 * MIB);
  assert_int_equal(posix_fadvise(fx->fd, 0, 4 * MIB, POSIX_FADV_DONTNEED), 0);
  bool drops = resident_pct(fx->fd, 0, 4 * MIB) < 10;
  assert_int_equal(ftruncate(fx->fd, 0), 0);
  assert_int_equal(lseek(fx->fd, 0, SEEK_SET), 0);
  return drops;
}

/* Everything more than the lag behind the end leaves the cache; the lag
 * itself stays (a reader of the file's tail, e.g. the CLI's own scan, and
 * a disk slower than the trace keep what they need). Without the helper,
 * the same writes stay cached: the comparison shows the helper did it. */
static void drops_what_lags_behind_and_keeps_the_rest(void **state) {
  fixture_t *fx = *state;
  if (!drops_pages(fx)) {
    print_message("this file system keeps pages it is asked to drop\n");
    skip();
  }
  write_clean(fx, NULL, TOTAL);
  unsigned without = resident_pct(fx->fd, 0, TOTAL - TG_WRITE_BEHIND_LAG);
  assert_int_equal(ftruncate(fx->fd, 0), 0);
  assert_int_equal(lseek(fx->fd, 0, SEEK_SET), 0);

  tg_write_behind_t wb;
  tg_write_behind_init(&wb, fx->fd);
  assert_true(tg_write_behind_active(&wb));
  write_clean(fx, &wb, TOTAL);
  assert_true(tg_write_behind_active(&wb));
  unsigned behind = resident_pct(fx->fd, 0, TOTAL - TG_WRITE_BEHIND_LAG);
  unsigned lag = resident_pct(fx->fd, TOTAL - TG_WRITE_BEHIND_LAG, TOTAL);
  print_message("resident: %u%% behind the lag (%u%% without the helper), "
                "%u%% within it\n", behind, without, lag);
  assert_true(without >= 90);
  assert_true(behind <= 10);
  assert_true(lag >= 90);
}

/* What was in the file before the helper took over is not its to drop:
 * with the fd at an offset, only pages from there on go. */
static void leaves_what_came_before_it(void **state) {
  fixture_t *fx = *state;
  if (!drops_pages(fx)) {
    print_message("this file system keeps pages it is asked to drop\n");
    skip();
  }
  write_clean(fx, NULL, 8 * MIB);
  assert_int_equal(pwrite(fx->fd, fx->chunk, 100, 8 * MIB), 100);
  assert_int_equal(lseek(fx->fd, 8 * MIB + 100, SEEK_SET), 8 * MIB + 100);
  tg_write_behind_t wb;
  tg_write_behind_init(&wb, fx->fd);
  write_clean(fx, &wb, TOTAL);
  assert_true(resident_pct(fx->fd, 0, 8 * MIB) >= 90);
  assert_true(resident_pct(fx->fd, 9 * MIB, 9 * MIB + 16 * MIB) <= 10);
}

/* A pipe has no pages to drop: the helper is off and stays harmless. */
static void is_off_for_a_pipe(void **state) {
  (void)state;
  int p[2];
  assert_int_equal(pipe(p), 0);
  tg_write_behind_t wb;
  tg_write_behind_init(&wb, p[1]);
  assert_false(tg_write_behind_active(&wb));
  tg_write_behind_wrote(&wb, TOTAL);
  assert_false(tg_write_behind_active(&wb));
  close(p[0]);
  close(p[1]);
  tg_write_behind_init(&wb, -1);
  assert_false(tg_write_behind_active(&wb));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(drops_what_lags_behind_and_keeps_the_rest,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(leaves_what_came_before_it, setup,
                                      teardown),
      cmocka_unit_test(is_off_for_a_pipe),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
