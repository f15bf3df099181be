/* linux.ftrace's kernel addresses: void * fields written as per-drain
 * indices (never the address), the interned kernel_symbols that name them
 * with symbolize_ksyms, and the kallsyms parser on synthetic and hostile
 * text. Pages are built byte by byte (ftrace_fixtures.h) and the packets
 * decoded back with protobuf-c. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/probes/ftrace_encode.h"
#include "agent/probes/ftrace_format.h"
#include "agent/probes/ftrace_kaddr.h"
#include "agent/sys/ftrace_ksyms.h"
#include "ftrace_fixtures.h"
#include "pb/trace/trace_packet.pb-c.h"
#include "tracegate/pb_writer.h"

/* --- fixtures ------------------------------------------------------------ */

static const char wq_start_format[] =
    "name: workqueue_execute_start\nID: 335\n" COMMON_FIELDS
    "\tfield:void * work;\toffset:8;\tsize:8;\tsigned:0;\n"
    "\tfield:void * function;\toffset:16;\tsize:8;\tsigned:0;\n";

static const char wq_queue_format[] =
    "name: workqueue_queue_work\nID: 337\n" COMMON_FIELDS
    "\tfield:void * work;\toffset:8;\tsize:8;\tsigned:0;\n"
    "\tfield:void * function;\toffset:16;\tsize:8;\tsigned:0;\n"
    "\tfield:__data_loc char[] workqueue;\toffset:24;\tsize:4;\tsigned:0;\n"
    "\tfield:int req_cpu;\toffset:28;\tsize:4;\tsigned:1;\n"
    "\tfield:int cpu;\toffset:32;\tsize:4;\tsigned:1;\n";

/* Not one of Perfetto's: GenericFtraceEvent. "void*" without a blank, as
 * sched_blocked_reason declares caller. */
static const char generic_format[] =
    "name: hrtimer_start\nID: 90\n" COMMON_FIELDS
    "\tfield:void* hrtimer;\toffset:8;\tsize:8;\tsigned:0;\n"
    "\tfield:s64 expires;\toffset:16;\tsize:8;\tsigned:1;\n";

#define F_VMSTAT UINT64_C(0xffffffff81001000)   /* vmstat_update's start */
#define F_FLUSH_IN UINT64_C(0xffffffff81002010) /* inside flush_to_ldisc */
#define W_HEAP1 UINT64_C(0xffff888012345678)    /* heap: no symbol */
#define W_HEAP2 UINT64_C(0xffff888087654321)

static const char kallsyms_text[] =
    "ffffffff81000000 T _stext\n"
    "ffffffff81001000 T vmstat_update\n"
    "ffffffff81002000 t flush_to_ldisc\n"
    "ffffffff81003000 D some_data\n"
    "ffffffffc0001000 t mod_fn\t[some_mod]\n";

typedef struct fx {
  tg_ftrace_table_t table;
  tg_ftrace_encoder_t enc;
  tg_ksyms_t ks;
  uint8_t out[65536];
} fx_t;

static fx_t *fx_new(void) {
  fx_t *f = calloc(1, sizeof(*f));
  assert_non_null(f);
  assert_int_equal(tg_ftrace_table_init(&f->table), 0);
  add_format(&f->table, "workqueue", wq_start_format);
  add_format(&f->table, "workqueue", wq_queue_format);
  add_format(&f->table, "timer", generic_format);
  assert_int_equal(tg_ftrace_encoder_init(&f->enc, &f->table, false, 4096), 0);
  assert_int_equal(tg_ksyms_parse(&f->ks, kallsyms_text, strlen(kallsyms_text)),
                   4);
  return f;
}

static void fx_free(fx_t *f) {
  tg_ftrace_encoder_free(&f->enc);
  tg_ftrace_table_free(&f->table);
  tg_ksyms_free(&f->ks);
  free(f);
}

static size_t wq_start(uint8_t *out, uint64_t work, uint64_t fn) {
  uint8_t b[16];
  memcpy(b, &work, 8);
  memcpy(b + 8, &fn, 8);
  return event(out, 335, 10, b, sizeof(b));
}

static void add_wq_start(page_t *p, uint64_t work, uint64_t fn) {
  uint8_t rec[64];
  size_t n = wq_start(rec, work, fn);
  rec_data(p, 1, rec, n);
}

/* One TracePacket as write_page() makes it: the bundle, then (with |ks|)
 * the names of the new indices. Decoded back. */
static Perfetto__Protos__TracePacket *encode(fx_t *f, page_t *p,
                                             const tg_ksyms_t *ks) {
  page_finish(p, false);
  tg_ftrace_page_layout_t l;
  assert_int_equal(tg_ftrace_header_page_parse(header_page_fixture,
                                               strlen(header_page_fixture), &l),
                   0);
  tg_pbw_t w;
  tg_pbw_init(&w, f->out, sizeof(f->out), NULL, NULL);
  tg_pbw_begin_nested(&w, 1);
  tg_ftrace_bundle_result_t res;
  tg_ftrace_encode_bundle(&f->enc, &w, 0, &l, p->b, sizeof(p->b), &res);
  tg_pbw_end_nested(&w);
  if (ks) tg_ftrace_kaddrs_write_interned(&f->enc.kaddrs, ks, &w);
  assert_int_equal(tg_pbw_error(&w), 0);
  assert_false(res.corrupt);
  Perfetto__Protos__TracePacket *pk = perfetto__protos__trace_packet__unpack(
      NULL, (size_t)tg_pbw_written(&w), f->out);
  assert_non_null(pk);
  /* No byte run of the packet is a raw address of this test. */
  const uint64_t raw[] = {F_VMSTAT, F_FLUSH_IN, W_HEAP1, W_HEAP2};
  for (size_t i = 0; i < sizeof(raw) / sizeof(raw[0]); i++) {
    uint8_t v[10];
    size_t n = 0;
    for (uint64_t x = raw[i]; x >= 0x80; x >>= 7) v[n++] = (uint8_t)(x | 0x80);
    v[n] = (uint8_t)(raw[i] >> (7 * n));
    n++;
    size_t len = (size_t)tg_pbw_written(&w);
    for (size_t o = 0; o + n <= len; o++)
      assert_true(memcmp(f->out + o, v, n) != 0);
    for (size_t o = 0; o + 8 <= len; o++)
      assert_true(memcmp(f->out + o, &raw[i], 8) != 0);
  }
  return pk;
}

static const Perfetto__Protos__WorkqueueExecuteStartFtraceEvent *start_ev(
    const Perfetto__Protos__TracePacket *pk, size_t i) {
  assert_int_equal(pk->data_case,
                   PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS);
  assert_true(i < pk->ftrace_events->n_event);
  const Perfetto__Protos__FtraceEvent *e = pk->ftrace_events->event[i];
  assert_int_equal(e->event_case,
                   PERFETTO__PROTOS__FTRACE_EVENT__EVENT_WORKQUEUE_EXECUTE_START);
  assert_true(e->workqueue_execute_start->has_work &&
              e->workqueue_execute_start->has_function);
  return e->workqueue_execute_start;
}

/* The kernel_symbols of |pk|, as "iid=name;" in order. */
static void symbols_of(const Perfetto__Protos__TracePacket *pk, char *out,
                       size_t cap) {
  out[0] = 0;
  if (!pk->interned_data) return;
  size_t o = 0;
  for (size_t i = 0; i < pk->interned_data->n_kernel_symbols; i++) {
    const Perfetto__Protos__InternedString *s =
        pk->interned_data->kernel_symbols[i];
    assert_true(s->has_iid && s->has_str);
    o += (size_t)snprintf(out + o, cap - o, "%llu=%.*s;",
                          (unsigned long long)s->iid, (int)s->str.len,
                          (const char *)s->str.data);
    assert_true(o < cap);
  }
}

static bool state_cleared(const Perfetto__Protos__TracePacket *pk) {
  return pk->has_sequence_flags &&
         pk->sequence_flags ==
             PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_INCREMENTAL_STATE_CLEARED;
}

/* --- format files -------------------------------------------------------- */

static void format_marks_pointers_as_kernel_addresses(void **state) {
  (void)state;
  static const char text[] =
      "name: x\nID: 7\n" COMMON_FIELDS
      "\tfield:void * a;\toffset:8;\tsize:8;\tsigned:0;\n"
      "\tfield:void* b;\toffset:16;\tsize:4;\tsigned:0;\n"
      "\tfield:void *c;\toffset:20;\tsize:8;\tsigned:0;\n"
      "\tfield:const void * d;\toffset:28;\tsize:8;\tsigned:0;\n"
      "\tfield:void * e[2];\toffset:36;\tsize:16;\tsigned:0;\n"
      "\tfield:void * f;\toffset:52;\tsize:2;\tsigned:0;\n"
      "\tfield:unsigned long g;\toffset:54;\tsize:8;\tsigned:0;\n"
      "\tfield:const char * h;\toffset:62;\tsize:8;\tsigned:0;\n"
      "\tfield:struct page * i;\toffset:70;\tsize:8;\tsigned:0;\n";
  tg_ftrace_format_t f;
  assert_int_equal(tg_ftrace_format_parse(text, strlen(text), &f), 0);
  /* Every pointer of pointer size is an address, whatever it points to:
   * written raw, any of them would disclose the kernel's layout. A char
   * pointer is marked apart: it may be written as its string instead
   * (test_ftrace_printk.c), never as itself either. */
  assert_int_equal(tg_ftrace_format_field(&f, "a")->kind, TG_FTRACE_FIELD_SYMADDR);
  assert_int_equal(tg_ftrace_format_field(&f, "b")->kind, TG_FTRACE_FIELD_SYMADDR);
  assert_int_equal(tg_ftrace_format_field(&f, "c")->kind, TG_FTRACE_FIELD_SYMADDR);
  assert_int_equal(tg_ftrace_format_field(&f, "d")->kind, TG_FTRACE_FIELD_SYMADDR);
  assert_int_equal(tg_ftrace_format_field(&f, "h")->kind, TG_FTRACE_FIELD_STRPTR);
  assert_int_equal(tg_ftrace_format_field(&f, "i")->kind, TG_FTRACE_FIELD_SYMADDR);
  /* An array of pointers, or a "pointer" of another size: not decoded. */
  assert_int_equal(tg_ftrace_format_field(&f, "e")->kind, TG_FTRACE_FIELD_SKIP);
  assert_int_equal(tg_ftrace_format_field(&f, "f")->kind, TG_FTRACE_FIELD_SKIP);
  assert_int_equal(tg_ftrace_format_field(&f, "g")->kind, TG_FTRACE_FIELD_INT);
}

/* --- indices ------------------------------------------------------------- */

static void kernel_addresses_are_written_as_indices(void **state) {
  (void)state;
  fx_t *f = fx_new();
  page_t p;
  page_init(&p, 100);
  add_wq_start(&p, W_HEAP1, F_VMSTAT);
  add_wq_start(&p, W_HEAP2, F_VMSTAT);
  add_wq_start(&p, W_HEAP1, F_FLUSH_IN);
  /* A generic event's void * shares the table. */
  uint8_t body[16], rec[64];
  uint64_t a = F_FLUSH_IN;
  int64_t expires = 9;
  memcpy(body, &a, 8);
  memcpy(body + 8, &expires, 8);
  rec_data(&p, 1, rec, event(rec, 90, 10, body, sizeof(body)));
  /* workqueue_queue_work: the addresses, and its other fields as they are
   * but the workqueue's name, which Perfetto's schema has no field for. */
  uint8_t q[40] = {0};
  uint64_t w = W_HEAP2, fn = F_VMSTAT;
  memcpy(q, &w, 8);
  memcpy(q + 8, &fn, 8);
  uint32_t loc = (7u << 16) | 36u; /* "events\0" after the fixed fields */
  memcpy(q + 16, &loc, 4);
  int32_t req_cpu = 3, cpu = -1;
  memcpy(q + 20, &req_cpu, 4);
  memcpy(q + 24, &cpu, 4);
  memcpy(q + 28, "events", 7);
  rec_data(&p, 1, rec, event(rec, 337, 10, q, 35));

  Perfetto__Protos__TracePacket *pk = encode(f, &p, NULL);
  assert_int_equal(pk->ftrace_events->n_event, 5);
  /* 1, 2... in order of first appearance; the same address, the same. */
  assert_int_equal(start_ev(pk, 0)->work, 1);
  assert_int_equal(start_ev(pk, 0)->function, 2);
  assert_int_equal(start_ev(pk, 1)->work, 3);
  assert_int_equal(start_ev(pk, 1)->function, 2);
  assert_int_equal(start_ev(pk, 2)->work, 1);
  assert_int_equal(start_ev(pk, 2)->function, 4);
  const Perfetto__Protos__GenericFtraceEvent *g =
      pk->ftrace_events->event[3]->generic;
  assert_non_null(g);
  assert_string_equal(g->field[0]->name, "hrtimer");
  assert_int_equal(g->field[0]->value_case,
                   PERFETTO__PROTOS__GENERIC_FTRACE_EVENT__FIELD__VALUE_UINT_VALUE);
  assert_int_equal(g->field[0]->uint_value, 4);
  assert_int_equal(g->field[1]->int_value, 9);
  const Perfetto__Protos__WorkqueueQueueWorkFtraceEvent *qw =
      pk->ftrace_events->event[4]->workqueue_queue_work;
  assert_non_null(qw);
  assert_int_equal(qw->work, 3);
  assert_int_equal(qw->function, 2);
  assert_false(qw->has_workqueue);
  assert_int_equal(qw->req_cpu, 3);
  assert_int_equal(qw->cpu, -1);
  /* Without symbolize_ksyms: no names, no flags. */
  assert_null(pk->interned_data);
  assert_false(pk->has_sequence_flags);
  perfetto__protos__trace_packet__free_unpacked(pk, NULL);

  /* A reset (after each drain) starts the indices again. */
  tg_ftrace_kaddrs_reset(&f->enc.kaddrs);
  page_init(&p, 200);
  add_wq_start(&p, W_HEAP2, F_FLUSH_IN);
  pk = encode(f, &p, NULL);
  assert_int_equal(start_ev(pk, 0)->work, 1);
  assert_int_equal(start_ev(pk, 0)->function, 2);
  perfetto__protos__trace_packet__free_unpacked(pk, NULL);
  fx_free(f);
}

static void full_table_writes_zero_and_counts(void **state) {
  (void)state;
  tg_ftrace_kaddrs_t k;
  assert_int_equal(tg_ftrace_kaddrs_init(&k, 3), 0);
  assert_int_equal(tg_ftrace_kaddrs_index(&k, 0x10), 1);
  assert_int_equal(tg_ftrace_kaddrs_index(&k, 0x20), 2);
  assert_int_equal(tg_ftrace_kaddrs_index(&k, 0x30), 3);
  /* Full: a new address is 0, never itself; known ones keep theirs. */
  assert_int_equal(tg_ftrace_kaddrs_index(&k, 0x40), 0);
  assert_int_equal(tg_ftrace_kaddrs_index(&k, 0x50), 0);
  assert_int_equal(tg_ftrace_kaddrs_index(&k, 0x20), 2);
  assert_int_equal(k.dropped, 2);
  tg_ftrace_kaddrs_reset(&k);
  assert_int_equal(k.dropped, 0);
  assert_int_equal(tg_ftrace_kaddrs_index(&k, 0x40), 1);
  assert_int_equal(tg_ftrace_kaddrs_index(&k, 0x10), 2);
  tg_ftrace_kaddrs_free(&k);
  assert_int_equal(tg_ftrace_kaddrs_init(&k, 0), -EINVAL);
}

/* --- interned names ------------------------------------------------------ */

static void packets_intern_names_of_new_indices_only(void **state) {
  (void)state;
  fx_t *f = fx_new();
  char syms[256];
  page_t p;

  /* The first names of the sequence: SEQ_INCREMENTAL_STATE_CLEARED, and
   * only the function (the heap pointer has no symbol). */
  page_init(&p, 100);
  add_wq_start(&p, W_HEAP1, F_VMSTAT);
  add_wq_start(&p, W_HEAP1, F_VMSTAT);
  Perfetto__Protos__TracePacket *pk = encode(f, &p, &f->ks);
  assert_true(state_cleared(pk));
  symbols_of(pk, syms, sizeof(syms));
  assert_string_equal(syms, "2=vmstat_update;");
  perfetto__protos__trace_packet__free_unpacked(pk, NULL);

  /* Only indices new since: 4, inside flush_to_ldisc; no flags. */
  page_init(&p, 200);
  add_wq_start(&p, W_HEAP2, F_FLUSH_IN);
  add_wq_start(&p, W_HEAP1, F_VMSTAT);
  pk = encode(f, &p, &f->ks);
  assert_false(pk->has_sequence_flags);
  assert_int_equal(start_ev(pk, 0)->function, 4);
  symbols_of(pk, syms, sizeof(syms));
  assert_string_equal(syms, "4=flush_to_ldisc;");
  perfetto__protos__trace_packet__free_unpacked(pk, NULL);

  /* Nothing new: no interned_data at all. */
  page_init(&p, 300);
  add_wq_start(&p, W_HEAP1, F_VMSTAT);
  pk = encode(f, &p, &f->ks);
  assert_null(pk->interned_data);
  assert_false(pk->has_sequence_flags);
  perfetto__protos__trace_packet__free_unpacked(pk, NULL);

  /* After a reset, a packet with only unnamed addresses does not clear the
   * state: the next one that names something does. */
  tg_ftrace_kaddrs_reset(&f->enc.kaddrs);
  page_init(&p, 400);
  add_wq_start(&p, W_HEAP2, W_HEAP1);
  pk = encode(f, &p, &f->ks);
  assert_null(pk->interned_data);
  assert_false(pk->has_sequence_flags);
  perfetto__protos__trace_packet__free_unpacked(pk, NULL);
  page_init(&p, 500);
  add_wq_start(&p, W_HEAP1, F_FLUSH_IN);
  pk = encode(f, &p, &f->ks);
  assert_true(state_cleared(pk));
  assert_int_equal(start_ev(pk, 0)->work, 2);
  assert_int_equal(start_ev(pk, 0)->function, 3);
  symbols_of(pk, syms, sizeof(syms));
  assert_string_equal(syms, "3=flush_to_ldisc;");
  perfetto__protos__trace_packet__free_unpacked(pk, NULL);

  /* Symbols that name nothing (kptr_restrict): indices, no names. */
  tg_ksyms_t none;
  const char zeros[] = "0000000000000000 T _stext\n0000000000000000 t f\n";
  assert_int_equal(tg_ksyms_parse(&none, zeros, strlen(zeros)), 0);
  assert_int_equal(none.zero_addrs, 2);
  tg_ftrace_kaddrs_reset(&f->enc.kaddrs);
  page_init(&p, 600);
  add_wq_start(&p, W_HEAP1, F_VMSTAT);
  pk = encode(f, &p, &none);
  assert_int_equal(start_ev(pk, 0)->function, 2);
  assert_null(pk->interned_data);
  assert_false(pk->has_sequence_flags);
  perfetto__protos__trace_packet__free_unpacked(pk, NULL);
  tg_ksyms_free(&none);
  fx_free(f);
}

/* --- kallsyms ------------------------------------------------------------ */

static void kallsyms_lookup_finds_the_enclosing_function(void **state) {
  (void)state;
  tg_ksyms_t k;
  assert_int_equal(tg_ksyms_parse(&k, kallsyms_text, strlen(kallsyms_text)), 4);
  size_t n;
  const char *s = tg_ksyms_lookup(&k, F_VMSTAT, &n);
  assert_non_null(s);
  assert_int_equal(n, strlen("vmstat_update"));
  assert_memory_equal(s, "vmstat_update", n);
  /* Inside a function: the greatest symbol at or below. */
  s = tg_ksyms_lookup(&k, F_FLUSH_IN, &n);
  assert_non_null(s);
  assert_memory_equal(s, "flush_to_ldisc", n);
  /* D (data) is not kept: its address falls in the function before. */
  s = tg_ksyms_lookup(&k, UINT64_C(0xffffffff81003000), &n);
  assert_memory_equal(s, "flush_to_ldisc", n);
  /* A module symbol, without its [module]. */
  s = tg_ksyms_lookup(&k, UINT64_C(0xffffffffc0001004), &n);
  assert_non_null(s);
  assert_int_equal(n, 6);
  assert_memory_equal(s, "mod_fn", n);
  /* Below the first symbol, or far past the last one before: none. */
  assert_null(tg_ksyms_lookup(&k, W_HEAP1, &n));
  assert_null(tg_ksyms_lookup(&k, 0, &n));
  assert_null(tg_ksyms_lookup(&k, UINT64_C(0xffffffff81002000) +
                                      TG_KSYMS_MAX_FUNC_SIZE + 1, &n));
  tg_ksyms_free(&k);
}

static void kallsyms_survives_hostile_text(void **state) {
  (void)state;
  char *text = malloc(1 << 16);
  assert_non_null(text);
  size_t o = 0;
#define ADD(s)                       \
  do {                               \
    memcpy(text + o, s, strlen(s));  \
    o += strlen(s);                  \
  } while (0)
  ADD("ffffffff81000300 T third\n");               /* unsorted */
  ADD("ffffffff81000100 T first\n");
  ADD("ffffffff81000100 T first_alias\n");         /* duplicate address */
  ADD("zzzzffff81000000 T bad_hex\n");
  ADD("1ffffffff81000000 T seventeen_digits\n");
  ADD("ffffffff81000200 T\n");                     /* no name */
  ADD("ffffffff81000200 T   \n");
  ADD("ffffffff81000200\n");                       /* no type */
  ADD("ffffffff81000200 Tx name\n");               /* type not one char */
  ADD(" ffffffff81000200 T leading_blank\n");
  ADD("\n\n\x01\x02\xff\n");
  ADD("ffffffff81000400 t $x.12\n");               /* ARM mapping symbol */
  ADD("ffffffff81000500 t cfi_fn.cfi_jt\n");
  ADD("ffffffff81000600 t other.cfi\n");
  /* A line longer than TG_KSYMS_LINE_MAX: skipped whole, next one kept. */
  ADD("ffffffff81000700 T ");
  memset(text + o, 'x', 4000);
  o += 4000;
  ADD("\nffffffff81000800 T after_long\n");
  /* A name longer than TG_KSYMS_NAME_MAX fits a line: cut. */
  ADD("ffffffff81000900 T ");
  memset(text + o, 'n', 400);
  o += 400;
  ADD("\nFFFFFFFF81000A00 T upper_hex\n");
  ADD("ffffffff81000b00 T no_newline");
#undef ADD

  /* Whole, and one byte at a time: the same table. */
  tg_ksyms_t a, b;
  int n = tg_ksyms_parse(&a, text, o);
  tg_ksyms_init(&b);
  for (size_t i = 0; i < o; i++) assert_int_equal(tg_ksyms_feed(&b, text + i, 1), 0);
  assert_int_equal(tg_ksyms_finish(&b), n);
  assert_int_equal(n, 8);
  assert_int_equal(a.syms.n, b.syms.n);
  assert_true(tg__addr_strs_equal(&a.syms, &b.syms));
  for (size_t i = 1; i < a.syms.n; i++) /* sorted */
    assert_true(tg__addr_strs_addr(&a.syms, i - 1) <
                tg__addr_strs_addr(&a.syms, i));
  assert_int_equal(a.bad_lines, b.bad_lines);
  assert_true(a.bad_lines >= 10);
  size_t len;
  const char *s = tg_ksyms_lookup(&a, UINT64_C(0xffffffff81000100), &len);
  assert_int_equal(len, 5);
  assert_memory_equal(s, "first", 5); /* the first listed of an address */
  s = tg_ksyms_lookup(&a, UINT64_C(0xffffffff81000500), &len);
  assert_int_equal(len, 6);
  assert_memory_equal(s, "cfi_fn", 6);
  s = tg_ksyms_lookup(&a, UINT64_C(0xffffffff81000600), &len);
  assert_memory_equal(s, "other", len);
  s = tg_ksyms_lookup(&a, UINT64_C(0xffffffff81000400), &len);
  assert_memory_equal(s, "third", len); /* $x.12 is not a function */
  s = tg_ksyms_lookup(&a, UINT64_C(0xffffffff81000700), &len);
  assert_memory_equal(s, "other", len); /* the long line is not kept */
  s = tg_ksyms_lookup(&a, UINT64_C(0xffffffff81000800), &len);
  assert_memory_equal(s, "after_long", len);
  s = tg_ksyms_lookup(&a, UINT64_C(0xffffffff81000900), &len);
  assert_int_equal(len, TG_KSYMS_NAME_MAX);
  s = tg_ksyms_lookup(&a, UINT64_C(0xffffffff81000a00), &len);
  assert_memory_equal(s, "upper_hex", len);
  s = tg_ksyms_lookup(&a, UINT64_C(0xffffffff81000b00), &len);
  assert_memory_equal(s, "no_newline", len);
  tg_ksyms_free(&a);
  tg_ksyms_free(&b);

  /* Nothing usable at all: an empty table that names nothing. */
  assert_int_equal(tg_ksyms_parse(&a, "", 0), 0);
  assert_null(tg_ksyms_lookup(&a, 1, &len));
  tg_ksyms_free(&a);
  free(text);
}

static void kallsyms_loads_this_kernels_file(void **state) {
  (void)state;
  tg_ksyms_t k;
  int n = tg_ksyms_load(&k, "/proc/kallsyms");
  if (n < 0) {
    tg_ksyms_free(&k);
    print_message("skipped: /proc/kallsyms: %s\n", strerror(-n));
    skip();
  }
  /* Unprivileged or under kptr_restrict every address is 0: nothing. */
  if (n == 0) assert_true(k.zero_addrs > 0);
  for (size_t i = 1; i < k.syms.n; i++)
    assert_true(tg__addr_strs_addr(&k.syms, i - 1) <
                tg__addr_strs_addr(&k.syms, i));
  tg_ksyms_free(&k);
  assert_int_equal(tg_ksyms_load(&k, "/nonexistent/kallsyms"), -ENOENT);
  tg_ksyms_free(&k);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(format_marks_pointers_as_kernel_addresses),
      cmocka_unit_test(kernel_addresses_are_written_as_indices),
      cmocka_unit_test(full_table_writes_zero_and_counts),
      cmocka_unit_test(packets_intern_names_of_new_indices_only),
      cmocka_unit_test(kallsyms_lookup_finds_the_enclosing_function),
      cmocka_unit_test(kallsyms_survives_hostile_text),
      cmocka_unit_test(kallsyms_loads_this_kernels_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
