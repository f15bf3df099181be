/* SPDX-License-Identifier: Apache-2.0 */
/* common/libcrypto_init: libcrypto started once, without its exit handler.
 *
 * The check that matters runs after main returns: libcrypto used on one
 * of libuv's pool threads, which outlive every exit handler. With
 * libcrypto's handler registered, the sanitizer trees' leak check (the
 * runtime linked into the program) finds that thread's libcrypto state
 * unreachable and fails the test; started through tg_libcrypto_init, the
 * state stays reachable until the process is gone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <uv.h>

#include "common/libcrypto_init.h"

static int work_status = -1;

/* What a handshake leaves on a pool thread: its random generator and its
 * error state. */
static void pool_work(uv_work_t *w) {
  (void)w;
  unsigned char b[16];
  work_status = RAND_priv_bytes(b, sizeof(b)) == 1 ? 0 : -1;
  (void)ERR_set_mark();
  (void)ERR_pop_to_mark();
}

static void pool_done(uv_work_t *w, int status) {
  (void)w;
  assert_int_equal(status, 0);
}

static void starts_once_and_says_so(void **state) {
  (void)state;
  assert_int_equal(tg_libcrypto_init(), 0);
  assert_int_equal(tg_libcrypto_init(), 0);
}

static void pool_thread_uses_libcrypto(void **state) {
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  uv_work_t w;
  assert_int_equal(uv_queue_work(&loop, &w, pool_work, pool_done), 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(work_status, 0);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  /* First, as a program's main does: before anything else starts
   * libcrypto. */
  if (tg_libcrypto_init() != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(starts_once_and_says_so),
      cmocka_unit_test(pool_thread_uses_libcrypto),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
