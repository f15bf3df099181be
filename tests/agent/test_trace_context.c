/* W3C trace context (agent/trace_context.c): traceparent parsed and
 * formatted as level 1 says, every invalid form refused with its code, the
 * flow id derived as tracegate/trace_context.h publishes it (SipHash-2-4
 * against the reference vectors, the header's example value), and equal on
 * a client and a server that share only the header. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "agent/siphash.h"
#include "tracegate/error.h"
#include "tracegate/trace_context.h"

#define EXAMPLE "00-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-01"

static const uint8_t k_example_trace[16] = {
    0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
    0xa3, 0xce, 0x92, 0x9d, 0x0c, 0xf0, 0xe4, 0xf7};
static const uint8_t k_example_parent[8] = {0x00, 0xf0, 0x67, 0xaa,
                                            0x0b, 0xa9, 0x02, 0xb7};

static int parse(const char *s, tg_trace_context_t *out) {
  return tg_traceparent_parse(s, strlen(s), out);
}

/* |s| is refused with |want| and |*out| is left as it was. */
static void refused(const char *s, int want) {
  tg_trace_context_t c;
  memset(&c, 0xA5, sizeof(c));
  tg_trace_context_t before = c;
  int rv = parse(s, &c);
  if (rv != want) fail_msg("parse(\"%s\") = %d, want %d", s, rv, want);
  assert_memory_equal(&c, &before, sizeof(c));
}

static void parse_reads_the_spec_example(void **state) {
  (void)state;
  tg_trace_context_t c;
  assert_int_equal(parse(EXAMPLE, &c), 0);
  assert_int_equal(c.version, 0);
  assert_memory_equal(c.trace_id, k_example_trace, 16);
  assert_memory_equal(c.parent_id, k_example_parent, 8);
  assert_int_equal(c.flags, TG_TRACE_FLAG_SAMPLED);
  /* No NUL needed: the length bounds the read. */
  char buf[64];
  memcpy(buf, EXAMPLE "zzzz", 59);
  assert_int_equal(tg_traceparent_parse(buf, TG_TRACEPARENT_LEN, &c), 0);
}

static void format_round_trips(void **state) {
  (void)state;
  const char *const valid[] = {
      EXAMPLE,
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
      "00-00000000000000000000000000000001-0000000000000001-ff",
      "00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-09",
  };
  for (size_t i = 0; i < sizeof(valid) / sizeof(*valid); i++) {
    tg_trace_context_t c;
    assert_int_equal(parse(valid[i], &c), 0);
    char out[TG_TRACEPARENT_BUF];
    memset(out, 'x', sizeof(out));
    tg_traceparent_format(&c, out);
    assert_int_equal(strlen(out), TG_TRACEPARENT_LEN);
    assert_string_equal(out, valid[i]);
  }
  /* And contexts made here come back from their header unchanged. */
  for (int i = 0; i < 16; i++) {
    tg_trace_context_t c, back;
    assert_int_equal(tg_trace_context_new(&c), 0);
    c.flags = (uint8_t)i;
    char out[TG_TRACEPARENT_BUF];
    tg_traceparent_format(&c, out);
    assert_int_equal(parse(out, &back), 0);
    assert_memory_equal(&back, &c, sizeof(c));
  }
}

/* Level 1's forbidden values: the grammar holds, the value may not. */
static void forbidden_values_are_einval(void **state) {
  (void)state;
  refused("ff-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-01", -EINVAL);
  refused("00-00000000000000000000000000000000-00f067aa0ba902b7-01", -EINVAL);
  refused("00-4bf92f3577b34da6a3ce929d0cf0e4f7-0000000000000000-01", -EINVAL);
  /* ff is invalid at any length, as a future version would be read. */
  refused("ff-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-01-x",
          -EINVAL);
}

/* Anything off the grammar is TG_EPARSE. */
static void malformed_headers_are_eparse(void **state) {
  (void)state;
  const char *const bad[] = {
      "",
      "00",
      /* 54 characters: one short everywhere */
      "00-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-0",
      "00-4bf92f3577b34da6a3ce929d0cf0e4f-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b-01",
      "0-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-01",
      /* uppercase hex in each field */
      "0A-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-01",
      "00-4BF92F3577B34DA6A3CE929D0CF0E4F7-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0cf0e4f7-00F067AA0BA902B7-01",
      "00-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-0A",
      /* not hex at all */
      "00-4bf92f3577b34da6a3ce929d0cf0e4g7-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-0 ",
      "zz-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-01",
      " 00-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-01",
      /* a delimiter that is not '-' at each of the three places */
      "00_4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0cf0e4f7_00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7_01",
      /* a field one longer, the next one shorter: dashes move */
      "00-4bf92f3577b34da6a3ce929d0cf0e4f70-00f067aa0ba902b-01",
      /* version 00 ends at the flags, whatever follows */
      EXAMPLE "-",
      EXAMPLE "-what-the-future-will-be-like",
      EXAMPLE "0",
      EXAMPLE " ",
      /* a future version goes on only after a '-' */
      "cc-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-01what",
      "cc-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-1",
      "cc-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-0X-more",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
    refused(bad[i], TG_EPARSE);
}

static void future_versions_are_read_as_level_1(void **state) {
  (void)state;
  tg_trace_context_t c;
  assert_int_equal(
      parse("cc-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-01", &c), 0);
  assert_int_equal(c.version, 0xcc);
  assert_memory_equal(c.trace_id, k_example_trace, 16);
  assert_memory_equal(c.parent_id, k_example_parent, 8);
  assert_int_equal(c.flags, 1);
  assert_int_equal(parse("01-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-"
                         "09-what-the-future-will-be-like",
                         &c),
                   0);
  assert_int_equal(c.version, 1);
  assert_int_equal(c.flags, 9);
  /* Answered as version 00, the one this library speaks. */
  char out[TG_TRACEPARENT_BUF];
  tg_traceparent_format(&c, out);
  assert_string_equal(
      out, "00-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-09");
}

/* SipHash-2-4 under key 00..0f on messages 00..n-1: the reference
 * implementation's vectors (short tail, one block, block and tail). */
static void siphash_matches_the_reference_vectors(void **state) {
  (void)state;
  static const struct {
    size_t n;
    uint64_t want;
  } v[] = {
      {0, 0x726fdb47dd0e0e31ull},  {7, 0xab0200f58b01d137ull},
      {8, 0x93f5f5799a932462ull},  {15, 0xa129ca6149be45e5ull},
      {16, 0x3f2acc7f57c29bdbull}, {63, 0x958a324ceb064572ull},
  };
  uint8_t key[16], msg[64];
  for (int i = 0; i < 16; i++) key[i] = (uint8_t)i;
  for (int i = 0; i < 64; i++) msg[i] = (uint8_t)i;
  for (size_t i = 0; i < sizeof(v) / sizeof(*v); i++)
    assert_true(tg__siphash24(key, msg, v[i].n) == v[i].want);
}

/* The value trace_context.h publishes for the spec's example, computed
 * apart from this code; a change here breaks every peer. */
static void flow_id_is_the_published_derivation(void **state) {
  (void)state;
  assert_true(tg_flow_id_from_context(k_example_trace, k_example_parent) ==
              0x881ee84c410d96e9ull);
  tg_trace_context_t c;
  assert_int_equal(
      parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", &c), 0);
  assert_true(tg_flow_id_from_context(c.trace_id, c.parent_id) ==
              0x080cc6f90b90a19cull);
  /* Each input byte counts: flip one of the span id. */
  uint8_t span[8];
  memcpy(span, k_example_parent, 8);
  span[7] ^= 1;
  assert_true(tg_flow_id_from_context(k_example_trace, span) !=
              0x881ee84c410d96e9ull);
}

/* A client sends a header and derives its id from the context it sent; a
 * server derives its id from the header alone: the same id. */
static void client_and_server_derive_the_same_flow_id(void **state) {
  (void)state;
  for (int i = 0; i < 32; i++) {
    tg_trace_context_t client;
    assert_int_equal(tg_trace_context_new(&client), 0);
    client.flags = TG_TRACE_FLAG_SAMPLED;
    uint64_t sent = tg_flow_id_from_context(client.trace_id, client.parent_id);
    char header[TG_TRACEPARENT_BUF];
    tg_traceparent_format(&client, header);

    tg_trace_context_t server;
    assert_int_equal(tg_traceparent_parse(header, strlen(header), &server), 0);
    uint64_t got = tg_flow_id_from_context(server.trace_id, server.parent_id);
    assert_true(got == sent);
    assert_true(got != 0);
  }
}

static void new_and_child_contexts(void **state) {
  (void)state;
  static const uint8_t zero[16];
  tg_trace_context_t a, b;
  assert_int_equal(tg_trace_context_new(&a), 0);
  assert_int_equal(tg_trace_context_new(&b), 0);
  assert_int_equal(a.version, 0);
  assert_int_equal(a.flags, 0);
  assert_memory_not_equal(a.trace_id, zero, 16);
  assert_memory_not_equal(a.parent_id, zero, 8);
  assert_memory_not_equal(a.trace_id, b.trace_id, 16);

  /* A child: the same trace and flags, another hop (so another flow). */
  a.flags = TG_TRACE_FLAG_SAMPLED;
  tg_trace_context_t ch;
  assert_int_equal(tg_trace_context_child(&a, &ch), 0);
  assert_memory_equal(ch.trace_id, a.trace_id, 16);
  assert_int_equal(ch.flags, TG_TRACE_FLAG_SAMPLED);
  assert_memory_not_equal(ch.parent_id, a.parent_id, 8);
  assert_true(tg_flow_id_from_context(ch.trace_id, ch.parent_id) !=
              tg_flow_id_from_context(a.trace_id, a.parent_id));
  /* In place, from a parsed future version: answered as version 0. */
  tg_trace_context_t f;
  assert_int_equal(
      parse("cc-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-01", &f), 0);
  assert_int_equal(tg_trace_context_child(&f, &f), 0);
  assert_int_equal(f.version, 0);
  assert_memory_equal(f.trace_id, k_example_trace, 16);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(parse_reads_the_spec_example),
      cmocka_unit_test(format_round_trips),
      cmocka_unit_test(forbidden_values_are_einval),
      cmocka_unit_test(malformed_headers_are_eparse),
      cmocka_unit_test(future_versions_are_read_as_level_1),
      cmocka_unit_test(siphash_matches_the_reference_vectors),
      cmocka_unit_test(flow_id_is_the_published_derivation),
      cmocka_unit_test(client_and_server_derive_the_same_flow_id),
      cmocka_unit_test(new_and_child_contexts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
