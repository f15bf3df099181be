/* compressed_packets inflated on the consumer side
 * (consumer/packet_inflate.c): what the service's DEFLATE read-out wrote
 * (service/packet_deflate.c) comes back packet for packet; corrupt,
 * truncated, trailing and oversized streams are refused, bounded. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include "consumer/packet_inflate.h"
#include "service/packet_deflate.h"
#include "tracegate/error.h"

typedef struct wrappers {
  uint8_t *z[16];
  size_t n[16];
  size_t count;
} wrappers_t;

/* Keeps the compressed bytes of each wrapper the compressor emits. */
static int keep(void *ctx, const uint8_t *const *pieces, const size_t *lens,
                unsigned n, unsigned n_stable, size_t total) {
  (void)total;
  (void)n_stable;
  wrappers_t *w = ctx;
  assert_int_equal(n, 2); /* [tag + length][compressed bytes] */
  assert_true(w->count < 16);
  w->z[w->count] = malloc(lens[1]);
  memcpy(w->z[w->count], pieces[1], lens[1]);
  w->n[w->count++] = lens[1];
  return 0;
}

typedef struct seen {
  size_t packets;
  int mismatch;
} seen_t;

static int check(void *ctx, const uint8_t *pkt, size_t len) {
  seen_t *s = ctx;
  char want[64];
  int k = snprintf(want, sizeof(want), "packet %zu", s->packets);
  if (len != (size_t)k || memcmp(pkt, want, len) != 0) s->mismatch++;
  s->packets++;
  return 0;
}

static void deflated_packets_come_back_in_order(void **state) {
  (void)state;
  wrappers_t w = {0};
  tg_deflate_t d;
  assert_int_equal(tg_deflate_init(&d, keep, &w), 0);
  for (size_t i = 0; i < 20000; i++) {
    char p[64];
    int k = snprintf(p, sizeof(p), "packet %zu", i);
    const uint8_t *piece = (const uint8_t *)p;
    size_t len = (size_t)k;
    assert_int_equal(tg_deflate_emit(&d, &piece, &len, 1, 1, len), 0);
  }
  tg_deflate_finish(&d);
  tg_deflate_free(&d);
  assert_true(w.count >= 1);
  tg_buf_t out;
  tg_buf_init(&out, TG_PACKETS_INFLATE_MAX);
  seen_t s = {0};
  for (size_t i = 0; i < w.count; i++) {
    assert_int_equal(tg_packets_inflate(w.z[i], w.n[i], &out), 0);
    assert_int_equal(tg_packets_each(tg_buf_begin(&out), tg_buf_size(&out),
                                     check, &s),
                     0);
  }
  assert_int_equal(s.packets, 20000);
  assert_int_equal(s.mismatch, 0);

  /* Truncated, corrupt, and with bytes after the end. */
  assert_int_equal(tg_packets_inflate(w.z[0], w.n[0] / 2, &out),
                   TG_EBAD_COMPRESSED);
  uint8_t *bad = malloc(w.n[0] + 4);
  memcpy(bad, w.z[0], w.n[0]);
  bad[w.n[0] / 2] ^= 0x5a;
  bad[w.n[0] / 2 + 1] ^= 0xa5;
  assert_int_equal(tg_packets_inflate(bad, w.n[0], &out), TG_EBAD_COMPRESSED);
  memcpy(bad, w.z[0], w.n[0]);
  memcpy(bad + w.n[0], "more", 4);
  assert_int_equal(tg_packets_inflate(bad, w.n[0] + 4, &out),
                   TG_EBAD_COMPRESSED);
  assert_int_equal(tg_packets_inflate((const uint8_t *)"", 0, &out),
                   TG_EBAD_COMPRESSED);
  free(bad);
  for (size_t i = 0; i < w.count; i++) free(w.z[i]);
  tg_buf_free(&out);
}

static void a_bomb_stops_at_the_cap(void **state) {
  (void)state;
  /* 8 MiB of zeros compress to a few KiB; a 1 MiB cap refuses them. */
  size_t n = 8u << 20;
  uint8_t *zeros = calloc(1, n);
  uLongf zn = compressBound((uLong)n);
  uint8_t *z = malloc(zn);
  assert_int_equal(compress2(z, &zn, zeros, (uLong)n, 9), Z_OK);
  assert_true(zn < 64u << 10);
  tg_buf_t out;
  tg_buf_init(&out, 1u << 20);
  assert_int_equal(tg_packets_inflate(z, zn, &out), -ENOBUFS);
  assert_true(tg_buf_size(&out) <= 1u << 20);
  tg_buf_free(&out);
  free(z);
  free(zeros);
}

static int count(void *ctx, const uint8_t *pkt, size_t len) {
  (void)pkt;
  (void)len;
  (*(size_t *)ctx)++;
  return 0;
}

static void broken_framing_is_a_parse_error(void **state) {
  (void)state;
  size_t n = 0;
  /* One good packet, then a varint field where a packet should be. */
  const uint8_t t[] = {0x0a, 0x02, 'h', 'i', 0x08, 0x01};
  assert_int_equal(tg_packets_each(t, sizeof(t), count, &n), TG_EPARSE);
  assert_int_equal(n, 1);
  /* A length past the end. */
  const uint8_t u[] = {0x0a, 0x09, 'h', 'i'};
  n = 0;
  assert_int_equal(tg_packets_each(u, sizeof(u), count, &n), TG_EPARSE);
  assert_int_equal(n, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(deflated_packets_come_back_in_order),
      cmocka_unit_test(a_bomb_stops_at_the_cap),
      cmocka_unit_test(broken_framing_is_a_parse_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
