/* Perfetto's packet filter, alone (service/trace_filter.h): the bytecode
 * parser (v1, v2, overlay, every malformed form refused), the string
 * rules under each policy, and the message filter's exact output bytes
 * (fields kept and dropped, nested messages, varint/fixed/packed types,
 * errors anywhere in a packet, any slicing of the input). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "service/trace_filter.h"
#include "tests/service/filter_bytecode_gen.h"

/* Loads |n| words (checksum added). */
static int load_words(tg_filter_bytecode_t *bc, const uint32_t *w, size_t n) {
  uint8_t buf[4096];
  size_t len = fbc_encode(w, n, buf);
  char why[256];
  return tg_filter_bytecode_load(bc, buf, len, NULL, 0, why, sizeof(why));
}

#define W(id, op) FBC_WORD(id, op)
#define SIMPLE (TG_FILTER_ALLOWED | TG_FILTER_SIMPLE)

static void expect_state(const tg_filter_bytecode_t *bc, uint32_t msg,
                         uint32_t field, uint32_t want) {
  assert_int_equal(tg_filter_bytecode_query(bc, msg, field), want);
}
#define NWORDS(a) (sizeof(a) / sizeof((a)[0]))

/* --- bytecode ------------------------------------------------------------- */

static void bytecode_v1_fields_nested_and_ranges(void **state) {
  (void)state;
  const uint32_t w[] = {
      W(1, FBC_NESTED), 1, W(0, FBC_EOM),                  /* msg 0 */
      W(1, FBC_SIMPLE), W(2, FBC_NESTED), 2, W(120, FBC_RANGE), 20,
      W(1000, FBC_SIMPLE), W(0, FBC_EOM),                  /* msg 1 */
      W(1, FBC_SIMPLE), W(0, FBC_EOM),                     /* msg 2 */
  };
  tg_filter_bytecode_t bc;
  assert_int_equal(load_words(&bc, w, NWORDS(w)), 0);
  assert_int_equal(bc.n_messages, 3);
  expect_state(&bc, 0, 1, TG_FILTER_ALLOWED | 1);
  expect_state(&bc, 0, 2, 0);
  expect_state(&bc, 1, 1, SIMPLE);
  expect_state(&bc, 1, 2, TG_FILTER_ALLOWED | 2);
  expect_state(&bc, 1, 3, 0);
  /* A range across the direct-index limit: both halves, nothing past. */
  expect_state(&bc, 1, 120, SIMPLE);
  expect_state(&bc, 1, 127, SIMPLE);
  expect_state(&bc, 1, 128, SIMPLE);
  expect_state(&bc, 1, 139, SIMPLE);
  expect_state(&bc, 1, 140, 0);
  expect_state(&bc, 1, 1000, SIMPLE);
  expect_state(&bc, 1, 1001, 0);
  /* Messages past the last are no message. */
  expect_state(&bc, 3, 1, 0);
  expect_state(&bc, UINT32_MAX, 1, 0);
  tg_filter_bytecode_free(&bc);
}

static void bytecode_v2_filter_string_opcode(void **state) {
  (void)state;
  const uint32_t w[] = {W(1, FBC_NESTED), 1, W(0, FBC_EOM),
                        W(3, FBC_STRING), W(200, FBC_STRING), W(0, FBC_EOM)};
  tg_filter_bytecode_t bc;
  assert_int_equal(load_words(&bc, w, NWORDS(w)), 0);
  expect_state(&bc, 1, 3, TG_FILTER_ALLOWED | TG_FILTER_STRING);
  expect_state(&bc, 1, 200, TG_FILTER_ALLOWED | TG_FILTER_STRING);
  tg_filter_bytecode_free(&bc);
}

static void bytecode_overlay_adds_and_upgrades(void **state) {
  (void)state;
  const uint32_t w[] = {W(1, FBC_NESTED), 1, W(0, FBC_EOM),
                        W(2, FBC_SIMPLE), W(9, FBC_SIMPLE), W(0, FBC_EOM)};
  /* msg 1: add 1 (before 2), upgrade 9 to a string, add 300 (after). */
  const uint32_t ov[] = {1, W(1, FBC_SIMPLE), 0, 1, W(9, FBC_STRING), 0,
                         1, W(300, FBC_SIMPLE), 0};
  uint8_t code[256], over[256];
  size_t cl = fbc_encode(w, NWORDS(w), code), ol = fbc_encode(ov, NWORDS(ov), over);
  tg_filter_bytecode_t bc;
  char why[256];
  assert_int_equal(tg_filter_bytecode_load(&bc, code, cl, over, ol, why, sizeof(why)), 0);
  expect_state(&bc, 1, 1, SIMPLE);
  expect_state(&bc, 1, 2, SIMPLE);
  expect_state(&bc, 1, 9, TG_FILTER_ALLOWED | TG_FILTER_STRING);
  expect_state(&bc, 1, 300, SIMPLE);
  expect_state(&bc, 0, 1, TG_FILTER_ALLOWED | 1);
  tg_filter_bytecode_free(&bc);
}

static void refused(const uint8_t *code, size_t len, const uint8_t *ov,
                    size_t ol) {
  tg_filter_bytecode_t bc;
  char why[256] = "";
  assert_int_equal(tg_filter_bytecode_load(&bc, code, len, ov, ol, why, sizeof(why)),
                   -EINVAL);
  assert_true(why[0] != 0);
  assert_null(bc.words);
  assert_int_equal(bc.n_messages, 0);
}

static void refused_words(const uint32_t *w, size_t n) {
  uint8_t buf[512];
  size_t len = fbc_encode(w, n, buf);
  refused(buf, len, NULL, 0);
}

static void bytecode_refuses_every_malformed_form(void **state) {
  (void)state;
  uint8_t buf[512] = {0};
  /* Empty. */
  refused(buf, 0, NULL, 0);
  /* Wrong checksum. */
  const uint32_t ok[] = {W(1, FBC_SIMPLE), W(0, FBC_EOM)};
  size_t len = fbc_encode(ok, 2, buf);
  buf[len - 1] ^= 0x01;
  refused(buf, len, NULL, 0);
  /* A varint cut at the end, and one longer than 10 bytes. */
  len = fbc_encode(ok, 2, buf);
  buf[len++] = 0x80;
  refused(buf, len, NULL, 0);
  memset(buf, 0xff, 11);
  buf[11] = 0;
  refused(buf, 12, NULL, 0);
  /* Unknown opcodes. */
  for (uint32_t op = 5; op < 8; op++) {
    const uint32_t w[] = {W(1, op), W(0, FBC_EOM)};
    refused_words(w, 2);
  }
  /* Field id 0 for a field. */
  const uint32_t zero[] = {W(0, FBC_SIMPLE), W(0, FBC_EOM)};
  refused_words(zero, 2);
  /* Nested field or range without their next word. */
  const uint32_t nest[] = {W(1, FBC_NESTED)};
  refused_words(nest, 1);
  const uint32_t range[] = {W(1, FBC_RANGE)};
  refused_words(range, 1);
  /* The last message not closed. */
  const uint32_t open[] = {W(1, FBC_SIMPLE), W(0, FBC_EOM), W(2, FBC_SIMPLE)};
  refused_words(open, 3);
  /* A nested field naming a message that does not exist. */
  const uint32_t far[] = {W(1, FBC_NESTED), 5, W(0, FBC_EOM)};
  refused_words(far, 3);
  /* Overlapping ranges. */
  const uint32_t lap[] = {W(200, FBC_RANGE), 10, W(205, FBC_RANGE), 10,
                          W(0, FBC_EOM)};
  refused_words(lap, 5);
  /* Overlays: not triples, out of order, a bad opcode, a bad checksum. */
  uint8_t ob[128];
  len = fbc_encode(ok, 2, buf);
  const uint32_t ov2[] = {0, W(2, FBC_SIMPLE)};
  refused(buf, len, ob, fbc_encode(ov2, 2, ob));
  const uint32_t ovu[] = {0, W(3, FBC_SIMPLE), 0, 0, W(2, FBC_SIMPLE), 0};
  refused(buf, len, ob, fbc_encode(ovu, 6, ob));
  const uint32_t ovd[] = {0, W(3, FBC_SIMPLE), 0, 0, W(3, FBC_SIMPLE), 0};
  refused(buf, len, ob, fbc_encode(ovd, 6, ob));
  const uint32_t ovn[] = {0, W(3, FBC_NESTED), 0};
  refused(buf, len, ob, fbc_encode(ovn, 3, ob));
  const uint32_t ovs[] = {0, W(3, FBC_SIMPLE), 0};
  size_t ol = fbc_encode(ovs, 3, ob);
  ob[ol - 1] ^= 1;
  refused(buf, len, ob, ol);
}

/* --- string rules ----------------------------------------------------------- */

static void add_rule(tg_string_filter_t *sf, int policy, const char *re,
                     const char *prefix) {
  char why[256];
  assert_int_equal(tg_string_filter_add_rule(sf, policy, re, prefix, why, sizeof(why)), 0);
}

static tg_string_filter_t *rules(int policy, const char *re, const char *prefix) {
  tg_string_filter_t *sf = tg_string_filter_new();
  assert_non_null(sf);
  add_rule(sf, policy, re, prefix);
  return sf;
}

/* Applies |sf| to a copy of |in|; checks the result against |want|. */
static void expect_filtered(tg_string_filter_t *sf, const char *in,
                            const char *want, bool changed) {
  char buf[256];
  size_t n = strlen(in);
  memcpy(buf, in, n);
  assert_int_equal(tg_string_filter_apply(sf, buf, n), changed);
  buf[n] = 0;
  assert_string_equal(buf, want);
}

static void strings_match_redact_groups(void **state) {
  (void)state;
  tg_string_filter_t *sf =
      rules(TG_SFP_MATCH_REDACT_GROUPS, "foo (\\d+) bar (\\w*)", NULL);
  expect_filtered(sf, "foo 12345 bar x", "foo P60RE bar P", true);
  /* A group longer than the marker: dashes after it. */
  expect_filtered(sf, "foo 1 bar abcdefghijklmno", "foo P bar P60REDACTED----",
                  true);
  /* A match must cover the whole string. */
  expect_filtered(sf, "xfoo 1 bar a", "xfoo 1 bar a", false);
  expect_filtered(sf, "foo 1 bar a\n", "foo 1 bar a\n", false);
  tg_string_filter_free(sf);
}

static void strings_match_break_stops_the_chain(void **state) {
  (void)state;
  tg_string_filter_t *sf = rules(TG_SFP_MATCH_BREAK, "B\\|1\\|keep (.*)", NULL);
  add_rule(sf, TG_SFP_MATCH_REDACT_GROUPS, "B\\|\\d+\\|\\w+ (.*)", NULL);
  expect_filtered(sf, "B|1|keep secret", "B|1|keep secret", false);
  expect_filtered(sf, "B|2|keep secret", "B|2|keep P60RED", true);
  assert_int_equal(tg_string_filter_n_rules(sf), 2);
  tg_string_filter_free(sf);
}

static void strings_atrace_policies_check_the_payload_prefix(void **state) {
  (void)state;
  tg_string_filter_t *sf = rules(TG_SFP_ATRACE_MATCH_REDACT_GROUPS,
                                 "B\\|\\d+\\|foo:(.*)", "foo");
  expect_filtered(sf, "B|1024|foo:secret", "B|1024|foo:P60RED", true);
  /* Not an atrace payload, or not the prefix: the rule does not apply. */
  expect_filtered(sf, "E|1024|foo:secret", "E|1024|foo:secret", false);
  expect_filtered(sf, "B|1024", "B|1024", false);
  expect_filtered(sf, "B|1024|bar:foo:x", "B|1024|bar:foo:x", false);
  tg_string_filter_free(sf);
  sf = rules(TG_SFP_ATRACE_MATCH_BREAK, "B\\|\\d+\\|foo:.*", "foo");
  add_rule(sf, TG_SFP_MATCH_REDACT_GROUPS, "B\\|\\d+\\|(.*)", NULL);
  expect_filtered(sf, "B|1|foo:x", "B|1|foo:x", false);
  expect_filtered(sf, "B|1|bar:x", "B|1|P60RE", true);
  tg_string_filter_free(sf);
}

static void strings_repeated_search_redacts_every_match(void **state) {
  (void)state;
  tg_string_filter_t *sf = rules(TG_SFP_ATRACE_REPEATED_SEARCH_REDACT_GROUPS,
                                 "foo=(\\d+)", "");
  expect_filtered(sf, "C|1|foo=123,bar=456,foo=78901234567890,baz=1",
                  "C|1|foo=P60,bar=456,foo=P60REDACTED---,baz=1", true);
  expect_filtered(sf, "C|1|nothing", "C|1|nothing", false);
  tg_string_filter_free(sf);
  /* Empty matches move on one byte and find the non-empty ones. */
  sf = rules(TG_SFP_ATRACE_REPEATED_SEARCH_REDACT_GROUPS, "(a*)", "");
  expect_filtered(sf, "B|1|baab", "B|1|bP6b", true);
  tg_string_filter_free(sf);
}

static void strings_refuse_bad_rules(void **state) {
  (void)state;
  tg_string_filter_t *sf = tg_string_filter_new();
  char why[256] = "";
  assert_int_equal(tg_string_filter_add_rule(sf, 0, "a", NULL, why, sizeof(why)),
                   -EINVAL);
  assert_int_equal(tg_string_filter_add_rule(sf, 6, "a", NULL, why, sizeof(why)),
                   -EINVAL);
  why[0] = 0;
  assert_int_equal(tg_string_filter_add_rule(sf, 1, "(unclosed", NULL, why,
                                             sizeof(why)), -EINVAL);
  assert_true(strstr(why, "regex_pattern") != NULL);
  assert_int_equal(tg_string_filter_n_rules(sf), 0);
  tg_string_filter_free(sf);
}

/* --- message filter --------------------------------------------------------- */

/* Trace {packet = 1: TracePacket}; TracePacket {1, 4, 5 simple; 2: Sub;
 * 3: filtered string; 6: packed (simple)}; Sub {1 simple; 2: Sub}. */
static tg_trace_filter_t *test_filter(tg_string_filter_t *sf) {
  const uint32_t w[] = {
      W(1, FBC_NESTED), 1, W(0, FBC_EOM),
      W(1, FBC_SIMPLE), W(2, FBC_NESTED), 2, W(3, FBC_STRING),
      W(4, FBC_RANGE), 3, W(0, FBC_EOM),
      W(1, FBC_SIMPLE), W(2, FBC_NESTED), 2, W(0, FBC_EOM),
  };
  tg_filter_bytecode_t bc;
  assert_int_equal(load_words(&bc, w, NWORDS(w)), 0);
  tg_trace_filter_t *f;
  const uint32_t root[] = {1};
  char why[256];
  assert_int_equal(tg_trace_filter_new(&f, &bc, sf, root, 1, why, sizeof(why)), 0);
  return f;
}

/* Filters |in| in one slice; expects |want| (NULL: an error). */
static void expect_out(tg_trace_filter_t *f, const uint8_t *in, size_t n,
                       const uint8_t *want, long want_len) {
  const uint8_t *out;
  const uint8_t *sl[1] = {in};
  size_t ln[1] = {n};
  long got = tg_trace_filter_run(f, sl, ln, 1, &out);
  if (!want) {
    assert_int_equal(got, -EINVAL);
    return;
  }
  assert_int_equal(got, want_len);
  assert_true(got <= (long)n);
  if (want_len) assert_memory_equal(out, want, (size_t)want_len);
  /* Any split of the input into two slices gives the same bytes. */
  for (size_t cut = 0; cut <= n; cut++) {
    const uint8_t *s2[2] = {in, in + cut};
    size_t l2[2] = {cut, n - cut};
    assert_int_equal(tg_trace_filter_run(f, s2, l2, 2, &out), want_len);
    if (want_len) assert_memory_equal(out, want, (size_t)want_len);
  }
}

static void filter_keeps_allowed_fields_of_each_type(void **state) {
  (void)state;
  tg_trace_filter_t *f = test_filter(NULL);
  const uint8_t in[] = {
      0x08, 0x96, 0x01,                   /* 1: varint 150 (kept) */
      0x38, 0x05,                         /* 7: varint (dropped) */
      0x25, 1, 2, 3, 4,                   /* 4: fixed32 (kept) */
      0x29, 1, 2, 3, 4, 5, 6, 7, 8,       /* 5: fixed64 (kept) */
      0x32, 3, 0x01, 0x96, 0x01,          /* 6: packed varints (kept) */
      0x41, 1, 2, 3, 4, 5, 6, 7, 8,       /* 8: fixed64 (dropped) */
      0x4a, 2, 'h', 'i',                  /* 9: bytes (dropped) */
      0x0a, 1, 'x',                       /* 1: allowed, but as bytes */
  };
  const uint8_t want[] = {0x08, 0x96, 0x01, 0x25, 1, 2, 3, 4,
                          0x29, 1, 2, 3, 4, 5, 6, 7, 8,
                          0x32, 3, 0x01, 0x96, 0x01, 0x0a, 1, 'x'};
  expect_out(f, in, sizeof(in), want, sizeof(want));
  /* Redundant varint encodings come out at their shortest. */
  const uint8_t red[] = {0x88, 0x80, 0x00, 0x81, 0x80, 0x00};
  const uint8_t red_want[] = {0x08, 0x01};
  expect_out(f, red, sizeof(red), red_want, sizeof(red_want));
  /* Nothing allowed: an empty output, not an error. */
  const uint8_t none[] = {0x38, 0x05};
  expect_out(f, none, sizeof(none), none, 0);
  tg_trace_filter_free(f);
}

static void filter_rewrites_nested_lengths_at_their_input_width(void **state) {
  (void)state;
  tg_trace_filter_t *f = test_filter(NULL);
  /* 2: Sub {1: 7, 3: 130 dropped bytes, 2: Sub {1: 9, 5: 1}} */
  uint8_t in[200];
  size_t n = 0;
  in[n++] = 0x12;
  size_t len_at = n;
  n += 2;                                  /* the length, set below */
  in[n++] = 0x08; in[n++] = 7;
  in[n++] = 0x1a; in[n++] = 0x82; in[n++] = 0x01; /* 3: 130 bytes */
  memset(in + n, 'z', 130);
  n += 130;
  in[n++] = 0x12; in[n++] = 4; in[n++] = 0x08; in[n++] = 9; in[n++] = 0x28; in[n++] = 1;
  size_t sub = n - len_at - 2;
  in[len_at] = (uint8_t)(sub | 0x80);
  in[len_at + 1] = (uint8_t)(sub >> 7);
  /* The outer length keeps its 2 bytes, padded; the inner one its 1. */
  const uint8_t want[] = {0x12, 0x86, 0x00, 0x08, 7, 0x12, 2, 0x08, 9};
  expect_out(f, in, n, want, sizeof(want));
  /* An empty allowed submessage stays, as an empty field. */
  const uint8_t empty[] = {0x12, 0x00, 0x08, 1};
  expect_out(f, empty, sizeof(empty), empty, sizeof(empty));
  tg_trace_filter_free(f);
}

static void filter_applies_string_rules_to_filter_string_fields(void **state) {
  (void)state;
  tg_trace_filter_t *f = test_filter(
      rules(TG_SFP_ATRACE_REPEATED_SEARCH_REDACT_GROUPS, "pw=(\\w+)", ""));
  const uint8_t in[] = {0x1a, 13, 'B', '|', '1', '|', 'p', 'w', '=', 's', 'e', 'c', 'r', 'e', 't',
                        0x0a, 0};
  const uint8_t want[] = {0x1a, 13, 'B', '|', '1', '|', 'p', 'w', '=', 'P', '6', '0', 'R', 'E', 'D',
                          0x0a, 0};
  expect_out(f, in, sizeof(in), want, sizeof(want));
  tg_trace_filter_free(f);
}

static void filter_errors_drop_the_whole_packet(void **state) {
  (void)state;
  tg_trace_filter_t *f = test_filter(NULL);
  /* An empty packet. */
  expect_out(f, (const uint8_t *)"", 0, NULL, 0);
  /* A string longer than what is left of the packet. */
  const uint8_t long_str[] = {0x08, 1, 0x1a, 5, 'a', 'b'};
  expect_out(f, long_str, sizeof(long_str), NULL, 0);
  /* A submessage longer than its parent. */
  const uint8_t deep[] = {0x12, 4, 0x12, 5, 0x08, 1};
  expect_out(f, deep, sizeof(deep), NULL, 0);
  /* A field cut by its message's end (varint, fixed, tag). */
  const uint8_t cut[] = {0x12, 2, 0x08, 0x81, 0x01, 0x08, 1};
  expect_out(f, cut, sizeof(cut), NULL, 0);
  const uint8_t cut2[] = {0x12, 3, 0x25, 1, 2, 0x08, 1};
  expect_out(f, cut2, sizeof(cut2), NULL, 0);
  const uint8_t cut3[] = {0x08, 0x81};
  expect_out(f, cut3, sizeof(cut3), NULL, 0);
  /* Group wire types 3 and 4, and the unused 6 and 7. */
  for (uint8_t wt = 3; wt <= 7; wt = (uint8_t)(wt == 4 ? 6 : wt + 1)) {
    const uint8_t grp[] = {0x08, 1, (uint8_t)(0x10 | wt), 0};
    expect_out(f, grp, sizeof(grp), NULL, 0);
  }
  /* A varint of 11 bytes. */
  const uint8_t v11[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  expect_out(f, v11, sizeof(v11), NULL, 0);
  /* The filter goes on after an error. */
  const uint8_t ok[] = {0x08, 1};
  expect_out(f, ok, sizeof(ok), ok, sizeof(ok));
  tg_trace_filter_free(f);
}

/* |depth| nested Subs (field 2) around {1: 1}, inside the packet's field 2. */
static size_t nested(uint8_t *buf, unsigned depth) {
  /* Built inside out: each level is [0x12][len][inner]. */
  size_t cap = 8 + (size_t)depth * 4, n = 2;
  uint8_t *tmp = malloc(cap);
  assert_non_null(tmp);
  size_t at = cap - 2;
  tmp[at] = 0x08;
  tmp[at + 1] = 1;
  for (unsigned i = 0; i < depth; i++) {
    uint8_t hdr[6];
    hdr[0] = 0x12;
    size_t hl = 1 + fbc_put_varint(hdr + 1, (uint32_t)n);
    at -= hl;
    memcpy(tmp + at, hdr, hl);
    n += hl;
  }
  memcpy(buf, tmp + at, n);
  free(tmp);
  return n;
}

static void filter_nesting_is_bounded(void **state) {
  (void)state;
  tg_trace_filter_t *f = test_filter(NULL);
  uint8_t *buf = malloc(8 * TG_TRACE_FILTER_MAX_DEPTH);
  const uint8_t *out;
  /* Root + the levels: within the limit, the packet is kept whole. */
  size_t n = nested(buf, TG_TRACE_FILTER_MAX_DEPTH - 1);
  const uint8_t *sl[1] = {buf};
  size_t ln[1] = {n};
  assert_int_equal(tg_trace_filter_run(f, sl, ln, 1, &out), (long)n);
  assert_memory_equal(out, buf, n);
  n = nested(buf, TG_TRACE_FILTER_MAX_DEPTH);
  ln[0] = n;
  assert_int_equal(tg_trace_filter_run(f, sl, ln, 1, &out), -EINVAL);
  free(buf);
  tg_trace_filter_free(f);
}

static void filter_root_must_be_an_allowed_nested_message(void **state) {
  (void)state;
  const uint32_t w[] = {W(1, FBC_SIMPLE), W(0, FBC_EOM)};
  tg_filter_bytecode_t bc;
  assert_int_equal(load_words(&bc, w, NWORDS(w)), 0);
  tg_trace_filter_t *f = NULL;
  const uint32_t root[] = {1};
  char why[256] = "";
  assert_int_equal(tg_trace_filter_new(&f, &bc, NULL, root, 1, why, sizeof(why)),
                   -EINVAL);
  assert_null(f);
  assert_true(why[0] != 0);
}

static void filter_dup_filters_alike(void **state) {
  (void)state;
  tg_trace_filter_t *f = test_filter(rules(TG_SFP_MATCH_REDACT_GROUPS, "(.*)", NULL));
  tg_trace_filter_t *g = tg_trace_filter_dup(f);
  assert_non_null(g);
  tg_trace_filter_free(f);
  const uint8_t in[] = {0x1a, 3, 'a', 'b', 'c', 0x38, 1};
  const uint8_t want[] = {0x1a, 3, 'P', '6', '0'};
  expect_out(g, in, sizeof(in), want, sizeof(want));
  tg_trace_filter_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bytecode_v1_fields_nested_and_ranges),
      cmocka_unit_test(bytecode_v2_filter_string_opcode),
      cmocka_unit_test(bytecode_overlay_adds_and_upgrades),
      cmocka_unit_test(bytecode_refuses_every_malformed_form),
      cmocka_unit_test(strings_match_redact_groups),
      cmocka_unit_test(strings_match_break_stops_the_chain),
      cmocka_unit_test(strings_atrace_policies_check_the_payload_prefix),
      cmocka_unit_test(strings_repeated_search_redacts_every_match),
      cmocka_unit_test(strings_refuse_bad_rules),
      cmocka_unit_test(filter_keeps_allowed_fields_of_each_type),
      cmocka_unit_test(filter_rewrites_nested_lengths_at_their_input_width),
      cmocka_unit_test(filter_applies_string_rules_to_filter_string_fields),
      cmocka_unit_test(filter_errors_drop_the_whole_packet),
      cmocka_unit_test(filter_nesting_is_bounded),
      cmocka_unit_test(filter_root_must_be_an_allowed_nested_message),
      cmocka_unit_test(filter_dup_filters_alike),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
