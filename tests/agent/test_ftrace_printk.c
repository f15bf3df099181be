/* linux.ftrace's char pointers: the printk_formats parser on kernel-like
 * and hostile text, its lookups, the file read from a fake tracefs tree,
 * which pointer fields are written as their strings, and records of
 * power/suspend_resume and of a generic event encoded from pages built
 * byte by byte (ftrace_fixtures.h), decoded back with protobuf-c. Last,
 * this kernel's printk_formats (needs root and tracefs; skipped without
 * them unless TG_REQUIRE_FTRACE is set). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/probes/ftrace_config.h"
#include "agent/probes/ftrace_encode.h"
#include "agent/probes/ftrace_events.h"
#include "agent/probes/ftrace_format.h"
#include "agent/probes/ftrace_printk.h"
#include "agent/probes/ftrace_session.h"
#include "agent/probes/ftrace_tracefs.h"
#include "common/log.h"
#include "ftrace_fixtures.h"
#include "pb/trace/trace_packet.pb-c.h"
#include "tracegate/pb_writer.h"

/* --- fixtures ------------------------------------------------------------ */

#define S_THAW UINT64_C(0xffffffff8281a8ff)
#define S_DPM UINT64_C(0xffffffff8281b739)
#define S_NONE UINT64_C(0xffffffff8281c000) /* not listed */

/* As this kernel prints it: a duplicate, a string with a colon. */
static const char printk_text[] =
    "0xffffffff8281a8ff : \"thaw_processes\"\n"
    "0xffffffff8281a8ff : \"thaw_processes\"\n"
    "0xffffffff8281b739 : \"dpm_suspend: late\"\n"
    "0xffffffff8281b755 : \"rcu_preempt\"\n";

static const char suspend_format[] =
    "name: suspend_resume\nID: 314\n" COMMON_FIELDS
    "\tfield:const char * action;\toffset:8;\tsize:8;\tsigned:0;\n"
    "\tfield:int val;\toffset:16;\tsize:4;\tsigned:1;\n"
    "\tfield:bool start;\toffset:20;\tsize:1;\tsigned:0;\n";

/* Not one of Perfetto's: GenericFtraceEvent. */
static const char rcu_format[] =
    "name: rcu_utilization\nID: 315\n" COMMON_FIELDS
    "\tfield:const char * s;\toffset:8;\tsize:8;\tsigned:0;\n";

/* A kernel whose workqueue function were a char pointer: the message's
 * field is an integer, so it is an index like any address. */
static const char wq_char_format[] =
    "name: workqueue_execute_start\nID: 316\n" COMMON_FIELDS
    "\tfield:void * work;\toffset:8;\tsize:8;\tsigned:0;\n"
    "\tfield:const char * function;\toffset:16;\tsize:8;\tsigned:0;\n";

static tg_printk_formats_t parsed(const char *text) {
  tg_printk_formats_t t;
  assert_true(tg_printk_formats_parse(&t, text, strlen(text)) >= 0);
  return t;
}

/* The string at |addr| as a C string in |buf|, or NULL. */
static const char *lookup(const tg_printk_formats_t *t, uint64_t addr,
                          char *buf, size_t cap) {
  size_t n;
  const char *s = tg_printk_formats_lookup(t, addr, &n);
  if (!s) return NULL;
  assert_true(n < cap);
  memcpy(buf, s, n);
  buf[n] = 0;
  return buf;
}

#define LOOKS_UP(t, addr, str)                                  \
  do {                                                          \
    char b_[TG_PRINTK_STR_MAX + 1];                             \
    const char *s_ = lookup((t), (addr), b_, sizeof(b_));       \
    assert_non_null(s_);                                        \
    assert_string_equal(s_, (str));                             \
  } while (0)

#define MISSES(t, addr)                                         \
  do {                                                          \
    size_t n_;                                                  \
    assert_null(tg_printk_formats_lookup((t), (addr), &n_));    \
  } while (0)

/* --- parser -------------------------------------------------------------- */

static void printk_parses_kernel_lines(void **state) {
  (void)state;
  tg_printk_formats_t t = parsed(printk_text);
  assert_int_equal(t.strs.n, 3); /* the duplicate once */
  assert_int_equal(t.bad_lines, 0);
  LOOKS_UP(&t, S_THAW, "thaw_processes");
  LOOKS_UP(&t, S_DPM, "dpm_suspend: late");
  LOOKS_UP(&t, UINT64_C(0xffffffff8281b755), "rcu_preempt");
  tg_printk_formats_free(&t);

  /* Perfetto's leniencies: no 0x, no blanks, no quotes, upper case hex,
   * blanks around the address, a last line without a newline. */
  t = parsed("0x2 : No quotes\n"
             "0x3:\"No gap\"\n"
             "ABCDEF : \"no prefix\"\n"
             " \t0X10 \t: \t\"blanks\"\n"
             "0x9 : \"Last line\"");
  assert_int_equal(t.strs.n, 5);
  assert_int_equal(t.bad_lines, 0);
  LOOKS_UP(&t, 2, "No quotes");
  LOOKS_UP(&t, 3, "No gap");
  LOOKS_UP(&t, 0xabcdef, "no prefix");
  LOOKS_UP(&t, 0x10, "blanks");
  LOOKS_UP(&t, 9, "Last line");
  /* Sorted by address. */
  for (size_t i = 1; i < t.strs.n; i++)
    assert_true(tg__addr_strs_addr(&t.strs, i - 1) <
                tg__addr_strs_addr(&t.strs, i));
  tg_printk_formats_free(&t);
}

static void printk_skips_malformed_lines(void **state) {
  (void)state;
  /* Perfetto's rubbish, and more: each line but the last two is bad or
   * names nothing. */
  tg_printk_formats_t t = parsed(
      ": leading colon\n"
      "trailing colon:\n"
      "multiple colons: : : : :\n"
      "\n"
      ":\n"
      ": \"No address\"\n"
      "0x1 :\n"                          /* no string */
      "0x4 : \"\"\n"                     /* an empty one */
      "0xbadhexaddress : \"Bad hex\"\n"
      "\"Wrong way round\" : 0x4\n"
      "0x : \"no digits\"\n"
      "0x0x5 : \"two prefixes\"\n"
      "0x 5 : \"blank inside\"\n"
      "-0x5 : \"negative\"\n"
      "0x10000000000000000 : \"17 digits\"\n"
      "fffffffffffffffff : \"17 f\"\n"
      "\x01\x02\xff\n"
      "   \n"
      "0x00000000000000000000000006 : \"leading zeros\"\n"
      "0xffffffffffffffff : \"max\"\n");
  assert_int_equal(t.strs.n, 2);
  assert_int_equal(t.bad_lines, 15);
  LOOKS_UP(&t, 6, "leading zeros");
  LOOKS_UP(&t, UINT64_MAX, "max");
  MISSES(&t, 1);
  MISSES(&t, 4);
  MISSES(&t, 5);
  tg_printk_formats_free(&t);
}

static void printk_keeps_strings_as_printed(void **state) {
  (void)state;
  /* The kernel escapes \n, \t and \" but not a backslash itself: the text
   * is kept as printed, as Perfetto's probes keep it. One pair of quotes
   * is dropped; an unterminated string keeps what follows its quote. */
  tg_printk_formats_t t = parsed(
      "0x1 : \"rcu: %s\\n\"\n"
      "0x2 : \"say \\\"hi\\\"\"\n"
      "0x3 : \"unterminated\n"
      "0x4 : \"\"quoted twice\"\"\n"
      "0x5 : \"a\\tb\"  \n"
      "0x6 : \"\n");
  LOOKS_UP(&t, 1, "rcu: %s\\n");
  LOOKS_UP(&t, 2, "say \\\"hi\\\"");
  LOOKS_UP(&t, 3, "unterminated");
  LOOKS_UP(&t, 4, "\"quoted twice\"");
  /* Blanks after the closing quote: it is not the last byte, so kept. */
  LOOKS_UP(&t, 5, "a\\tb\"  ");
  MISSES(&t, 6); /* a lone quote: empty */
  assert_int_equal(t.strs.n, 5);
  tg_printk_formats_free(&t);
}

static void printk_bounds_lines_strings_and_entries(void **state) {
  (void)state;
  size_t cap = 3 * TG_PRINTK_LINE_MAX + 256;
  char *text = malloc(cap);
  assert_non_null(text);
  size_t o = 0;
  /* A line longer than TG_PRINTK_LINE_MAX: skipped whole. */
  o += (size_t)snprintf(text + o, cap - o, "0x1 : \"");
  memset(text + o, 'x', TG_PRINTK_LINE_MAX);
  o += TG_PRINTK_LINE_MAX;
  o += (size_t)snprintf(text + o, cap - o, "\"\n0x2 : \"after\"\n0x3 : \"");
  /* A string longer than TG_PRINTK_STR_MAX on a line that fits: cut. */
  memset(text + o, 's', TG_PRINTK_STR_MAX + 100);
  o += TG_PRINTK_STR_MAX + 100;
  o += (size_t)snprintf(text + o, cap - o, "\"\n");
  tg_printk_formats_t t;
  assert_int_equal(tg_printk_formats_parse(&t, text, o), 2);
  assert_int_equal(t.bad_lines, 1);
  assert_int_equal(t.cut, 1);
  MISSES(&t, 1);
  LOOKS_UP(&t, 2, "after");
  size_t n;
  const char *s = tg_printk_formats_lookup(&t, 3, &n);
  assert_non_null(s);
  assert_int_equal(n, TG_PRINTK_STR_MAX);
  assert_int_equal(s[0], 's');
  assert_int_equal(s[n - 1], 's');
  tg_printk_formats_free(&t);
  free(text);

  /* Past TG_PRINTK_MAX_ENTRIES: the rest are counted, not kept. */
  size_t lines = TG_PRINTK_MAX_ENTRIES + 2;
  cap = lines * 24;
  text = malloc(cap);
  assert_non_null(text);
  o = 0;
  for (size_t i = 1; i <= lines; i++)
    o += (size_t)snprintf(text + o, cap - o, "0x%zx : \"s\"\n", i);
  assert_int_equal(tg_printk_formats_parse(&t, text, o),
                   (int)TG_PRINTK_MAX_ENTRIES);
  assert_int_equal(t.strs.dropped, 2);
  LOOKS_UP(&t, TG_PRINTK_MAX_ENTRIES, "s");
  MISSES(&t, TG_PRINTK_MAX_ENTRIES + 1);
  tg_printk_formats_free(&t);
  free(text);
}

static void printk_empty_or_zeroed_text_lists_nothing(void **state) {
  (void)state;
  tg_printk_formats_t t;
  assert_int_equal(tg_printk_formats_parse(&t, "", 0), 0);
  MISSES(&t, S_THAW);
  assert_int_equal(tg_printk_formats_mem(&t), 0);
  tg_printk_formats_free(&t);
  /* A reader the kernel hides addresses from. */
  t = parsed("0x0 : \"Rescheduling interrupts\"\n0x0 : \"rcu_sched\"\n");
  assert_int_equal(t.strs.n, 0);
  assert_int_equal(t.zero_addrs, 2);
  MISSES(&t, 0);
  tg_printk_formats_free(&t);
  /* No table at all. */
  MISSES(NULL, S_THAW);
}

static void printk_duplicates_keep_the_first_listed(void **state) {
  (void)state;
  tg_printk_formats_t t = parsed("0x30 : \"third\"\n"
                                 "0x10 : \"first\"\n"
                                 "0x30 : \"third again\"\n"
                                 "0x20 : \"second\"\n"
                                 "0x10 : \"first again\"\n");
  assert_int_equal(t.strs.n, 3);
  LOOKS_UP(&t, 0x10, "first");
  LOOKS_UP(&t, 0x20, "second");
  LOOKS_UP(&t, 0x30, "third");
  /* Exact addresses only: a pointer inside a string is not the string. */
  MISSES(&t, 0x0f);
  MISSES(&t, 0x11);
  MISSES(&t, 0x31);
  tg_printk_formats_free(&t);
}

static void printk_pieces_parse_as_the_whole(void **state) {
  (void)state;
  static const char text[] = "0x30 : \"third\"\n"
                             "junk\n"
                             "0x10 : \"first\"\n"
                             "0x0 : \"zero\"\n"
                             "0x20 : \"no newline\"";
  tg_printk_formats_t whole = parsed(text), parts;
  for (size_t step = 1; step < 8; step++) {
    tg_printk_formats_init(&parts);
    for (size_t o = 0; o < strlen(text); o += step) {
      size_t n = strlen(text) - o < step ? strlen(text) - o : step;
      assert_int_equal(tg_printk_formats_feed(&parts, text + o, n), 0);
    }
    assert_int_equal(tg_printk_formats_finish(&parts), (int)whole.strs.n);
    assert_int_equal(parts.bad_lines, whole.bad_lines);
    assert_int_equal(parts.zero_addrs, whole.zero_addrs);
    assert_true(tg__addr_strs_equal(&parts.strs, &whole.strs));
    tg_printk_formats_free(&parts);
  }
  assert_int_equal(whole.strs.n, 3);
  LOOKS_UP(&whole, 0x20, "no newline");
  tg_printk_formats_free(&whole);
}

/* --- a fake tracefs tree ------------------------------------------------- */

typedef struct fake_tracefs {
  char root[64];
  char file[128];
} fake_tracefs_t;

/* A directory standing for tracefs, with |text| (NULL: none) as its
 * printk_formats. */
static void fake_tracefs(fake_tracefs_t *f, const char *text) {
  snprintf(f->root, sizeof(f->root), "/tmp/tg-printk-XXXXXX");
  assert_non_null(mkdtemp(f->root));
  snprintf(f->file, sizeof(f->file), "%s/" TG_PRINTK_FILE, f->root);
  if (!text) return;
  FILE *fp = fopen(f->file, "w");
  assert_non_null(fp);
  assert_int_equal(fwrite(text, 1, strlen(text), fp), strlen(text));
  assert_int_equal(fclose(fp), 0);
}

static void fake_tracefs_remove(fake_tracefs_t *f) {
  unlink(f->file);
  assert_int_equal(rmdir(f->root), 0);
}

static void printk_loads_from_the_tracefs_root(void **state) {
  (void)state;
  fake_tracefs_t fs;
  fake_tracefs(&fs, printk_text);
  tg_printk_formats_t t;
  assert_int_equal(tg_printk_formats_load(&t, fs.root), 3);
  LOOKS_UP(&t, S_DPM, "dpm_suspend: late");
  assert_true(tg_printk_formats_mem(&t) > 0);
  tg_printk_formats_free(&t);
  fake_tracefs_remove(&fs);

  /* No file: an error, and a table that lists nothing. */
  fake_tracefs(&fs, NULL);
  assert_int_equal(tg_printk_formats_load(&t, fs.root), -ENOENT);
  MISSES(&t, S_DPM);
  tg_printk_formats_free(&t);
  fake_tracefs_remove(&fs);
}

/* --- which pointers are strings ------------------------------------------ */

static void format_marks_char_pointers(void **state) {
  (void)state;
  static const char text[] =
      "name: x\nID: 7\n" COMMON_FIELDS
      "\tfield:const char * a;\toffset:8;\tsize:8;\tsigned:0;\n"
      "\tfield:char *b;\toffset:16;\tsize:4;\tsigned:0;\n"
      "\tfield:unsigned char* c;\toffset:20;\tsize:8;\tsigned:0;\n"
      "\tfield:const char ** d;\toffset:28;\tsize:8;\tsigned:0;\n"
      "\tfield:const char * e[2];\toffset:36;\tsize:16;\tsigned:0;\n"
      "\tfield:const char * f;\toffset:52;\tsize:2;\tsigned:0;\n"
      "\tfield:struct char_dev * g;\toffset:54;\tsize:8;\tsigned:0;\n"
      "\tfield:uchar * h;\toffset:62;\tsize:8;\tsigned:0;\n"
      "\tfield:char i[16];\toffset:70;\tsize:16;\tsigned:0;\n"
      "\tfield:__data_loc char[] j;\toffset:86;\tsize:4;\tsigned:0;\n";
  tg_ftrace_format_t f;
  assert_int_equal(tg_ftrace_format_parse(text, strlen(text), &f), 0);
  assert_int_equal(tg_ftrace_format_field(&f, "a")->kind, TG_FTRACE_FIELD_STRPTR);
  assert_int_equal(tg_ftrace_format_field(&f, "b")->kind, TG_FTRACE_FIELD_STRPTR);
  assert_int_equal(tg_ftrace_format_field(&f, "c")->kind, TG_FTRACE_FIELD_STRPTR);
  /* A pointer to pointers, or to something else named *char*: addresses. */
  assert_int_equal(tg_ftrace_format_field(&f, "d")->kind, TG_FTRACE_FIELD_SYMADDR);
  assert_int_equal(tg_ftrace_format_field(&f, "g")->kind, TG_FTRACE_FIELD_SYMADDR);
  assert_int_equal(tg_ftrace_format_field(&f, "h")->kind, TG_FTRACE_FIELD_SYMADDR);
  /* Arrays of them, or pointers of another size: not decoded. */
  assert_int_equal(tg_ftrace_format_field(&f, "e")->kind, TG_FTRACE_FIELD_SKIP);
  assert_int_equal(tg_ftrace_format_field(&f, "f")->kind, TG_FTRACE_FIELD_SKIP);
  /* Strings held in the record are what they were. */
  assert_int_equal(tg_ftrace_format_field(&f, "i")->kind, TG_FTRACE_FIELD_CHARS);
  assert_int_equal(tg_ftrace_format_field(&f, "j")->kind, TG_FTRACE_FIELD_DATA_LOC);
}

static const tg_ftrace_out_field_t *out_field(const tg_ftrace_table_t *t,
                                              uint16_t id, const char *name) {
  uint16_t at = t->by_id[id];
  assert_true(at > 0);
  const tg_ftrace_event_desc_t *d = &t->events[at - 1];
  for (unsigned i = 0; i < d->n_out; i++)
    if (strcmp(d->out[i].f.name, name) == 0) return &d->out[i];
  fail_msg("%s: not written", name);
  return NULL;
}

static void table_writes_char_pointers_as_strings_where_wanted(void **state) {
  (void)state;
  tg_ftrace_table_t t;
  assert_int_equal(tg_ftrace_table_init(&t), 0);
  add_format(&t, "workqueue", wq_char_format);
  /* An integer in the message: an address, as before. */
  assert_int_equal(out_field(&t, 316, "function")->f.kind,
                   TG_FTRACE_FIELD_SYMADDR);
  assert_false(tg_ftrace_table_wants_strings(&t));
  add_format(&t, "power", suspend_format);
  const tg_ftrace_out_field_t *o = out_field(&t, 314, "action");
  assert_int_equal(o->f.kind, TG_FTRACE_FIELD_STRPTR);
  assert_int_equal(o->type, TG_FTRACE_PT_STRING);
  assert_int_equal(o->proto_field, 1);
  assert_true(tg_ftrace_table_wants_strings(&t));
  tg_ftrace_table_free(&t);

  /* A generic event's char pointer: its string, as Perfetto's probes
   * write it (str_value). */
  assert_int_equal(tg_ftrace_table_init(&t), 0);
  add_format(&t, "rcu", rcu_format);
  assert_int_equal(out_field(&t, 315, "s")->f.kind, TG_FTRACE_FIELD_STRPTR);
  assert_true(tg_ftrace_table_wants_strings(&t));
  tg_ftrace_table_free(&t);
}

/* --- records ------------------------------------------------------------- */

typedef struct fx {
  tg_ftrace_table_t table;
  tg_ftrace_encoder_t enc;
  tg_printk_formats_t printk;
  uint8_t out[65536];
  size_t segment; /* 0: one segment; else refills of this many bytes */
} fx_t;

/* The table and encoder of the formats above, with printk_formats read
 * from a fake tracefs tree holding printk_text. */
static fx_t *fx_new(void) {
  fx_t *f = calloc(1, sizeof(*f));
  assert_non_null(f);
  assert_int_equal(tg_ftrace_table_init(&f->table), 0);
  add_format(&f->table, "power", suspend_format);
  add_format(&f->table, "rcu", rcu_format);
  add_format(&f->table, "workqueue", wq_char_format);
  assert_int_equal(tg_ftrace_encoder_init(&f->enc, &f->table, false, 4096), 0);
  fake_tracefs_t fs;
  fake_tracefs(&fs, printk_text);
  assert_int_equal(tg_printk_formats_load(&f->printk, fs.root), 3);
  fake_tracefs_remove(&fs);
  f->enc.printk = &f->printk;
  return f;
}

static void fx_free(fx_t *f) {
  tg_ftrace_encoder_free(&f->enc);
  tg_ftrace_table_free(&f->table);
  tg_printk_formats_free(&f->printk);
  free(f);
}

static int refill(void *ctx, tg_pbw_t *w, size_t min_contiguous) {
  fx_t *f = ctx;
  size_t n = f->segment > min_contiguous ? f->segment : min_contiguous;
  if ((size_t)(w->cur - f->out) + n > sizeof(f->out)) return -ENOSPC;
  w->end = w->cur + n;
  return 0;
}

static void add_suspend(page_t *p, uint64_t action, int32_t val, bool start) {
  uint8_t b[13] = {0}, rec[64];
  memcpy(b, &action, 8);
  memcpy(b + 8, &val, 4);
  b[12] = start;
  rec_data(p, 1, rec, event(rec, 314, 1, b, sizeof(b)));
}

static void add_rcu(page_t *p, uint64_t s) {
  uint8_t rec[64];
  rec_data(p, 1, rec, event(rec, 315, 1, &s, 8));
}

/* The page as one TracePacket's bundle, in one segment or in small ones,
 * decoded back. No byte run of it is a raw address of this test. */
static Perfetto__Protos__TracePacket *encode(fx_t *f, page_t *p,
                                             size_t segment) {
  page_finish(p, false);
  tg_ftrace_page_layout_t l;
  assert_int_equal(tg_ftrace_header_page_parse(header_page_fixture,
                                               strlen(header_page_fixture), &l),
                   0);
  f->segment = segment;
  tg_pbw_t w;
  if (segment)
    tg_pbw_init(&w, f->out, segment, refill, f);
  else
    tg_pbw_init(&w, f->out, sizeof(f->out), NULL, NULL);
  tg_pbw_begin_nested(&w, 1);
  tg_ftrace_bundle_result_t res;
  tg_ftrace_encode_bundle(&f->enc, &w, 0, &l, p->b, sizeof(p->b), &res);
  tg_pbw_end_nested(&w);
  assert_int_equal(tg_pbw_error(&w), 0);
  assert_false(res.corrupt);
  assert_int_equal(res.skipped, 0);
  size_t len = (size_t)tg_pbw_written(&w);
  const uint64_t raw[] = {S_THAW, S_DPM, S_NONE};
  for (size_t i = 0; i < sizeof(raw) / sizeof(raw[0]); i++)
    for (size_t o = 0; o + 8 <= len; o++)
      assert_true(memcmp(f->out + o, &raw[i], 8) != 0);
  Perfetto__Protos__TracePacket *pk =
      perfetto__protos__trace_packet__unpack(NULL, len, f->out);
  assert_non_null(pk);
  assert_non_null(pk->ftrace_events);
  tg_ftrace_kaddrs_reset(&f->enc.kaddrs);
  return pk;
}

static const Perfetto__Protos__SuspendResumeFtraceEvent *suspend_ev(
    const Perfetto__Protos__TracePacket *pk, size_t i) {
  assert_true(i < pk->ftrace_events->n_event);
  const Perfetto__Protos__FtraceEvent *e = pk->ftrace_events->event[i];
  assert_int_equal(e->event_case,
                   PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SUSPEND_RESUME);
  return e->suspend_resume;
}

static void suspend_resume_action_is_its_printk_string(void **state) {
  (void)state;
  fx_t *f = fx_new();
  static const size_t segments[] = {0, 7};
  for (size_t k = 0; k < sizeof(segments) / sizeof(segments[0]); k++) {
    page_t p;
    page_init(&p, 1000);
    add_suspend(&p, S_THAW, 3, true);
    add_suspend(&p, S_DPM, -1, false);
    add_suspend(&p, S_NONE, 7, true); /* not in printk_formats */
    add_suspend(&p, 0, 0, false);     /* NULL */
    Perfetto__Protos__TracePacket *pk = encode(f, &p, segments[k]);
    assert_int_equal(pk->ftrace_events->n_event, 4);
    const Perfetto__Protos__SuspendResumeFtraceEvent *s = suspend_ev(pk, 0);
    assert_string_equal(s->action, "thaw_processes");
    assert_int_equal(s->val, 3);
    assert_int_equal(s->start, 1);
    s = suspend_ev(pk, 1);
    assert_string_equal(s->action, "dpm_suspend: late");
    assert_int_equal(s->val, -1);
    assert_true(s->has_start);
    assert_int_equal(s->start, 0);
    /* An address not listed: an empty string, as Perfetto's probes write
     * it (PrintkMap::at gives an empty view); the other fields as ever. */
    for (size_t i = 2; i < 4; i++) {
      s = suspend_ev(pk, i);
      assert_non_null(s->action);
      assert_string_equal(s->action, "");
      assert_true(s->has_val);
    }
    assert_int_equal(suspend_ev(pk, 2)->val, 7);
    perfetto__protos__trace_packet__free_unpacked(pk, NULL);
  }

  /* Without printk_formats (unreadable): every action empty. */
  f->enc.printk = NULL;
  page_t p;
  page_init(&p, 2000);
  add_suspend(&p, S_THAW, 3, true);
  Perfetto__Protos__TracePacket *pk = encode(f, &p, 0);
  assert_string_equal(suspend_ev(pk, 0)->action, "");
  perfetto__protos__trace_packet__free_unpacked(pk, NULL);
  fx_free(f);
}

static void truncated_record_leaves_the_pointer_out(void **state) {
  (void)state;
  fx_t *f = fx_new();
  page_t p;
  page_init(&p, 1000);
  /* Only 4 of the pointer's 8 bytes: the field is left out, never read
   * past the record. */
  uint8_t rec[64];
  uint32_t half = (uint32_t)S_THAW;
  rec_data(&p, 1, rec, event(rec, 314, 1, &half, 4));
  Perfetto__Protos__TracePacket *pk = encode(f, &p, 0);
  assert_null(suspend_ev(pk, 0)->action);
  perfetto__protos__trace_packet__free_unpacked(pk, NULL);
  fx_free(f);
}

static void generic_char_pointer_is_its_string(void **state) {
  (void)state;
  fx_t *f = fx_new();
  page_t p;
  page_init(&p, 1000);
  add_rcu(&p, UINT64_C(0xffffffff8281b755));
  add_rcu(&p, S_NONE);
  Perfetto__Protos__TracePacket *pk = encode(f, &p, 0);
  assert_int_equal(pk->ftrace_events->n_event, 2);
  const char *want[] = {"rcu_preempt", ""};
  for (size_t i = 0; i < 2; i++) {
    const Perfetto__Protos__GenericFtraceEvent *g =
        pk->ftrace_events->event[i]->generic;
    assert_non_null(g);
    assert_string_equal(g->event_name, "rcu_utilization");
    assert_int_equal(g->n_field, 1);
    assert_string_equal(g->field[0]->name, "s");
    assert_int_equal(g->field[0]->value_case,
                     PERFETTO__PROTOS__GENERIC_FTRACE_EVENT__FIELD__VALUE_STR_VALUE);
    assert_string_equal(g->field[0]->str_value, want[i]);
  }
  perfetto__protos__trace_packet__free_unpacked(pk, NULL);
  fx_free(f);
}

static void char_pointer_of_an_integer_field_is_an_index(void **state) {
  (void)state;
  fx_t *f = fx_new();
  page_t p;
  page_init(&p, 1000);
  uint8_t b[16], rec[64];
  uint64_t work = UINT64_C(0xffff888012345678), fn = S_THAW;
  memcpy(b, &work, 8);
  memcpy(b + 8, &fn, 8);
  rec_data(&p, 1, rec, event(rec, 316, 1, b, sizeof(b)));
  Perfetto__Protos__TracePacket *pk = encode(f, &p, 0);
  const Perfetto__Protos__WorkqueueExecuteStartFtraceEvent *w =
      pk->ftrace_events->event[0]->workqueue_execute_start;
  assert_non_null(w);
  assert_int_equal(w->work, 1);
  assert_int_equal(w->function, 2);
  perfetto__protos__trace_packet__free_unpacked(pk, NULL);
  fx_free(f);
}

/* --- this machine's kernel ----------------------------------------------- */

/* tracefs' root, mounted as the probes would mount it when it is not yet
 * (a machine just booted has it unmounted until something asks), or the
 * test is skipped (failed with TG_REQUIRE_FTRACE). */
static void require_ftrace(char *root) {
  char why[160];
  int rv = geteuid() != 0 ? -EACCES : tg_tracefs_find(root);
  if (rv == 0) return;
  snprintf(why, sizeof(why), "tracefs: %s", strerror(-rv));
  if (getenv("TG_REQUIRE_FTRACE"))
    fail_msg("TG_REQUIRE_FTRACE is set but %s", why);
  print_message("skipped: %s\n", why);
  skip();
}

static void printk_loads_this_kernels_file(void **state) {
  (void)state;
  char root[TG_TRACEFS_PATH_MAX];
  require_ftrace(root);
  tg_printk_formats_t t;
  int n = tg_printk_formats_load(&t, root);
  assert_true(n >= 0);
  print_message("%d strings, %llu at address 0, %llu bad lines, %zu bytes\n",
                n, (unsigned long long)t.zero_addrs,
                (unsigned long long)t.bad_lines, tg_printk_formats_mem(&t));
  assert_int_equal(t.bad_lines, 0);
  for (size_t i = 1; i < t.strs.n; i++)
    assert_true(tg__addr_strs_addr(&t.strs, i - 1) <
                tg__addr_strs_addr(&t.strs, i));
  tg_printk_formats_free(&t);

  /* This kernel's suspend_resume, if it has one: action is a string. */
  static char text[16384];
  long len = tg_tracefs_read(root, "events/power/suspend_resume/format", text,
                             sizeof(text));
  if (len < 0) return;
  tg_ftrace_table_t tb;
  assert_int_equal(tg_ftrace_table_init(&tb), 0);
  tg_ftrace_format_t fmt;
  assert_int_equal(tg_ftrace_format_parse(text, (size_t)len, &fmt), 0);
  assert_int_equal(tg_ftrace_table_add(&tb, "power", &fmt, false), 0);
  assert_int_equal(out_field(&tb, (uint16_t)fmt.id, "action")->f.kind,
                   TG_FTRACE_FIELD_STRPTR);
  assert_true(tg_ftrace_table_wants_strings(&tb));
  tg_ftrace_table_free(&tb);
}

/* Counts the log lines that say printk_formats was read. */
static void count_printk_lines(void *ctx, tg_log_level_t level,
                               const char *line) {
  (void)level;
  if (strstr(line, TG_PRINTK_FILE)) (*(int *)ctx)++;
}

static int session_printk_lines(char *event) {
  int lines = 0;
  tg_log_set_level(TG_LOG_DEBUG);
  tg_log_set_sink(count_printk_lines, &lines);
  char *events[] = {event};
  tg_ftrace_cfg_t cfg = {.events = events, .n_events = 1,
                         .buffer_size_kb = 64, .drain_period_ms = 100};
  tg_ftrace_session_t *s = NULL;
  int rv = tg_ftrace_session_start(&cfg, &s);
  tg_ftrace_session_stop(s);
  tg_log_set_sink(NULL, NULL);
  tg_log_set_level(TG_LOG_INFO);
  assert_int_equal(rv, 0);
  return lines;
}

/* A real session reads the file (through the tracefs root it uses) when
 * one of its events writes a char pointer as its string, and only then. */
static void session_reads_printk_formats_for_string_pointers(void **state) {
  (void)state;
  char root[TG_TRACEFS_PATH_MAX];
  require_ftrace(root);
  char dir[TG_TRACEFS_PATH_MAX + 64];
  snprintf(dir, sizeof(dir), "%s/events/power/suspend_resume", root);
  if (access(dir, F_OK) != 0) {
    print_message("skipped: no power/suspend_resume in this kernel\n");
    skip();
  }
  assert_int_equal(session_printk_lines("power/suspend_resume"), 1);
  assert_int_equal(session_printk_lines("sched/sched_switch"), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(printk_parses_kernel_lines),
      cmocka_unit_test(printk_skips_malformed_lines),
      cmocka_unit_test(printk_keeps_strings_as_printed),
      cmocka_unit_test(printk_bounds_lines_strings_and_entries),
      cmocka_unit_test(printk_empty_or_zeroed_text_lists_nothing),
      cmocka_unit_test(printk_duplicates_keep_the_first_listed),
      cmocka_unit_test(printk_pieces_parse_as_the_whole),
      cmocka_unit_test(printk_loads_from_the_tracefs_root),
      cmocka_unit_test(format_marks_char_pointers),
      cmocka_unit_test(table_writes_char_pointers_as_strings_where_wanted),
      cmocka_unit_test(suspend_resume_action_is_its_printk_string),
      cmocka_unit_test(truncated_record_leaves_the_pointer_out),
      cmocka_unit_test(generic_char_pointer_is_its_string),
      cmocka_unit_test(char_pointer_of_an_integer_field_is_an_index),
      cmocka_unit_test(printk_loads_this_kernels_file),
      cmocka_unit_test(session_reads_printk_formats_for_string_pointers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
