/* COMPRESSION_TYPE_DEFLATE output (service/packet_deflate.c): what the
 * sink receives are TracePackets holding only compressed_packets, and
 * inflating each gives a Trace whose packets are exactly the ones emitted,
 * in order, byte for byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include "pb/trace/trace.pb-c.h"
#include "service/packet_deflate.h"

typedef struct sink {
  Perfetto__Protos__TracePacket **out; /* what arrived, decoded */
  size_t n, cap;
  int stop_after; /* return 1 on this call number (1-based); 0: never */
  int calls;
} sink_t;

static int on_packet(void *ctx, const uint8_t *const *pieces,
                     const size_t *lens, unsigned n, unsigned n_stable,
                     size_t total) {
  sink_t *s = ctx;
  /* The batch is the compressor's own buffer, reused for the next. */
  assert_int_equal(n_stable, 0);
  uint8_t *flat = malloc(total);
  assert_non_null(flat);
  size_t off = 0;
  for (unsigned i = 0; i < n; i++) {
    memcpy(flat + off, pieces[i], lens[i]);
    off += lens[i];
  }
  assert_int_equal(off, total);
  Perfetto__Protos__TracePacket *p =
      perfetto__protos__trace_packet__unpack(NULL, total, flat);
  free(flat);
  assert_non_null(p);
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 8;
    s->out = realloc(s->out, s->cap * sizeof(*s->out));
    assert_non_null(s->out);
  }
  s->out[s->n++] = p;
  return ++s->calls == s->stop_after;
}

/* Inflates every compressed packet of |s| into one Trace buffer. */
static uint8_t *inflate_all(const sink_t *s, size_t *len) {
  size_t cap = 64u << 20;
  uint8_t *all = malloc(cap);
  assert_non_null(all);
  *len = 0;
  for (size_t i = 0; i < s->n; i++) {
    const Perfetto__Protos__TracePacket *p = s->out[i];
    assert_int_equal(p->data_case,
                     PERFETTO__PROTOS__TRACE_PACKET__DATA_COMPRESSED_PACKETS);
    /* Nothing but the compressed bytes in the wrapper. */
    assert_false(p->has_timestamp);
    uLongf n = (uLongf)(cap - *len);
    assert_int_equal(uncompress(all + *len, &n, p->compressed_packets.data,
                                p->compressed_packets.len),
                     Z_OK);
    *len += n;
  }
  return all;
}

static void sink_free(sink_t *s) {
  for (size_t i = 0; i < s->n; i++)
    perfetto__protos__trace_packet__free_unpacked(s->out[i], NULL);
  free(s->out);
}

/* A for_testing-like packet: timestamp + a payload of |size| bytes. */
static size_t make_packet(uint8_t *buf, uint64_t ts, size_t size) {
  uint8_t *p = buf;
  *p++ = 0x40; /* timestamp (8), varint */
  while (ts >= 0x80) {
    *p++ = (uint8_t)(ts | 0x80);
    ts >>= 7;
  }
  *p++ = (uint8_t)ts;
  *p++ = 0x92; /* a bytes field the decoder skips as unknown (field 2002) */
  *p++ = 0x7d;
  size_t n = size;
  do {
    *p++ = (uint8_t)((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
    n >>= 7;
  } while (n);
  for (size_t i = 0; i < size; i++) *p++ = (uint8_t)('a' + (ts + i) % 7);
  return (size_t)(p - buf);
}

static void packets_round_trip_in_order(void **state) {
  (void)state;
  sink_t s = {0};
  tg_deflate_t d;
  assert_int_equal(tg_deflate_init(&d, on_packet, &s), 0);
  static uint8_t pk[3][1 << 21];
  size_t lens[3];
  /* 3000 small packets, each sent in two pieces, then a 1.5 MiB one
   * larger than a batch, then one more small one. */
  size_t sent = 0;
  for (uint64_t i = 0; i < 3000; i++) {
    size_t n = make_packet(pk[0], i, 100 + i % 300);
    const uint8_t *pieces[2] = {pk[0], pk[0] + n / 2};
    size_t pl[2] = {n / 2, n - n / 2};
    assert_int_equal(tg_deflate_emit(&d, pieces, pl, 2, 2, n), 0);
    sent++;
  }
  lens[1] = make_packet(pk[1], 3000, 1500000);
  const uint8_t *big = pk[1];
  assert_int_equal(tg_deflate_emit(&d, &big, &lens[1], 1, 1, lens[1]), 0);
  lens[2] = make_packet(pk[2], 3001, 10);
  const uint8_t *last = pk[2];
  assert_int_equal(tg_deflate_emit(&d, &last, &lens[2], 1, 1, lens[2]), 0);
  assert_int_equal(tg_deflate_finish(&d), 0);
  /* Nothing pending: a second finish emits nothing. */
  size_t batches = s.n;
  assert_int_equal(tg_deflate_finish(&d), 0);
  assert_int_equal(s.n, batches);
  assert_true(batches >= 3); /* ~700 KB of small ones, then the big one */

  size_t len;
  uint8_t *all = inflate_all(&s, &len);
  Perfetto__Protos__Trace *t = perfetto__protos__trace__unpack(NULL, len, all);
  assert_non_null(t);
  assert_int_equal(t->n_packet, 3002);
  for (size_t i = 0; i < t->n_packet; i++) {
    assert_true(t->packet[i]->has_timestamp);
    assert_int_equal(t->packet[i]->timestamp, i);
  }
  /* Byte for byte: the big packet re-encodes to what was sent. */
  size_t n = perfetto__protos__trace_packet__get_packed_size(t->packet[3000]);
  assert_int_equal(n, lens[1]);
  /* Compressible data shrinks. */
  assert_true(d.bytes_out * 4 < d.bytes_in);
  perfetto__protos__trace__free_unpacked(t, NULL);
  free(all);
  tg_deflate_free(&d);
  sink_free(&s);
}

static void a_sink_asking_to_stop_is_obeyed(void **state) {
  (void)state;
  sink_t s = {.stop_after = 1};
  tg_deflate_t d;
  assert_int_equal(tg_deflate_init(&d, on_packet, &s), 0);
  static uint8_t pk[1 << 17];
  int rv = 0;
  size_t i = 0;
  /* Until the first batch closes, emit says "go on"; the batch that goes to
   * the sink carries its stop back. */
  for (; i < 100 && rv == 0; i++) {
    size_t n = make_packet(pk, i, 100000);
    const uint8_t *p = pk;
    rv = tg_deflate_emit(&d, &p, &n, 1, 1, n);
  }
  assert_int_equal(rv, 1);
  assert_int_equal(s.n, 1);
  assert_true(i > 1 && i < 100);
  tg_deflate_free(&d);
  sink_free(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(packets_round_trip_in_order),
      cmocka_unit_test(a_sink_asking_to_stop_is_obeyed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
