/* tracegated end to end: TraceConfig.trace_filter. Packets leave the
 * session filtered (producer and service packets alike), a packet the
 * filter finds malformed is dropped and counted, filter_stats say what
 * went in and out, a filter that does not load refuses the config, and a
 * clone keeps its source's filter unless asked to skip it (the bugreport
 * clone). Raw producers and consumers, as Perfetto's clients speak. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "pb/common/tracing_service_state.pb-c.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "pb/trace/test_event.pb-c.h"
#include "pb/trace/trace.pb-c.h"
#include "tests/service/filter_bytecode_gen.h"
#include "test_proc.h"
#include "test_service.h"

#define W(id, op) FBC_WORD(id, op)

/* Trace {packet: TracePacket}; TracePacket {for_testing (900): TestEvent,
 * trace_stats (35) whole}; TestEvent {seq_value (2)}: a producer's str is
 * stripped, every other service packet emptied. */
static const uint32_t kFilterWords[] = {
    W(1, FBC_NESTED), 1, W(0, FBC_EOM),
    W(35, FBC_SIMPLE), W(900, FBC_NESTED), 2, W(0, FBC_EOM),
    W(2, FBC_SIMPLE), W(0, FBC_EOM),
};

typedef struct filter_cfg {
  simple_cfg_t sc;
  Perfetto__Protos__TraceConfig__TraceFilter tf;
  uint8_t code[128];
} filter_cfg_t;

static void filter_cfg_init(filter_cfg_t *f, const char *ds) {
  simple_cfg_init(&f->sc, 256, 1, ds);
  perfetto__protos__trace_config__trace_filter__init(&f->tf);
  f->tf.has_bytecode_v2 = 1;
  f->tf.bytecode_v2.data = f->code;
  f->tf.bytecode_v2.len =
      fbc_encode(kFilterWords, sizeof(kFilterWords) / sizeof(kFilterWords[0]),
                 f->code);
  f->sc.cfg.trace_filter = &f->tf;
}

/* A producer of |ds| (|p|), a consumer (|c|) and a filtered config for
 * |ds| (|fc|), not enabled yet. */
static void filter_setup(const test_service_t *ts, raw_producer_t *p,
                         raw_consumer_t *c, filter_cfg_t *fc, const char *ds) {
  assert_int_equal(raw_producer_connect(p, ts, "test.producer", ds, 4, 64, false), 0);
  assert_int_equal(raw_consumer_connect(c, ts), 0);
  filter_cfg_init(fc, ds);
}

/* for_testing {seq_value: 2, then a varint cut by the message's end}:
 * the top level parses (the service takes it), the filter does not. */
static const uint8_t kBadPacket[] = {0xa2, 0x38, 0x03, 0x10, 0x02, 0x10};

static void write_and_commit(raw_producer_t *p, uint32_t chunk_id,
                             const char *str, unsigned n, bool with_bad) {
  uint8_t pk[8][128];
  const uint8_t *frags[9];
  size_t lens[9];
  unsigned k = 0;
  for (unsigned i = 0; i < n; i++, k++) {
    lens[k] = make_test_packet(pk[i], sizeof(pk[i]), str, 100 + i);
    frags[k] = pk[i];
  }
  if (with_bad) {
    frags[k] = kBadPacket;
    lens[k++] = sizeof(kBadPacket);
  }
  assert_int_equal(raw_producer_write_chunk(p, 0, chunk_id % 4, TG_PAGE_DIV_4, 1,
                                            chunk_id, 0, frags, lens, k), 0);
  uint32_t page = 0, chunk = chunk_id % 4;
  assert_int_equal(raw_producer_commit(p, &page, &chunk, 1, 0), 0);
}

/* A filtered session of |c| recording |n| test packets (and the bad one
 * after them when |with_bad|) of producer |p|; compressed (DEFLATE) when
 * |deflate|. */
static void filter_record(const test_service_t *ts, raw_producer_t *p,
                          raw_consumer_t *c, filter_cfg_t *fc, unsigned n,
                          bool with_bad, bool deflate) {
  filter_setup(ts, p, c, fc, "filter.ds");
  fc->sc.cfg.has_compression_type = deflate;
  fc->sc.cfg.compression_type =
      PERFETTO__PROTOS__TRACE_CONFIG__COMPRESSION_TYPE__COMPRESSION_TYPE_DEFLATE;
  assert_int_equal(raw_consumer_enable(c, &fc->sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(p, 5000), 0);
  write_and_commit(p, 0, "secret", n, with_bad);
}

typedef struct seen {
  size_t test_with_str, test_without_str, configs, empty, others;
  const Perfetto__Protos__TraceStats *stats;
} seen_t;

static seen_t look(Perfetto__Protos__TracePacket **pk, size_t n) {
  seen_t s = {0};
  for (size_t i = 0; i < n; i++) {
    switch (pk[i]->data_case) {
      case PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING:
        if (pk[i]->for_testing->str) s.test_with_str++;
        else s.test_without_str++;
        break;
      case PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_CONFIG:
        s.configs++;
        break;
      case PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_STATS:
        s.stats = pk[i]->trace_stats;
        break;
      case PERFETTO__PROTOS__TRACE_PACKET__DATA__NOT_SET:
        if (!pk[i]->has_trusted_pid && !pk[i]->has_timestamp) s.empty++;
        else s.others++;
        break;
      default:
        s.others++;
    }
  }
  return s;
}

static void filtered_session_strips_fields_and_counts(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  raw_consumer_t c;
  filter_cfg_t fc;
  filter_record(ts, &p, &c, &fc, 5, true, false);
  assert_int_equal(raw_consumer_disable(&c, 5000), 0);
  size_t n = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(&c, &n);
  assert_non_null(out);
  seen_t s = look(out, n);
  /* The producer's packets, without their str and without the trusted
   * fields; the malformed one gone; no service packet but the stats. */
  assert_int_equal(s.test_with_str, 0);
  assert_int_equal(s.test_without_str, 5);
  assert_int_equal(s.configs, 0);
  assert_int_equal(s.others, 0);
  assert_int_equal(s.empty, 0); /* ReadBuffers sends no emptied packet */
  for (size_t i = 0, v = 100; i < n; i++)
    if (out[i]->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING) {
      assert_true(out[i]->for_testing->has_seq_value);
      assert_int_equal(out[i]->for_testing->seq_value, v++);
      assert_false(out[i]->has_trusted_pid);
    }
  assert_non_null(s.stats);
  const Perfetto__Protos__TraceStats__FilterStats *fs = s.stats->filter_stats;
  assert_non_null(fs);
  /* Before the stats packet: at least the 6 producer packets and the
   * service's preamble; one error; less out than in. */
  assert_true(fs->has_input_packets && fs->input_packets > 6);
  assert_int_equal(fs->errors, 1);
  assert_true(fs->output_bytes < fs->input_bytes);
  assert_true(fs->has_time_taken_ns);
  assert_int_equal(fs->n_bytes_discarded_per_buffer, 1);
  assert_true(fs->bytes_discarded_per_buffer[0] >= sizeof(kBadPacket));
  uint64_t seen_before = fs->input_packets;
  free_packets(out, n);

  /* GetTraceStats says the same, counting the packets read since. */
  Perfetto__Protos__GetTraceStatsResponse *r = raw_consumer_stats(&c);
  assert_non_null(r);
  assert_non_null(r->trace_stats->filter_stats);
  assert_int_equal(r->trace_stats->filter_stats->errors, 1);
  assert_true(r->trace_stats->filter_stats->input_packets > seen_before);
  perfetto__protos__get_trace_stats_response__free_unpacked(r, NULL);
  raw_consumer_close(&c);
  raw_producer_close(&p);
}

/* COMPRESSION_TYPE_DEFLATE: the filter comes first, the compressor gets
 * what it left. */
static void filtered_then_compressed(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  raw_consumer_t c;
  filter_cfg_t fc;
  filter_record(ts, &p, &c, &fc, 5, false, true);
  assert_int_equal(raw_consumer_disable(&c, 5000), 0);
  size_t n = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(&c, &n);
  assert_non_null(out);
  Perfetto__Protos__Trace *t =
      test_inflate_trace((const Perfetto__Protos__TracePacket *const *)out, n);
  free_packets(out, n);
  assert_non_null(t);
  seen_t s = look(t->packet, t->n_packet);
  assert_int_equal(s.test_with_str, 0);
  assert_int_equal(s.test_without_str, 5);
  assert_int_equal(s.configs, 0);
  perfetto__protos__trace__free_unpacked(t, NULL);
  raw_consumer_close(&c);
  raw_producer_close(&p);
}

static void unloadable_filters_refuse_the_config(void **state) {
  test_service_t *ts = *state;
  raw_consumer_t c;
  filter_cfg_t fc;
  char err[512];
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  /* A bad checksum. */
  filter_cfg_init(&fc, "x.ds");
  fc.code[fc.tf.bytecode_v2.len - 1] ^= 1;
  assert_int_equal(raw_consumer_enable(&c, &fc.sc.cfg, -1), 0);
  assert_int_equal(raw_consumer_wait_disabled(&c, 5000, err, sizeof(err)), 0);
  assert_non_null(strstr(err, "trace_filter.bytecode_v2"));
  /* Trace.packet not an allowed message: no root to filter from. */
  const uint32_t flat[] = {W(1, FBC_SIMPLE), W(0, FBC_EOM)};
  filter_cfg_init(&fc, "x.ds");
  fc.tf.bytecode_v2.len = fbc_encode(flat, 2, fc.code);
  assert_int_equal(raw_consumer_enable(&c, &fc.sc.cfg, -1), 0);
  assert_int_equal(raw_consumer_wait_disabled(&c, 5000, err, sizeof(err)), 0);
  assert_non_null(strstr(err, "trace_filter"));
  /* A string rule with no policy, one that does not compile. */
  Perfetto__Protos__TraceConfig__TraceFilter__StringFilterRule rule =
      PERFETTO__PROTOS__TRACE_CONFIG__TRACE_FILTER__STRING_FILTER_RULE__INIT, *rp = &rule;
  Perfetto__Protos__TraceConfig__TraceFilter__StringFilterChain ch =
      PERFETTO__PROTOS__TRACE_CONFIG__TRACE_FILTER__STRING_FILTER_CHAIN__INIT;
  ch.n_rules = 1;
  ch.rules = &rp;
  rule.regex_pattern = (char *)"(a)";
  filter_cfg_init(&fc, "x.ds");
  fc.tf.string_filter_chain = &ch;
  assert_int_equal(raw_consumer_enable(&c, &fc.sc.cfg, -1), 0);
  assert_int_equal(raw_consumer_wait_disabled(&c, 5000, err, sizeof(err)), 0);
  assert_non_null(strstr(err, "string_filter_chain.rules[0]"));
  rule.has_policy = 1;
  rule.policy = PERFETTO__PROTOS__TRACE_CONFIG__TRACE_FILTER__STRING_FILTER_POLICY__SFP_MATCH_REDACT_GROUPS;
  rule.regex_pattern = (char *)"(a";
  assert_int_equal(raw_consumer_enable(&c, &fc.sc.cfg, -1), 0);
  assert_int_equal(raw_consumer_wait_disabled(&c, 5000, err, sizeof(err)), 0);
  assert_non_null(strstr(err, "string_filter_chain.rules[0]"));
  raw_consumer_close(&c);
}

/* EnableTracing with |fc| by a consumer of its own, then DisableTracing:
 * 1 if the session ran, 0 if the config was refused (the reason in
 * |err|). */
static int runs(const test_service_t *ts, filter_cfg_t *fc, char *err,
                size_t errlen) {
  raw_consumer_t c;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  assert_int_equal(raw_consumer_enable(&c, &fc->sc.cfg, -1), 0);
  Perfetto__Protos__DisableTracingRequest d = PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
  raw_call(&c.conn, "DisableTracing", &d.base, -1, NULL, NULL, 5000);
  int rv = raw_consumer_wait_disabled(&c, 5000, err, errlen);
  raw_consumer_close(&c);
  return rv;
}

static void bytecode_v2_is_taken_over_v1_when_set(void **state) {
  test_service_t *ts = *state;
  filter_cfg_t fc;
  char err[512];
  uint8_t bad[] = {0x01};
  /* v1 alone. */
  filter_cfg_init(&fc, "x.ds");
  fc.tf.bytecode = fc.tf.bytecode_v2;
  fc.tf.has_bytecode = 1;
  fc.tf.has_bytecode_v2 = 0;
  fc.tf.bytecode_v2.len = 0;
  if (runs(ts, &fc, err, sizeof(err)) != 1) fail_msg("refused: %s", err);
  /* v2 set: v1 is not even read. */
  filter_cfg_init(&fc, "x.ds");
  fc.tf.has_bytecode = 1;
  fc.tf.bytecode.data = bad;
  fc.tf.bytecode.len = sizeof(bad);
  if (runs(ts, &fc, err, sizeof(err)) != 1) fail_msg("refused: %s", err);
  /* v2 bad, v1 good: refused for v2. */
  fc.tf.bytecode = fc.tf.bytecode_v2;
  fc.tf.bytecode_v2.data = bad;
  fc.tf.bytecode_v2.len = sizeof(bad);
  assert_int_equal(runs(ts, &fc, err, sizeof(err)), 0);
  assert_non_null(strstr(err, "trace_filter.bytecode_v2"));
}

static int64_t clone_of(raw_consumer_t *k, uint64_t id, bool skip) {
  Perfetto__Protos__CloneSessionRequest r = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__INIT;
  r.selector_case = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_SESSION_ID;
  r.session_id = id;
  r.has_skip_trace_filter = skip;
  r.skip_trace_filter = skip;
  return raw_invoke(&k->conn, "CloneSession", &r.base, -1, false);
}

static void clone_wait_ok(raw_consumer_t *k, int64_t rid) {
  ProtobufCMessage *m = NULL;
  assert_true(rid > 0);
  assert_int_equal(raw_wait_reply(&k->conn, (uint64_t)rid,
                                  &perfetto__protos__clone_session_response__descriptor,
                                  &m, 5000), 1);
  Perfetto__Protos__CloneSessionResponse *r = (void *)m;
  assert_true(r->has_success && r->success);
  protobuf_c_message_free_unpacked(m, NULL);
}

/* A clone of |id| by a new consumer of |ts|, acked by |p|: what it reads. */
static seen_t read_clone(test_service_t *ts, raw_producer_t *p, uint64_t id,
                         bool skip, uint64_t *flush_after) {
  raw_consumer_t k;
  assert_int_equal(raw_consumer_connect(&k, ts), 0);
  int64_t rid = clone_of(&k, id, skip);
  uint64_t fid = raw_producer_wait_flush(p, *flush_after, 5000);
  assert_true(fid > 0);
  *flush_after = fid;
  assert_int_equal(raw_producer_commit_ex(p, NULL, 0, NULL, 0, fid, false), 0);
  clone_wait_ok(&k, rid);
  size_t n = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(&k, &n);
  assert_non_null(out);
  seen_t s = look(out, n);
  s.stats = NULL; /* freed below */
  free_packets(out, n);
  raw_consumer_close(&k);
  return s;
}

static void clones_keep_the_filter_unless_told_to_skip_it(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  raw_consumer_t c;
  filter_cfg_t fc;
  filter_record(ts, &p, &c, &fc, 3, false, false);
  Perfetto__Protos__QueryServiceStateResponse *q = raw_consumer_query(&c, 5000);
  assert_non_null(q);
  assert_int_equal(q->service_state->n_tracing_sessions, 1);
  uint64_t id = q->service_state->tracing_sessions[0]->id;
  perfetto__protos__query_service_state_response__free_unpacked(q, NULL);

  uint64_t fid = 0;
  seen_t kept = read_clone(ts, &p, id, false, &fid);
  assert_int_equal(kept.test_with_str, 0);
  assert_int_equal(kept.test_without_str, 3);
  assert_int_equal(kept.configs, 0);
  /* skip_trace_filter (perfetto --clone-for-bugreport): all of it. */
  seen_t raw = read_clone(ts, &p, id, true, &fid);
  assert_int_equal(raw.test_with_str, 3);
  assert_int_equal(raw.test_without_str, 0);
  assert_int_equal(raw.configs, 1);
  assert_int_equal(raw_consumer_disable(&c, 5000), 0);
  raw_consumer_close(&c);
  raw_producer_close(&p);
}

/* --- side by side with Perfetto's traced ----------------------------------- */

/* for_testing (900): M {1: filtered string, 2 simple, 3: M, 4 simple
 * fixed, 5..9 simple}; anything else dropped. Every other packet of
 * either service filters to nothing. */
static const uint32_t kSideWords[] = {
    W(1, FBC_NESTED), 1, W(0, FBC_EOM),
    W(900, FBC_NESTED), 2, W(0, FBC_EOM),
    W(1, FBC_STRING), W(2, FBC_SIMPLE), W(3, FBC_NESTED), 2, W(4, FBC_SIMPLE),
    W(5, FBC_RANGE), 5, W(0, FBC_EOM),
};

/* Packets both services get, each a for_testing body (|body|, |n|). */
typedef struct side_packet {
  const uint8_t *body;
  size_t n;
} side_packet_t;

static const uint8_t kSideA[] = {
    0x0a, 14, 'B', '|', '4', '2', '|', 'p', 'w', '=', 's', 'e', 'c', 'r', 'e', 't',
    0x10, 0x96, 0x01,                               /* 2: 150 */
    0x90, 0x80, 0x00, 0x07,                         /* 2, redundant tag */
    0x18, 0x81, 0x80, 0x80, 0x00,                   /* 3 as varint: dropped */
    0x25, 1, 2, 3, 4,                               /* 4: fixed32 */
    0x31, 1, 2, 3, 4, 5, 6, 7, 8,                   /* 6: fixed64 */
    0x50, 1,                                        /* 10: dropped */
};
static const uint8_t kSideB[] = {
    0x1a, 11, 0x10, 1, 0x58, 9, 0x1a, 5, 0x10, 2, 0x0a, 1, 'x',   /* 3: M{M{}} */
    0x3a, 3, 0x01, 0x02, 0x03,                      /* 7: packed bytes */
    0x1a, 0,                                        /* 3: empty message */
};
static const uint8_t kSideErr[] = {0x1a, 3, 0x10, 1, 0x10}; /* cut varint */
static const uint8_t kSideDrop[] = {0x58, 1};               /* all dropped */

#define SFP(x) PERFETTO__PROTOS__TRACE_CONFIG__TRACE_FILTER__STRING_FILTER_POLICY__SFP_##x

/* A chain with every policy, and strings that each rule (or none) takes. */
static const struct {
  int policy;
  const char *pattern, *prefix;
} kSideRules[] = {
    {SFP(ATRACE_MATCH_BREAK), "B\\|\\d+\\|keep.*", "keep"},
    {SFP(ATRACE_MATCH_REDACT_GROUPS), "B\\|\\d+\\|tok (\\w+) (\\d+)", "tok"},
    {SFP(MATCH_BREAK), "plain keep.*", ""},
    {SFP(MATCH_REDACT_GROUPS), "plain (.*) (end|fin)", ""},
    {SFP(ATRACE_REPEATED_SEARCH_REDACT_GROUPS), "pw=(\\w+)", "pw"},
};
static const char *const kSideStrings[] = {
    "B|1|keep pw=x",
    "B|1|tok abcdefghijklmnop 12345",
    "B|1|tok short",
    "plain keep x end",
    "plain secret stuff end",
    "plain a b fin",
    "C|7|pw=aa pw=bbbbbbbbbbbbbbbbbb,pw=c",
    "E|1|pw=zz",
    "S|12|pwd x",
    "B|",
};

/* Wraps |body| as a TracePacket {for_testing (900): body}. */
static size_t side_wrap(uint8_t *out, const uint8_t *body, size_t n) {
  out[0] = 0xa2;
  out[1] = 0x38;
  size_t k = 2 + fbc_put_varint(out + 2, (uint32_t)n);
  memcpy(out + k, body, n);
  return k + n;
}

/* The non-empty packets of trace file |path|, concatenated as
 * [u32 len][bytes] into |*out|; |*empty|: how many were empty. */
static size_t file_packets(const char *path, uint8_t **out, size_t *empty) {
  *empty = 0;
  size_t len = 0, k = 0;
  uint8_t *f = tg_test_read_file(path, &len);
  assert_non_null(f);
  *out = malloc(len + 4);
  assert_non_null(*out);
  for (size_t at = 0; at < len;) {
    assert_int_equal(f[at++], 0x0a);
    uint64_t n = 0;
    for (unsigned shift = 0;; shift += 7) {
      assert_true(at < len && shift < 64);
      n |= (uint64_t)(f[at] & 0x7f) << shift;
      if (!(f[at++] & 0x80)) break;
    }
    assert_true(n <= len - at);
    if (!n) (*empty)++;
    if (n) {
      uint32_t l = (uint32_t)n;
      memcpy(*out + k, &l, 4);
      memcpy(*out + k + 4, f + at, n);
      k += 4 + n;
    }
    at += n;
  }
  free(f);
  return k;
}

/* Records the side packets through the service on |ts|'s sockets into
 * |path| with the filter. */
static void side_record(const test_service_t *ts, const char *path) {
  raw_producer_t p;
  raw_consumer_t c;
  filter_cfg_t fc;
  filter_setup(ts, &p, &c, &fc, "side.ds");
  fc.tf.bytecode_v2.len = fbc_encode(kSideWords, sizeof(kSideWords) / 4, fc.code);
  enum { N_RULES = sizeof(kSideRules) / sizeof(kSideRules[0]) };
  Perfetto__Protos__TraceConfig__TraceFilter__StringFilterRule rule[N_RULES], *rp[N_RULES];
  Perfetto__Protos__TraceConfig__TraceFilter__StringFilterChain ch =
      PERFETTO__PROTOS__TRACE_CONFIG__TRACE_FILTER__STRING_FILTER_CHAIN__INIT;
  for (size_t i = 0; i < N_RULES; i++) {
    perfetto__protos__trace_config__trace_filter__string_filter_rule__init(&rule[i]);
    rule[i].has_policy = 1;
    rule[i].policy = kSideRules[i].policy;
    rule[i].regex_pattern = (char *)kSideRules[i].pattern;
    rule[i].atrace_payload_starts_with = (char *)kSideRules[i].prefix;
    rp[i] = &rule[i];
  }
  ch.n_rules = N_RULES;
  ch.rules = rp;
  fc.tf.string_filter_chain = &ch;
  fc.sc.cfg.has_write_into_file = 1;
  fc.sc.cfg.write_into_file = 1;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(raw_consumer_enable(&c, &fc.sc.cfg, fd), 0);
  close(fd);
  assert_int_equal(raw_producer_wait_started(&p, 5000), 0);
  /* One more body: every string of kSideStrings as field 1. */
  uint8_t strs[400];
  size_t ns = 0;
  for (size_t i = 0; i < sizeof(kSideStrings) / sizeof(kSideStrings[0]); i++) {
    size_t l = strlen(kSideStrings[i]);
    assert_true(ns + 2 + l <= sizeof(strs) && l < 128);
    strs[ns++] = 0x0a;
    strs[ns++] = (uint8_t)l;
    memcpy(strs + ns, kSideStrings[i], l);
    ns += l;
  }
  const side_packet_t in[] = {{kSideA, sizeof(kSideA)}, {kSideErr, sizeof(kSideErr)},
                              {kSideB, sizeof(kSideB)}, {kSideDrop, sizeof(kSideDrop)},
                              {strs, ns}};
  enum { N_IN = sizeof(in) / sizeof(in[0]) };
  uint8_t pk[N_IN][512];
  const uint8_t *frags[N_IN];
  size_t lens[N_IN];
  for (unsigned i = 0; i < N_IN; i++) {
    lens[i] = side_wrap(pk[i], in[i].body, in[i].n);
    frags[i] = pk[i];
  }
  assert_int_equal(raw_producer_write_chunk(&p, 0, 0, TG_PAGE_DIV_4, 1, 0, 0, frags, lens, N_IN), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(&p, &page, &chunk, 1, 0), 0);
  assert_int_equal(raw_consumer_disable(&c, 10000), 0);
  raw_consumer_close(&c);
  raw_producer_close(&p);
}

/* Perfetto's traced on |ts|'s socket paths; waits until it accepts. */
static pid_t start_traced(const char *bin, const test_service_t *ts) {
  char path[512];
  snprintf(path, sizeof(path), "%s/traced", bin);
  setenv("PERFETTO_PRODUCER_SOCK_NAME", ts->producer_sock, 1);
  setenv("PERFETTO_CONSUMER_SOCK_NAME", ts->consumer_sock, 1);
  const char *argv[] = {"traced", NULL};
  tg_test_spawn_t sp = TG_TEST_SPAWN_INIT;
  sp.path = path;
  sp.argv = argv;
  sp.stdout_fd = sp.stderr_fd = TG_TEST_FD_DEVNULL;
  pid_t pid = tg_test_spawn(&sp);
  unsetenv("PERFETTO_PRODUCER_SOCK_NAME");
  unsetenv("PERFETTO_CONSUMER_SOCK_NAME");
  assert_true(pid > 0);
  for (int64_t end = tg_test_now_ms() + 10000; tg_test_now_ms() < end;) {
    raw_consumer_t c;
    if (access(ts->producer_sock, F_OK) == 0 && raw_consumer_connect(&c, ts) == 0) {
      raw_consumer_close(&c);
      return pid;
    }
    usleep(20000);
  }
  fail_msg("traced did not start on %s", ts->consumer_sock);
  return -1;
}

static void same_filtered_bytes_as_perfettos_traced(void **state) {
  test_service_t *ts = *state;
  const char *bin = getenv("PERFETTO_BIN");
  if (!bin || !bin[0]) {
    print_message("skipped: PERFETTO_BIN is not set (Perfetto's traced, to "
                  "compare with)\n");
    skip();
  }
  test_service_t pts;
  assert_int_equal(test_service_prepare(&pts), 0);
  pid_t traced = start_traced(bin, &pts);
  char ours[160], theirs[160];
  snprintf(ours, sizeof(ours), "%s/ours.pftrace", ts->dir);
  snprintf(theirs, sizeof(theirs), "%s/theirs.pftrace", pts.dir);
  side_record(ts, ours);
  side_record(&pts, theirs);
  assert_true(tg_test_stop(traced, SIGTERM, 10000) != -1);
  uint8_t *a, *b;
  size_t ea, eb;
  size_t na = file_packets(ours, &a, &ea), nb = file_packets(theirs, &b, &eb);
  /* Emptied packets stay in a file, as empty TracePackets, in both. */
  assert_true(ea > 0 && eb > 0);
  /* Three packets survive (the malformed one and the emptied one do not),
   * byte for byte the same. */
  size_t count = 0;
  for (size_t at = 0; at + 4 <= na; count++) {
    uint32_t l;
    memcpy(&l, a + at, 4);
    at += 4 + l;
  }
  assert_int_equal(count, 4);
  /* The rules ran: each policy's result is there. */
  static const char *const want[] = {
      "pw=P60RED", "B|1|keep pw=x", "tok P60REDACTED----- P60RE",
      "B|1|tok short", "plain keep x end", "plain P60REDACTED- P60",
      "plain P60 P60", "pw=P6 pw=P60REDACTED-------,pw=P", "E|1|pw=zz",
      "S|12|pwd x"};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
    if (!memmem(a, na, want[i], strlen(want[i]))) fail_msg("missing: %s", want[i]);
  assert_int_equal(na, nb);
  assert_memory_equal(a, b, na);
  free(a);
  free(b);
  unlink(theirs);
  tg_test_rm_rf(pts.dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(filtered_session_strips_fields_and_counts,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(filtered_then_compressed, test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(unloadable_filters_refuse_the_config,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(bytecode_v2_is_taken_over_v1_when_set,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(clones_keep_the_filter_unless_told_to_skip_it,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(same_filtered_bytes_as_perfettos_traced,
                                      test_service_setup, test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
