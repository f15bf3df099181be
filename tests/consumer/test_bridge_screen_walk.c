/* What `tracegate bridge`'s screen checks of a client's bytes
 * (cli/bridge_screen_walk.c): the end of the HTTP request head
 * and the MASK bit of every frame header, over streams cut everywhere
 * and fed one byte at a time. Pure: no bridge runs here (the bridge end
 * to end is test_cli_bridge.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/bridge_screen_walk.h"
#include "ws_frame.h"

/* Masked frames of every length encoding: 0, 5 and 125 bytes (7-bit),
 * 126 and 65535 (16-bit), 65536 (64-bit); a ping among them. Returns the
 * stream's size; *frames their count. */
static size_t masked_stream(uint8_t *out, uint64_t *frames) {
  static const size_t lens[] = {0, 5, 125, 126, 65535, 65536};
  static uint8_t payload[65536];
  size_t n = 0;
  for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
    n += ws_frame(out + n, i == 1 ? 9 : 2, true, false, lens[i], payload,
                  lens[i]);
  *frames = sizeof(lens) / sizeof(lens[0]);
  return n;
}

#define STREAM_MAX (3 * 65536 + 1024)

static void screen_walk_passes_masked_frames_cut_anywhere(void **state) {
  (void)state;
  uint8_t *s = malloc(STREAM_MAX);
  assert_non_null(s);
  uint64_t frames;
  size_t n = masked_stream(s, &frames);
  bridge_walk_t w;
  for (size_t k = 0; k <= n; k++) {
    bridge_walk_init(&w);
    assert_int_equal(bridge_walk_feed(&w, s, k), 0);
    assert_int_equal(bridge_walk_feed(&w, s + k, n - k), 0);
    assert_int_equal(w.frames, frames);
    assert_int_equal(w.pos, n);
    assert_int_equal(w.state, BRIDGE_WALK_HEADER); /* at the next header */
  }
  bridge_walk_init(&w);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(bridge_walk_feed(&w, s + i, 1), 0);
  assert_int_equal(w.frames, frames);
  free(s);
}

static void screen_walk_stops_at_the_first_unmasked_header(void **state) {
  (void)state;
  uint8_t *s = malloc(STREAM_MAX);
  assert_non_null(s);
  uint64_t frames;
  size_t n = masked_stream(s, &frames);
  /* A 16-bit length: the verdict comes at its second byte, before the
   * length it announces. Masked frames follow. */
  static uint8_t p[300];
  size_t bad_at = n + 1;
  n += ws_frame(s + n, 2, true, true, sizeof(p), p, sizeof(p));
  n += ws_frame(s + n, 2, true, false, 5, p, 5);
  bridge_walk_t w;
  for (size_t k = 0; k <= n; k++) {
    bridge_walk_init(&w);
    assert_int_equal(bridge_walk_feed(&w, s, k), k <= bad_at ? 0 : -EPROTO);
    assert_int_equal(bridge_walk_feed(&w, s + k, n - k), -EPROTO);
    assert_int_equal(w.state, BRIDGE_WALK_UNMASKED);
    assert_int_equal(w.pos, bad_at);
    assert_int_equal(w.frames, frames);
    assert_int_equal(w.hdr[0], 0x82);
    assert_int_equal(bridge_walk_feed(&w, s, 1), -EPROTO); /* sticky */
  }
  /* First thing after the upgrade: an unmasked ping, byte by byte. */
  size_t m = ws_frame(s, 9, true, true, 4, p, 4);
  bridge_walk_init(&w);
  assert_int_equal(bridge_walk_feed(&w, s, 1), 0);
  assert_int_equal(bridge_walk_feed(&w, s + 1, m - 1), -EPROTO);
  assert_int_equal(w.pos, 1);
  assert_int_equal(w.frames, 0);
  assert_int_equal(w.hdr[0] & 0x0f, 9);
  free(s);
}

static void screen_walk_skips_64bit_lengths(void **state) {
  (void)state;
  /* Announced, not sent: the walker counts them down, whatever they are
   * (2^63 + 5 breaks the RFC's top bit; that is lws's to refuse). */
  static const uint64_t lens[] = {(uint64_t)1 << 40, ((uint64_t)1 << 63) + 5,
                                  UINT64_MAX};
  uint8_t s[1024];
  memset(s, 0x55, sizeof(s)); /* unmasked headers, if they were read */
  for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
    size_t h = ws_frame(s, 2, true, false, lens[i], NULL, 0);
    assert_int_equal(h, 14);
    for (size_t k = 0; k <= h; k++) {
      bridge_walk_t w;
      bridge_walk_init(&w);
      assert_int_equal(bridge_walk_feed(&w, s, k), 0);
      assert_int_equal(bridge_walk_feed(&w, s + k, sizeof(s) - k), 0);
      assert_int_equal(w.state, BRIDGE_WALK_PAYLOAD);
      assert_int_equal(w.frames, 1);
      assert_true(w.left == lens[i] - (sizeof(s) - h));
    }
  }
}

static void screen_head_ends_at_its_empty_line(void **state) {
  (void)state;
  static const char *const heads[] = {
      "GET /traced HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: x\r\n\r\n",
      "GET /traced HTTP/1.1\nHost: 127.0.0.1\n\n",          /* bare LF */
      "GET /traced HTTP/1.1\r\nHost: 127.0.0.1\n\r\n",      /* mixed */
      "\r\n\nGET /traced HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", /* skipped */
  };
  for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
    char s[256];
    size_t hl = strlen(heads[i]);
    int n = snprintf(s, sizeof(s), "%s\x82\x80\n\n\r\n", heads[i]);
    for (size_t k = 0; k <= (size_t)n; k++) {
      bridge_head_t h;
      bridge_head_init(&h);
      size_t u1, u2;
      assert_int_equal(bridge_head_feed(&h, (uint8_t *)s, k, 4096, &u1), 0);
      assert_int_equal(
          bridge_head_feed(&h, (uint8_t *)s + u1, (size_t)n - u1, 4096, &u2),
          0);
      assert_int_equal(h.state, BRIDGE_HEAD_ENDED);
      assert_int_equal(u1 + u2, hl);
      assert_int_equal(u1, k < hl ? k : hl);
    }
  }
  /* The bound: a head may fill it, not go past it. */
  const char *req = "GET / HTTP/1.1\r\n\r\n";
  size_t used;
  bridge_head_t h;
  bridge_head_init(&h);
  assert_int_equal(bridge_head_feed(&h, (const uint8_t *)req, strlen(req),
                                    strlen(req), &used),
                   0);
  assert_int_equal(h.state, BRIDGE_HEAD_ENDED);
  bridge_head_init(&h);
  assert_int_equal(bridge_head_feed(&h, (const uint8_t *)req, strlen(req),
                                    strlen(req) - 1, &used),
                   -EMSGSIZE);
  assert_int_equal(h.state, BRIDGE_HEAD_OVER);
  assert_int_equal(bridge_head_feed(&h, (const uint8_t *)"\n", 1, 100, &used),
                   -EMSGSIZE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(screen_walk_passes_masked_frames_cut_anywhere),
      cmocka_unit_test(screen_walk_stops_at_the_first_unmasked_header),
      cmocka_unit_test(screen_walk_skips_64bit_lengths),
      cmocka_unit_test(screen_head_ends_at_its_empty_line),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
