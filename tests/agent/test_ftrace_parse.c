/* linux.ftrace's pure parts: ring buffer pages built here byte by byte
 * (every record type, lost-events flag, hostile lengths), format files,
 * the page header layout, the encoder decoded back with protobuf-c
 * (Perfetto's messages, GenericFtraceEvent, compact_sched), the config
 * reader's warnings and the per-CPU stats text. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/probes/ftrace_config.h"
#include "agent/probes/ftrace_encode.h"
#include "agent/probes/ftrace_format.h"
#include "agent/probes/ftrace_page.h"
#include "agent/probes/ftrace_tracefs.h"
#include "ftrace_fixtures.h"
#include "pb/config/data_source_config.pb-c.h"
#include "pb/trace/trace_packet.pb-c.h"
#include "tracegate/error.h"
#include "tracegate/pb_writer.h"

/* --- fixtures ------------------------------------------------------------ */

static const char irq_format[] =
    "name: irq_handler_entry\nID: 120\n" COMMON_FIELDS
    "\tfield:int irq;\toffset:8;\tsize:4;\tsigned:1;\n"
    "\tfield:__data_loc char[] name;\toffset:12;\tsize:4;\tsigned:0;\n";

/* kmem/rss_stat as kernels since 5.x print it. */
static const char rss_format[] =
    "name: rss_stat\nID: 200\n" COMMON_FIELDS
    "\tfield:unsigned int mm_id;\toffset:8;\tsize:4;\tsigned:0;\n"
    "\tfield:unsigned int curr;\toffset:12;\tsize:4;\tsigned:0;\n"
    "\tfield:int member;\toffset:16;\tsize:4;\tsigned:1;\n"
    "\tfield:long size;\toffset:24;\tsize:8;\tsigned:1;\n";

/* Not one of Perfetto's: written as GenericFtraceEvent. */
static const char generic_format[] =
    "name: hrtimer_start\nID: 90\n" COMMON_FIELDS
    "\tfield:void * hrtimer;\toffset:8;\tsize:8;\tsigned:0;\n"
    "\tfield:s64 expires;\toffset:16;\tsize:8;\tsigned:1;\n"
    "\tfield:__rel_loc char[] label;\toffset:24;\tsize:4;\tsigned:0;\n";

static size_t switch_rec(uint8_t *out, const char *prev, int32_t prev_pid,
                         int64_t state, const char *next, int32_t next_pid) {
  uint8_t b[56] = {0};
  strncpy((char *)b, prev, 16);
  memcpy(b + 16, &prev_pid, 4);
  int32_t prio = 120;
  memcpy(b + 20, &prio, 4);
  memcpy(b + 24, &state, 8);
  strncpy((char *)b + 32, next, 16);
  memcpy(b + 48, &next_pid, 4);
  prio = 100;
  memcpy(b + 52, &prio, 4);
  return event(out, 372, prev_pid, b, sizeof(b));
}

static tg_ftrace_page_layout_t layout(void) {
  tg_ftrace_page_layout_t l;
  assert_int_equal(tg_ftrace_header_page_parse(header_page_fixture,
                                               strlen(header_page_fixture), &l),
                   0);
  return l;
}

/* --- page walking -------------------------------------------------------- */

static void header_page_gives_the_layout(void **state) {
  (void)state;
  tg_ftrace_page_layout_t l = layout();
  assert_int_equal(l.commit_size, 8);
  assert_int_equal(l.data_offset, 16);
  assert_int_equal(l.page_size, 4096);
  /* A 32-bit kernel's header: a 4-byte commit, data at 12. */
  const char small[] =
      "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
      "\tfield: local_t commit;\toffset:8;\tsize:4;\tsigned:1;\n"
      "\tfield: char data;\toffset:12;\tsize:4084;\tsigned:0;\n";
  assert_int_equal(tg_ftrace_header_page_parse(small, strlen(small), &l), 0);
  assert_int_equal(l.data_offset, 12);
  assert_int_equal(l.page_size, 4096);
  const char bad[] = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n";
  assert_int_equal(tg_ftrace_header_page_parse(bad, strlen(bad), &l), -EINVAL);
}

static void page_walks_every_record_type(void **state) {
  (void)state;
  tg_ftrace_page_layout_t l = layout();
  page_t p;
  page_init(&p, 1000);
  uint8_t small[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  uint8_t big[200];
  for (size_t i = 0; i < sizeof(big); i++) big[i] = (uint8_t)i;
  rec_data(&p, 10, small, sizeof(small));          /* ts 1010 */
  rec_extend(&p, (UINT64_C(5) << 27) + 7);          /* +671088647 */
  rec_data(&p, 3, big, sizeof(big));               /* type_len 0 */
  rec_pad(&p, 16);                                 /* a discarded event */
  rec_abs(&p, UINT64_C(5000000000));
  rec_data(&p, 0, small, 4);
  page_finish(&p, true);

  tg_ftrace_page_iter_t it;
  tg_ftrace_page_header_t hdr;
  assert_int_equal(tg_ftrace_page_begin(&l, p.b, sizeof(p.b), &it, &hdr), 0);
  assert_true(hdr.lost_events);
  assert_int_equal(hdr.ts, 1000);
  assert_int_equal(hdr.data_len, p.off - 16);
  tg_ftrace_record_t r;
  assert_int_equal(tg_ftrace_page_next(&it, &r), 1);
  assert_int_equal(r.ts, 1010);
  assert_int_equal(r.len, 8);
  assert_memory_equal(r.data, small, 8);
  assert_int_equal(tg_ftrace_page_next(&it, &r), 1);
  assert_int_equal(r.ts, 1010 + (UINT64_C(5) << 27) + 7 + 3);
  assert_int_equal(r.len, 200);
  assert_memory_equal(r.data, big, 200);
  assert_int_equal(tg_ftrace_page_next(&it, &r), 1);
  assert_int_equal(r.ts, UINT64_C(5000000000));
  assert_int_equal(r.len, 4);
  assert_int_equal(tg_ftrace_page_next(&it, &r), 0);
  assert_int_equal(tg_ftrace_page_next(&it, &r), 0);
}

static void page_ends_at_final_padding(void **state) {
  (void)state;
  tg_ftrace_page_layout_t l = layout();
  page_t p;
  page_init(&p, 0);
  uint8_t d[4] = {0};
  rec_data(&p, 1, d, 4);
  put32(&p, 29); /* padding with time_delta 0: the page ends here */
  rec_data(&p, 1, d, 4);
  page_finish(&p, false);
  tg_ftrace_page_iter_t it;
  tg_ftrace_page_header_t hdr;
  assert_int_equal(tg_ftrace_page_begin(&l, p.b, sizeof(p.b), &it, &hdr), 0);
  assert_false(hdr.lost_events);
  tg_ftrace_record_t r;
  assert_int_equal(tg_ftrace_page_next(&it, &r), 1);
  assert_int_equal(tg_ftrace_page_next(&it, &r), 0);
}

static void page_rejects_hostile_lengths(void **state) {
  (void)state;
  tg_ftrace_page_layout_t l = layout();
  tg_ftrace_page_iter_t it;
  tg_ftrace_page_header_t hdr;
  tg_ftrace_record_t r;
  page_t p;
  /* The commit claims more than was read. */
  page_init(&p, 0);
  p.off = 16 + 100;
  page_finish(&p, false);
  assert_int_equal(tg_ftrace_page_begin(&l, p.b, 64, &it, &hdr), -EBADMSG);
  assert_int_equal(tg_ftrace_page_begin(&l, p.b, 8, &it, &hdr), -EBADMSG);
  /* A type_len 0 record whose length runs past the commit. */
  page_init(&p, 0);
  uint8_t d[4] = {0};
  rec_data(&p, 1, d, 4);
  put32(&p, 0);
  put32(&p, 4000);
  page_finish(&p, false);
  assert_int_equal(tg_ftrace_page_begin(&l, p.b, sizeof(p.b), &it, &hdr), 0);
  assert_int_equal(tg_ftrace_page_next(&it, &r), 1); /* the good one stands */
  assert_int_equal(tg_ftrace_page_next(&it, &r), -EBADMSG);
  assert_int_equal(tg_ftrace_page_next(&it, &r), 0);
  /* Lengths below their own size, a padding past the end, a record cut by
   * the commit. */
  const uint32_t bad[][2] = {{0, 2}, {29u | 1u << 5, 0}, {29u | 1u << 5, 9999},
                             {28, 0}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    page_init(&p, 0);
    put32(&p, bad[i][0]);
    put32(&p, bad[i][1]);
    page_finish(&p, false);
    assert_int_equal(tg_ftrace_page_begin(&l, p.b, sizeof(p.b), &it, &hdr), 0);
    assert_int_equal(tg_ftrace_page_next(&it, &r), -EBADMSG);
  }
}

/* --- format files -------------------------------------------------------- */

static void format_file_gives_fields_and_kinds(void **state) {
  (void)state;
  tg_ftrace_format_t f;
  assert_int_equal(tg_ftrace_format_parse(switch_format, strlen(switch_format), &f),
                   0);
  assert_string_equal(f.name, "sched_switch");
  assert_int_equal(f.id, 372);
  assert_int_equal(f.pid_offset, 4);
  assert_int_equal(f.flags_offset, 2);
  assert_int_equal(f.n_fields, 7);
  const tg_ftrace_field_t *c = tg_ftrace_format_field(&f, "prev_comm");
  assert_non_null(c);
  assert_int_equal(c->kind, TG_FTRACE_FIELD_CHARS);
  assert_int_equal(c->offset, 8);
  assert_int_equal(c->size, 16);
  const tg_ftrace_field_t *st = tg_ftrace_format_field(&f, "prev_state");
  assert_int_equal(st->kind, TG_FTRACE_FIELD_INT);
  assert_int_equal(st->size, 8);
  assert_true(st->is_signed);

  assert_int_equal(tg_ftrace_format_parse(irq_format, strlen(irq_format), &f), 0);
  assert_int_equal(tg_ftrace_format_field(&f, "name")->kind,
                   TG_FTRACE_FIELD_DATA_LOC);
  assert_int_equal(tg_ftrace_format_parse(sys_enter_format,
                                          strlen(sys_enter_format), &f), 0);
  const tg_ftrace_field_t *a = tg_ftrace_format_field(&f, "args");
  assert_int_equal(a->kind, TG_FTRACE_FIELD_INT_ARRAY);
  assert_int_equal(a->elem_size, 8);
  assert_int_equal(tg_ftrace_format_parse(print_format, strlen(print_format), &f),
                   0);
  assert_int_equal(tg_ftrace_format_field(&f, "buf")->kind, TG_FTRACE_FIELD_TAIL);
  /* An unsigned long named as a code address is a kernel address. */
  assert_int_equal(tg_ftrace_format_field(&f, "ip")->kind,
                   TG_FTRACE_FIELD_SYMADDR);
  const char kmalloc[] =
      "name: kmalloc\nID: 500\nformat:\n"
      "\tfield:unsigned long call_site;\toffset:8;\tsize:8;\tsigned:0;\n"
      "\tfield:size_t bytes_req;\toffset:16;\tsize:8;\tsigned:0;\n"
      "\tfield:s32 caller_offs;\toffset:24;\tsize:4;\tsigned:1;\n"
      "\tfield:unsigned char func;\toffset:28;\tsize:1;\tsigned:0;\n";
  assert_int_equal(tg_ftrace_format_parse(kmalloc, strlen(kmalloc), &f), 0);
  assert_int_equal(tg_ftrace_format_field(&f, "call_site")->kind,
                   TG_FTRACE_FIELD_SYMADDR);
  assert_int_equal(tg_ftrace_format_field(&f, "bytes_req")->kind,
                   TG_FTRACE_FIELD_INT);
  /* A signed offset, and a byte: no address whatever the name. */
  assert_int_equal(tg_ftrace_format_field(&f, "caller_offs")->kind,
                   TG_FTRACE_FIELD_INT);
  assert_int_equal(tg_ftrace_format_field(&f, "func")->kind,
                   TG_FTRACE_FIELD_INT);
  assert_int_equal(tg_ftrace_format_parse(generic_format,
                                          strlen(generic_format), &f), 0);
  assert_int_equal(tg_ftrace_format_field(&f, "label")->kind,
                   TG_FTRACE_FIELD_REL_LOC);

  /* No ID, or garbage: rejected. */
  const char no_id[] = "name: x\nformat:\n\tfield:int a;\toffset:8;\tsize:4;\n";
  assert_int_equal(tg_ftrace_format_parse(no_id, strlen(no_id), &f), -EINVAL);
  assert_int_equal(tg_ftrace_format_parse("\x01\x02garbage", 9, &f), -EINVAL);
  const char huge[] = "ID: 99999999\n\tfield:int a;\toffset:8;\tsize:4;\n";
  assert_int_equal(tg_ftrace_format_parse(huge, strlen(huge), &f), -EINVAL);
}

/* --- encoding ------------------------------------------------------------ */

typedef struct enc_fixture {
  tg_ftrace_table_t table;
  tg_ftrace_encoder_t enc;
  uint8_t out[65536];
} enc_fixture_t;

static enc_fixture_t *fixture(bool compact) {
  enc_fixture_t *fx = calloc(1, sizeof(*fx));
  assert_non_null(fx);
  assert_int_equal(tg_ftrace_table_init(&fx->table), 0);
  add_format(&fx->table, "sched", switch_format);
  add_format(&fx->table, "sched", waking_format);
  add_format(&fx->table, "irq", irq_format);
  add_format(&fx->table, "raw_syscalls", sys_enter_format);
  add_format(&fx->table, "ftrace", print_format);
  add_format(&fx->table, "timer", generic_format);
  add_format(&fx->table, "kmem", rss_format);
  tg_ftrace_format_t f;
  assert_int_equal(tg_ftrace_format_parse(irq_format, strlen(irq_format), &f), 0);
  assert_int_equal(tg_ftrace_table_add(&fx->table, "irq", &f, false), -EEXIST);
  assert_int_equal(tg_ftrace_encoder_init(&fx->enc, &fx->table, compact, 4096), 0);
  return fx;
}

static void fixture_free(enc_fixture_t *fx) {
  tg_ftrace_encoder_free(&fx->enc);
  tg_ftrace_table_free(&fx->table);
  free(fx);
}

/* Encodes |p| as TracePacket { ftrace_events } and decodes it back. */
static Perfetto__Protos__TracePacket *encode(enc_fixture_t *fx, const page_t *p,
                                             tg_ftrace_bundle_result_t *res) {
  tg_ftrace_page_layout_t l = layout();
  tg_pbw_t w;
  tg_pbw_init(&w, fx->out, sizeof(fx->out), NULL, NULL);
  tg_pbw_begin_nested(&w, 1);
  tg_ftrace_encode_bundle(&fx->enc, &w, 3, &l, p->b, sizeof(p->b), res);
  tg_pbw_end_nested(&w);
  assert_int_equal(tg_pbw_error(&w), 0);
  Perfetto__Protos__TracePacket *pk = perfetto__protos__trace_packet__unpack(
      NULL, (size_t)tg_pbw_written(&w), fx->out);
  assert_non_null(pk);
  assert_int_equal(pk->data_case, PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS);
  return pk;
}

static void encoder_writes_perfettos_messages(void **state) {
  (void)state;
  enc_fixture_t *fx = fixture(false);
  page_t p;
  page_init(&p, 5000);
  uint8_t rec[256];
  size_t n = switch_rec(rec, "bash", 42, 1, "swapper/3", 0);
  rec_data(&p, 10, rec, n);
  /* irq_handler_entry: irq 9, name "acpi" through __data_loc. */
  uint8_t irq[16] = {0};
  int32_t irqno = 9;
  memcpy(irq, &irqno, 4);
  uint32_t loc = (5u << 16) | 16u; /* 5 bytes at offset 16 of the record */
  memcpy(irq + 4, &loc, 4);
  memcpy(irq + 8, "acpi", 5);
  n = event(rec, 120, 0, irq, 13);
  rec_data(&p, 1, rec, n);
  /* sys_enter: id 1, args 1..6. */
  uint8_t se[56];
  int64_t id = 1;
  memcpy(se, &id, 8);
  for (uint64_t i = 0; i < 6; i++) {
    uint64_t v = i + 1;
    memcpy(se + 8 + i * 8, &v, 8);
  }
  n = event(rec, 443, 77, se, sizeof(se));
  rec_data(&p, 1, rec, n);
  /* print: ip, then the marker text. */
  uint8_t pr[40] = {0};
  uint64_t ip = 0xffff1234;
  memcpy(pr, &ip, 8);
  memcpy(pr + 8, "hello marker\n", 14);
  n = event(rec, 5, 77, pr, 22);
  rec_data(&p, 1, rec, n);
  /* Not in the table: skipped. */
  n = event(rec, 999, 1, se, 8);
  rec_data(&p, 1, rec, n);
  page_finish(&p, false);

  tg_ftrace_bundle_result_t res;
  Perfetto__Protos__TracePacket *pk = encode(fx, &p, &res);
  assert_int_equal(res.events, 4);
  assert_int_equal(res.skipped, 1);
  assert_false(res.corrupt);
  const Perfetto__Protos__FtraceEventBundle *b = pk->ftrace_events;
  assert_int_equal(b->cpu, 3);
  assert_false(b->has_lost_events);
  assert_null(b->compact_sched);
  assert_int_equal(b->n_event, 4);

  const Perfetto__Protos__FtraceEvent *e = b->event[0];
  assert_int_equal(e->timestamp, 5010);
  assert_int_equal(e->pid, 42);
  assert_int_equal(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH);
  assert_string_equal(e->sched_switch->prev_comm, "bash");
  assert_int_equal(e->sched_switch->prev_pid, 42);
  assert_int_equal(e->sched_switch->prev_prio, 120);
  assert_int_equal(e->sched_switch->prev_state, 1);
  assert_string_equal(e->sched_switch->next_comm, "swapper/3");
  assert_int_equal(e->sched_switch->next_pid, 0);
  assert_true(e->sched_switch->has_next_pid);
  assert_int_equal(e->sched_switch->next_prio, 100);

  e = b->event[1];
  assert_int_equal(e->timestamp, 5011);
  assert_int_equal(e->event_case,
                   PERFETTO__PROTOS__FTRACE_EVENT__EVENT_IRQ_HANDLER_ENTRY);
  assert_int_equal(e->irq_handler_entry->irq, 9);
  assert_string_equal(e->irq_handler_entry->name, "acpi");

  e = b->event[2];
  assert_int_equal(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SYS_ENTER);
  assert_int_equal(e->sys_enter->id, 1);
  assert_int_equal(e->sys_enter->n_args, 6);
  assert_int_equal(e->sys_enter->args[5], 6);

  e = b->event[3];
  assert_int_equal(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_PRINT);
  assert_int_equal(e->print->ip, 1); /* the address's index, not itself */
  assert_string_equal(e->print->buf, "hello marker\n");
  perfetto__protos__trace_packet__free_unpacked(pk, NULL);
  fixture_free(fx);
}

/* kmem/rss_stat becomes RssStatFtraceEvent (313): trace_processor's RSS
 * counters come from it, not from a generic event. */
static void encoder_writes_rss_stat(void **state) {
  (void)state;
  enc_fixture_t *fx = fixture(false);
  page_t p;
  page_init(&p, 7000);
  uint8_t b[24] = {0}, rec[64];
  uint32_t mm_id = 0xabcd, curr = 1;
  int32_t member = 1; /* MM_ANONPAGES */
  int64_t size = 123 * 4096;
  memcpy(b, &mm_id, 4);
  memcpy(b + 4, &curr, 4);
  memcpy(b + 8, &member, 4);
  memcpy(b + 16, &size, 8);
  size_t n = event(rec, 200, 55, b, sizeof(b));
  rec_data(&p, 2, rec, n);
  page_finish(&p, false);
  tg_ftrace_bundle_result_t res;
  Perfetto__Protos__TracePacket *pk = encode(fx, &p, &res);
  assert_int_equal(res.events, 1);
  const Perfetto__Protos__FtraceEvent *e = pk->ftrace_events->event[0];
  assert_int_equal(e->pid, 55);
  assert_int_equal(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_RSS_STAT);
  assert_int_equal(e->rss_stat->member, 1);
  assert_int_equal(e->rss_stat->size, 123 * 4096);
  assert_int_equal(e->rss_stat->curr, 1);
  assert_int_equal(e->rss_stat->mm_id, 0xabcd);
  perfetto__protos__trace_packet__free_unpacked(pk, NULL);
  fixture_free(fx);
}

static void encoder_writes_generic_events_field_by_field(void **state) {
  (void)state;
  enc_fixture_t *fx = fixture(false);
  page_t p;
  page_init(&p, 0);
  uint8_t body[32] = {0};
  uint64_t timer = 0xabcdef;
  int64_t expires = -5;
  memcpy(body, &timer, 8);
  memcpy(body + 8, &expires, 8);
  /* __rel_loc: offset from the end of the field (record offset 28). */
  uint32_t loc = (4u << 16) | 0u;
  memcpy(body + 16, &loc, 4);
  memcpy(body + 20, "tmr", 4);
  uint8_t rec[64];
  size_t n = event(rec, 90, 7, body, 24);
  rec_data(&p, 2, rec, n);
  page_finish(&p, true);
  tg_ftrace_bundle_result_t res;
  Perfetto__Protos__TracePacket *pk = encode(fx, &p, &res);
  const Perfetto__Protos__FtraceEventBundle *b = pk->ftrace_events;
  assert_true(b->has_lost_events && b->lost_events);
  assert_int_equal(b->n_event, 1);
  const Perfetto__Protos__FtraceEvent *e = b->event[0];
  assert_int_equal(e->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_GENERIC);
  const Perfetto__Protos__GenericFtraceEvent *g = e->generic;
  assert_string_equal(g->event_name, "hrtimer_start");
  assert_int_equal(g->n_field, 3);
  assert_string_equal(g->field[0]->name, "hrtimer");
  assert_int_equal(g->field[0]->value_case,
                   PERFETTO__PROTOS__GENERIC_FTRACE_EVENT__FIELD__VALUE_UINT_VALUE);
  /* A kernel address: its index, never the address. */
  assert_int_equal(g->field[0]->uint_value, 1);
  assert_int_equal(g->field[1]->value_case,
                   PERFETTO__PROTOS__GENERIC_FTRACE_EVENT__FIELD__VALUE_INT_VALUE);
  assert_int_equal(g->field[1]->int_value, -5);
  assert_string_equal(g->field[2]->name, "label");
  assert_string_equal(g->field[2]->str_value, "tmr");
  perfetto__protos__trace_packet__free_unpacked(pk, NULL);
  fixture_free(fx);
}

static void encoder_fills_compact_sched_with_interned_comms(void **state) {
  (void)state;
  enc_fixture_t *fx = fixture(true);
  for (int round = 0; round < 2; round++) { /* the intern table resets */
    page_t p;
    page_init(&p, 100);
    uint8_t rec[128];
    size_t n = switch_rec(rec, "a", 1, 0, "worker", 10);
    rec_data(&p, 5, rec, n); /* 105 */
    n = switch_rec(rec, "worker", 10, 2, "other", 11);
    rec_data(&p, 7, rec, n); /* 112 */
    n = switch_rec(rec, "other", 11, 0, "worker", 10);
    rec_data(&p, 8, rec, n); /* 120 */
    uint8_t wk[28] = {0};
    strcpy((char *)wk, "other");
    int32_t v = 11;
    memcpy(wk + 16, &v, 4);
    v = 120;
    memcpy(wk + 20, &v, 4);
    v = 2;
    memcpy(wk + 24, &v, 4);
    n = event(rec, 373, 10, wk, sizeof(wk));
    rec_data(&p, 1, rec, n); /* 121 */
    page_finish(&p, false);
    tg_ftrace_bundle_result_t res;
    Perfetto__Protos__TracePacket *pk = encode(fx, &p, &res);
    assert_int_equal(res.events, 4);
    const Perfetto__Protos__FtraceEventBundle *b = pk->ftrace_events;
    assert_int_equal(b->n_event, 0);
    const Perfetto__Protos__FtraceEventBundle__CompactSched *cs = b->compact_sched;
    assert_non_null(cs);
    assert_int_equal(cs->n_intern_table, 2); /* "worker", "other" */
    assert_int_equal(cs->n_switch_timestamp, 3);
    assert_int_equal(cs->switch_timestamp[0], 105); /* from 0 */
    assert_int_equal(cs->switch_timestamp[1], 7);
    assert_int_equal(cs->switch_timestamp[2], 8);
    assert_int_equal(cs->n_switch_next_pid, 3);
    assert_int_equal(cs->switch_next_pid[1], 11);
    assert_int_equal(cs->switch_prev_state[1], 2);
    assert_int_equal(cs->switch_next_prio[0], 100);
    assert_int_equal(cs->n_switch_next_comm_index, 3);
    assert_int_equal(cs->switch_next_comm_index[0], cs->switch_next_comm_index[2]);
    assert_string_equal(cs->intern_table[cs->switch_next_comm_index[0]], "worker");
    assert_string_equal(cs->intern_table[cs->switch_next_comm_index[1]], "other");
    assert_int_equal(cs->n_waking_timestamp, 1);
    assert_int_equal(cs->waking_timestamp[0], 121);
    assert_int_equal(cs->waking_pid[0], 11);
    assert_int_equal(cs->waking_target_cpu[0], 2);
    assert_int_equal(cs->waking_prio[0], 120);
    assert_int_equal(cs->waking_common_flags[0], 5);
    assert_string_equal(cs->intern_table[cs->waking_comm_index[0]], "other");
    perfetto__protos__trace_packet__free_unpacked(pk, NULL);
  }
  fixture_free(fx);
}

static void encoder_survives_a_truncated_record(void **state) {
  (void)state;
  enc_fixture_t *fx = fixture(false);
  page_t p;
  page_init(&p, 0);
  /* A sched_switch cut after next_comm: the fields past the record's end
   * are left out, the rest decode. */
  uint8_t rec[128];
  switch_rec(rec, "cut", 5, 0, "next", 6);
  rec_data(&p, 1, rec, 48);
  page_finish(&p, false);
  tg_ftrace_bundle_result_t res;
  Perfetto__Protos__TracePacket *pk = encode(fx, &p, &res);
  const Perfetto__Protos__SchedSwitchFtraceEvent *s =
      pk->ftrace_events->event[0]->sched_switch;
  assert_string_equal(s->prev_comm, "cut");
  assert_int_equal(s->prev_pid, 5);
  assert_false(s->has_next_pid);
  assert_null(s->next_comm);
  perfetto__protos__trace_packet__free_unpacked(pk, NULL);
  fixture_free(fx);
}

/* --- config, stats, instance names --------------------------------------- */

static void config_names_each_unsupported_field(void **state) {
  (void)state;
  Perfetto__Protos__FtraceConfig fc = PERFETTO__PROTOS__FTRACE_CONFIG__INIT;
  char *events[] = {"sched/sched_switch", "irq/*", "sched_waking"};
  fc.n_ftrace_events = 3;
  fc.ftrace_events = events;
  fc.has_buffer_size_kb = true;
  fc.buffer_size_kb = 1u << 30; /* clamped */
  fc.has_drain_period_ms = true;
  fc.drain_period_ms = 250;
  Perfetto__Protos__FtraceConfig__CompactSchedConfig cs =
      PERFETTO__PROTOS__FTRACE_CONFIG__COMPACT_SCHED_CONFIG__INIT;
  cs.has_enabled = true;
  cs.enabled = true;
  fc.compact_sched = &cs;
  fc.has_symbolize_ksyms = true;
  fc.symbolize_ksyms = true;
  char *cats[] = {"gfx"};
  fc.n_atrace_categories = 1;
  fc.atrace_categories = cats;
  Perfetto__Protos__FtraceConfig__KprobeEvent kp =
      PERFETTO__PROTOS__FTRACE_CONFIG__KPROBE_EVENT__INIT, *kpp = &kp;
  fc.n_kprobe_events = 1;
  fc.kprobe_events = &kpp;
  Perfetto__Protos__DataSourceConfig dsc = PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
  dsc.name = "linux.ftrace";
  dsc.ftrace_config = &fc;
  uint8_t buf[1024];
  size_t len = perfetto__protos__data_source_config__pack(&dsc, buf);

  tg_ftrace_cfg_t c;
  assert_int_equal(tg_ftrace_cfg_parse(buf, len, &c), 0);
  assert_int_equal(c.n_events, 3);
  assert_string_equal(c.events[1], "irq/*");
  assert_int_equal(c.buffer_size_kb, TG_FTRACE_MAX_BUFFER_KB);
  assert_int_equal(c.drain_period_ms, 250);
  assert_true(c.drain_period_asked);
  assert_true(c.compact_sched);
  /* symbolize_ksyms is acted on, not warned about. */
  assert_true(c.symbolize_ksyms);
  assert_false(c.ksyms_retain);
  assert_int_equal(c.n_unsupported, 2);
  assert_string_equal(c.unsupported[0], "atrace_categories");
  assert_string_equal(c.unsupported[1], "kprobe_events");
  tg_ftrace_cfg_free(&c);

  /* No ftrace_config: defaults, nothing to record; garbage: an error. */
  dsc.ftrace_config = NULL;
  len = perfetto__protos__data_source_config__pack(&dsc, buf);
  assert_int_equal(tg_ftrace_cfg_parse(buf, len, &c), 0);
  assert_int_equal(c.n_events, 0);
  assert_int_equal(c.buffer_size_kb, TG_FTRACE_DEFAULT_BUFFER_KB);
  assert_int_equal(c.drain_period_ms, TG_FTRACE_DEFAULT_DRAIN_MS);
  assert_false(c.drain_period_asked);
  tg_ftrace_cfg_free(&c);
  /* compact_sched: on unless the config turns it off, as Perfetto's
   * probes do since v42. */
  Perfetto__Protos__FtraceConfig plain = PERFETTO__PROTOS__FTRACE_CONFIG__INIT;
  plain.n_ftrace_events = 1;
  plain.ftrace_events = events;
  dsc.ftrace_config = &plain;
  len = perfetto__protos__data_source_config__pack(&dsc, buf);
  assert_int_equal(tg_ftrace_cfg_parse(buf, len, &c), 0);
  assert_true(c.compact_sched);
  /* drain_period_ms unset: the reader's own cadence. */
  assert_false(c.drain_period_asked);
  tg_ftrace_cfg_free(&c);
  cs.enabled = false;
  plain.compact_sched = &cs;
  len = perfetto__protos__data_source_config__pack(&dsc, buf);
  assert_int_equal(tg_ftrace_cfg_parse(buf, len, &c), 0);
  assert_false(c.compact_sched);
  tg_ftrace_cfg_free(&c);
  const uint8_t junk[] = {0xff, 0xff, 0xff};
  assert_int_equal(tg_ftrace_cfg_parse(junk, sizeof(junk), &c), TG_EBAD_CONFIG);
}

static void cpu_stats_text_parses(void **state) {
  (void)state;
  const char text[] =
      "entries: 12\noverrun: 3\ncommit overrun: 1\nbytes: 4096\n"
      "oldest event ts:   425.123456\nnow ts:   426.040886\n"
      "dropped events: 7\nread events: 99\n";
  tg_ftrace_cpu_stats_t s;
  tg_ftrace_cpu_stats_parse(text, strlen(text), &s);
  assert_int_equal(s.entries, 12);
  assert_int_equal(s.overrun, 3);
  assert_int_equal(s.commit_overrun, 1);
  assert_int_equal(s.bytes, 4096);
  assert_true(s.oldest_event_ts > 425.12 && s.oldest_event_ts < 425.13);
  assert_true(s.now_ts > 426.04 && s.now_ts < 426.05);
  assert_int_equal(s.dropped_events, 7);
  assert_int_equal(s.read_events, 99);
}

static void only_instances_of_dead_runs_are_stale(void **state) {
  (void)state;
  pid_t child = fork();
  if (child == 0) _exit(0);
  assert_true(child > 0);
  int status;
  assert_int_equal(waitpid(child, &status, 0), child);
  char name[64];
  snprintf(name, sizeof(name), "tracegate-%d-0", (int)child);
  assert_true(tg_tracefs_instance_is_stale(name));
  snprintf(name, sizeof(name), "tracegate-%d-3", (int)getppid());
  assert_false(tg_tracefs_instance_is_stale(name)); /* alive */
  snprintf(name, sizeof(name), "tracegate-%d-1", (int)getpid());
  assert_false(tg_tracefs_instance_is_stale(name)); /* ours */
  assert_false(tg_tracefs_instance_is_stale("perfetto-1"));
  assert_false(tg_tracefs_instance_is_stale("tracegate-x-1"));
  assert_false(tg_tracefs_instance_is_stale("tracegate-"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(header_page_gives_the_layout),
      cmocka_unit_test(page_walks_every_record_type),
      cmocka_unit_test(page_ends_at_final_padding),
      cmocka_unit_test(page_rejects_hostile_lengths),
      cmocka_unit_test(format_file_gives_fields_and_kinds),
      cmocka_unit_test(encoder_writes_perfettos_messages),
      cmocka_unit_test(encoder_writes_generic_events_field_by_field),
      cmocka_unit_test(encoder_writes_rss_stat),
      cmocka_unit_test(encoder_fills_compact_sched_with_interned_comms),
      cmocka_unit_test(encoder_survives_a_truncated_record),
      cmocka_unit_test(config_names_each_unsupported_field),
      cmocka_unit_test(cpu_stats_text_parses),
      cmocka_unit_test(only_instances_of_dead_runs_are_stale),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
