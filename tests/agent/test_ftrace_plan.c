/* linux.ftrace's fast paths against a reference encoder kept here.
 *
 * Known events go through field plans and compact_sched through one-go
 * column writes (agent/probes/ftrace_plan.h, ftrace_compact.c); both write
 * with unchecked word stores. The reference below writes the same
 * messages field by field through tg_pbw, as the general path does, so
 * the bytes must match exactly: field numbers, varint widths (negative
 * int64s in ten bytes, timestamps past 2^56), 4-byte nested sizes but for
 * an event's and its message's, one byte when under 128, and compact_sched's
 * of the fewest bytes (as Perfetto's probes write them), interned comms. Pages mix every layout a plan reads
 * (scalars of each size and sign, char[16], __data_loc, a tail string, an
 * array), a generic event, a truncated record, an unknown one and a
 * corrupt one; and the writer is also run in small segments, where every
 * record takes the general path and an event split across segments keeps
 * its 4-byte sizes: the same message again, once protobuf-c packs both.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/probes/ftrace_encode.h"
#include "agent/probes/ftrace_format.h"
#include "ftrace_fixtures.h"
#include "pb/trace/ftrace/ftrace_event_bundle.pb-c.h"
#include "tracegate/pb_writer.h"

/* --- formats ------------------------------------------------------------- */

enum {
  ID_SWITCH = 372,
  ID_WAKING = 373,
  ID_FREQ = 200,
  ID_PRINT = 5,
  ID_IRQ = 120,
  ID_SYS_ENTER = 443,
  ID_HRTIMER = 90,
};

static const char freq_format[] =
    "name: cpu_frequency\nID: 200\n" COMMON_FIELDS
    "\tfield:u32 state;\toffset:8;\tsize:4;\tsigned:0;\n"
    "\tfield:u32 cpu_id;\toffset:12;\tsize:4;\tsigned:0;\n";

/* irq as a short: a 2-byte signed scalar. */
static const char irq_format[] =
    "name: irq_handler_entry\nID: 120\n" COMMON_FIELDS
    "\tfield:short irq;\toffset:8;\tsize:2;\tsigned:1;\n"
    "\tfield:__data_loc char[] name;\toffset:12;\tsize:4;\tsigned:0;\n";

static const char hrtimer_format[] =
    "name: hrtimer_start\nID: 90\n" COMMON_FIELDS
    "\tfield:void * hrtimer;\toffset:8;\tsize:8;\tsigned:0;\n"
    "\tfield:s8 mode;\toffset:16;\tsize:1;\tsigned:1;\n"
    "\tfield:__rel_loc char[] label;\toffset:20;\tsize:4;\tsigned:0;\n";

/* --- records ------------------------------------------------------------- */

#define REC_MAX 256

typedef struct sw {
  const char *prev;
  int32_t prev_pid;
  int64_t state;
  const char *next;
  int32_t next_pid;
} sw_t;

static const int32_t PREV_PRIO = 120, NEXT_PRIO = -1;

static size_t switch_rec(uint8_t *out, int32_t pid, const sw_t *s) {
  uint8_t b[56] = {0};
  memcpy(b, s->prev, strnlen(s->prev, 16));
  memcpy(b + 16, &s->prev_pid, 4);
  memcpy(b + 20, &PREV_PRIO, 4);
  memcpy(b + 24, &s->state, 8);
  memcpy(b + 32, s->next, strnlen(s->next, 16));
  memcpy(b + 48, &s->next_pid, 4);
  memcpy(b + 52, &NEXT_PRIO, 4);
  return event(out, ID_SWITCH, pid, b, sizeof(b));
}

typedef struct wk {
  const char *comm;
  int32_t pid, prio, cpu;
} wk_t;

static size_t waking_rec(uint8_t *out, int32_t pid, const wk_t *k) {
  uint8_t b[28] = {0};
  memcpy(b, k->comm, strnlen(k->comm, 16)); /* 16 bytes: no NUL */
  memcpy(b + 16, &k->pid, 4);
  memcpy(b + 20, &k->prio, 4);
  memcpy(b + 24, &k->cpu, 4);
  return event(out, ID_WAKING, pid, b, sizeof(b));
}

static size_t freq_rec(uint8_t *out, uint32_t state, uint32_t cpu) {
  uint8_t b[8];
  memcpy(b, &state, 4);
  memcpy(b + 4, &cpu, 4);
  return event(out, ID_FREQ, 0, b, sizeof(b));
}

static size_t print_rec(uint8_t *out, uint64_t ip, const char *text) {
  uint8_t b[256] = {0};
  memcpy(b, &ip, 8);
  memcpy(b + 8, text, strlen(text) + 1);
  return event(out, ID_PRINT, 77, b, 8 + strlen(text) + 1);
}

static size_t irq_rec(uint8_t *out, int16_t irq, const char *name) {
  uint8_t b[200] = {0};
  memcpy(b, &irq, 2);
  size_t n = strlen(name) + 1;
  uint32_t loc = (uint32_t)n << 16 | 16u; /* at offset 16 of the record */
  memcpy(b + 4, &loc, 4);
  memcpy(b + 8, name, n);
  return event(out, ID_IRQ, 0, b, 8 + n);
}

static size_t sys_enter_rec(uint8_t *out, int32_t pid, int64_t id,
                            const uint64_t args[6]) {
  uint8_t b[56];
  memcpy(b, &id, 8);
  memcpy(b + 8, args, 48);
  return event(out, ID_SYS_ENTER, pid, b, sizeof(b));
}

static size_t hrtimer_rec(uint8_t *out, uint64_t timer, int8_t mode,
                          const char *label) {
  uint8_t b[40] = {0};
  memcpy(b, &timer, 8);
  b[8] = (uint8_t)mode;
  size_t n = strlen(label) + 1;
  uint32_t loc = (uint32_t)n << 16; /* right after the field */
  memcpy(b + 12, &loc, 4);
  memcpy(b + 16, label, n);
  return event(out, ID_HRTIMER, 3, b, 16 + n);
}

/* A corrupt record: a long-data header claiming more than the page. */
static void rec_corrupt(page_t *p) {
  put32(p, 0);
  put32(p, 1u << 20);
}

/* --- the reference: field by field through tg_pbw ------------------------- */

#define OUT_MAX 65536

typedef struct ref {
  tg_pbw_t w;
  uint8_t *ev_size, *msg_size; /* the open event's */
  uint8_t buf[OUT_MAX];
} ref_t;

/* TracePacket.ftrace_events { cpu }, as the session wraps a bundle. */
static void ref_begin(ref_t *r, uint32_t cpu) {
  tg_pbw_init(&r->w, r->buf, sizeof(r->buf), NULL, NULL);
  tg_pbw_begin_nested(&r->w, 1);
  tg_pbw_append_varint(&r->w, 1, cpu);
}

static size_t ref_end(ref_t *r) {
  tg_pbw_end_nested(&r->w);
  assert_int_equal(tg_pbw_error(&r->w), 0);
  return (size_t)tg_pbw_written(&r->w);
}

/* FtraceEvent { timestamp, pid, <message field> { ... } }. */
static void ref_event(ref_t *r, uint64_t ts, int32_t pid, uint32_t msg) {
  tg_pbw_begin_nested(&r->w, 2);
  r->ev_size = r->w.cur - TG_PB_REDUNDANT_VARINT_SIZE;
  tg_pbw_append_varint(&r->w, 1, ts);
  tg_pbw_append_varint(&r->w, 2, (uint32_t)pid);
  tg_pbw_begin_nested(&r->w, msg);
  r->msg_size = r->w.cur - TG_PB_REDUNDANT_VARINT_SIZE;
}

/* A 4-byte size at |size| of a message ending at |end| as one byte when
 * it is under 128; returns the new end. */
static uint8_t *one_byte_size(uint8_t *size, uint8_t *end) {
  size_t n = (size_t)(end - size) - TG_PB_REDUNDANT_VARINT_SIZE;
  if (n >= 128) return end;
  memmove(size + 1, size + TG_PB_REDUNDANT_VARINT_SIZE, n);
  *size = (uint8_t)n;
  return end - (TG_PB_REDUNDANT_VARINT_SIZE - 1);
}

static void ref_event_end(ref_t *r) {
  tg_pbw_end_nested(&r->w);
  r->w.cur = one_byte_size(r->msg_size, r->w.cur);
  tg_pbw_end_nested(&r->w);
  /* The message's shrinking shrank the event: its size again. */
  tg_pb_write_redundant_varint(
      r->ev_size, (uint32_t)(r->w.cur - r->ev_size) - TG_PB_REDUNDANT_VARINT_SIZE);
  r->w.cur = one_byte_size(r->ev_size, r->w.cur);
}

static void ref_str(ref_t *r, uint32_t field, const char *s, size_t max) {
  tg_pbw_append_bytes(&r->w, field, s, strnlen(s, max));
}

/* A sched_switch message with its first |fields| fields (7: all; fewer:
 * the record was cut). */
static void ref_switch(ref_t *r, uint64_t ts, int32_t pid, const sw_t *s,
                       int fields) {
  const int64_t ints[7] = {0, s->prev_pid, PREV_PRIO, s->state,
                           0, s->next_pid, NEXT_PRIO};
  ref_event(r, ts, pid, 4);
  for (int i = 0; i < fields; i++) {
    if (i == 0 || i == 4)
      ref_str(r, (uint32_t)i + 1, i ? s->next : s->prev, 16);
    else
      tg_pbw_append_int(&r->w, (uint32_t)i + 1, ints[i]);
  }
  ref_event_end(r);
}

/* compact_sched rows; comms interned in |intern| order. */
typedef struct cs_ref {
  uint64_t sw_ts[8], wk_ts[8];
  int64_t sw_state[8];
  int32_t sw_pid[8], sw_prio[8], wk_pid[8], wk_cpu[8], wk_prio[8];
  const char *sw_comm[8], *wk_comm[8];
  size_t n_sw, n_wk;
  const char *intern[8];
  size_t n_intern;
} cs_ref_t;

static uint32_t intern_index(const cs_ref_t *c, const char *comm) {
  for (uint32_t i = 0; i < c->n_intern; i++)
    if (strncmp(c->intern[i], comm, 16) == 0) return i;
  fail_msg("comm %s not in the intern list", comm);
  return 0;
}

/* compact_sched's fields have sizes of the fewest bytes. */
static void ref_packed(tg_pbw_t *w, uint32_t field, const uint64_t *v,
                       size_t n) {
  if (!n) return;
  uint8_t buf[8 * TG_PB_MAX_VARINT_SIZE], *p = buf;
  for (size_t i = 0; i < n; i++) p = tg_pb_write_varint(p, v[i]);
  tg_pbw_append_bytes(w, field, buf, (size_t)(p - buf));
}

static void ref_compact(ref_t *r, const cs_ref_t *c) {
  uint64_t col[6][8];
  uint8_t body[1024];
  tg_pbw_t b;
  tg_pbw_init(&b, body, sizeof(body), NULL, NULL);
  for (size_t i = 0; i < c->n_intern; i++)
    tg_pbw_append_bytes(&b, 5, c->intern[i], strnlen(c->intern[i], 16));
  uint64_t prev = 0;
  for (size_t i = 0; i < c->n_sw; i++) {
    col[0][i] = c->sw_ts[i] - prev;
    prev = c->sw_ts[i];
    col[1][i] = (uint64_t)c->sw_state[i];
    col[2][i] = (uint64_t)(int64_t)c->sw_pid[i];
    col[3][i] = (uint64_t)(int64_t)c->sw_prio[i];
    col[4][i] = intern_index(c, c->sw_comm[i]);
  }
  for (unsigned k = 0; k < 5; k++) ref_packed(&b, 1 + k + (k == 4), col[k], c->n_sw);
  prev = 0;
  for (size_t i = 0; i < c->n_wk; i++) {
    col[0][i] = c->wk_ts[i] - prev;
    prev = c->wk_ts[i];
    col[1][i] = (uint64_t)(int64_t)c->wk_pid[i];
    col[2][i] = (uint64_t)(int64_t)c->wk_cpu[i];
    col[3][i] = (uint64_t)(int64_t)c->wk_prio[i];
    col[4][i] = intern_index(c, c->wk_comm[i]);
    col[5][i] = 5; /* common_flags, as event() writes them */
  }
  for (unsigned k = 0; k < 6; k++) ref_packed(&b, 7 + k, col[k], c->n_wk);
  assert_int_equal(tg_pbw_error(&b), 0);
  tg_pbw_append_bytes(&r->w, 4, body, (size_t)tg_pbw_written(&b));
}

/* --- the encoder --------------------------------------------------------- */

typedef struct enc {
  tg_ftrace_table_t table;
  tg_ftrace_encoder_t enc;
  uint8_t out[OUT_MAX];
  size_t segment; /* 0: one segment; else refills of this many bytes */
} enc_t;

static enc_t *enc_new(bool compact) {
  enc_t *e = calloc(1, sizeof(*e));
  assert_non_null(e);
  assert_int_equal(tg_ftrace_table_init(&e->table), 0);
  add_format(&e->table, "sched", switch_format);
  add_format(&e->table, "sched", waking_format);
  add_format(&e->table, "power", freq_format);
  add_format(&e->table, "ftrace", print_format);
  add_format(&e->table, "irq", irq_format);
  add_format(&e->table, "raw_syscalls", sys_enter_format);
  add_format(&e->table, "timer", hrtimer_format);
  assert_int_equal(tg_ftrace_encoder_init(&e->enc, &e->table, compact, 4096), 0);
  return e;
}

static void enc_free(enc_t *e) {
  tg_ftrace_encoder_free(&e->enc);
  tg_ftrace_table_free(&e->table);
  free(e);
}

/* The next |segment| bytes of the same buffer: what is written stays
 * contiguous, but no write finds room past the segment. */
static int refill(void *ctx, tg_pbw_t *w, size_t min_contiguous) {
  enc_t *e = ctx;
  size_t n = e->segment > min_contiguous ? e->segment : min_contiguous;
  if ((size_t)(w->cur - e->out) + n > sizeof(e->out)) return -ENOSPC;
  w->end = w->cur + n;
  return 0;
}

static size_t encode(enc_t *e, const page_t *p, tg_ftrace_bundle_result_t *res) {
  tg_ftrace_page_layout_t l;
  assert_int_equal(tg_ftrace_header_page_parse(header_page_fixture,
                                               strlen(header_page_fixture), &l),
                   0);
  tg_pbw_t w;
  memset(e->out, 0xa5, sizeof(e->out)); /* stale bytes must not leak */
  if (e->segment)
    tg_pbw_init(&w, e->out, e->segment, refill, e);
  else
    tg_pbw_init(&w, e->out, sizeof(e->out), NULL, NULL);
  tg_pbw_begin_nested(&w, 1);
  tg_ftrace_encode_bundle(&e->enc, &w, 3, &l, p->b, sizeof(p->b), res);
  tg_pbw_end_nested(&w);
  assert_int_equal(tg_pbw_error(&w), 0);
  return (size_t)tg_pbw_written(&w);
}

static void assert_same_bytes(const uint8_t *got, size_t n_got,
                              const uint8_t *want, size_t n_want) {
  size_t n = n_got < n_want ? n_got : n_want, i = 0;
  while (i < n && got[i] == want[i]) i++;
  if (i < n || n_got != n_want)
    fail_msg("bytes differ at %zu (got %zu bytes, want %zu)", i, n_got, n_want);
}

/* The bundle in |buf| (TracePacket.ftrace_events with a 4-byte size, as
 * encode() and ref_begin() write it) packed again by protobuf-c into
 * |out|: every size minimal. Returns the length. */
static size_t repacked(const uint8_t *buf, size_t n, uint8_t *out) {
  const size_t head = 1 + TG_PB_REDUNDANT_VARINT_SIZE;
  assert_true(n >= head && buf[0] == 0x0a);
  Perfetto__Protos__FtraceEventBundle *b =
      perfetto__protos__ftrace_event_bundle__unpack(NULL, n - head, buf + head);
  assert_non_null(b);
  size_t len = perfetto__protos__ftrace_event_bundle__get_packed_size(b);
  assert_true(len <= OUT_MAX);
  perfetto__protos__ftrace_event_bundle__pack(b, out);
  perfetto__protos__ftrace_event_bundle__free_unpacked(b, NULL);
  return len;
}

/* Checks |p| against the reference: the same bytes in one segment; in
 * several sizes of small ones, the same message. */
static void check_page(bool compact, const page_t *p, const ref_t *r,
                       size_t n_ref, uint32_t events, uint32_t skipped,
                       bool corrupt) {
  static const size_t segments[] = {0, 5, 9, 33, 100};
  enc_t *e = enc_new(compact);
  for (size_t i = 0; i < sizeof(segments) / sizeof(segments[0]); i++) {
    e->segment = segments[i];
    tg_ftrace_bundle_result_t res;
    size_t n = encode(e, p, &res);
    if (!e->segment) {
      assert_same_bytes(e->out, n, r->buf, n_ref);
    } else {
      static uint8_t got[OUT_MAX], want[OUT_MAX];
      size_t n_got = repacked(e->out, n, got);
      size_t n_want = repacked(r->buf, n_ref, want);
      assert_same_bytes(got, n_got, want, n_want);
    }
    assert_int_equal(res.events, events);
    assert_int_equal(res.skipped, skipped);
    assert_int_equal(res.corrupt, corrupt);
  }
  enc_free(e);
}

/* --- tests --------------------------------------------------------------- */

static const sw_t SW1 = {"bash", 42, 1, "swapper/3", 0};
static const sw_t SW2 = {"swapper/3", 0, 0, "0123456789abcdef", 4242};
static const sw_t SW3 = {"0123456789abcdef", 4242, -1, "bash", 42};
static const wk_t WK1 = {"0123456789abcdef", 4242, 120, 1};
static const wk_t WK2 = {"kworker/0:1", 17, -5, 0};
static const uint64_t ARGS[6] = {0,          127,
                                 128,        UINT64_C(1) << 56,
                                 UINT64_MAX, (UINT64_C(1) << 63) + 5};

static void plans_write_the_bytes_of_the_reference(void **state) {
  (void)state;
  /* Timestamps below 2^56 (the common case) and above it (9-byte varints),
   * with a jump across a 2^28 boundary (the timestamp cache). */
  static const uint64_t starts[] = {5000, (UINT64_C(1) << 60) + 12345};
  for (size_t s = 0; s < 2; s++) {
    uint64_t ts = starts[s];
    page_t p;
    page_init(&p, ts);
    ref_t *r = malloc(sizeof(*r));
    assert_non_null(r);
    ref_begin(r, 3);
    uint8_t rec[REC_MAX];

    rec_data(&p, 10, rec, switch_rec(rec, 42, &SW1));
    ref_switch(r, ts += 10, 42, &SW1, 7);

    rec_data(&p, 1, rec, waking_rec(rec, -1, &WK1)); /* pid 0xffffffff */
    ref_event(r, ts += 1, -1, 20);
    ref_str(r, 1, WK1.comm, 16);
    tg_pbw_append_int(&r->w, 2, WK1.pid);
    tg_pbw_append_int(&r->w, 3, WK1.prio);
    tg_pbw_append_int(&r->w, 5, WK1.cpu);
    ref_event_end(r);

    rec_extend(&p, UINT64_C(3) << 28);
    rec_data(&p, 0, rec, freq_rec(rec, 2400000, 3));
    ref_event(r, ts += UINT64_C(3) << 28, 0, 11);
    tg_pbw_append_varint(&r->w, 1, 2400000);
    tg_pbw_append_varint(&r->w, 2, 3);
    ref_event_end(r);

    /* print's ip is a kernel address: written as its index (the first of
     * the table, 1), never as itself, by the general path. */
    rec_data(&p, 2, rec, print_rec(rec, 0xffffffff81234567, "hello marker\n"));
    ref_event(r, ts += 2, 77, 3);
    tg_pbw_append_varint(&r->w, 1, 1);
    ref_str(r, 2, "hello marker\n", 64);
    ref_event_end(r);

    /* Sizes of 128 or more keep four bytes: a message of 124 bytes in an
     * event of more, then both over (print by the general path, an irq
     * name by its plan). */
    for (size_t len = 110; len <= 150; len += 40) {
      char text[160];
      memset(text, 'm', len);
      text[len] = 0;
      rec_data(&p, 2, rec, print_rec(rec, 0xffffffff81234567, text));
      ref_event(r, ts += 2, 77, 3);
      tg_pbw_append_varint(&r->w, 1, 1);
      ref_str(r, 2, text, sizeof(text));
      ref_event_end(r);
      rec_data(&p, 2, rec, irq_rec(rec, 5, text));
      ref_event(r, ts += 2, 0, 36);
      tg_pbw_append_int(&r->w, 1, 5);
      ref_str(r, 2, text, sizeof(text));
      ref_event_end(r);
    }

    rec_data(&p, 3, rec, irq_rec(rec, -7, "acpi"));
    ref_event(r, ts += 3, 0, 36);
    tg_pbw_append_int(&r->w, 1, -7);
    ref_str(r, 2, "acpi", 16);
    ref_event_end(r);

    rec_data(&p, 4, rec, sys_enter_rec(rec, 99, -1, ARGS));
    ref_event(r, ts += 4, 99, 329);
    tg_pbw_append_int(&r->w, 1, -1); /* ten bytes */
    for (int i = 0; i < 6; i++) tg_pbw_append_varint(&r->w, 2, ARGS[i]);
    ref_event_end(r);

    /* Not one of Perfetto's: GenericFtraceEvent, field by field. */
    rec_data(&p, 5, rec, hrtimer_rec(rec, 0xabcdef, -2, "tmr"));
    ref_event(r, ts += 5, 3, 327);
    ref_str(r, 1, "hrtimer_start", 64);
    static const char *names[] = {"hrtimer", "mode", "label"};
    for (int i = 0; i < 3; i++) {
      tg_pbw_begin_nested(&r->w, 2);
      ref_str(r, 1, names[i], 64);
      /* A kernel address: the second index (print's ip is the first). */
      if (i == 0) tg_pbw_append_varint(&r->w, 5, 2);
      if (i == 1) tg_pbw_append_int(&r->w, 4, -2);
      if (i == 2) ref_str(r, 3, "tmr", 16);
      tg_pbw_end_nested(&r->w);
    }
    ref_event_end(r);

    /* Cut after prev_state: the general path leaves out what is missing. */
    switch_rec(rec, 42, &SW2);
    rec_data(&p, 6, rec, 40);
    ref_switch(r, ts += 6, 42, &SW2, 4);

    /* Not in the table: skipped. */
    rec_data(&p, 1, rec, event(rec, 999, 1, ARGS, 8));
    ts += 1;

    rec_data(&p, 7, rec, switch_rec(rec, 4242, &SW3));
    ref_switch(r, ts += 7, 4242, &SW3, 7);

    /* The walk ends here; what came before stands. */
    rec_corrupt(&p);
    page_finish(&p, false);
    size_t n_ref = ref_end(r);
    check_page(false, &p, r, n_ref, 13, 1, true);
    free(r);
  }
}

static void compact_sched_writes_the_bytes_of_the_reference(void **state) {
  (void)state;
  uint64_t ts = 1000;
  page_t p;
  page_init(&p, ts);
  ref_t *r = malloc(sizeof(*r));
  cs_ref_t *c = calloc(1, sizeof(*c));
  assert_non_null(r);
  assert_non_null(c);
  ref_begin(r, 3);
  uint8_t rec[REC_MAX];
  const sw_t *sws[] = {&SW1, &SW2, &SW3};
  const wk_t *wks[] = {&WK1, &WK2};
  /* Rows in page order: switch, waking, switch, waking, switch, with
   * planned events between them (written as they come). */
  for (int i = 0; i < 3; i++) {
    rec_data(&p, 100, rec, switch_rec(rec, sws[i]->prev_pid, sws[i]));
    ts += 100;
    c->sw_ts[c->n_sw] = ts;
    c->sw_state[c->n_sw] = sws[i]->state;
    c->sw_pid[c->n_sw] = sws[i]->next_pid;
    c->sw_prio[c->n_sw] = NEXT_PRIO;
    c->sw_comm[c->n_sw++] = sws[i]->next;
    if (i == 2) break;
    rec_data(&p, 3, rec, waking_rec(rec, 1, wks[i]));
    ts += 3;
    c->wk_ts[c->n_wk] = ts;
    c->wk_pid[c->n_wk] = wks[i]->pid;
    c->wk_cpu[c->n_wk] = wks[i]->cpu;
    c->wk_prio[c->n_wk] = wks[i]->prio;
    c->wk_comm[c->n_wk++] = wks[i]->comm;
    rec_data(&p, 2, rec, freq_rec(rec, 1000000u * (unsigned)(i + 1), 1));
    ts += 2;
    ref_event(r, ts, 0, 11);
    tg_pbw_append_varint(&r->w, 1, 1000000u * (unsigned)(i + 1));
    tg_pbw_append_varint(&r->w, 2, 1);
    ref_event_end(r);
  }
  /* Too short for a row: a full event (the general path). */
  switch_rec(rec, 5, &SW1);
  rec_data(&p, 9, rec, 36);
  ref_switch(r, ts += 9, 5, &SW1, 3);
  page_finish(&p, true);

  c->intern[c->n_intern++] = "swapper/3";
  c->intern[c->n_intern++] = "0123456789abcdef";
  c->intern[c->n_intern++] = "kworker/0:1";
  c->intern[c->n_intern++] = "bash";
  ref_compact(r, c);
  tg_pbw_append_bool(&r->w, 3, true); /* lost_events */
  size_t n_ref = ref_end(r);
  check_page(true, &p, r, n_ref, 8, 0, false);
  free(c);
  free(r);
}

/* A page of |n| sched_switch records (SW1, SW2 by turns) from |ts| on,
 * 10 ns apart. */
static void switch_page(page_t *p, uint64_t ts, int n) {
  uint8_t rec[REC_MAX];
  page_init(p, ts);
  for (int i = 0; i < n; i++)
    rec_data(p, i ? 10 : 0, rec, switch_rec(rec, 1, i % 2 ? &SW2 : &SW1));
  page_finish(p, false);
}

/* Pages of one read share one bundle: one compact_sched whose comms are
 * interned once and whose timestamps run on across the pages, smaller
 * than a bundle per page; and the bundle takes pages only while the rows
 * of one more fit. */
static void pages_of_a_read_share_one_bundle(void **state) {
  (void)state;
  tg_ftrace_page_layout_t l;
  assert_int_equal(tg_ftrace_header_page_parse(header_page_fixture,
                                               strlen(header_page_fixture), &l),
                   0);
  enc_t *e = enc_new(true);
  page_t *pages = calloc(3, sizeof(*pages));
  assert_non_null(pages);
  for (int i = 0; i < 3; i++) switch_page(&pages[i], 1000 + 1000 * (uint64_t)i, 20);

  tg_pbw_t w;
  tg_pbw_init(&w, e->out, sizeof(e->out), NULL, NULL);
  tg_pbw_begin_nested(&w, 1);
  tg_ftrace_bundle_begin(&e->enc, &w, 3);
  for (int i = 0; i < 3; i++) {
    assert_true(tg_ftrace_bundle_has_room(&e->enc));
    tg_ftrace_bundle_result_t res;
    tg_ftrace_bundle_add_page(&e->enc, &w, &l, pages[i].b, sizeof(pages[i].b),
                              &res);
    assert_int_equal(res.events, 20);
  }
  tg_ftrace_bundle_end(&e->enc, &w, false);
  tg_pbw_end_nested(&w);
  size_t one = (size_t)tg_pbw_written(&w);
  const size_t head = 1 + TG_PB_REDUNDANT_VARINT_SIZE;
  Perfetto__Protos__FtraceEventBundle *b =
      perfetto__protos__ftrace_event_bundle__unpack(NULL, one - head,
                                                    e->out + head);
  assert_non_null(b);
  assert_non_null(b->compact_sched);
  Perfetto__Protos__FtraceEventBundle__CompactSched *cs = b->compact_sched;
  assert_int_equal(cs->n_intern_table, 2);
  assert_int_equal(cs->n_switch_timestamp, 60);
  uint64_t t = 0;
  for (size_t i = 0; i < cs->n_switch_timestamp; i++) {
    t += cs->switch_timestamp[i];
    assert_int_equal(t, 1000 + 1000 * (i / 20) + 10 * (i % 20));
  }
  perfetto__protos__ftrace_event_bundle__free_unpacked(b, NULL);

  size_t per_page = 0;
  for (int i = 0; i < 3; i++) {
    tg_ftrace_bundle_result_t res;
    per_page += encode(e, &pages[i], &res);
  }
  assert_true(one < per_page);

  /* Full pages of the smallest rows until the bundle says no more. */
  tg_pbw_init(&w, e->out, sizeof(e->out), NULL, NULL);
  tg_ftrace_bundle_begin(&e->enc, &w, 3);
  switch_page(&pages[0], 1000, 60);
  int n = 0;
  while (tg_ftrace_bundle_has_room(&e->enc)) {
    tg_ftrace_bundle_result_t res;
    tg_ftrace_bundle_add_page(&e->enc, &w, &l, pages[0].b, sizeof(pages[0].b),
                              &res);
    n++;
    assert_true(n * 60 <= TG_FTRACE_BUNDLE_ROWS);
    tg_pbw_init(&w, e->out, sizeof(e->out), NULL, NULL); /* rows stay */
  }
  assert_true(n > 1);
  enc_free(e);
  free(pages);
}

/* Each bundle of a CPU says where its previous one ended: the timestamp
 * of the last record that one wrote (compact or full), none in the
 * first. */
static void a_bundle_says_where_the_previous_ended(void **state) {
  (void)state;
  tg_ftrace_page_layout_t l;
  assert_int_equal(tg_ftrace_header_page_parse(header_page_fixture,
                                               strlen(header_page_fixture), &l),
                   0);
  page_t *page = calloc(1, sizeof(*page));
  assert_non_null(page);
  for (int compact = 0; compact < 2; compact++) {
    enc_t *e = enc_new(compact);
    uint64_t previous = 0;
    for (int k = 0; k < 2; k++) {
      /* 20 records, 10 ns apart, from 1000 + 5000 k */
      switch_page(page, 1000 + 5000 * (uint64_t)k, 20);
      tg_pbw_t w;
      tg_pbw_init(&w, e->out, sizeof(e->out), NULL, NULL);
      tg_pbw_begin_nested(&w, 1);
      tg_ftrace_bundle_begin_after(&e->enc, &w, 3, previous);
      tg_ftrace_bundle_result_t res;
      tg_ftrace_bundle_add_page(&e->enc, &w, &l, page->b, sizeof(page->b),
                                &res);
      tg_ftrace_bundle_end(&e->enc, &w, false);
      tg_pbw_end_nested(&w);
      assert_int_equal(res.events, 20);
      assert_int_equal(res.last_ts, 1000 + 5000 * (uint64_t)k + 190);
      const size_t head = 1 + TG_PB_REDUNDANT_VARINT_SIZE;
      Perfetto__Protos__FtraceEventBundle *b =
          perfetto__protos__ftrace_event_bundle__unpack(
              NULL, (size_t)tg_pbw_written(&w) - head, e->out + head);
      assert_non_null(b);
      assert_int_equal(b->has_previous_bundle_end_timestamp, k > 0);
      if (k) assert_int_equal(b->previous_bundle_end_timestamp, 1190);
      perfetto__protos__ftrace_event_bundle__free_unpacked(b, NULL);
      previous = res.last_ts;
    }
    enc_free(e);
  }
  free(page);
}

/* A record that ends within a word of the buffer's end is read from a
 * padded copy: the same bytes, and nothing read past the buffer (ASan). */
static void record_at_the_buffer_end_reads_nothing_past_it(void **state) {
  (void)state;
  page_t p;
  page_init(&p, 10);
  uint8_t rec[REC_MAX];
  rec_data(&p, 1, rec, freq_rec(rec, 7, 2));
  page_finish(&p, false);
  size_t len = p.off; /* the buffer ends with the record */
  uint8_t *exact = malloc(len);
  assert_non_null(exact);
  memcpy(exact, p.b, len);

  ref_t *r = malloc(sizeof(*r));
  assert_non_null(r);
  ref_begin(r, 3);
  ref_event(r, 11, 0, 11);
  tg_pbw_append_varint(&r->w, 1, 7);
  tg_pbw_append_varint(&r->w, 2, 2);
  ref_event_end(r);
  size_t n_ref = ref_end(r);

  enc_t *e = enc_new(false);
  tg_ftrace_page_layout_t l;
  assert_int_equal(tg_ftrace_header_page_parse(header_page_fixture,
                                               strlen(header_page_fixture), &l),
                   0);
  tg_pbw_t w;
  tg_pbw_init(&w, e->out, sizeof(e->out), NULL, NULL);
  tg_pbw_begin_nested(&w, 1);
  tg_ftrace_bundle_result_t res;
  tg_ftrace_encode_bundle(&e->enc, &w, 3, &l, exact, len, &res);
  tg_pbw_end_nested(&w);
  assert_same_bytes(e->out, (size_t)tg_pbw_written(&w), r->buf, n_ref);
  enc_free(e);
  free(r);
  free(exact);
}

/* --- compact_sched columns, written straight from rows ------------------- */

/* A row as tg__ftrace_compact_add puts it: a sched_switch's, |extra| its
 * prev_state, or (|waking|) a sched_waking's, |extra| its target_cpu. */
static void compact_row(tg_ftrace_compact_t *c, bool waking, uint64_t ts,
                        int32_t pid, int32_t prio, int64_t extra,
                        const char *comm, uint32_t flags) {
  uint32_t k = tg__ftrace_compact_intern(c, (const uint8_t *)comm,
                                         strlen(comm), false);
  tg__ftrace_compact_put(c, waking, ts, pid, prio, extra, k, flags);
}

/* Writes |c|'s columns into |e->out| (one segment, or refills of
 * |e->segment| bytes); returns their length. */
static size_t compact_written(enc_t *e, tg_ftrace_compact_t *c) {
  tg_pbw_t w;
  memset(e->out, 0xa5, sizeof(e->out));
  if (e->segment)
    tg_pbw_init(&w, e->out, e->segment, refill, e);
  else
    tg_pbw_init(&w, e->out, sizeof(e->out), NULL, NULL);
  tg__ftrace_compact_write(c, &w);
  assert_int_equal(tg_pbw_error(&w), 0);
  return (size_t)tg_pbw_written(&w);
}

static const int64_t LONG_STATES[] = {INT64_MIN, -1, 0, 1, INT64_MAX};
static const int32_t LONG_INTS[] = {INT32_MIN, -1, 0, 127, INT32_MAX};

/* Values at the limits of their types survive the columns: timestamps
 * near UINT64_MAX and ones that go backwards (a delta that wraps),
 * negative prev_state, pids, prios and CPUs (ten-byte varints), flags of
 * 32 bits. Decoded by protobuf-c; in one segment and in small ones. */
static void encoder_compact_columns_keep_long_and_negative_values(
    void **state) {
  (void)state;
  enum { N = 5 };
  const uint64_t ts[N] = {UINT64_MAX - 7, UINT64_MAX, 5, UINT64_C(1) << 63, 3};
  const char *comms[N] = {"a", "0123456789abcdef", "", "kworker/0:1", "a"};
  for (size_t seg = 0; seg <= 24; seg += 24) {
    enc_t *e = enc_new(true);
    e->segment = seg;
    tg_ftrace_compact_t c;
    assert_int_equal(tg__ftrace_compact_init(&c, 16), 0);
    for (int i = 0; i < N; i++) {
      compact_row(&c, false, ts[i], LONG_INTS[i], LONG_INTS[N - 1 - i],
                  LONG_STATES[i], comms[i], 0);
      compact_row(&c, true, ts[N - 1 - i], LONG_INTS[N - 1 - i], -100 - i,
                  LONG_INTS[i], comms[N - 1 - i],
                  i ? UINT32_MAX >> i : UINT32_MAX);
    }
    size_t n = compact_written(e, &c);
    Perfetto__Protos__FtraceEventBundle *b =
        perfetto__protos__ftrace_event_bundle__unpack(NULL, n, e->out);
    assert_non_null(b);
    const Perfetto__Protos__FtraceEventBundle__CompactSched *cs =
        b->compact_sched;
    assert_non_null(cs);
    assert_int_equal(cs->n_switch_timestamp, N);
    assert_int_equal(cs->n_switch_prev_state, N);
    assert_int_equal(cs->n_switch_next_pid, N);
    assert_int_equal(cs->n_switch_next_prio, N);
    assert_int_equal(cs->n_switch_next_comm_index, N);
    assert_int_equal(cs->n_waking_timestamp, N);
    assert_int_equal(cs->n_waking_pid, N);
    assert_int_equal(cs->n_waking_target_cpu, N);
    assert_int_equal(cs->n_waking_prio, N);
    assert_int_equal(cs->n_waking_comm_index, N);
    assert_int_equal(cs->n_waking_common_flags, N);
    assert_int_equal(cs->n_intern_table, 4);
    uint64_t t_sw = 0, t_wk = 0;
    for (int i = 0; i < N; i++) {
      t_sw += cs->switch_timestamp[i]; /* wraps as the writer's did */
      t_wk += cs->waking_timestamp[i];
      assert_true(t_sw == ts[i]);
      assert_true(t_wk == ts[N - 1 - i]);
      assert_true(cs->switch_prev_state[i] == LONG_STATES[i]);
      assert_int_equal(cs->switch_next_pid[i], LONG_INTS[i]);
      assert_int_equal(cs->switch_next_prio[i], LONG_INTS[N - 1 - i]);
      assert_string_equal(cs->intern_table[cs->switch_next_comm_index[i]],
                          comms[i]);
      assert_int_equal(cs->waking_pid[i], LONG_INTS[N - 1 - i]);
      assert_int_equal(cs->waking_target_cpu[i], LONG_INTS[i]);
      assert_int_equal(cs->waking_prio[i], -100 - i);
      assert_string_equal(cs->intern_table[cs->waking_comm_index[i]],
                          comms[N - 1 - i]);
      assert_int_equal(cs->waking_common_flags[i],
                       i ? UINT32_MAX >> i : UINT32_MAX);
    }
    perfetto__protos__ftrace_event_bundle__free_unpacked(b, NULL);
    tg__ftrace_compact_free(&c);
    enc_free(e);
  }
}

/* A bundle of ordinary rows (pids, prios, states, comms of a busy host,
 * timestamps microseconds apart) as the column writer wrote it before it
 * wrote varints straight into the writer's segment: the same bytes, in
 * one segment and in small ones. */
static const uint8_t COMPACT_GOLDEN[] = {
    0x22, 0xc0, 0x12, 0x2a, 0x09, 0x73, 0x77, 0x61, 0x70, 0x70, 0x65, 0x72,
    0x2f, 0x30, 0x2a, 0x04, 0x62, 0x61, 0x73, 0x68, 0x2a, 0x0b, 0x6b, 0x77,
    0x6f, 0x72, 0x6b, 0x65, 0x72, 0x2f, 0x31, 0x3a, 0x32, 0x2a, 0x0f, 0x73,
    0x63, 0x68, 0x65, 0x64, 0x2d, 0x6d, 0x65, 0x73, 0x73, 0x61, 0x67, 0x69,
    0x6e, 0x67, 0x2a, 0x04, 0x70, 0x65, 0x72, 0x66, 0x0a, 0x95, 0x03, 0x96,
    0xca, 0xb7, 0xb0, 0x88, 0x89, 0x1c, 0x86, 0x06, 0xfb, 0x0c, 0xf5, 0x06,
    0xd9, 0x0e, 0xe4, 0x07, 0xb7, 0x10, 0xd3, 0x08, 0x95, 0x12, 0xc2, 0x09,
    0xf3, 0x13, 0xb1, 0x0a, 0xd1, 0x15, 0xa0, 0x0b, 0xaf, 0x17, 0x8f, 0x0c,
    0x8d, 0x19, 0xfe, 0x0c, 0xeb, 0x1a, 0xed, 0x0d, 0xc9, 0x1c, 0xdc, 0x0e,
    0xa7, 0x1e, 0xcb, 0x0f, 0x85, 0x20, 0xba, 0x10, 0xe3, 0x21, 0xa9, 0x11,
    0xc1, 0x23, 0x98, 0x12, 0x9f, 0x25, 0x87, 0x13, 0xfd, 0x26, 0xf6, 0x13,
    0xdb, 0x28, 0xe5, 0x14, 0xb9, 0x2a, 0xd4, 0x15, 0x97, 0x2c, 0xc3, 0x16,
    0xf5, 0x2d, 0xb2, 0x17, 0xd3, 0x2f, 0xa1, 0x18, 0xb1, 0x31, 0x90, 0x19,
    0x8f, 0x33, 0xff, 0x19, 0xed, 0x34, 0xee, 0x1a, 0xcb, 0x36, 0xdd, 0x1b,
    0xa9, 0x38, 0xcc, 0x1c, 0x87, 0x3a, 0xbb, 0x1d, 0xe5, 0x3b, 0xaa, 0x1e,
    0xc3, 0x3d, 0x99, 0x1f, 0xa1, 0x3f, 0x88, 0x20, 0xff, 0x40, 0xf7, 0x20,
    0xdd, 0x42, 0xe6, 0x21, 0xbb, 0x44, 0xd5, 0x22, 0x99, 0x46, 0xc4, 0x23,
    0xf7, 0x47, 0xb3, 0x24, 0xd5, 0x49, 0xa2, 0x25, 0xb3, 0x4b, 0x91, 0x26,
    0x91, 0x4d, 0x80, 0x27, 0xef, 0x4e, 0xef, 0x27, 0xcd, 0x50, 0xde, 0x28,
    0xab, 0x52, 0xcd, 0x29, 0x89, 0x54, 0xbc, 0x2a, 0xe7, 0x55, 0xab, 0x2b,
    0xc5, 0x57, 0x9a, 0x2c, 0x9b, 0x32, 0x81, 0x06, 0xf1, 0x0c, 0xf0, 0x06,
    0xcf, 0x0e, 0xdf, 0x07, 0xad, 0x10, 0xce, 0x08, 0x8b, 0x12, 0xbd, 0x09,
    0xe9, 0x13, 0xac, 0x0a, 0xc7, 0x15, 0x9b, 0x0b, 0xa5, 0x17, 0x8a, 0x0c,
    0x83, 0x19, 0xf9, 0x0c, 0xe1, 0x1a, 0xe8, 0x0d, 0xbf, 0x1c, 0xd7, 0x0e,
    0x9d, 0x1e, 0xc6, 0x0f, 0xfb, 0x1f, 0xb5, 0x10, 0xd9, 0x21, 0xa4, 0x11,
    0xb7, 0x23, 0x93, 0x12, 0x95, 0x25, 0x82, 0x13, 0xf3, 0x26, 0xf1, 0x13,
    0xd1, 0x28, 0xe0, 0x14, 0xaf, 0x2a, 0xcf, 0x15, 0x8d, 0x2c, 0xbe, 0x16,
    0xeb, 0x2d, 0xad, 0x17, 0xc9, 0x2f, 0x9c, 0x18, 0xa7, 0x31, 0x8b, 0x19,
    0x85, 0x33, 0xfa, 0x19, 0xe3, 0x34, 0xe9, 0x1a, 0xc1, 0x36, 0xd8, 0x1b,
    0x9f, 0x38, 0xc7, 0x1c, 0xfd, 0x39, 0xb6, 0x1d, 0xdb, 0x3b, 0xa5, 0x1e,
    0xb9, 0x3d, 0x94, 0x1f, 0x97, 0x3f, 0x83, 0x20, 0xf5, 0x40, 0xf2, 0x20,
    0xd3, 0x42, 0xe1, 0x21, 0xb1, 0x44, 0xd0, 0x22, 0x8f, 0x46, 0xbf, 0x23,
    0xed, 0x47, 0xae, 0x24, 0xcb, 0x49, 0x9d, 0x25, 0xa9, 0x4b, 0x8c, 0x26,
    0x87, 0x4d, 0xfb, 0x26, 0xe5, 0x4e, 0xea, 0x27, 0xc3, 0x50, 0xd9, 0x28,
    0xa1, 0x52, 0xc8, 0x29, 0xff, 0x53, 0xb7, 0x2a, 0xdd, 0x55, 0xa6, 0x2b,
    0xbb, 0x57, 0x95, 0x2c, 0x91, 0x32, 0xfc, 0x05, 0xe7, 0x0c, 0xeb, 0x06,
    0xc5, 0x0e, 0xda, 0x07, 0xa3, 0x10, 0xc9, 0x08, 0x81, 0x12, 0xb8, 0x09,
    0xdf, 0x13, 0xa7, 0x0a, 0xbd, 0x15, 0x96, 0x0b, 0x9b, 0x17, 0x85, 0x0c,
    0xf9, 0x18, 0xf4, 0x0c, 0xd7, 0x1a, 0xe3, 0x0d, 0x12, 0xac, 0x02, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x01,
    0x80, 0x08, 0x00, 0x01, 0x80, 0x08, 0x00, 0x80, 0x08, 0x80, 0x08, 0x1a,
    0xf4, 0x02, 0xf5, 0x07, 0x82, 0x08, 0x9c, 0x08, 0xa9, 0x08, 0x00, 0xd0,
    0x08, 0xea, 0x08, 0xf7, 0x08, 0x91, 0x09, 0x00, 0xb8, 0x09, 0xc5, 0x09,
    0xdf, 0x09, 0xec, 0x09, 0x86, 0x0a, 0x93, 0x0a, 0xad, 0x0a, 0xba, 0x0a,
    0x00, 0xe1, 0x0a, 0xfb, 0x0a, 0x88, 0x0b, 0xa2, 0x0b, 0x00, 0xc9, 0x0b,
    0xd6, 0x0b, 0xf0, 0x0b, 0xfd, 0x0b, 0x97, 0x0c, 0xa4, 0x0c, 0xbe, 0x0c,
    0xcb, 0x0c, 0x00, 0xf2, 0x0c, 0x8c, 0x0d, 0x99, 0x0d, 0xb3, 0x0d, 0x00,
    0xda, 0x0d, 0xe7, 0x0d, 0x81, 0x0e, 0x8e, 0x0e, 0xa8, 0x0e, 0xb5, 0x0e,
    0xcf, 0x0e, 0xdc, 0x0e, 0x00, 0x83, 0x0f, 0x9d, 0x0f, 0xaa, 0x0f, 0xc4,
    0x0f, 0x00, 0xeb, 0x0f, 0xf8, 0x0f, 0x92, 0x10, 0x9f, 0x10, 0xb9, 0x10,
    0xc6, 0x10, 0xe0, 0x10, 0xed, 0x10, 0x00, 0x94, 0x11, 0xae, 0x11, 0xbb,
    0x11, 0xd5, 0x11, 0x00, 0xfc, 0x11, 0x89, 0x12, 0xa3, 0x12, 0xb0, 0x12,
    0xca, 0x12, 0xd7, 0x12, 0xf1, 0x12, 0xfe, 0x12, 0x00, 0xa5, 0x13, 0xbf,
    0x13, 0xcc, 0x13, 0xe6, 0x13, 0x00, 0x8d, 0x14, 0x9a, 0x14, 0xb4, 0x14,
    0xc1, 0x14, 0xdb, 0x14, 0xe8, 0x14, 0x82, 0x15, 0x8f, 0x15, 0x00, 0xb6,
    0x15, 0xd0, 0x15, 0xdd, 0x15, 0xf7, 0x15, 0x00, 0x9e, 0x16, 0xab, 0x16,
    0xc5, 0x16, 0xd2, 0x16, 0xec, 0x16, 0xf9, 0x16, 0x93, 0x17, 0xa0, 0x17,
    0x00, 0xc7, 0x17, 0xe1, 0x17, 0xee, 0x17, 0x88, 0x18, 0x00, 0xaf, 0x18,
    0xbc, 0x18, 0xd6, 0x18, 0xe3, 0x18, 0xfd, 0x18, 0x8a, 0x19, 0xa4, 0x19,
    0xb1, 0x19, 0x00, 0xd8, 0x19, 0xf2, 0x19, 0xff, 0x19, 0x99, 0x1a, 0x00,
    0xc0, 0x1a, 0xcd, 0x1a, 0xe7, 0x1a, 0xf4, 0x1a, 0x8e, 0x1b, 0x9b, 0x1b,
    0xb5, 0x1b, 0xc2, 0x1b, 0x00, 0xe9, 0x1b, 0x83, 0x1c, 0x90, 0x1c, 0xaa,
    0x1c, 0x00, 0xd1, 0x1c, 0xde, 0x1c, 0xf8, 0x1c, 0x85, 0x1d, 0x9f, 0x1d,
    0xac, 0x1d, 0xc6, 0x1d, 0xd3, 0x1d, 0x00, 0xfa, 0x1d, 0x94, 0x1e, 0xa1,
    0x1e, 0xbb, 0x1e, 0x00, 0xe2, 0x1e, 0xef, 0x1e, 0x89, 0x1f, 0x96, 0x1f,
    0xb0, 0x1f, 0xbd, 0x1f, 0xd7, 0x1f, 0xe4, 0x1f, 0x00, 0x8b, 0x20, 0xa5,
    0x20, 0xb2, 0x20, 0xcc, 0x20, 0x00, 0xf3, 0x20, 0x80, 0x21, 0x9a, 0x21,
    0xa7, 0x21, 0xc1, 0x21, 0xce, 0x21, 0xe8, 0x21, 0xf5, 0x21, 0x00, 0x9c,
    0x22, 0xb6, 0x22, 0xc3, 0x22, 0xdd, 0x22, 0x00, 0x84, 0x23, 0x91, 0x23,
    0xab, 0x23, 0xb8, 0x23, 0xd2, 0x23, 0xdf, 0x23, 0xf9, 0x23, 0x86, 0x24,
    0x00, 0xad, 0x24, 0xc7, 0x24, 0xd4, 0x24, 0xee, 0x24, 0x00, 0x95, 0x25,
    0xa2, 0x25, 0xbc, 0x25, 0xc9, 0x25, 0xe3, 0x25, 0xf0, 0x25, 0x8a, 0x26,
    0x97, 0x26, 0x22, 0xc8, 0x01, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77,
    0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77,
    0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77,
    0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77,
    0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77,
    0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77,
    0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77,
    0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77,
    0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77,
    0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77,
    0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77,
    0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77,
    0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77,
    0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77,
    0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77,
    0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77,
    0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77, 0x76, 0x77,
    0x76, 0x32, 0xc8, 0x01, 0x01, 0x02, 0x03, 0x00, 0x02, 0x04, 0x00, 0x01,
    0x04, 0x03, 0x01, 0x02, 0x03, 0x00, 0x02, 0x04, 0x00, 0x01, 0x04, 0x03,
    0x01, 0x02, 0x03, 0x00, 0x02, 0x04, 0x00, 0x01, 0x04, 0x03, 0x01, 0x02,
    0x03, 0x00, 0x02, 0x04, 0x00, 0x01, 0x04, 0x03, 0x01, 0x02, 0x03, 0x00,
    0x02, 0x04, 0x00, 0x01, 0x04, 0x03, 0x01, 0x02, 0x03, 0x00, 0x02, 0x04,
    0x00, 0x01, 0x04, 0x03, 0x01, 0x02, 0x03, 0x00, 0x02, 0x04, 0x00, 0x01,
    0x04, 0x03, 0x01, 0x02, 0x03, 0x00, 0x02, 0x04, 0x00, 0x01, 0x04, 0x03,
    0x01, 0x02, 0x03, 0x00, 0x02, 0x04, 0x00, 0x01, 0x04, 0x03, 0x01, 0x02,
    0x03, 0x00, 0x02, 0x04, 0x00, 0x01, 0x04, 0x03, 0x01, 0x02, 0x03, 0x00,
    0x02, 0x04, 0x00, 0x01, 0x04, 0x03, 0x01, 0x02, 0x03, 0x00, 0x02, 0x04,
    0x00, 0x01, 0x04, 0x03, 0x01, 0x02, 0x03, 0x00, 0x02, 0x04, 0x00, 0x01,
    0x04, 0x03, 0x01, 0x02, 0x03, 0x00, 0x02, 0x04, 0x00, 0x01, 0x04, 0x03,
    0x01, 0x02, 0x03, 0x00, 0x02, 0x04, 0x00, 0x01, 0x04, 0x03, 0x01, 0x02,
    0x03, 0x00, 0x02, 0x04, 0x00, 0x01, 0x04, 0x03, 0x01, 0x02, 0x03, 0x00,
    0x02, 0x04, 0x00, 0x01, 0x04, 0x03, 0x01, 0x02, 0x03, 0x00, 0x02, 0x04,
    0x00, 0x01, 0x04, 0x03, 0x01, 0x02, 0x03, 0x00, 0x02, 0x04, 0x00, 0x01,
    0x04, 0x03, 0x01, 0x02, 0x03, 0x00, 0x02, 0x04, 0x00, 0x01, 0x04, 0x03,
    0x3a, 0xd1, 0x01, 0xb5, 0xc4, 0xb7, 0xb0, 0x88, 0x89, 0x1c, 0x92, 0x12,
    0xdf, 0x14, 0xac, 0x17, 0xf9, 0x19, 0xc6, 0x1c, 0x93, 0x1f, 0xe0, 0x21,
    0xad, 0x24, 0xfa, 0x26, 0xc7, 0x29, 0x94, 0x2c, 0xe1, 0x2e, 0xae, 0x31,
    0xfb, 0x33, 0xc8, 0x36, 0x95, 0x39, 0xe2, 0x3b, 0xaf, 0x3e, 0xfc, 0x40,
    0xc9, 0x43, 0x96, 0x46, 0xe3, 0x48, 0xb0, 0x4b, 0xfd, 0x4d, 0xca, 0x50,
    0x97, 0x53, 0xe4, 0x55, 0xb1, 0x58, 0xfe, 0x5a, 0xcb, 0x5d, 0x98, 0x60,
    0xe5, 0x62, 0xb2, 0x65, 0xff, 0x67, 0xcc, 0x6a, 0x99, 0x6d, 0xe6, 0x6f,
    0xb3, 0x72, 0x80, 0x75, 0xcd, 0x77, 0x9a, 0x7a, 0xe7, 0x7c, 0xb4, 0x7f,
    0x81, 0x82, 0x01, 0xce, 0x84, 0x01, 0x83, 0x12, 0xd0, 0x14, 0x9d, 0x17,
    0xea, 0x19, 0xb7, 0x1c, 0x84, 0x1f, 0xd1, 0x21, 0x9e, 0x24, 0xeb, 0x26,
    0xb8, 0x29, 0x85, 0x2c, 0xd2, 0x2e, 0x9f, 0x31, 0xec, 0x33, 0xb9, 0x36,
    0x86, 0x39, 0xd3, 0x3b, 0xa0, 0x3e, 0xed, 0x40, 0xba, 0x43, 0x87, 0x46,
    0xd4, 0x48, 0xa1, 0x4b, 0xee, 0x4d, 0xbb, 0x50, 0x88, 0x53, 0xd5, 0x55,
    0xa2, 0x58, 0xef, 0x5a, 0xbc, 0x5d, 0x89, 0x60, 0xd6, 0x62, 0xa3, 0x65,
    0xf0, 0x67, 0xbd, 0x6a, 0x8a, 0x6d, 0xd7, 0x6f, 0xa4, 0x72, 0xf1, 0x74,
    0xbe, 0x77, 0x8b, 0x7a, 0xd8, 0x7c, 0xa5, 0x7f, 0xf2, 0x81, 0x01, 0xbf,
    0x84, 0x01, 0xf4, 0x11, 0xc1, 0x14, 0x8e, 0x17, 0xdb, 0x19, 0xa8, 0x1c,
    0xf5, 0x1e, 0xc2, 0x21, 0x8f, 0x24, 0xdc, 0x26, 0x42, 0xc8, 0x01, 0xd0,
    0x0f, 0xd3, 0x0f, 0xd6, 0x0f, 0xd9, 0x0f, 0xdc, 0x0f, 0xdf, 0x0f, 0xe2,
    0x0f, 0xe5, 0x0f, 0xe8, 0x0f, 0xeb, 0x0f, 0xee, 0x0f, 0xf1, 0x0f, 0xf4,
    0x0f, 0xf7, 0x0f, 0xfa, 0x0f, 0xfd, 0x0f, 0x80, 0x10, 0x83, 0x10, 0x86,
    0x10, 0x89, 0x10, 0x8c, 0x10, 0x8f, 0x10, 0x92, 0x10, 0x95, 0x10, 0x98,
    0x10, 0x9b, 0x10, 0x9e, 0x10, 0xa1, 0x10, 0xa4, 0x10, 0xa7, 0x10, 0xaa,
    0x10, 0xad, 0x10, 0xb0, 0x10, 0xb3, 0x10, 0xb6, 0x10, 0xb9, 0x10, 0xbc,
    0x10, 0xbf, 0x10, 0xc2, 0x10, 0xc5, 0x10, 0xc8, 0x10, 0xcb, 0x10, 0xce,
    0x10, 0xd1, 0x10, 0xd4, 0x10, 0xd7, 0x10, 0xda, 0x10, 0xdd, 0x10, 0xe0,
    0x10, 0xe3, 0x10, 0xe6, 0x10, 0xe9, 0x10, 0xec, 0x10, 0xef, 0x10, 0xf2,
    0x10, 0xf5, 0x10, 0xf8, 0x10, 0xfb, 0x10, 0xfe, 0x10, 0x81, 0x11, 0x84,
    0x11, 0x87, 0x11, 0x8a, 0x11, 0x8d, 0x11, 0x90, 0x11, 0x93, 0x11, 0x96,
    0x11, 0x99, 0x11, 0x9c, 0x11, 0x9f, 0x11, 0xa2, 0x11, 0xa5, 0x11, 0xa8,
    0x11, 0xab, 0x11, 0xae, 0x11, 0xb1, 0x11, 0xb4, 0x11, 0xb7, 0x11, 0xba,
    0x11, 0xbd, 0x11, 0xc0, 0x11, 0xc3, 0x11, 0xc6, 0x11, 0xc9, 0x11, 0xcc,
    0x11, 0xcf, 0x11, 0xd2, 0x11, 0xd5, 0x11, 0xd8, 0x11, 0xdb, 0x11, 0xde,
    0x11, 0xe1, 0x11, 0xe4, 0x11, 0xe7, 0x11, 0xea, 0x11, 0xed, 0x11, 0xf0,
    0x11, 0xf3, 0x11, 0xf6, 0x11, 0xf9, 0x11, 0x4a, 0x64, 0x00, 0x03, 0x02,
    0x01, 0x00, 0x03, 0x02, 0x01, 0x00, 0x03, 0x02, 0x01, 0x00, 0x03, 0x02,
    0x01, 0x00, 0x03, 0x02, 0x01, 0x00, 0x03, 0x02, 0x01, 0x00, 0x03, 0x02,
    0x01, 0x00, 0x03, 0x02, 0x01, 0x00, 0x03, 0x02, 0x01, 0x00, 0x03, 0x02,
    0x01, 0x00, 0x03, 0x02, 0x01, 0x00, 0x03, 0x02, 0x01, 0x00, 0x03, 0x02,
    0x01, 0x00, 0x03, 0x02, 0x01, 0x00, 0x03, 0x02, 0x01, 0x00, 0x03, 0x02,
    0x01, 0x00, 0x03, 0x02, 0x01, 0x00, 0x03, 0x02, 0x01, 0x00, 0x03, 0x02,
    0x01, 0x00, 0x03, 0x02, 0x01, 0x00, 0x03, 0x02, 0x01, 0x00, 0x03, 0x02,
    0x01, 0x00, 0x03, 0x02, 0x01, 0x00, 0x03, 0x02, 0x01, 0x00, 0x03, 0x02,
    0x01, 0x52, 0x64, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78,
    0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78,
    0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78,
    0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78,
    0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78,
    0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78,
    0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78,
    0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78,
    0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x78, 0x5a, 0x64, 0x00, 0x01, 0x02,
    0x04, 0x03, 0x00, 0x01, 0x02, 0x04, 0x03, 0x00, 0x01, 0x02, 0x04, 0x03,
    0x00, 0x01, 0x02, 0x04, 0x03, 0x00, 0x01, 0x02, 0x04, 0x03, 0x00, 0x01,
    0x02, 0x04, 0x03, 0x00, 0x01, 0x02, 0x04, 0x03, 0x00, 0x01, 0x02, 0x04,
    0x03, 0x00, 0x01, 0x02, 0x04, 0x03, 0x00, 0x01, 0x02, 0x04, 0x03, 0x00,
    0x01, 0x02, 0x04, 0x03, 0x00, 0x01, 0x02, 0x04, 0x03, 0x00, 0x01, 0x02,
    0x04, 0x03, 0x00, 0x01, 0x02, 0x04, 0x03, 0x00, 0x01, 0x02, 0x04, 0x03,
    0x00, 0x01, 0x02, 0x04, 0x03, 0x00, 0x01, 0x02, 0x04, 0x03, 0x00, 0x01,
    0x02, 0x04, 0x03, 0x00, 0x01, 0x02, 0x04, 0x03, 0x00, 0x01, 0x02, 0x04,
    0x03, 0x62, 0x64, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x01, 0x00, 0x01,
};

static void compact_ordinary_rows(tg_ftrace_compact_t *c) {
  static const char *const comms[] = {"swapper/0", "bash", "kworker/1:2",
                                      "perf", "sched-messaging"};
  uint64_t t = UINT64_C(123456789012345);
  for (int i = 0; i < 300; i++) {
    t += 700 + (uint64_t)(i * 37 % 5000);
    if (i % 3)
      compact_row(c, false, t, i % 7 ? 1000 + i * 13 : 0, 120 - i % 3,
                  i % 4 == 0 ? 0 : i % 4 == 1 ? 1 : 0x400, comms[i % 5], 0);
    else
      compact_row(c, true, t, 2000 + i, 120, i % 4, comms[(i / 3) % 5],
                  i % 2 ? 0x1 : 0x0);
  }
}

static void encoder_compact_writes_the_golden_bytes(void **state) {
  (void)state;
  for (size_t seg = 0; seg <= 40; seg += 40) {
    enc_t *e = enc_new(true);
    e->segment = seg;
    tg_ftrace_compact_t c;
    assert_int_equal(tg__ftrace_compact_init(&c, 512), 0);
    compact_ordinary_rows(&c);
    size_t n = compact_written(e, &c);
    assert_same_bytes(e->out, n, COMPACT_GOLDEN, sizeof(COMPACT_GOLDEN));
    tg__ftrace_compact_free(&c);
    enc_free(e);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(plans_write_the_bytes_of_the_reference),
      cmocka_unit_test(compact_sched_writes_the_bytes_of_the_reference),
      cmocka_unit_test(pages_of_a_read_share_one_bundle),
      cmocka_unit_test(a_bundle_says_where_the_previous_ended),
      cmocka_unit_test(record_at_the_buffer_end_reads_nothing_past_it),
      cmocka_unit_test(encoder_compact_columns_keep_long_and_negative_values),
      cmocka_unit_test(encoder_compact_writes_the_golden_bytes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
