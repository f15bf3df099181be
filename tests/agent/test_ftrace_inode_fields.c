/* linux.ftrace's inode and device fields, for linux.inode_file_map: which
 * format fields name inodes and devices, the (inode, device) pairs the
 * encoder collects from records on synthetic pages, and dev_t written as
 * st_dev (makedev()'s encoding) by field plans and field by field.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include <cmocka.h>

#include "agent/probes/ftrace_encode.h"
#include "agent/probes/ftrace_format.h"
#include "agent/probes/inode_set.h"
#include "ftrace_fixtures.h"
#include "pb/trace/trace_packet.pb-c.h"
#include "probes_fixtures.h"

/* As this kernel has them: ext4's dev_t before its inodes, filemap's
 * after, writeback's cgroup inode beside a dev_t. */
static const char ext4_format[] =
    "name: ext4_sync_file_enter\nID: 1232\n" COMMON_FIELDS
    "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n"
    "\tfield:ino_t ino;\toffset:16;\tsize:8;\tsigned:0;\n"
    "\tfield:ino_t parent;\toffset:24;\tsize:8;\tsigned:0;\n"
    "\tfield:int datasync;\toffset:32;\tsize:4;\tsigned:1;\n";

static const char filemap_format[] =
    "name: mm_filemap_add_to_page_cache\nID: 600\n" COMMON_FIELDS
    "\tfield:unsigned long pfn;\toffset:8;\tsize:8;\tsigned:0;\n"
    "\tfield:unsigned long i_ino;\toffset:16;\tsize:8;\tsigned:0;\n"
    "\tfield:unsigned long index;\toffset:24;\tsize:8;\tsigned:0;\n"
    "\tfield:dev_t s_dev;\toffset:32;\tsize:4;\tsigned:0;\n"
    "\tfield:unsigned char order;\toffset:36;\tsize:1;\tsigned:0;\n";

static const char writeback_format[] =
    "name: writeback_start\nID: 700\n" COMMON_FIELDS
    "\tfield:long nr_pages;\toffset:8;\tsize:8;\tsigned:1;\n"
    "\tfield:dev_t sb_dev;\toffset:16;\tsize:4;\tsigned:0;\n"
    "\tfield:ino_t cgroup_ino;\toffset:24;\tsize:8;\tsigned:0;\n";

static const char block_format[] =
    "name: block_rq_issue\nID: 2104\n" COMMON_FIELDS
    "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n"
    "\tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;\n"
    "\tfield:unsigned int nr_sector;\toffset:24;\tsize:4;\tsigned:0;\n"
    "\tfield:unsigned int bytes;\toffset:28;\tsize:4;\tsigned:0;\n"
    "\tfield:unsigned short ioprio;\toffset:32;\tsize:2;\tsigned:0;\n"
    "\tfield:char rwbs[10];\toffset:34;\tsize:10;\tsigned:0;\n"
    "\tfield:char comm[16];\toffset:44;\tsize:16;\tsigned:0;\n"
    "\tfield:__data_loc char[] cmd;\toffset:60;\tsize:4;\tsigned:0;\n";

/* The kernel's dev_t of 254:0 (/dev/vda) and 8:17. */
#define KDEV_VDA ((254u << 20) | 0u)
#define KDEV_SDB1 ((8u << 20) | 17u)

static uint8_t role_of(const char *text, const char *field) {
  tg_ftrace_format_t f;
  assert_int_equal(tg_ftrace_format_parse(text, strlen(text), &f), 0);
  const tg_ftrace_field_t *x = tg_ftrace_format_field(&f, field);
  assert_non_null(x);
  return x->role;
}

static void format_marks_inode_and_dev_fields(void **state) {
  (void)state;
  assert_int_equal(role_of(ext4_format, "dev"), TG_FTRACE_ROLE_DEV);
  assert_int_equal(role_of(ext4_format, "ino"), TG_FTRACE_ROLE_INODE);
  assert_int_equal(role_of(ext4_format, "parent"), TG_FTRACE_ROLE_INODE);
  assert_int_equal(role_of(ext4_format, "datasync"), TG_FTRACE_ROLE_NONE);
  assert_int_equal(role_of(filemap_format, "i_ino"), TG_FTRACE_ROLE_INODE);
  assert_int_equal(role_of(filemap_format, "s_dev"), TG_FTRACE_ROLE_DEV);
  assert_int_equal(role_of(filemap_format, "index"), TG_FTRACE_ROLE_NONE);
  assert_int_equal(role_of(writeback_format, "cgroup_ino"),
                   TG_FTRACE_ROLE_NONE);
  assert_int_equal(role_of(block_format, "sector"), TG_FTRACE_ROLE_NONE);
  /* The conversion is makedev()'s, for large minors too. */
  assert_int_equal(tg_ftrace_dev_to_user(KDEV_VDA), makedev(254, 0));
  assert_int_equal(tg_ftrace_dev_to_user(KDEV_SDB1), makedev(8, 17));
  assert_int_equal(tg_ftrace_dev_to_user((259u << 20) | 0x12345u),
                   makedev(259, 0x12345));
}

static size_t ext4_rec(uint8_t *out, int32_t pid, uint32_t kdev, uint64_t ino,
                       uint64_t parent) {
  uint8_t b[28] = {0};
  memcpy(b, &kdev, 4);
  memcpy(b + 8, &ino, 8);
  memcpy(b + 16, &parent, 8);
  return event(out, 1232, pid, b, sizeof(b));
}

static size_t filemap_rec(uint8_t *out, int32_t pid, uint64_t ino,
                          uint32_t kdev) {
  uint8_t b[32] = {0};
  memcpy(b + 8, &ino, 8);
  memcpy(b + 24, &kdev, 4);
  return event(out, 600, pid, b, sizeof(b));
}

static size_t block_rec(uint8_t *out, uint32_t kdev, bool whole) {
  uint8_t b[64] = {0};
  memcpy(b, &kdev, 4);
  memcpy(b + 26, "W", 1);
  memcpy(b + 36, "kworker", 7);
  uint32_t loc = 4u << 16 | 64u; /* "cmd" after the fixed fields */
  memcpy(b + 52, &loc, 4);
  memcpy(b + 56, "cmd", 4);
  return event(out, 2104, 9, b, whole ? 60 : 52);
}

typedef struct encoded {
  uint8_t buf[65536];
  size_t len;
  Perfetto__Protos__FtraceEventBundle *bundle;
} encoded_t;

/* Encodes |p| with every format above in the table; pairs into |set|
 * (NULL: not collected), skipping |skip_pid|'s records. */
static void encode(const page_t *p, tg_inode_set_t *set, int32_t skip_pid,
                   encoded_t *e) {
  static const group_format_t formats[] = {{"ext4", ext4_format},
                                           {"filemap", filemap_format},
                                           {"writeback", writeback_format},
                                           {"block", block_format}};
  page_encoder_t pe;
  page_encoder_init(&pe, formats, 4, false);
  pe.enc.inodes = set;
  pe.enc.inode_skip_pid = skip_pid;
  tg_ftrace_bundle_result_t res;
  e->len = page_encoder_encode(&pe, p, e->buf, sizeof(e->buf), &res);
  e->bundle =
      perfetto__protos__ftrace_event_bundle__unpack(NULL, e->len, e->buf);
  assert_non_null(e->bundle);
  page_encoder_free(&pe);
}

static bool has_pair(const tg_inode_set_t *s, uint64_t ino, uint64_t dev) {
  return tg_inode_set_find(s, ino, dev) >= 0;
}

static void encoder_collects_inode_device_pairs(void **state) {
  (void)state;
  page_t p;
  page_init(&p, 1000);
  uint8_t rec[128];
  rec_data(&p, 1, rec, ext4_rec(rec, 100, KDEV_VDA, 12, 2));
  rec_data(&p, 1, rec, ext4_rec(rec, 100, KDEV_VDA, 12, 2)); /* again */
  rec_data(&p, 1, rec, filemap_rec(rec, 101, 13, KDEV_SDB1));
  rec_data(&p, 1, rec, filemap_rec(rec, 101, 0, KDEV_SDB1)); /* no inode */
  rec_data(&p, 1, rec, ext4_rec(rec, 555, KDEV_VDA, 14, 2)); /* skipped */
  uint8_t wb[24] = {0};
  uint32_t kdev = KDEV_VDA;
  uint64_t cg = 99;
  memcpy(wb + 8, &kdev, 4);
  memcpy(wb + 16, &cg, 8);
  rec_data(&p, 1, rec, event(rec, 700, 102, wb, sizeof(wb)));
  /* An ext4 record cut after its dev_t and inode: the parent is left out. */
  size_t n = ext4_rec(rec, 103, KDEV_VDA, 15, 16);
  rec_data(&p, 1, rec, n - 12);
  page_finish(&p, false);

  tg_inode_set_t set;
  assert_int_equal(tg_inode_set_init(&set, 64), 0);
  encoded_t *e = malloc(sizeof(*e));
  assert_non_null(e);
  encode(&p, &set, 555, e);
  const uint64_t vda = makedev(254, 0), sdb1 = makedev(8, 17);
  assert_int_equal(set.base.n, 4);
  assert_true(has_pair(&set, 12, vda));
  assert_true(has_pair(&set, 2, vda));
  assert_true(has_pair(&set, 13, sdb1));
  assert_true(has_pair(&set, 15, vda));
  assert_false(has_pair(&set, 14, vda)); /* the scanner's own */
  assert_false(has_pair(&set, 99, vda)); /* a cgroup's */
  assert_false(has_pair(&set, 16, vda)); /* outside the record */
  assert_int_equal(set.base.dropped, 0);

  /* Every event writes its dev_t as st_dev: ext4 and filemap in their own
   * messages, writeback_start as a generic event. */
  size_t devs = 0;
  for (size_t i = 0; i < e->bundle->n_event; i++) {
    const Perfetto__Protos__FtraceEvent *ev = e->bundle->event[i];
    uint64_t dev;
    if (ev->event_case ==
        PERFETTO__PROTOS__FTRACE_EVENT__EVENT_EXT4_SYNC_FILE_ENTER) {
      dev = ev->ext4_sync_file_enter->dev;
    } else if (ev->event_case ==
               PERFETTO__PROTOS__FTRACE_EVENT__EVENT_MM_FILEMAP_ADD_TO_PAGE_CACHE) {
      dev = ev->mm_filemap_add_to_page_cache->s_dev;
    } else {
      assert_int_equal(ev->event_case,
                       PERFETTO__PROTOS__FTRACE_EVENT__EVENT_GENERIC);
      const Perfetto__Protos__GenericFtraceEvent *g = ev->generic;
      assert_int_equal(g->n_field, 3);
      assert_string_equal(g->field[1]->name, "sb_dev");
      assert_int_equal(
          g->field[1]->value_case,
          PERFETTO__PROTOS__GENERIC_FTRACE_EVENT__FIELD__VALUE_UINT_VALUE);
      dev = g->field[1]->uint_value;
    }
    assert_true(dev == vda || dev == sdb1);
    devs++;
  }
  assert_int_equal(devs, 7);
  perfetto__protos__ftrace_event_bundle__free_unpacked(e->bundle, NULL);

  /* Not collected at all without a set. */
  encode(&p, NULL, 0, e);
  perfetto__protos__ftrace_event_bundle__free_unpacked(e->bundle, NULL);
  free(e);

  /* A full set counts what it could not hold. */
  tg_inode_set_clear(&set);
  tg_inode_set_t tiny;
  assert_int_equal(tg_inode_set_init(&tiny, 2), 0);
  e = malloc(sizeof(*e));
  assert_non_null(e);
  encode(&p, &tiny, 0, e);
  /* Five pairs (pid 555's too, nothing is skipped now), two kept: the
   * other three counted. */
  assert_int_equal(tiny.base.n, 2);
  assert_int_equal(tiny.base.dropped, 3);
  perfetto__protos__ftrace_event_bundle__free_unpacked(e->bundle, NULL);
  free(e);
  tg_inode_set_free(&tiny);
  tg_inode_set_free(&set);
}

static void block_dev_is_written_as_st_dev_by_plans_and_fields(void **state) {
  (void)state;
  page_t p;
  page_init(&p, 1000);
  uint8_t rec[128];
  rec_data(&p, 1, rec, block_rec(rec, KDEV_SDB1, true));  /* its plan */
  rec_data(&p, 1, rec, block_rec(rec, KDEV_SDB1, false)); /* field by field */
  page_finish(&p, false);
  encoded_t *e = malloc(sizeof(*e));
  assert_non_null(e);
  encode(&p, NULL, 0, e);
  assert_int_equal(e->bundle->n_event, 2);
  for (size_t i = 0; i < 2; i++) {
    const Perfetto__Protos__BlockRqIssueFtraceEvent *b =
        e->bundle->event[i]->block_rq_issue;
    assert_non_null(b);
    assert_int_equal(b->dev, makedev(8, 17));
    assert_string_equal(b->comm, "kworker");
  }
  assert_string_equal(e->bundle->event[0]->block_rq_issue->cmd, "cmd");
  assert_null(e->bundle->event[1]->block_rq_issue->cmd);
  perfetto__protos__ftrace_event_bundle__free_unpacked(e->bundle, NULL);
  free(e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(format_marks_inode_and_dev_fields),
      cmocka_unit_test(encoder_collects_inode_device_pairs),
      cmocka_unit_test(block_dev_is_written_as_st_dev_by_plans_and_fields),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
