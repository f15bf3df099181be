/* Direct writes of trace files (common/direct_write.c): every byte in the
 * file in order whatever the appends' sizes, the page-cache fallback when
 * the file system refuses, write errors reported and never a hang, the
 * process's writer budget, and the fd given back as it was. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/direct_write_test.h"

static char dir[] = "/tmp/tg-direct-XXXXXX";

static int open_new(const char *name) {
  char path[128];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  return fd;
}

/* Deterministic bytes, so that the file can be checked anywhere. */
static uint8_t byte_at(uint64_t i) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull;
  return (uint8_t)(x >> 56);
}

/* Appends |total| bytes in pieces of sizes from 1 byte to 9 MiB, from
 * sources at any alignment, with runs the size of the CLI's (a 3-byte
 * packet header, then ~1 KiB of packet) and around a 64-byte line. */
static int append_pattern(tg_direct_writer_t *w, uint64_t total) {
  static const size_t sizes[] = {1,  7,  4096, 4095, 100000, 9u << 20, 33,
                                 (4u << 20) - 5, 65536, 3, 1021, 3, 1021,
                                 63, 64, 65, 128, 2,  61};
  uint8_t *piece = malloc((9u << 20) + 8);
  assert_non_null(piece);
  uint64_t off = 0;
  int rv = 0;
  for (size_t k = 0; off < total && rv == 0; k++) {
    size_t n = sizes[k % (sizeof(sizes) / sizeof(sizes[0]))];
    if (n > total - off) n = (size_t)(total - off);
    uint8_t *src = piece + k % 7;
    for (size_t i = 0; i < n; i++) src[i] = byte_at(off + i);
    rv = tg_direct_writer_append(w, src, n);
    off += n;
  }
  free(piece);
  return rv;
}

static void assert_file_is_pattern(int fd, uint64_t total) {
  struct stat st;
  assert_int_equal(fstat(fd, &st), 0);
  assert_int_equal((uint64_t)st.st_size, total);
  assert_int_equal((uint64_t)lseek(fd, 0, SEEK_CUR), total);
  uint8_t buf[65536];
  uint64_t off = 0;
  while (off < total) {
    ssize_t r = pread(fd, buf, sizeof(buf), (off_t)off);
    assert_true(r > 0);
    for (ssize_t i = 0; i < r; i++)
      if (buf[i] != byte_at(off + (uint64_t)i))
        fail_msg("byte %llu differs", (unsigned long long)(off + (uint64_t)i));
    off += (uint64_t)r;
  }
}

/* Starts a writer, or skips the test on a file system without O_DIRECT
 * (the writer then refuses with -EINVAL, which is its contract). */
static tg_direct_writer_t *start_or_skip(int fd) {
  tg_direct_writer_t *w = NULL;
  int rv = tg_direct_writer_start(fd, &w);
  if (rv == -EINVAL) {
    fprintf(stderr, "skipped: %s refuses O_DIRECT\n", dir);
    close(fd);
    skip();
  }
  assert_int_equal(rv, 0);
  return w;
}

static void every_byte_in_order(void **state) {
  (void)state;
  int fd = open_new("order");
  int flags = fcntl(fd, F_GETFL);
  tg_direct_writer_t *w = start_or_skip(fd);
  assert_true(fcntl(fd, F_GETFL) & O_DIRECT);
  /* Several full blocks and a tail that is not a multiple of 4096. */
  uint64_t total = 5 * (uint64_t)TG_DIRECT_WRITE_BLOCK + 12345;
  assert_int_equal(append_pattern(w, total), 0);
  assert_int_equal(tg_direct_writer_finish(w), 0);
  const tg_direct_write_stats_t *st = tg_direct_writer_stats(w);
  assert_int_equal(st->blocks_direct, 5);
  assert_int_equal(st->blocks_buffered, 1); /* the tail */
  /* Finished twice: the same answer, nothing written again. */
  assert_int_equal(tg_direct_writer_finish(w), 0);
  assert_int_equal(tg_direct_writer_append(w, "x", 1), -EINVAL);
  tg_direct_writer_free(w);
  assert_int_equal(fcntl(fd, F_GETFL), flags);
  assert_file_is_pattern(fd, total);
  close(fd);
}

/* The kernel's THP mode, the bracketed word of its setting: "always",
 * "madvise" or "never"; "" when it cannot tell. */
static void thp_mode(char *out, size_t cap) {
  out[0] = 0;
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (!f) return;
  char line[128];
  if (fgets(line, sizeof(line), f)) {
    char *a = strchr(line, '['), *b = a ? strchr(a, ']') : NULL;
    if (a && b && (size_t)(b - a - 1) < cap) {
      memcpy(out, a + 1, (size_t)(b - a - 1));
      out[b - a - 1] = 0;
    }
  }
  fclose(f);
}

/* THPeligible of the mapping that holds |p| (/proc/self/smaps), -1 when
 * not found. */
static int thp_eligible(const void *p) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[512];
  bool in = false;
  int v = -1;
  while (fgets(line, sizeof(line), f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) /* a mapping's first line */
      in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
    else if (in && sscanf(line, "THPeligible: %d", &v) == 1)
      break;
  }
  fclose(f);
  return v;
}

/* Each block starts on a 2 MiB boundary, eligible for huge pages where
 * the kernel has them: with 4 KiB pages every direct write pins a
 * thousand pages one by one. */
static void blocks_ask_for_huge_pages(void **state) {
  (void)state;
  int fd = open_new("huge");
  tg_direct_writer_t *w = start_or_skip(fd);
  char mode[16];
  thp_mode(mode, sizeof(mode));
  for (unsigned i = 0; i < TG_DIRECT_WRITE_BUFS; i++) {
    const void *b = tg_direct_writer_block_for_test(w, i);
    assert_non_null(b);
    assert_int_equal((uintptr_t)b % (2u << 20), 0);
    if (!strcmp(mode, "always") || !strcmp(mode, "madvise"))
      assert_int_equal(thp_eligible(b), 1);
  }
  assert_null(tg_direct_writer_block_for_test(w, TG_DIRECT_WRITE_BUFS));
  uint64_t total = (uint64_t)TG_DIRECT_WRITE_BLOCK + 4096;
  assert_int_equal(append_pattern(w, total), 0);
  assert_int_equal(tg_direct_writer_finish(w), 0);
  tg_direct_writer_free(w);
  assert_file_is_pattern(fd, total);
  close(fd);
}

static void exact_blocks_and_empty(void **state) {
  (void)state;
  int fd = open_new("exact");
  tg_direct_writer_t *w = start_or_skip(fd);
  uint64_t total = 2 * (uint64_t)TG_DIRECT_WRITE_BLOCK;
  assert_int_equal(append_pattern(w, total), 0);
  assert_int_equal(tg_direct_writer_finish(w), 0);
  assert_int_equal(tg_direct_writer_stats(w)->blocks_direct, 2);
  assert_int_equal(tg_direct_writer_stats(w)->blocks_buffered, 0);
  tg_direct_writer_free(w);
  assert_file_is_pattern(fd, total);
  close(fd);

  fd = open_new("empty");
  w = start_or_skip(fd);
  tg_direct_writer_free(w); /* free without finish finishes */
  assert_file_is_pattern(fd, 0);
  close(fd);
}

static void refusal_falls_back_to_page_cache(void **state) {
  (void)state;
  int fd = open_new("refused");
  tg_direct_writer_t *w = start_or_skip(fd);
  uint64_t total = 3 * (uint64_t)TG_DIRECT_WRITE_BLOCK + 999;
  /* The first block goes direct, then the file system "refuses". */
  assert_int_equal(append_pattern(w, TG_DIRECT_WRITE_BLOCK), 0);
  tg_direct_writer_refuse_next_for_test(w);
  uint8_t *rest = malloc(total);
  assert_non_null(rest);
  for (uint64_t i = TG_DIRECT_WRITE_BLOCK; i < total; i++) rest[i] = byte_at(i);
  assert_int_equal(tg_direct_writer_append(w, rest + TG_DIRECT_WRITE_BLOCK,
                                           total - TG_DIRECT_WRITE_BLOCK),
                   0);
  free(rest);
  assert_int_equal(tg_direct_writer_finish(w), 0);
  const tg_direct_write_stats_t *st = tg_direct_writer_stats(w);
  /* The refusal may hit the first block or the second, depending on when
   * the thread took it; from the refusal on, all through the cache. */
  assert_true(st->blocks_direct <= 1);
  assert_int_equal(st->blocks_direct + st->blocks_buffered, 4);
  tg_direct_writer_free(w);
  assert_false(fcntl(fd, F_GETFL) & O_DIRECT);
  assert_file_is_pattern(fd, total);
  close(fd);
}

static void refused_starts(void **state) {
  (void)state;
  tg_direct_writer_t *w = (tg_direct_writer_t *)1;
  int p[2];
  assert_int_equal(pipe(p), 0);
  assert_int_equal(tg_direct_writer_start(p[1], &w), -EINVAL);
  assert_null(w);
  close(p[0]);
  close(p[1]);
  assert_int_equal(tg_direct_writer_start(-1, &w), -EINVAL);

  /* An offset that is not aligned: refused, the flags untouched. */
  int fd = open_new("unaligned");
  assert_int_equal(write(fd, "abc", 3), 3);
  int flags = fcntl(fd, F_GETFL);
  assert_int_equal(tg_direct_writer_start(fd, &w), -EINVAL);
  assert_int_equal(fcntl(fd, F_GETFL), flags);
  close(fd);
}

static void budget_per_process(void **state) {
  (void)state;
  int fds[TG_DIRECT_WRITE_MAX + 1];
  tg_direct_writer_t *ws[TG_DIRECT_WRITE_MAX];
  for (int i = 0; i <= TG_DIRECT_WRITE_MAX; i++) {
    char name[32];
    snprintf(name, sizeof(name), "budget-%d", i);
    fds[i] = open_new(name);
  }
  for (int i = 0; i < TG_DIRECT_WRITE_MAX; i++) ws[i] = start_or_skip(fds[i]);
  tg_direct_writer_t *extra = NULL;
  assert_int_equal(tg_direct_writer_start(fds[TG_DIRECT_WRITE_MAX], &extra),
                   -EBUSY);
  assert_false(fcntl(fds[TG_DIRECT_WRITE_MAX], F_GETFL) & O_DIRECT);
  tg_direct_writer_free(ws[0]);
  assert_int_equal(tg_direct_writer_start(fds[TG_DIRECT_WRITE_MAX], &extra), 0);
  tg_direct_writer_free(extra);
  for (int i = 1; i < TG_DIRECT_WRITE_MAX; i++) tg_direct_writer_free(ws[i]);
  for (int i = 0; i <= TG_DIRECT_WRITE_MAX; i++) close(fds[i]);
}

/* A write that fails (here: over RLIMIT_FSIZE, EFBIG) is reported by the
 * appends after it and by finish, and the caller never waits for ever on
 * the blocks the thread drops. */
static void write_error_reported(void **state) {
  (void)state;
  int fd = open_new("efbig");
  tg_direct_writer_t *w = start_or_skip(fd);
  struct rlimit old, lim;
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
  lim = old;
  lim.rlim_cur = 2 * (rlim_t)TG_DIRECT_WRITE_BLOCK;
  signal(SIGXFSZ, SIG_IGN);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
  int rv = append_pattern(w, 12 * (uint64_t)TG_DIRECT_WRITE_BLOCK);
  int fin = tg_direct_writer_finish(w);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, SIG_DFL);
  /* The appends may outrun the thread: the error shows in them or, at
   * the latest, in finish. */
  assert_true(rv == 0 || rv == -EFBIG);
  assert_int_equal(fin, -EFBIG);
  assert_int_equal(tg_direct_writer_append(w, "x", 1), -EINVAL);
  tg_direct_writer_free(w);
  struct stat st;
  assert_int_equal(fstat(fd, &st), 0);
  assert_true((uint64_t)st.st_size <= 2 * (uint64_t)TG_DIRECT_WRITE_BLOCK);
  close(fd);
}

static int setup(void **state) {
  (void)state;
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[64];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_byte_in_order),
      cmocka_unit_test(exact_blocks_and_empty),
      cmocka_unit_test(blocks_ask_for_huge_pages),
      cmocka_unit_test(refusal_falls_back_to_page_cache),
      cmocka_unit_test(refused_starts),
      cmocka_unit_test(budget_per_process),
      cmocka_unit_test(write_error_reported),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
