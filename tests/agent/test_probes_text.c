/* The probes' streamed text (agent/sys/text.h, proc_read.h): whole lines
 * out of pieces cut anywhere, lines past the cap skipped whole, callback
 * errors, and files read in chunks. Every scenario compares the lines seen
 * with those of the text parsed whole. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/sys/proc_read.h"
#include "agent/sys/text.h"
#include "agent/sys/tracefs_root.h"

/* What the callback saw, as "[line]" per line and "<n>" per line too long,
 * so one string comparison checks order, content and boundaries. */
typedef struct seen {
  char out[8192];
  size_t len;
  unsigned calls;
  unsigned fail_at; /* the call (from 1) that returns fail_rv; 0: none */
  int fail_rv;
} seen_t;

static void put(seen_t *s, const char *p, size_t n) {
  assert_true(s->len + n < sizeof(s->out));
  memcpy(s->out + s->len, p, n);
  s->len += n;
  s->out[s->len] = '\0';
}

static int on_line(void *ctx, int status, const char *line, size_t n) {
  seen_t *s = ctx;
  s->calls++;
  if (status < 0) {
    assert_int_equal(status, -ENOBUFS);
    assert_null(line);
    char num[32];
    put(s, num, (size_t)snprintf(num, sizeof(num), "<%zu>", n));
  } else {
    assert_int_equal(status, 0);
    assert_null(memchr(line, '\n', n));
    put(s, "[", 1);
    put(s, line, n);
    put(s, "]", 1);
  }
  return s->calls == s->fail_at ? s->fail_rv : 0;
}

/* |text| fed as [0, a), [a, b), [b, len), then finished. */
static const char *lines_of(seen_t *s, size_t cap, const char *text,
                            size_t len, size_t a, size_t b) {
  memset(s, 0, sizeof(*s));
  tg__lines_t l;
  tg__lines_init(&l, cap);
  assert_int_equal(tg__lines_feed(&l, text, a, on_line, s), 0);
  assert_int_equal(tg__lines_feed(&l, text + a, b - a, on_line, s), 0);
  assert_int_equal(tg__lines_feed(&l, text + b, len - b, on_line, s), 0);
  assert_int_equal(tg__lines_finish(&l, on_line, s), 0);
  return s->out;
}

/* [text, text + len) cut at every two places, and fed one byte at a time:
 * always the lines in [want, want + want_len). */
static void assert_lines(size_t cap, const char *text, size_t len,
                         const char *want, size_t want_len) {
  seen_t s;
  for (size_t a = 0; a <= len; a++)
    for (size_t b = a; b <= len; b++) {
      lines_of(&s, cap, text, len, a, b);
      assert_int_equal(s.len, want_len);
      assert_memory_equal(s.out, want, want_len);
    }
  memset(&s, 0, sizeof(s));
  tg__lines_t l;
  tg__lines_init(&l, cap);
  for (size_t i = 0; i < len; i++)
    assert_int_equal(tg__lines_feed(&l, text + i, 1, on_line, &s), 0);
  assert_int_equal(tg__lines_finish(&l, on_line, &s), 0);
  assert_int_equal(s.len, want_len);
  assert_memory_equal(s.out, want, want_len);
}

static void lines_split_at_every_byte_boundary(void **state) {
  (void)state;
  /* An empty line, one exactly at the cap (8), one a byte past it, and a
   * last line without a newline. */
  static const char text[] = "ab\n\nabcdefgh\nabcdefghi\nx\nlast";
  static const char want[] = "[ab][][abcdefgh]<9>[x][last]";
  assert_lines(8, text, sizeof(text) - 1, want, sizeof(want) - 1);
}

static void lines_too_long_are_skipped_whole(void **state) {
  (void)state;
  char text[256];
  size_t o = 0;
  o += (size_t)sprintf(text + o, "short\n");
  memset(text + o, 'x', 100); /* in the middle: the next line is whole */
  o += 100;
  o += (size_t)sprintf(text + o, "\nafter\n");
  memset(text + o, 'y', 50); /* at the end, without a newline */
  o += 50;
  static const char want[] = "[short]<100>[after]<50>";
  assert_lines(16, text, o, want, sizeof(want) - 1);
  /* The same ending with a newline: reported by the feed, not finish. */
  text[o++] = '\n';
  seen_t s;
  memset(&s, 0, sizeof(s));
  tg__lines_t l;
  tg__lines_init(&l, 16);
  assert_int_equal(tg__lines_feed(&l, text, o, on_line, &s), 0);
  assert_string_equal(s.out, want);
  assert_int_equal(tg__lines_finish(&l, on_line, &s), 0);
  assert_int_equal(s.calls, 4);

  /* A cap above TG__LINE_MAX is held to it. */
  static char big[TG__LINE_MAX + 2];
  memset(big, 'z', sizeof(big));
  big[TG__LINE_MAX + 1] = '\n';
  tg__lines_init(&l, SIZE_MAX);
  memset(&s, 0, sizeof(s));
  assert_int_equal(tg__lines_feed(&l, big, 10, on_line, &s), 0);
  assert_int_equal(tg__lines_feed(&l, big + 10, sizeof(big) - 10, on_line, &s),
                   0);
  char num[32];
  snprintf(num, sizeof(num), "<%d>", TG__LINE_MAX + 1);
  assert_string_equal(s.out, num);
}

static void lines_treat_cr_and_nul_as_line_bytes(void **state) {
  (void)state;
  static const char text[] = "a\r\nb\rc\r\n\r\nn\0l\n";
  static const char want[] = "[a\r][b\rc\r][\r][n\0l]";
  assert_lines(8, text, sizeof(text) - 1, want, sizeof(want) - 1);
}

static void lines_of_empty_text_are_none(void **state) {
  (void)state;
  seen_t s;
  memset(&s, 0, sizeof(s));
  tg__lines_t l;
  tg__lines_init(&l, 8);
  assert_int_equal(tg__lines_feed(&l, "", 0, on_line, &s), 0);
  assert_int_equal(tg__lines_finish(&l, on_line, &s), 0);
  assert_int_equal(s.calls, 0);
  /* An empty piece neither ends nor extends a pending line. */
  assert_int_equal(tg__lines_feed(&l, "ab", 2, on_line, &s), 0);
  assert_int_equal(tg__lines_feed(&l, "", 0, on_line, &s), 0);
  assert_int_equal(s.calls, 0);
  assert_int_equal(tg__lines_feed(&l, "c\n", 2, on_line, &s), 0);
  assert_string_equal(s.out, "[abc]");
  /* Finished twice: nothing is left the second time. */
  assert_int_equal(tg__lines_feed(&l, "d", 1, on_line, &s), 0);
  assert_int_equal(tg__lines_finish(&l, on_line, &s), 0);
  assert_int_equal(tg__lines_finish(&l, on_line, &s), 0);
  assert_string_equal(s.out, "[abc][d]");
  /* A lone newline is one empty line. */
  assert_string_equal(lines_of(&s, 8, "\n", 1, 0, 1), "[]");
}

static void lines_stop_at_a_callback_error(void **state) {
  (void)state;
  static const char text[] = "one\ntwo\nthree\nfour";
  size_t len = sizeof(text) - 1;
  for (size_t a = 0; a <= len; a++) {
    seen_t s;
    memset(&s, 0, sizeof(s));
    s.fail_at = 2;
    s.fail_rv = -ENOMEM;
    tg__lines_t l;
    tg__lines_init(&l, 8);
    /* Fed in two pieces: the error comes from whichever completes "two",
     * and nothing after it in that piece is read. */
    int r1 = tg__lines_feed(&l, text, a, on_line, &s);
    int r2 = r1 < 0 ? 0 : tg__lines_feed(&l, text + a, len - a, on_line, &s);
    assert_int_equal(r1 < 0 ? r1 : r2, -ENOMEM);
    assert_string_equal(s.out, "[one][two]");
    /* "two" was consumed: feeding on starts a new line. */
    assert_int_equal(tg__lines_feed(&l, "next\n", 5, on_line, &s), 0);
    assert_string_equal(s.out, "[one][two][next]");
  }

  /* An error from the last line comes back from finish. */
  seen_t s;
  memset(&s, 0, sizeof(s));
  s.fail_at = 1;
  s.fail_rv = -EINVAL;
  tg__lines_t l;
  tg__lines_init(&l, 8);
  assert_int_equal(tg__lines_feed(&l, "tail", 4, on_line, &s), 0);
  assert_int_equal(tg__lines_finish(&l, on_line, &s), -EINVAL);
  assert_int_equal(tg__lines_finish(&l, on_line, &s), 0);
  assert_int_equal(s.calls, 1);

  /* And from a line too long. */
  memset(&s, 0, sizeof(s));
  s.fail_at = 1;
  s.fail_rv = -E2BIG;
  tg__lines_init(&l, 2);
  assert_int_equal(tg__lines_feed(&l, "long\nok\n", 8, on_line, &s), -E2BIG);
  assert_string_equal(s.out, "<4>");
}

/* --- files read in chunks ------------------------------------------------ */

typedef struct chunks {
  char out[256];
  size_t len;
  unsigned calls;
  size_t max; /* the longest chunk */
} chunks_t;

static int on_chunk(void *ctx, const char *p, size_t n) {
  chunks_t *c = ctx;
  assert_true(c->len + n <= sizeof(c->out));
  memcpy(c->out + c->len, p, n);
  c->len += n;
  if (n > c->max) c->max = n;
  return ++c->calls == 3 ? -ECANCELED : 0;
}

static void read_chunks_hands_over_the_file_and_stops_at_errors(void **state) {
  (void)state;
  char path[] = "/tmp/tg_test_text_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  static const char body[] = "0123456789abcdefghij";
  assert_int_equal(write(fd, body, sizeof(body) - 1), sizeof(body) - 1);
  close(fd);

  chunks_t c = {0};
  assert_int_equal(tg_proc_read_chunks(path, 64, on_chunk, &c), 0);
  assert_int_equal(c.len, sizeof(body) - 1);
  assert_memory_equal(c.out, body, c.len);

  /* 7 bytes at a time: the third chunk's error ends the reading. */
  memset(&c, 0, sizeof(c));
  assert_int_equal(tg_proc_read_chunks(path, 7, on_chunk, &c), -ECANCELED);
  assert_int_equal(c.calls, 3);
  assert_int_equal(c.max, 7);
  assert_memory_equal(c.out, body, c.len);

  unlink(path);
  memset(&c, 0, sizeof(c));
  assert_int_equal(tg_proc_read_chunks(path, 7, on_chunk, &c), -ENOENT);
  assert_int_equal(c.calls, 0);
}

/* --- the head of a file ---------------------------------------------------- */

static void read_head_keeps_the_beginning_terminated(void **state) {
  (void)state;
  char path[] = "/tmp/tg_test_head_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  static const char body[] = "0123456789abcdefghij";
  assert_int_equal(write(fd, body, sizeof(body) - 1), sizeof(body) - 1);
  close(fd);

  char buf[64];
  /* All of it when it fits, terminated. */
  memset(buf, 'x', sizeof(buf));
  assert_int_equal(tg_proc_read_head(path, buf, sizeof(buf)), 20);
  assert_string_equal(buf, body);
  /* Its first cap - 1 bytes when it does not; the rest is not read. */
  memset(buf, 'x', sizeof(buf));
  assert_int_equal(tg_proc_read_head(path, buf, 8), 7);
  assert_string_equal(buf, "0123456");
  assert_int_equal(tg_proc_read_head(path, buf, 1), 0);
  assert_string_equal(buf, "");
  unlink(path);
  assert_int_equal(tg_proc_read_head(path, buf, sizeof(buf)), -ENOENT);

  /* A /proc file (size 0 to stat): this program's argv[0], to its NUL.
   * The buffer holds any path: CI's tree sits deep under /tmp, where a
   * 64-byte one cut argv[0] before the program's name. */
  char cmd[PATH_MAX + 1];
  long n = tg_proc_read_head("/proc/self/cmdline", cmd, sizeof(cmd));
  assert_true(n > 0);
  assert_non_null(strstr(cmd, "test_probes_text"));
  assert_true((size_t)n > strlen(cmd)); /* argv[0] whole, its NUL read */
}

/* --- tracefs's mount point --------------------------------------------------- */

static void tracefs_root_is_a_directory_with_events(void **state) {
  (void)state;
  char dir[] = "/tmp/tg_test_tracefs_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char events[64];
  snprintf(events, sizeof(events), "%s/events", dir);
  assert_false(tg_tracefs_is_root(dir));
  /* A file named events is not the directory. */
  FILE *f = fopen(events, "w");
  assert_non_null(f);
  fclose(f);
  assert_false(tg_tracefs_is_root(dir));
  assert_int_equal(unlink(events), 0);
  assert_int_equal(mkdir(events, 0700), 0);
  assert_true(tg_tracefs_is_root(dir));
  assert_int_equal(rmdir(events), 0);
  assert_int_equal(rmdir(dir), 0);

  /* This machine: a root that is named whole, or none, never a cut one. */
  char root[64];
  int rv = tg_tracefs_mounted(root, sizeof(root));
  assert_true(rv == 0 || rv == -ENOENT || rv == -EACCES);
  if (rv == 0) {
    assert_true(tg_tracefs_is_root(root));
    char tiny[4];
    assert_int_equal(tg_tracefs_mounted(tiny, sizeof(tiny)), -ENAMETOOLONG);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lines_split_at_every_byte_boundary),
      cmocka_unit_test(lines_too_long_are_skipped_whole),
      cmocka_unit_test(lines_treat_cr_and_nul_as_line_bytes),
      cmocka_unit_test(lines_of_empty_text_are_none),
      cmocka_unit_test(lines_stop_at_a_callback_error),
      cmocka_unit_test(read_chunks_hands_over_the_file_and_stops_at_errors),
      cmocka_unit_test(read_head_keeps_the_beginning_terminated),
      cmocka_unit_test(tracefs_root_is_a_directory_with_events),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
