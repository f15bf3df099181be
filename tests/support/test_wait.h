/* Waiting for events in tests, with deadlines: a line on a pipe, a file
 * that appears or gains some text, a uv loop reaching a state. Each wait
 * blocks on the thing itself (poll, inotify, the loop), never on a sleep,
 * so a test is as fast as the event and bounded when it never comes.
 */
#ifndef TRACEGATE_TESTS_TEST_WAIT_H
#define TRACEGATE_TESTS_TEST_WAIT_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

/* Reads |fd| until a line (or, at EOF, a last unterminated piece) holds
 * |needle|; copies that line, without its newline, into |line| (|cap|
 * bytes, may be NULL). Bytes after the line are consumed too (use it on
 * pipes that only carry such lines). Returns 1 found, 0 timeout or EOF
 * without it, -errno on a read error. */
int tg_test_wait_line(int fd, const char *needle, int timeout_ms, char *line,
                      size_t cap);

/* True once |path| exists, waiting up to |timeout_ms| on inotify events of
 * its directory. */
bool tg_test_wait_path(const char *path, int timeout_ms);

/* True once the file |path| contains |needle|, waiting up to |timeout_ms|
 * on inotify events of the file (or of its directory until it exists). */
bool tg_test_wait_file_text(const char *path, const char *needle,
                            int timeout_ms);

/* Runs |loop| one iteration at a time until cond(arg) holds or
 * |timeout_ms| pass (a timer bounds each iteration, so a loop with nothing
 * else to do still wakes for the deadline). Returns cond(arg). */
bool tg_test_run_loop_until(uv_loop_t *loop, bool (*cond)(void *), void *arg,
                            int timeout_ms);

#endif /* TRACEGATE_TESTS_TEST_WAIT_H */
