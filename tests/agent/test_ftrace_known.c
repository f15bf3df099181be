/* linux.ftrace's known-event table (agent/probes/ftrace_events.c).
 *
 * The whole table against the protobuf-c descriptors generated from our
 * .proto files: a typo in an FtraceEvent or message field number, or a
 * table type the message's field cannot take, fails here rather than as a
 * trace trace_processor misreads. Then records of the events of Perfetto's
 * test configs, built byte by byte in the layouts of a 6.x kernel, decoded
 * with protobuf-c as their own messages: once through the field plans (one
 * segment) and once through the general path (small segments). Then this
 * machine's kernel: every entry's fields in its format files, and real
 * records of exec, softirq_raise, ext4 and cgroup events. Those two need
 * root and tracefs: skipped without them unless TG_REQUIRE_FTRACE is set.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/probes/ftrace_config.h"
#include "agent/probes/ftrace_encode.h"
#include "agent/probes/ftrace_events.h"
#include "agent/probes/ftrace_format.h"
#include "agent/probes/ftrace_session.h"
#include "agent/probes/ftrace_tracefs.h"
#include "ftrace_fixtures.h"
#include "pb/trace/trace_packet.pb-c.h"
#include "tracegate/pb_writer.h"

/* --- the table against the descriptors ----------------------------------- */

/* Table field names that differ from the message's: the kernel renamed
 * block_rq_complete's "errors". */
static const char *message_name_of(const tg_ftrace_known_event_t *k,
                                   const char *field) {
  if (strcmp(k->name, "block_rq_complete") == 0 && strcmp(field, "error") == 0)
    return "errors";
  return field;
}

static bool type_takes(uint8_t type, const ProtobufCFieldDescriptor *fd) {
  bool repeated = fd->label == PROTOBUF_C_LABEL_REPEATED;
  switch (type) {
    case TG_FTRACE_PT_STRING:
      return !repeated && fd->type == PROTOBUF_C_TYPE_STRING;
    case TG_FTRACE_PT_INT: /* plain varints: never sint (zigzag) */
      return !repeated && (fd->type == PROTOBUF_C_TYPE_INT32 ||
                           fd->type == PROTOBUF_C_TYPE_INT64);
    case TG_FTRACE_PT_UINT:
      return !repeated && (fd->type == PROTOBUF_C_TYPE_UINT32 ||
                           fd->type == PROTOBUF_C_TYPE_UINT64);
    case TG_FTRACE_PT_REPEATED_UINT: /* one key per element: not packed */
      return repeated && fd->type == PROTOBUF_C_TYPE_UINT64 &&
             !(fd->flags & PROTOBUF_C_FIELD_FLAG_PACKED);
    default:
      return false;
  }
}

static void known_table_matches_the_descriptors(void **state) {
  (void)state;
  size_t n;
  const tg_ftrace_known_event_t *t = tg_ftrace_known_events(&n);
  assert_true(n > 60);
  const ProtobufCMessageDescriptor *ev = &perfetto__protos__ftrace_event__descriptor;
  for (size_t i = 0; i < n; i++) {
    const tg_ftrace_known_event_t *k = &t[i];
    assert_ptr_equal(tg_ftrace_known_event(k->group, k->name), k);
    /* FtraceEvent's field is named after the event, as in Perfetto. */
    const ProtobufCFieldDescriptor *fd =
        protobuf_c_message_descriptor_get_field_by_name(ev, k->name);
    if (!fd) fail_msg("%s/%s: no FtraceEvent field of that name", k->group, k->name);
    if (fd->id != k->proto_field)
      fail_msg("%s/%s: FtraceEvent field %u in the table, %u in the proto",
               k->group, k->name, k->proto_field, fd->id);
    assert_int_equal(fd->type, PROTOBUF_C_TYPE_MESSAGE);
    for (size_t j = 0; j < i; j++)
      if (t[j].proto_field == k->proto_field)
        fail_msg("%s/%s and %s/%s share FtraceEvent field %u", t[j].group,
                 t[j].name, k->group, k->name, k->proto_field);
    const ProtobufCMessageDescriptor *msg = fd->descriptor;
    assert_non_null(msg);
    assert_non_null(k->fields[0].name);
    for (unsigned f = 0; f < TG_FTRACE_KNOWN_FIELDS_MAX && k->fields[f].name;
         f++) {
      const tg_ftrace_known_field_t *kf = &k->fields[f];
      const char *pname = message_name_of(k, kf->name);
      const ProtobufCFieldDescriptor *mf =
          protobuf_c_message_descriptor_get_field_by_name(msg, pname);
      if (!mf) fail_msg("%s: no field \"%s\" in %s", k->name, pname, msg->name);
      if (mf->id != kf->proto_field)
        fail_msg("%s.%s: field %u in the table, %u in %s", k->name, kf->name,
                 kf->proto_field, mf->id, msg->name);
      if (!type_takes(kf->type, mf))
        fail_msg("%s.%s: table type %u cannot be %s's field", k->name,
                 kf->name, kf->type, msg->name);
      for (unsigned g = 0; g < f; g++) {
        assert_string_not_equal(k->fields[g].name, kf->name);
        if (k->fields[g].proto_field == kf->proto_field)
          assert_string_equal(message_name_of(k, k->fields[g].name), pname);
      }
    }
  }
}

/* --- synthetic records --------------------------------------------------- */

/* This kernel's layouts (6.x) of events the table gained; ids are ours. */
static const char exec_format[] =
    "name: sched_process_exec\nID: 310\n" COMMON_FIELDS
    "\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;\n"
    "\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;\n"
    "\tfield:pid_t old_pid;\toffset:16;\tsize:4;\tsigned:1;\n";

/* Older kernels' layout: comm as char[16]. */
static const char wait_format[] =
    "name: sched_process_wait\nID: 311\n" COMMON_FIELDS
    "\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
    "\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n"
    "\tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;\n";

static const char softirq_raise_format[] =
    "name: softirq_raise\nID: 313\n" COMMON_FIELDS
    "\tfield:unsigned int vec;\toffset:8;\tsize:4;\tsigned:0;\n";

static const char suspend_format[] =
    "name: suspend_resume\nID: 314\n" COMMON_FIELDS
    "\tfield:const char * action;\toffset:8;\tsize:8;\tsigned:0;\n"
    "\tfield:int val;\toffset:16;\tsize:4;\tsigned:1;\n"
    "\tfield:bool start;\toffset:20;\tsize:1;\tsigned:0;\n";

static const char limits_format[] =
    "name: cpu_frequency_limits\nID: 315\n" COMMON_FIELDS
    "\tfield:u32 min_freq;\toffset:8;\tsize:4;\tsigned:0;\n"
    "\tfield:u32 max_freq;\toffset:12;\tsize:4;\tsigned:0;\n"
    "\tfield:u32 cpu_id;\toffset:16;\tsize:4;\tsigned:0;\n";

static const char thermal_format[] =
    "name: thermal_temperature\nID: 316\n" COMMON_FIELDS
    "\tfield:__data_loc char[] thermal_zone;\toffset:8;\tsize:4;\tsigned:0;\n"
    "\tfield:int id;\toffset:12;\tsize:4;\tsigned:1;\n"
    "\tfield:int temp_prev;\toffset:16;\tsize:4;\tsigned:1;\n"
    "\tfield:int temp;\toffset:20;\tsize:4;\tsigned:1;\n";

static const char cdev_format[] =
    "name: cdev_update\nID: 317\n" COMMON_FIELDS
    "\tfield:__data_loc char[] type;\toffset:8;\tsize:4;\tsigned:0;\n"
    "\tfield:unsigned long target;\toffset:16;\tsize:8;\tsigned:0;\n";

static const char reclaim_begin_format[] =
    "name: mm_vmscan_direct_reclaim_begin\nID: 318\n" COMMON_FIELDS
    "\tfield:int order;\toffset:8;\tsize:4;\tsigned:1;\n"
    "\tfield:unsigned long gfp_flags;\toffset:16;\tsize:8;\tsigned:0;\n";

static const char reclaim_end_format[] =
    "name: mm_vmscan_direct_reclaim_end\nID: 319\n" COMMON_FIELDS
    "\tfield:unsigned long nr_reclaimed;\toffset:8;\tsize:8;\tsigned:0;\n";

static const char kswapd_wake_format[] =
    "name: mm_vmscan_kswapd_wake\nID: 320\n" COMMON_FIELDS
    "\tfield:int nid;\toffset:8;\tsize:4;\tsigned:1;\n"
    "\tfield:int zid;\toffset:12;\tsize:4;\tsigned:1;\n"
    "\tfield:int order;\toffset:16;\tsize:4;\tsigned:1;\n";

static const char compaction_end_format[] =
    "name: mm_compaction_end\nID: 321\n" COMMON_FIELDS
    "\tfield:unsigned long zone_start;\toffset:8;\tsize:8;\tsigned:0;\n"
    "\tfield:unsigned long migrate_pfn;\toffset:16;\tsize:8;\tsigned:0;\n"
    "\tfield:unsigned long free_pfn;\toffset:24;\tsize:8;\tsigned:0;\n"
    "\tfield:unsigned long zone_end;\toffset:32;\tsize:8;\tsigned:0;\n"
    "\tfield:bool sync;\toffset:40;\tsize:1;\tsigned:0;\n"
    "\tfield:int status;\toffset:44;\tsize:4;\tsigned:1;\n";

static const char kcompactd_wake_format[] =
    "name: mm_compaction_kcompactd_wake\nID: 322\n" COMMON_FIELDS
    "\tfield:int nid;\toffset:8;\tsize:4;\tsigned:1;\n"
    "\tfield:int order;\toffset:12;\tsize:4;\tsigned:1;\n"
    "\tfield:enum zone_type highest_zoneidx;\toffset:16;\tsize:4;\tsigned:0;\n";

static const char filemap_format[] =
    "name: mm_filemap_add_to_page_cache\nID: 323\n" COMMON_FIELDS
    "\tfield:unsigned long pfn;\toffset:8;\tsize:8;\tsigned:0;\n"
    "\tfield:unsigned long i_ino;\toffset:16;\tsize:8;\tsigned:0;\n"
    "\tfield:unsigned long index;\toffset:24;\tsize:8;\tsigned:0;\n"
    "\tfield:dev_t s_dev;\toffset:32;\tsize:4;\tsigned:0;\n"
    "\tfield:unsigned char order;\toffset:36;\tsize:1;\tsigned:0;\n";

static const char da_write_begin_format[] =
    "name: ext4_da_write_begin\nID: 324\n" COMMON_FIELDS
    "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n"
    "\tfield:ino_t ino;\toffset:16;\tsize:8;\tsigned:0;\n"
    "\tfield:loff_t pos;\toffset:24;\tsize:8;\tsigned:1;\n"
    "\tfield:unsigned int len;\toffset:32;\tsize:4;\tsigned:0;\n";

static const char sync_exit_format[] =
    "name: ext4_sync_file_exit\nID: 325\n" COMMON_FIELDS
    "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n"
    "\tfield:ino_t ino;\toffset:16;\tsize:8;\tsigned:0;\n"
    "\tfield:int ret;\toffset:24;\tsize:4;\tsigned:1;\n";

static const char mkdir_format[] =
    "name: cgroup_mkdir\nID: 326\n" COMMON_FIELDS
    "\tfield:int root;\toffset:8;\tsize:4;\tsigned:1;\n"
    "\tfield:int level;\toffset:12;\tsize:4;\tsigned:1;\n"
    "\tfield:u64 id;\toffset:16;\tsize:8;\tsigned:0;\n"
    "\tfield:__data_loc char[] path;\toffset:24;\tsize:4;\tsigned:0;\n";

static const char attach_format[] =
    "name: cgroup_attach_task\nID: 327\n" COMMON_FIELDS
    "\tfield:int dst_root;\toffset:8;\tsize:4;\tsigned:1;\n"
    "\tfield:int dst_level;\toffset:12;\tsize:4;\tsigned:1;\n"
    "\tfield:u64 dst_id;\toffset:16;\tsize:8;\tsigned:0;\n"
    "\tfield:int pid;\toffset:24;\tsize:4;\tsigned:1;\n"
    "\tfield:__data_loc char[] dst_path;\toffset:28;\tsize:4;\tsigned:0;\n"
    "\tfield:__data_loc char[] comm;\toffset:32;\tsize:4;\tsigned:0;\n";

static const char setup_root_format[] =
    "name: cgroup_setup_root\nID: 328\n" COMMON_FIELDS
    "\tfield:int root;\toffset:8;\tsize:4;\tsigned:1;\n"
    "\tfield:u16 ss_mask;\toffset:12;\tsize:2;\tsigned:0;\n"
    "\tfield:__data_loc char[] name;\toffset:16;\tsize:4;\tsigned:0;\n";

static const struct {
  const char *group, *text;
  uint16_t id;
} formats[] = {
    {"sched", exec_format, 310},          {"sched", wait_format, 311},
    {"irq", softirq_raise_format, 313},   {"power", suspend_format, 314},
    {"power", limits_format, 315},        {"thermal", thermal_format, 316},
    {"thermal", cdev_format, 317},        {"vmscan", reclaim_begin_format, 318},
    {"vmscan", reclaim_end_format, 319},  {"vmscan", kswapd_wake_format, 320},
    {"compaction", compaction_end_format, 321},
    {"compaction", kcompactd_wake_format, 322},
    {"filemap", filemap_format, 323},     {"ext4", da_write_begin_format, 324},
    {"ext4", sync_exit_format, 325},      {"cgroup", mkdir_format, 326},
    {"cgroup", attach_format, 327},       {"cgroup", setup_root_format, 328},
};

/* A record body of the layouts above: fields put at their offsets in the
 * record (common fields included), strings appended as __data_loc. */
typedef struct body {
  uint8_t b[256];
  size_t len; /* record bytes past the common fields' 8 */
} body_t;

/* An empty body of a record whose fixed fields end at |rec_size|. */
static void body_reset(body_t *r, size_t rec_size) {
  memset(r, 0, sizeof(*r));
  r->len = rec_size - 8;
}

static void put(body_t *r, size_t rec_off, const void *v, size_t n) {
  assert_true(rec_off >= 8 && rec_off - 8 + n <= sizeof(r->b));
  memcpy(r->b + rec_off - 8, v, n);
  if (rec_off - 8 + n > r->len) r->len = rec_off - 8 + n;
}
static void put_u8(body_t *r, size_t off, uint8_t v) { put(r, off, &v, 1); }
static void put_u16(body_t *r, size_t off, uint16_t v) { put(r, off, &v, 2); }
static void put_u32(body_t *r, size_t off, uint32_t v) { put(r, off, &v, 4); }
static void put_i32(body_t *r, size_t off, int32_t v) { put(r, off, &v, 4); }
static void put_u64(body_t *r, size_t off, uint64_t v) { put(r, off, &v, 8); }
static void put_i64(body_t *r, size_t off, int64_t v) { put(r, off, &v, 8); }

/* |s| with its NUL after everything so far (the fixed fields included:
 * body_reset), its locator at |loc_off|. */
static void put_loc(body_t *r, size_t loc_off, const char *s) {
  size_t at = 8 + ((r->len + 3) & ~(size_t)3), n = strlen(s) + 1;
  put(r, at, s, n);
  put_u32(r, loc_off, (uint32_t)(n << 16 | at));
}

static void add_rec(page_t *p, uint16_t id, int32_t pid, const body_t *r) {
  uint8_t rec[264];
  size_t n = event(rec, id, pid, r->b, r->len);
  rec_data(p, 1, rec, n);
}

typedef struct known_fx {
  tg_ftrace_table_t table;
  tg_ftrace_encoder_t enc;
  uint8_t out[1u << 16];
  size_t segment; /* 0: one segment; else refills of this many bytes */
} known_fx_t;

static known_fx_t *known_fixture(void) {
  known_fx_t *fx = calloc(1, sizeof(*fx));
  assert_non_null(fx);
  assert_int_equal(tg_ftrace_table_init(&fx->table), 0);
  for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
    add_format(&fx->table, formats[i].group, formats[i].text);
    /* Each is written as its own message, through a field plan when there
     * is room: no field of theirs needs the general path but a char
     * pointer's (suspend_resume's action), looked up in printk_formats. */
    uint16_t at = fx->table.by_id[formats[i].id];
    assert_true(at > 0);
    const tg_ftrace_event_desc_t *d = &fx->table.events[at - 1];
    assert_int_not_equal(d->proto_field, TG_FTRACE_EVENT_GENERIC);
    if (formats[i].id == 314)
      assert_int_equal(d->plan.min_len, UINT32_MAX);
    else
      assert_int_not_equal(d->plan.min_len, UINT32_MAX);
  }
  assert_int_equal(tg_ftrace_encoder_init(&fx->enc, &fx->table, false, 4096), 0);
  return fx;
}

static void known_fixture_free(known_fx_t *fx) {
  tg_ftrace_encoder_free(&fx->enc);
  tg_ftrace_table_free(&fx->table);
  free(fx);
}

static int refill(void *ctx, tg_pbw_t *w, size_t min_contiguous) {
  known_fx_t *fx = ctx;
  size_t n = fx->segment > min_contiguous ? fx->segment : min_contiguous;
  if ((size_t)(w->cur - fx->out) + n > sizeof(fx->out)) return -ENOSPC;
  w->end = w->cur + n;
  return 0;
}

typedef void (*bundle_check_fn)(const Perfetto__Protos__FtraceEventBundle *b);

/* Encodes |p| through the plans and through the general path, and hands
 * each bundle, decoded, to |check|. */
static void check_both_paths(const page_t *p, size_t n_events,
                             bundle_check_fn check) {
  static const size_t segments[] = {0, 7};
  known_fx_t *fx = known_fixture();
  tg_ftrace_page_layout_t l;
  assert_int_equal(tg_ftrace_header_page_parse(header_page_fixture,
                                               strlen(header_page_fixture), &l),
                   0);
  for (size_t i = 0; i < sizeof(segments) / sizeof(segments[0]); i++) {
    fx->segment = segments[i];
    tg_pbw_t w;
    if (fx->segment)
      tg_pbw_init(&w, fx->out, fx->segment, refill, fx);
    else
      tg_pbw_init(&w, fx->out, sizeof(fx->out), NULL, NULL);
    tg_pbw_begin_nested(&w, 1);
    tg_ftrace_bundle_result_t res;
    tg_ftrace_encode_bundle(&fx->enc, &w, 2, &l, p->b, sizeof(p->b), &res);
    tg_pbw_end_nested(&w);
    assert_int_equal(tg_pbw_error(&w), 0);
    assert_int_equal(res.events, n_events);
    assert_int_equal(res.skipped, 0);
    assert_false(res.corrupt);
    Perfetto__Protos__TracePacket *pk = perfetto__protos__trace_packet__unpack(
        NULL, (size_t)tg_pbw_written(&w), fx->out);
    assert_non_null(pk);
    assert_non_null(pk->ftrace_events);
    assert_int_equal(pk->ftrace_events->n_event, n_events);
    check(pk->ftrace_events);
    perfetto__protos__trace_packet__free_unpacked(pk, NULL);
  }
  known_fixture_free(fx);
}

static const Perfetto__Protos__FtraceEvent *event_of(
    const Perfetto__Protos__FtraceEventBundle *b, size_t i, int event_case) {
  assert_true(i < b->n_event);
  assert_int_equal(b->event[i]->event_case, event_case);
  return b->event[i];
}

/* sched: a __data_loc filename, a char[16] comm (older kernels). */
static void check_sched(const Perfetto__Protos__FtraceEventBundle *b) {
  const Perfetto__Protos__FtraceEvent *e =
      event_of(b, 0, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_EXEC);
  assert_int_equal(e->pid, 4321);
  assert_string_equal(e->sched_process_exec->filename, "/usr/bin/true");
  assert_int_equal(e->sched_process_exec->pid, 4321);
  assert_int_equal(e->sched_process_exec->old_pid, 4322);
  e = event_of(b, 1, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_WAIT);
  assert_string_equal(e->sched_process_wait->comm, "0123456789abcdef");
  assert_int_equal(e->sched_process_wait->pid, 77);
  assert_int_equal(e->sched_process_wait->prio, -2);
}

static void sched_process_events_decode_as_their_messages(void **state) {
  (void)state;
  page_t p;
  page_init(&p, 1000);
  body_t r;
  body_reset(&r, 20);
  put_loc(&r, 8, "/usr/bin/true");
  put_i32(&r, 12, 4321);
  put_i32(&r, 16, 4322);
  add_rec(&p, 310, 4321, &r);
  body_reset(&r, 32);
  put(&r, 8, "0123456789abcdef", 16); /* 16 bytes: no NUL */
  put_i32(&r, 24, 77);
  put_i32(&r, 28, -2);
  add_rec(&p, 311, 1, &r);
  page_finish(&p, false);
  check_both_paths(&p, 2, check_sched);
}

/* irq and power: a u32, a "const char *" printk_formats does not list, a
 * 1-byte bool, a negative int. */
static void check_irq_power(const Perfetto__Protos__FtraceEventBundle *b) {
  const Perfetto__Protos__FtraceEvent *e =
      event_of(b, 0, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SOFTIRQ_RAISE);
  assert_true(e->softirq_raise->has_vec);
  assert_int_equal(e->softirq_raise->vec, 9);
  e = event_of(b, 1, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SUSPEND_RESUME);
  /* A pointer into the kernel without a string (this encoder has no
   * printk_formats): empty, as Perfetto's probes write it; never the
   * number. test_ftrace_printk.c has the string. */
  assert_non_null(e->suspend_resume->action);
  assert_string_equal(e->suspend_resume->action, "");
  assert_int_equal(e->suspend_resume->val, -1);
  assert_true(e->suspend_resume->has_start);
  assert_int_equal(e->suspend_resume->start, 1);
  e = event_of(b, 2, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_CPU_FREQUENCY_LIMITS);
  assert_int_equal(e->cpu_frequency_limits->min_freq, 400000);
  assert_int_equal(e->cpu_frequency_limits->max_freq, 3600000);
  assert_int_equal(e->cpu_frequency_limits->cpu_id, 5);
}

static void irq_and_power_events_decode_as_their_messages(void **state) {
  (void)state;
  page_t p;
  page_init(&p, 1000);
  body_t r;
  body_reset(&r, 12);
  put_u32(&r, 8, 9);
  add_rec(&p, 313, 0, &r);
  body_reset(&r, 21);
  put_u64(&r, 8, UINT64_C(0xffffffff81234567));
  put_i32(&r, 16, -1);
  put_u8(&r, 20, 1);
  add_rec(&p, 314, 1, &r);
  body_reset(&r, 20);
  put_u32(&r, 8, 400000);
  put_u32(&r, 12, 3600000);
  put_u32(&r, 16, 5);
  add_rec(&p, 315, 0, &r);
  page_finish(&p, false);
  check_both_paths(&p, 3, check_irq_power);
}

/* thermal: negative temperatures, a 64-bit target, __data_loc names. */
static void check_thermal(const Perfetto__Protos__FtraceEventBundle *b) {
  const Perfetto__Protos__FtraceEvent *e =
      event_of(b, 0, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_THERMAL_TEMPERATURE);
  assert_string_equal(e->thermal_temperature->thermal_zone, "x86_pkg_temp");
  assert_int_equal(e->thermal_temperature->id, 1);
  assert_int_equal(e->thermal_temperature->temp_prev, -5000);
  assert_int_equal(e->thermal_temperature->temp, 45000);
  e = event_of(b, 1, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_CDEV_UPDATE);
  assert_string_equal(e->cdev_update->type, "Processor");
  assert_int_equal(e->cdev_update->target, UINT64_C(0x100000003));
}

static void thermal_events_decode_as_their_messages(void **state) {
  (void)state;
  page_t p;
  page_init(&p, 1000);
  body_t r;
  body_reset(&r, 24);
  put_loc(&r, 8, "x86_pkg_temp");
  put_i32(&r, 12, 1);
  put_i32(&r, 16, -5000);
  put_i32(&r, 20, 45000);
  add_rec(&p, 316, 0, &r);
  body_reset(&r, 24);
  put_loc(&r, 8, "Processor");
  put_u64(&r, 16, UINT64_C(0x100000003));
  add_rec(&p, 317, 0, &r);
  page_finish(&p, false);
  check_both_paths(&p, 2, check_thermal);
}

/* vmscan and compaction: 64-bit counters, a bool, signed ints, an enum. */
static void check_mm(const Perfetto__Protos__FtraceEventBundle *b) {
  const Perfetto__Protos__FtraceEvent *e = event_of(
      b, 0, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_MM_VMSCAN_DIRECT_RECLAIM_BEGIN);
  assert_int_equal(e->mm_vmscan_direct_reclaim_begin->order, 3);
  assert_false(e->mm_vmscan_direct_reclaim_begin->has_may_writepage);
  assert_int_equal(e->mm_vmscan_direct_reclaim_begin->gfp_flags, 0x400cc0);
  e = event_of(b, 1,
               PERFETTO__PROTOS__FTRACE_EVENT__EVENT_MM_VMSCAN_DIRECT_RECLAIM_END);
  assert_int_equal(e->mm_vmscan_direct_reclaim_end->nr_reclaimed,
                   UINT64_C(0x123456789));
  e = event_of(b, 2, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_MM_VMSCAN_KSWAPD_WAKE);
  assert_int_equal(e->mm_vmscan_kswapd_wake->nid, 0);
  assert_true(e->mm_vmscan_kswapd_wake->has_nid);
  assert_int_equal(e->mm_vmscan_kswapd_wake->zid, 2);
  assert_int_equal(e->mm_vmscan_kswapd_wake->order, 1);
  e = event_of(b, 3, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_MM_COMPACTION_END);
  const Perfetto__Protos__MmCompactionEndFtraceEvent *c = e->mm_compaction_end;
  assert_int_equal(c->zone_start, 0x1000);
  assert_int_equal(c->migrate_pfn, UINT64_C(0x2fffffffff));
  assert_int_equal(c->free_pfn, 0x3000);
  assert_int_equal(c->zone_end, UINT64_C(0x440000000));
  assert_int_equal(c->sync, 1);
  assert_int_equal(c->status, -22);
  e = event_of(b, 4,
               PERFETTO__PROTOS__FTRACE_EVENT__EVENT_MM_COMPACTION_KCOMPACTD_WAKE);
  assert_int_equal(e->mm_compaction_kcompactd_wake->nid, 1);
  assert_int_equal(e->mm_compaction_kcompactd_wake->order, 9);
  assert_false(e->mm_compaction_kcompactd_wake->has_classzone_idx);
  assert_int_equal(e->mm_compaction_kcompactd_wake->highest_zoneidx, 2);
}

static void vmscan_and_compaction_events_decode_as_their_messages(void **state) {
  (void)state;
  page_t p;
  page_init(&p, 1000);
  body_t r;
  body_reset(&r, 24);
  put_i32(&r, 8, 3);
  put_u64(&r, 16, 0x400cc0);
  add_rec(&p, 318, 99, &r);
  body_reset(&r, 16);
  put_u64(&r, 8, UINT64_C(0x123456789));
  add_rec(&p, 319, 99, &r);
  body_reset(&r, 20);
  put_i32(&r, 8, 0);
  put_i32(&r, 12, 2);
  put_i32(&r, 16, 1);
  add_rec(&p, 320, 0, &r);
  body_reset(&r, 48);
  put_u64(&r, 8, 0x1000);
  put_u64(&r, 16, UINT64_C(0x2fffffffff));
  put_u64(&r, 24, 0x3000);
  put_u64(&r, 32, UINT64_C(0x440000000));
  put_u8(&r, 40, 1);
  put_i32(&r, 44, -22);
  add_rec(&p, 321, 0, &r);
  body_reset(&r, 20);
  put_i32(&r, 8, 1);
  put_i32(&r, 12, 9);
  put_u32(&r, 16, 2);
  add_rec(&p, 322, 0, &r);
  page_finish(&p, false);
  check_both_paths(&p, 5, check_mm);
}

/* filemap and ext4: dev_t as st_dev, 64-bit inodes, a 64-bit signed
 * offset, a negative return; filemap's order is not Perfetto's. */
static void check_fs(const Perfetto__Protos__FtraceEventBundle *b) {
  const Perfetto__Protos__FtraceEvent *e = event_of(
      b, 0, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_MM_FILEMAP_ADD_TO_PAGE_CACHE);
  const Perfetto__Protos__MmFilemapAddToPageCacheFtraceEvent *f =
      e->mm_filemap_add_to_page_cache;
  assert_int_equal(f->pfn, 0x12345);
  assert_int_equal(f->i_ino, UINT64_C(0x1000000002));
  assert_int_equal(f->index, 7);
  assert_int_equal(f->s_dev, makedev(253, 1));
  assert_false(f->has_page);
  e = event_of(b, 1, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_EXT4_DA_WRITE_BEGIN);
  const Perfetto__Protos__Ext4DaWriteBeginFtraceEvent *w = e->ext4_da_write_begin;
  assert_int_equal(w->dev, makedev(8, 2));
  assert_int_equal(w->ino, UINT64_C(0x1000000002));
  assert_int_equal(w->pos, INT64_C(1) << 40);
  assert_int_equal(w->len, 4096);
  assert_false(w->has_flags);
  e = event_of(b, 2, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_EXT4_SYNC_FILE_EXIT);
  assert_int_equal(e->ext4_sync_file_exit->dev, makedev(8, 2));
  assert_int_equal(e->ext4_sync_file_exit->ino, 12);
  assert_int_equal(e->ext4_sync_file_exit->ret, -5);
}

static void filemap_and_ext4_events_decode_as_their_messages(void **state) {
  (void)state;
  page_t p;
  page_init(&p, 1000);
  body_t r;
  body_reset(&r, 37);
  put_u64(&r, 8, 0x12345);
  put_u64(&r, 16, UINT64_C(0x1000000002));
  put_u64(&r, 24, 7);
  put_u32(&r, 32, 253u << 20 | 1u); /* the kernel's dev_t */
  put_u8(&r, 36, 2);
  add_rec(&p, 323, 5, &r);
  body_reset(&r, 36);
  put_u32(&r, 8, 8u << 20 | 2u);
  put_u64(&r, 16, UINT64_C(0x1000000002));
  put_i64(&r, 24, INT64_C(1) << 40);
  put_u32(&r, 32, 4096);
  add_rec(&p, 324, 5, &r);
  body_reset(&r, 28);
  put_u32(&r, 8, 8u << 20 | 2u);
  put_u64(&r, 16, 12);
  put_i32(&r, 24, -5);
  add_rec(&p, 325, 5, &r);
  page_finish(&p, false);
  check_both_paths(&p, 3, check_fs);
}

/* cgroup: a 64-bit id into Perfetto's int32, paths and comm through
 * __data_loc, a 2-byte mask. */
static void check_cgroup(const Perfetto__Protos__FtraceEventBundle *b) {
  const Perfetto__Protos__FtraceEvent *e =
      event_of(b, 0, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_CGROUP_MKDIR);
  assert_int_equal(e->cgroup_mkdir->root, 0);
  assert_true(e->cgroup_mkdir->has_root);
  assert_int_equal(e->cgroup_mkdir->level, 2);
  assert_int_equal(e->cgroup_mkdir->id, 9001);
  assert_string_equal(e->cgroup_mkdir->path, "/system.slice/tg.service");
  assert_null(e->cgroup_mkdir->cname);
  e = event_of(b, 1, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_CGROUP_ATTACH_TASK);
  const Perfetto__Protos__CgroupAttachTaskFtraceEvent *a = e->cgroup_attach_task;
  assert_int_equal(a->dst_root, 1);
  assert_int_equal(a->dst_level, 1);
  assert_int_equal(a->dst_id, 42);
  assert_int_equal(a->pid, 3141);
  assert_string_equal(a->dst_path, "/user.slice");
  assert_string_equal(a->comm, "systemd");
  e = event_of(b, 2, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_CGROUP_SETUP_ROOT);
  assert_int_equal(e->cgroup_setup_root->root, 3);
  assert_int_equal(e->cgroup_setup_root->ss_mask, 0xffff);
  assert_string_equal(e->cgroup_setup_root->name, "cpu,cpuacct");
}

static void cgroup_events_decode_as_their_messages(void **state) {
  (void)state;
  page_t p;
  page_init(&p, 1000);
  body_t r;
  body_reset(&r, 28);
  put_i32(&r, 8, 0);
  put_i32(&r, 12, 2);
  put_u64(&r, 16, 9001);
  put_loc(&r, 24, "/system.slice/tg.service");
  add_rec(&p, 326, 1, &r);
  body_reset(&r, 36);
  put_i32(&r, 8, 1);
  put_i32(&r, 12, 1);
  put_u64(&r, 16, 42);
  put_i32(&r, 24, 3141);
  put_loc(&r, 28, "/user.slice");
  put_loc(&r, 32, "systemd");
  add_rec(&p, 327, 1, &r);
  body_reset(&r, 20);
  put_i32(&r, 8, 3);
  put_u16(&r, 12, 0xffff);
  put_loc(&r, 16, "cpu,cpuacct");
  add_rec(&p, 328, 1, &r);
  page_finish(&p, false);
  check_both_paths(&p, 3, check_cgroup);
}

/* --- this machine's kernel ----------------------------------------------- */

static char tracefs_root[TG_TRACEFS_PATH_MAX];

static void require_ftrace(void) {
  char why[160];
  if (geteuid() != 0) {
    snprintf(why, sizeof(why), "not root (euid %d): tracefs needs root",
             (int)geteuid());
  } else {
    int rv = tg_tracefs_find(tracefs_root);
    if (rv == 0) return;
    snprintf(why, sizeof(why), "tracefs is not available: %s", strerror(-rv));
  }
  if (getenv("TG_REQUIRE_FTRACE"))
    fail_msg("TG_REQUIRE_FTRACE is set but %s", why);
  fprintf(stderr, "skipped: %s\n", why);
  skip();
}

/* Every entry of the table this kernel has: each field of the entry its
 * format declares is written, and the event has a field plan unless it
 * holds a kernel address. The format fields no entry names are listed. */
static void kernel_formats_give_every_entry_field(void **state) {
  (void)state;
  require_ftrace();
  size_t n, present = 0;
  const tg_ftrace_known_event_t *t = tg_ftrace_known_events(&n);
  tg_ftrace_table_t table;
  assert_int_equal(tg_ftrace_table_init(&table), 0);
  static char text[65536];
  for (size_t i = 0; i < n; i++) {
    char rel[160];
    snprintf(rel, sizeof(rel), "events/%s/%s/format", t[i].group, t[i].name);
    long len = tg_tracefs_read(tracefs_root, rel, text, sizeof(text));
    if (len < 0) continue; /* this kernel has no such event */
    present++;
    tg_ftrace_format_t f;
    assert_int_equal(tg_ftrace_format_parse(text, (size_t)len, &f), 0);
    assert_int_equal(tg_ftrace_table_add(&table, t[i].group, &f, false), 0);
    const tg_ftrace_event_desc_t *d = &table.events[table.by_id[f.id] - 1];
    assert_int_equal(d->proto_field, t[i].proto_field);
    bool kaddr = false;
    for (unsigned j = 0; j < f.n_fields; j++) {
      const tg_ftrace_field_t *ff = &f.fields[j];
      kaddr |= ff->kind == TG_FTRACE_FIELD_SYMADDR ||
               ff->kind == TG_FTRACE_FIELD_STRPTR;
      bool named = false;
      for (unsigned k = 0; k < TG_FTRACE_KNOWN_FIELDS_MAX && t[i].fields[k].name;
           k++)
        named |= strcmp(t[i].fields[k].name, ff->name) == 0;
      bool written = false;
      for (unsigned o = 0; o < d->n_out; o++)
        written |= strcmp(d->out[o].f.name, ff->name) == 0 &&
                   d->out[o].proto_field != 0;
      if (named && !written)
        fail_msg("%s/%s: this kernel's \"%s\" (size %u) is not written",
                 t[i].group, t[i].name, ff->name, ff->size);
      if (!named)
        print_message("%s/%s: \"%s\" is not Perfetto's (not written)\n",
                      t[i].group, t[i].name, ff->name);
    }
    if (!kaddr && d->plan.min_len == UINT32_MAX)
      fail_msg("%s/%s has no field plan", t[i].group, t[i].name);
  }
  print_message("%zu of the table's %zu events are on this kernel\n", present, n);
  assert_true(present > 40);
  tg_ftrace_table_free(&table);
}

/* Each packet a session writes, decoded as it comes. */
typedef struct seen {
  uint8_t buf[1u << 20];
  tg_pbw_t w;
  pid_t exec_pid;
  ino_t ino;
  dev_t dev;
  char cgroup_path[64];
  bool exec, softirq_raise, sync_enter, sync_exit, da_write, mkdir, rmdir;
} seen_t;

static tg_pbw_t *seen_begin(void *ctx) {
  seen_t *s = ctx;
  tg_pbw_init(&s->w, s->buf, sizeof(s->buf), NULL, NULL);
  return &s->w;
}

static void seen_event(seen_t *s, const Perfetto__Protos__FtraceEvent *e) {
  switch (e->event_case) {
    case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_EXEC:
      if (e->sched_process_exec->pid != s->exec_pid) break;
      assert_string_equal(e->sched_process_exec->filename, "/bin/true");
      assert_int_equal(e->sched_process_exec->old_pid, s->exec_pid);
      assert_int_equal(e->pid, s->exec_pid);
      s->exec = true;
      break;
    case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SOFTIRQ_RAISE:
      assert_true(e->softirq_raise->has_vec);
      assert_true(e->softirq_raise->vec < 10); /* NR_SOFTIRQS */
      s->softirq_raise = true;
      break;
    case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_EXT4_SYNC_FILE_ENTER:
      if (e->ext4_sync_file_enter->ino != s->ino) break;
      assert_int_equal(e->ext4_sync_file_enter->dev, s->dev);
      assert_true(e->ext4_sync_file_enter->has_parent);
      s->sync_enter = true;
      break;
    case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_EXT4_SYNC_FILE_EXIT:
      if (e->ext4_sync_file_exit->ino != s->ino) break;
      assert_int_equal(e->ext4_sync_file_exit->dev, s->dev);
      assert_int_equal(e->ext4_sync_file_exit->ret, 0);
      s->sync_exit = true;
      break;
    case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_EXT4_DA_WRITE_BEGIN:
      if (e->ext4_da_write_begin->ino != s->ino) break;
      assert_int_equal(e->ext4_da_write_begin->dev, s->dev);
      assert_int_equal(e->ext4_da_write_begin->pos, 8192);
      assert_int_equal(e->ext4_da_write_begin->len, 4096);
      s->da_write = true;
      break;
    case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_CGROUP_MKDIR:
      if (!e->cgroup_mkdir->path ||
          strcmp(e->cgroup_mkdir->path, s->cgroup_path) != 0)
        break;
      assert_int_equal(e->cgroup_mkdir->level, 1);
      assert_true(e->cgroup_mkdir->has_id && e->cgroup_mkdir->id != 0);
      s->mkdir = true;
      break;
    case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_CGROUP_RMDIR:
      if (e->cgroup_rmdir->path &&
          strcmp(e->cgroup_rmdir->path, s->cgroup_path) == 0)
        s->rmdir = true;
      break;
    case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_GENERIC:
      fail_msg("%s written as a generic event", e->generic->event_name);
      break;
    default:
      break;
  }
}

static void seen_end(void *ctx) {
  seen_t *s = ctx;
  assert_int_equal(tg_pbw_error(&s->w), 0);
  Perfetto__Protos__TracePacket *pk = perfetto__protos__trace_packet__unpack(
      NULL, (size_t)tg_pbw_written(&s->w), s->buf);
  assert_non_null(pk);
  const Perfetto__Protos__FtraceEventBundle *b = pk->ftrace_events;
  for (size_t i = 0; b && i < b->n_event; i++) seen_event(s, b->event[i]);
  perfetto__protos__trace_packet__free_unpacked(pk, NULL);
}

static pid_t run_true(void) {
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/true", "/bin/true", (char *)NULL);
    _exit(127);
  }
  assert_true(pid > 0);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return pid;
}

/* Writes a page at 8192 of a new file and fsyncs it; false when /tmp is
 * not ext4. */
static bool write_ext4_file(seen_t *s) {
  struct statfs fs;
  if (statfs("/tmp", &fs) != 0 || fs.f_type != 0xEF53) return false;
  char path[] = "/tmp/tg-known-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  struct stat st;
  assert_int_equal(fstat(fd, &st), 0);
  s->ino = st.st_ino;
  s->dev = st.st_dev;
  static uint8_t page[4096];
  memset(page, 'k', sizeof(page));
  assert_int_equal(pwrite(fd, page, sizeof(page), 8192), (ssize_t)sizeof(page));
  assert_int_equal(fsync(fd), 0);
  close(fd);
  unlink(path);
  return true;
}

/* Makes and removes a cgroup at the top of the first writable hierarchy;
 * false when there is none. */
static bool touch_cgroup(seen_t *s) {
  static const char *roots[] = {"/sys/fs/cgroup/unified", "/sys/fs/cgroup",
                                "/sys/fs/cgroup/pids"};
  snprintf(s->cgroup_path, sizeof(s->cgroup_path), "/tg-known-%d",
           (int)getpid());
  for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
    struct statfs fs;
    /* cgroup2 or cgroup (v1), never the tmpfs holding v1's mounts. */
    if (statfs(roots[i], &fs) != 0 ||
        (fs.f_type != 0x63677270 && fs.f_type != 0x27e0eb))
      continue;
    char dir[128];
    snprintf(dir, sizeof(dir), "%s%s", roots[i], s->cgroup_path);
    if (mkdir(dir, 0755) != 0) continue;
    assert_int_equal(rmdir(dir), 0);
    return true;
  }
  return false;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A session of |events| in a 1 MiB buffer per CPU. */
static tg_ftrace_session_t *start_session(char **events, size_t n) {
  tg_ftrace_cfg_t cfg = {
      .events = events,
      .n_events = n,
      .buffer_size_kb = 1024,
      .drain_period_ms = 10,
  };
  tg_ftrace_session_t *session = NULL;
  assert_int_equal(tg_ftrace_session_start(&cfg, &session), 0);
  return session;
}

/* Real records of the kernel, written by a session as their own
 * messages: an exec's __data_loc filename, softirq_raise, ext4's dev_t
 * (as stat(2)'s st_dev) and ino_t, cgroup's path. */
static void kernel_records_decode_as_their_messages(void **state) {
  (void)state;
  require_ftrace();
  if (access("/bin/true", X_OK) != 0) skip();
  char *events[] = {"sched/sched_process_exec",  "irq/softirq_raise",
                    "ext4/ext4_sync_file_enter", "ext4/ext4_sync_file_exit",
                    "ext4/ext4_da_write_begin",  "cgroup/cgroup_mkdir",
                    "cgroup/cgroup_rmdir"};
  tg_ftrace_session_t *session =
      start_session(events, sizeof(events) / sizeof(events[0]));
  seen_t *s = calloc(1, sizeof(*s));
  assert_non_null(s);
  tg_probes_sink_t sink = {seen_begin, seen_end, s};

  s->exec_pid = run_true();
  bool ext4 = write_ext4_file(s);
  bool cgroup = touch_cgroup(s);
  double deadline = now_s() + 10;
  while (now_s() < deadline &&
         !(s->exec && s->softirq_raise && (!ext4 || (s->sync_enter && s->sync_exit)) &&
           (!cgroup || (s->mkdir && s->rmdir)))) {
    bool more = false;
    tg_ftrace_session_drain(session, &sink, 64, &more);
    if (!more) usleep(10000);
  }
  tg_ftrace_session_stop(session);
  print_message("exec %d, softirq_raise %d, ext4 %s (sync %d/%d, "
                "da_write_begin %d), cgroup %s (mkdir %d, rmdir %d)\n",
                s->exec, s->softirq_raise, ext4 ? "on /tmp" : "skipped",
                s->sync_enter, s->sync_exit, s->da_write,
                cgroup ? s->cgroup_path : "skipped", s->mkdir, s->rmdir);
  assert_true(s->exec);
  assert_true(s->softirq_raise);
  if (ext4) {
    assert_true(s->sync_enter);
    assert_true(s->sync_exit);
  }
  if (cgroup) {
    assert_true(s->mkdir);
    assert_true(s->rmdir);
  }
  free(s);
}

typedef struct pid_take {
  bool take;  /* what the callback answers */
  pid_t want; /* the pid looked for */
  bool seen;  /* handed over */
} pid_take_t;

static bool take_pids(void *ctx, const int32_t *pids, size_t n) {
  pid_take_t *t = ctx;
  for (size_t i = 0; i < n; i++)
    if (pids[i] == t->want) t->seen = true;
  return t->take;
}

/* Drains until |t| saw its pid (bounded); whether the drain that handed
 * it over said it handed new pids. */
static bool drain_until_handed(tg_ftrace_session_t *session,
                               const tg_probes_sink_t *sink, pid_take_t *t) {
  double deadline = now_s() + 10;
  while (now_s() < deadline) {
    bool more = false;
    tg_ftrace_session_drain(session, sink, 64, &more);
    if (t->seen) return tg_ftrace_session_handed_new_pids(session);
    if (!t->take) assert_false(tg_ftrace_session_handed_new_pids(session));
    if (!more) usleep(10000);
  }
  fail_msg("pid %d never handed over", (int)t->want);
  return false;
}

/* A drain says whether linux.process_stats took pids it had not been
 * handed lately while the host created tasks (a process started for the
 * purpose): the reader then keeps the default period for
 * TG_FTRACE_NEW_PIDS_HOLD_MS, so that processes that come and go are
 * resolved while they live (tg_ftrace_drain_wait_ms). Pids nobody took
 * are not new ones: they are handed over again. */
static void drains_say_when_they_handed_new_pids(void **state) {
  (void)state;
  require_ftrace();
  if (access("/bin/true", X_OK) != 0) skip();
  char *events[] = {"sched/sched_switch", "sched/sched_process_exec"};
  tg_ftrace_session_t *session =
      start_session(events, sizeof(events) / sizeof(events[0]));
  seen_t *s = calloc(1, sizeof(*s));
  assert_non_null(s);
  tg_probes_sink_t sink = {seen_begin, seen_end, s};
  pid_take_t t = {.take = false};
  tg_ftrace_session_on_pids(session, take_pids, &t);

  t.want = run_true();
  assert_false(drain_until_handed(session, &sink, &t));
  t = (pid_take_t){.take = true};
  t.want = run_true();
  assert_true(drain_until_handed(session, &sink, &t));

  tg_ftrace_session_stop(session);
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(known_table_matches_the_descriptors),
      cmocka_unit_test(sched_process_events_decode_as_their_messages),
      cmocka_unit_test(irq_and_power_events_decode_as_their_messages),
      cmocka_unit_test(thermal_events_decode_as_their_messages),
      cmocka_unit_test(vmscan_and_compaction_events_decode_as_their_messages),
      cmocka_unit_test(filemap_and_ext4_events_decode_as_their_messages),
      cmocka_unit_test(cgroup_events_decode_as_their_messages),
      cmocka_unit_test(kernel_formats_give_every_entry_field),
      cmocka_unit_test(kernel_records_decode_as_their_messages),
      cmocka_unit_test(drains_say_when_they_handed_new_pids),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
