/* Text-format TraceConfig parser: fixtures, wire encodings, limits.
 *
 * Most cases are files in pbtxt_fixtures/: NAME.pbtxt is parsed as
 * TraceConfig and NAME.expect says what must happen (format below). The
 * plain tests here are what a fixture cannot say: wire-level encodings of a
 * hand-made descriptor, generated inputs, every prefix of a config, and the
 * output cap. Outputs are checked by decoding them with protobuf-c (or by
 * reading the wire fields), never by comparing bytes with a hand-made
 * encoding of the same thing.
 *
 * NAME.expect: lines starting with '#' are comments. Then, optionally,
 * `message test.AllTypes` to parse as the hand-made type below (errors
 * only: protobuf-c cannot unpack it). Then either
 *   error LINE:COL     followed by one line per substring the message must
 *                      hold; the output buffer must be left as it was; or
 *   dump               followed by the exact canonical dump (pb_text_dump.h)
 *                      of the decoded message; the dump must also parse back
 *                      to the same dump.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "consumer/pbtxt.h"
#include "pb/config/trace_config.pb-c.h"
#include "pb_text_dump.h"
#include "tracegate/error.h"
#include "tracegate/pb_wire.h"

typedef Perfetto__Protos__TraceConfig cfg_t;

static void free_cfg(cfg_t *cfg) {
  perfetto__protos__trace_config__free_unpacked(cfg, NULL);
}

/* A message with every scalar type and a recursive field, for what our
 * protos do not exercise. The parser reads only names, ids, labels, types
 * and sub-descriptors. */
static const ProtobufCMessageDescriptor all_types_desc;
#define F(n, i, t) \
  { .name = n, .id = i, .label = PROTOBUF_C_LABEL_OPTIONAL, .type = t }
static const ProtobufCFieldDescriptor all_types_fields[] = {
    F("i32", 1, PROTOBUF_C_TYPE_INT32),
    F("s32", 2, PROTOBUF_C_TYPE_SINT32),
    F("sf32", 3, PROTOBUF_C_TYPE_SFIXED32),
    F("i64", 4, PROTOBUF_C_TYPE_INT64),
    F("s64", 5, PROTOBUF_C_TYPE_SINT64),
    F("sf64", 6, PROTOBUF_C_TYPE_SFIXED64),
    F("u32", 7, PROTOBUF_C_TYPE_UINT32),
    F("f32", 8, PROTOBUF_C_TYPE_FIXED32),
    F("u64", 9, PROTOBUF_C_TYPE_UINT64),
    F("f64", 10, PROTOBUF_C_TYPE_FIXED64),
    F("flt", 11, PROTOBUF_C_TYPE_FLOAT),
    F("dbl", 12, PROTOBUF_C_TYPE_DOUBLE),
    F("bytes", 13, PROTOBUF_C_TYPE_BYTES),
    {.name = "child",
     .id = 14,
     .label = PROTOBUF_C_LABEL_OPTIONAL,
     .type = PROTOBUF_C_TYPE_MESSAGE,
     .descriptor = &all_types_desc},
    {.name = "packed",
     .id = 300,
     .label = PROTOBUF_C_LABEL_REPEATED,
     .type = PROTOBUF_C_TYPE_SINT32,
     .flags = PROTOBUF_C_FIELD_FLAG_PACKED},
};
#undef F
static const ProtobufCMessageDescriptor all_types_desc = {
    .magic = PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC,
    .name = "test.AllTypes",
    .short_name = "AllTypes",
    .n_fields = sizeof(all_types_fields) / sizeof(all_types_fields[0]),
    .fields = all_types_fields,
};

/* Reads the next wire field of |r| and checks its id and wire type. */
static tg_pb_field_t next_field(tg_pb_reader_t *r, uint32_t id, uint8_t wt) {
  tg_pb_field_t f;
  assert_int_equal(tg_pb_reader_next(r, &f), 1);
  assert_int_equal(f.id, id);
  assert_int_equal(f.type, wt);
  return f;
}


/* --- fixtures ------------------------------------------------------------ */

/* Reads |path| into an exact-size heap block (so ASan sees any read past
 * the end); NULL if it cannot be read. */
static char *read_whole(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *data = NULL;
  size_t n = 0;
  char chunk[4096];
  for (size_t got; (got = fread(chunk, 1, sizeof(chunk), f)) > 0; n += got) {
    char *grown = realloc(data, n + got);
    if (!grown) {
      free(data);
      fclose(f);
      return NULL;
    }
    data = grown;
    memcpy(data + n, chunk, got);
  }
  bool bad = ferror(f);
  fclose(f);
  if (bad) {
    free(data);
    return NULL;
  }
  if (!data) data = malloc(1);
  *len = n;
  return data;
}

static char *read_fixture(const char *name, const char *ext, size_t *len) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s%s", PBTXT_FIXTURES_DIR, name, ext);
  return read_whole(path, len);
}

/* Parses |text| as |desc| after "pre" in a fresh buffer: the output must
 * keep the prefix whatever happens. */
static int parse_after_prefix(const ProtobufCMessageDescriptor *desc,
                              const char *text, size_t len, tg_buf_t *b,
                              tg_pbtxt_error_t *err) {
  tg_buf_init(b, 0);
  assert_int_equal(tg_buf_append(b, "pre", 3), 0);
  memset(err, 0, sizeof(*err));
  int rc = tg_pbtxt_parse(desc, text, len, b, err);
  assert_memory_equal(tg_buf_begin(b), "pre", 3);
  return rc;
}

/* Checks an `error LINE:COL` fixture; |words| are the remaining lines of
 * the .expect, one substring each. Returns whether it held. */
static bool check_error(const char *name, const ProtobufCMessageDescriptor *d,
                        const char *text, size_t len, unsigned line,
                        unsigned col, char *words) {
  tg_buf_t b;
  tg_pbtxt_error_t err;
  int rc = parse_after_prefix(d, text, len, &b, &err);
  size_t out_size = tg_buf_size(&b);
  tg_buf_free(&b);
  if (rc != TG_EPARSE) {
    print_error("%s: rc %d (%s), want TG_EPARSE\n", name, rc, err.msg);
    return false;
  }
  if (out_size != 3) {
    print_error("%s: output not restored (%zu bytes)\n", name, out_size);
    return false;
  }
  if (err.line != line || err.column != col) {
    print_error("%s: error at %u:%u, want %u:%u (%s)\n", name, err.line,
                err.column, line, col, err.msg);
    return false;
  }
  char prefix[48];
  snprintf(prefix, sizeof(prefix), "line %u, column %u: ", line, col);
  if (strncmp(err.msg, prefix, strlen(prefix)) != 0) {
    print_error("%s: message \"%s\" does not start \"%s\"\n", name, err.msg,
                prefix);
    return false;
  }
  for (char *w = strtok(words, "\n"); w; w = strtok(NULL, "\n")) {
    if (!strstr(err.msg, w)) {
      print_error("%s: '%s' not in \"%s\"\n", name, w, err.msg);
      return false;
    }
  }
  return true;
}

/* Parses |text| as TraceConfig, decodes it and dumps it into |dump|
 * (NUL-terminated). Returns the parser's rc, or -EBADMSG if protobuf-c
 * cannot decode what the parser wrote. */
static int parse_and_dump(const char *text, size_t len, tg_buf_t *dump,
                          tg_pbtxt_error_t *err) {
  tg_buf_t b;
  int rc = parse_after_prefix(&perfetto__protos__trace_config__descriptor,
                              text, len, &b, err);
  if (rc == 0) {
    cfg_t *cfg = perfetto__protos__trace_config__unpack(
        NULL, tg_buf_size(&b) - 3, tg_buf_begin(&b) + 3);
    if (!cfg) {
      rc = -EBADMSG;
    } else {
      assert_int_equal(tg_test_pb_text_dump(&cfg->base, dump), 0);
      free_cfg(cfg);
    }
  }
  tg_buf_free(&b);
  assert_int_equal(tg_buf_append(dump, "", 1), 0);
  return rc;
}

/* Checks a `dump` fixture: the dump is exactly |want|, and parsing the dump
 * yields the same dump again. */
static bool check_dump(const char *name, const char *text, size_t len,
                       const char *want) {
  tg_buf_t dump, again;
  tg_pbtxt_error_t err;
  tg_buf_init(&dump, 0);
  tg_buf_init(&again, 0);
  bool ok = false;
  int rc = parse_and_dump(text, len, &dump, &err);
  const char *got = (const char *)tg_buf_begin(&dump);
  if (rc != 0) {
    print_error("%s: rc %d: %s\n", name, rc, err.msg);
  } else if (strcmp(got, want) != 0) {
    /* cmocka's print_error truncates; a dump can be long. */
    fprintf(stderr, "%s: dump differs; got:\n%s---\nwant:\n%s---\n", name,
            got, want);
  } else if ((rc = parse_and_dump(got, strlen(got), &again, &err)) != 0) {
    print_error("%s: the dump does not parse back (%d): %s\n", name, rc,
                err.msg);
  } else if (strcmp((const char *)tg_buf_begin(&again), want) != 0) {
    fprintf(stderr, "%s: the dump parses back as:\n%s---\n", name,
            (const char *)tg_buf_begin(&again));
  } else {
    ok = true;
  }
  tg_buf_free(&dump);
  tg_buf_free(&again);
  return ok;
}

/* Runs one fixture; |expect| is its .expect, modified in place. */
static bool run_fixture(const char *name, char *expect) {
  size_t len;
  char *text = read_fixture(name, ".pbtxt", &len);
  if (!text) {
    print_error("%s: cannot read %s.pbtxt\n", name, name);
    return false;
  }
  /* Skip the comments. */
  char *p = expect;
  while (*p == '#') {
    char *nl = strchr(p, '\n');
    p = nl ? nl + 1 : p + strlen(p);
  }
  const ProtobufCMessageDescriptor *desc =
      &perfetto__protos__trace_config__descriptor;
  static const char all_types_line[] = "message test.AllTypes\n";
  if (strncmp(p, all_types_line, strlen(all_types_line)) == 0) {
    desc = &all_types_desc;
    p += strlen(all_types_line);
  }
  bool ok = false;
  unsigned line, col;
  int used = 0;
  if (sscanf(p, "error %u:%u%n", &line, &col, &used) == 2 && p[used] == '\n') {
    ok = check_error(name, desc, text, len, line, col, p + used + 1);
  } else if (strncmp(p, "dump\n", 5) == 0 && desc != &all_types_desc) {
    ok = check_dump(name, text, len, p + 5);
  } else {
    print_error("%s: .expect holds neither 'error L:C' nor 'dump'\n", name);
  }
  free(text);
  return ok;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every NAME.pbtxt has a NAME.expect and the other way round; each fixture
 * runs, and all failures are listed before the test fails. */
static void fixtures_parse_or_fail_as_expected(void **state) {
  (void)state;
  DIR *dir = opendir(PBTXT_FIXTURES_DIR);
  assert_non_null(dir);
  char *names[512];
  size_t n = 0;
  unsigned orphans = 0;
  for (struct dirent *e; (e = readdir(dir)) != NULL;) {
    size_t l = strlen(e->d_name);
    const char *ext = strrchr(e->d_name, '.');
    if (!ext || e->d_name[0] == '.') continue;
    if (strcmp(ext, ".pbtxt") == 0) {
      assert_true(n < sizeof(names) / sizeof(names[0]));
      names[n] = strndup(e->d_name, l - strlen(".pbtxt"));
      assert_non_null(names[n]);
      n++;
    } else if (strcmp(ext, ".expect") == 0) {
      char path[512];
      snprintf(path, sizeof(path), "%s/%.*s.pbtxt", PBTXT_FIXTURES_DIR,
               (int)(l - strlen(".expect")), e->d_name);
      if (access(path, R_OK) != 0) {
        print_error("%s has no .pbtxt\n", e->d_name);
        orphans++;
      }
    } else {
      print_error("%s: not a fixture file\n", e->d_name);
      orphans++;
    }
  }
  closedir(dir);
  qsort(names, n, sizeof(names[0]), by_name);
  unsigned failed = 0;
  for (size_t i = 0; i < n; i++) {
    size_t len;
    char *expect = read_fixture(names[i], ".expect", &len);
    if (!expect) {
      print_error("%s: no .expect\n", names[i]);
      failed++;
    } else {
      char *z = realloc(expect, len + 1);
      assert_non_null(z);
      z[len] = '\0';
      if (!run_fixture(names[i], z)) failed++;
      free(z);
    }
    free(names[i]);
  }
  print_message("%zu fixtures, %u failed, %u stray files\n", n, failed,
                orphans);
  assert_int_equal(failed, 0);
  assert_int_equal(orphans, 0);
  /* The fixtures are the bulk of this test; an empty directory (a wrong
   * path) must not pass. */
  assert_true(n >= 80);
}

/* --- what fixtures cannot say --------------------------------------------- */

static void every_scalar_type_uses_its_wire_encoding(void **state) {
  (void)state;
  const char *text =
      "i32: -1 s32: -1 s32: -2147483648 sf32: -2 i64: -9223372036854775808\n"
      "s64: -9223372036854775808 sf64: -3 u32: 4294967295 f32: 0xdeadbeef\n"
      "u64: 18446744073709551615 f64: 0x0123456789abcdef\n"
      "flt: 1.5f dbl: -inf packed: [-1, 1] child { i32: 7 child { } }\n";
  tg_buf_t b;
  tg_pbtxt_error_t err;
  tg_buf_init(&b, 0);
  int rc = tg_pbtxt_parse(&all_types_desc, text, strlen(text), &b, &err);
  if (rc) fail_msg("%s", err.msg);
  tg_pb_reader_t r;
  tg_pb_reader_init(&r, tg_buf_begin(&b), tg_buf_size(&b));
  const uint8_t *before = r.cur;
  /* int32 -1 is sign-extended to 64 bits: a 10-byte varint. */
  assert_true(next_field(&r, 1, TG_PB_WT_VARINT).value == UINT64_MAX);
  assert_int_equal(r.cur - before, 11);
  assert_int_equal(next_field(&r, 2, TG_PB_WT_VARINT).value, 1);
  assert_int_equal(next_field(&r, 2, TG_PB_WT_VARINT).value, 0xFFFFFFFFu);
  assert_int_equal(next_field(&r, 3, TG_PB_WT_FIXED32).value, 0xFFFFFFFEu);
  assert_true(next_field(&r, 4, TG_PB_WT_VARINT).value == 1ull << 63);
  assert_true(next_field(&r, 5, TG_PB_WT_VARINT).value == UINT64_MAX);
  assert_true(next_field(&r, 6, TG_PB_WT_FIXED64).value == (uint64_t)-3);
  assert_int_equal(next_field(&r, 7, TG_PB_WT_VARINT).value, 0xFFFFFFFFu);
  assert_int_equal(next_field(&r, 8, TG_PB_WT_FIXED32).value, 0xdeadbeefu);
  assert_true(next_field(&r, 9, TG_PB_WT_VARINT).value == UINT64_MAX);
  assert_true(next_field(&r, 10, TG_PB_WT_FIXED64).value ==
              0x0123456789abcdefull);
  float fl = 1.5f;
  uint32_t fbits;
  memcpy(&fbits, &fl, 4);
  assert_int_equal(next_field(&r, 11, TG_PB_WT_FIXED32).value, fbits);
  double d = -INFINITY;
  uint64_t dbits;
  memcpy(&dbits, &d, 8);
  assert_true(next_field(&r, 12, TG_PB_WT_FIXED64).value == dbits);
  /* Repeated scalars come out unpacked even when declared packed. */
  assert_int_equal(next_field(&r, 300, TG_PB_WT_VARINT).value, 1);
  assert_int_equal(next_field(&r, 300, TG_PB_WT_VARINT).value, 2);
  tg_pb_field_t child = next_field(&r, 14, TG_PB_WT_LEN);
  static const uint8_t want_child[] = {0x08, 7, 0x72, 0};
  assert_int_equal(child.size, sizeof(want_child));
  assert_memory_equal(child.data, want_child, sizeof(want_child));
  tg_pb_field_t end;
  assert_int_equal(tg_pb_reader_next(&r, &end), 0);
  tg_buf_free(&b);
}

static void bytes_hold_nuls_and_any_octet(void **state) {
  (void)state;
  tg_buf_t b;
  tg_pbtxt_error_t err;
  tg_buf_init(&b, 0);
  const char *text = "bytes: '\\0\\377\\x80a'";
  assert_int_equal(
      tg_pbtxt_parse(&all_types_desc, text, strlen(text), &b, &err), 0);
  tg_pb_reader_t r;
  tg_pb_reader_init(&r, tg_buf_begin(&b), tg_buf_size(&b));
  tg_pb_field_t f = next_field(&r, 13, TG_PB_WT_LEN);
  assert_int_equal(f.size, 4);
  assert_memory_equal(f.data, "\0\377\200a", 4);
  tg_buf_free(&b);
}

static void long_values_widen_lengths_and_output_appends(void **state) {
  (void)state;
  /* A 300-byte name in a nested message needs 2-byte lengths on the way up;
   * the output goes after what the buffer already held. */
  char text[512];
  char name[301];
  memset(name, 'n', 300);
  name[300] = '\0';
  snprintf(text, sizeof(text),
           "data_sources { config { name: \"%s\" } } duration_ms: 3", name);
  tg_buf_t b;
  tg_pbtxt_error_t err;
  tg_buf_init(&b, 0);
  assert_int_equal(tg_buf_append(&b, "pre", 3), 0);
  assert_int_equal(tg_pbtxt_parse(&perfetto__protos__trace_config__descriptor,
                                  text, strlen(text), &b, &err),
                   0);
  assert_memory_equal(tg_buf_begin(&b), "pre", 3);
  cfg_t *cfg = perfetto__protos__trace_config__unpack(NULL, tg_buf_size(&b) - 3,
                                                      tg_buf_begin(&b) + 3);
  assert_non_null(cfg);
  assert_string_equal(cfg->data_sources[0]->config->name, name);
  assert_int_equal(cfg->duration_ms, 3);
  free_cfg(cfg);

  /* Empty and comment-only inputs are the empty message. */
  tg_buf_reset(&b);
  assert_int_equal(tg_pbtxt_parse(&perfetto__protos__trace_config__descriptor,
                                  "", 0, &b, &err),
                   0);
  assert_int_equal(tg_pbtxt_parse(&perfetto__protos__trace_config__descriptor,
                                  " # nothing\n", 11, &b, NULL),
                   0);
  assert_int_equal(tg_buf_size(&b), 0);
  tg_buf_free(&b);
}

static void nesting_is_bounded(void **state) {
  (void)state;
  /* TG_PBTXT_MAX_DEPTH levels are fine; one more is an error at its '{'. */
  char text[1024];
  for (unsigned levels = TG_PBTXT_MAX_DEPTH; levels <= TG_PBTXT_MAX_DEPTH + 1;
       levels++) {
    size_t n = 0;
    for (unsigned i = 0; i < levels; i++)
      n += (size_t)sprintf(text + n, "child{");
    for (unsigned i = 0; i < levels; i++) text[n++] = '}';
    text[n] = '\0';
    tg_buf_t b;
    tg_pbtxt_error_t err;
    tg_buf_init(&b, 0);
    int rc = tg_pbtxt_parse(&all_types_desc, text, n, &b, &err);
    if (levels == TG_PBTXT_MAX_DEPTH) {
      assert_int_equal(rc, 0);
    } else {
      assert_int_equal(rc, TG_EPARSE);
      assert_int_equal(err.line, 1);
      assert_int_equal(err.column, 6 * TG_PBTXT_MAX_DEPTH + 6);
      assert_non_null(strstr(err.msg, "nested deeper than 64"));
      assert_int_equal(tg_buf_size(&b), 0);
    }
    tg_buf_free(&b);
  }
}

/* Every prefix of a real config, in an exact-size heap block so ASan sees
 * any read past |len|, either parses or fails cleanly. */
static void truncated_inputs_never_read_past_len(void **state) {
  (void)state;
  size_t len;
  char *text = read_fixture("two_buffers_route_two_data_sources", ".pbtxt", &len);
  assert_non_null(text);
  unsigned ok = 0;
  for (size_t n = 0; n <= len; n++) {
    char *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    memcpy(copy, text, n);
    tg_buf_t b;
    tg_pbtxt_error_t err;
    tg_buf_init(&b, 0);
    int rc = tg_pbtxt_parse(&perfetto__protos__trace_config__descriptor, copy,
                            n, &b, &err);
    if (rc == 0) {
      ok++;
    } else {
      assert_int_equal(rc, TG_EPARSE);
      assert_true(err.line >= 1 && err.column >= 1);
      assert_int_equal(tg_buf_size(&b), 0);
    }
    tg_buf_free(&b);
    free(copy);
  }
  free(text);
  assert_true(ok > 2); /* the empty prefix, the full text, and some more */
}

static void output_cap_is_reported_and_output_restored(void **state) {
  (void)state;
  tg_buf_t b;
  tg_pbtxt_error_t err;
  size_t len;
  char *text = read_fixture("two_buffers_route_two_data_sources", ".pbtxt", &len);
  assert_non_null(text);
  tg_buf_init(&b, 16);
  assert_int_equal(tg_buf_append(&b, "pre", 3), 0);
  int rc = tg_pbtxt_parse(&perfetto__protos__trace_config__descriptor,
                          text, len, &b, &err);
  assert_int_equal(rc, -ENOBUFS);
  assert_non_null(strstr(err.msg, "cannot grow the output"));
  assert_int_equal(tg_buf_size(&b), 3);
  tg_buf_free(&b);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fixtures_parse_or_fail_as_expected),
      cmocka_unit_test(every_scalar_type_uses_its_wire_encoding),
      cmocka_unit_test(bytes_hold_nuls_and_any_octet),
      cmocka_unit_test(long_values_widen_lengths_and_output_appends),
      cmocka_unit_test(nesting_is_bounded),
      cmocka_unit_test(truncated_inputs_never_read_past_len),
      cmocka_unit_test(output_cap_is_reported_and_output_restored),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
