/* Reading notices (common/notice.h) out of a program's stderr or log in
 * tests: a test recognises a line by its code and by the data it carries
 * (a path, a host, a key), never by its English words, which may change.
 */
#ifndef TRACEGATE_TESTS_TEST_NOTICE_H
#define TRACEGATE_TESTS_TEST_NOTICE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/notice.h"

/* The first line of |text| that carries |n|'s tag and, when |data| is not
 * NULL, also holds |data|: copied without its newline into |line| (|cap|
 * bytes, may be NULL). Returns true if there is one. */
bool tg_test_notice_line(const char *text, tg_notice_t n, const char *data,
                         char *line, size_t cap);
/* How many lines of |text| carry |n|'s tag (and |data|, unless NULL). */
size_t tg_test_notice_count(const char *text, tg_notice_t n, const char *data);
/* The last space-separated word of the first line carrying |n| (a path
 * that ends it), into |out|. Returns true if there is such a line. */
bool tg_test_notice_last_word(const char *text, tg_notice_t n, char *out,
                              size_t cap);
/* True once the file |path| (a log) carries |n|'s tag on a line that also
 * holds |data| (NULL: any), waiting up to |timeout_ms| on inotify events. */
bool tg_test_wait_notice(const char *path, tg_notice_t n, const char *data,
                         int timeout_ms);

/* True once has(text of |path|, |arg|) holds, reading the file again on
 * each inotify event, up to |timeout_ms|: for a wait on a line that a
 * notice code alone does not pick out (the relay's audit fields). */
bool tg_test_wait_file_until(const char *path,
                             bool (*has)(const char *text, void *arg),
                             void *arg, int timeout_ms);

/* In a cmocka test: |text| has a line with |n| (and |data|, or NULL);
 * prints |text| when not. */
#define assert_notice_with(text, n, data)                                   \
  do {                                                                      \
    const char *data_ = (data);                                             \
    if (!tg_test_notice_line((text), (n), data_, NULL, 0))                  \
      fail_msg("no %s%s%s line in:\n%s", tg_notice_tag(n),                  \
               data_ ? " ... " : "", data_ ? data_ : "", (text));           \
  } while (0)
#define assert_notice(text, n) assert_notice_with(text, n, NULL)
#define assert_no_notice(text, n)                                           \
  do {                                                                      \
    if (tg_test_notice_count((text), (n), NULL))                            \
      fail_msg("an unexpected %s line in:\n%s", tg_notice_tag(n), (text));  \
  } while (0)

#endif /* TRACEGATE_TESTS_TEST_NOTICE_H */
