/* linux.inode_file_map: the mountinfo parser; which format fields name
 * inodes and devices; linux.ftrace's encoder collecting (inode, device)
 * pairs and writing dev_t as st_dev; the feed that hands the pairs over per
 * session; the bounded directory walk on a temporary tree; the data
 * source's rounds (batches across rounds on a clock of the test's own, the
 * cache, do_not_scan, what a full scan missed); and end to end, a real
 * tracegated and tracegate-probes resolving a file this test fsyncs.
 *
 * The end-to-end test needs root and tracefs: without them it is skipped
 * with the reason, unless TG_REQUIRE_FTRACE is set (then it fails).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/probes/ftrace_tracefs.h"
#include "agent/probes/inode_feed.h"
#include "agent/probes/inode_file.h"
#include "agent/probes/inode_scan.h"
#include "agent/probes/inode_set.h"
#include "agent/probes/mountinfo.h"
#include "agent/probes/probes.h"
#include "agent/probes/probes_config.h"
#include "config_fields/probes.h"
#include "ftrace_fixtures.h"
#include "pb/config/data_source_config.pb-c.h"
#include "pb/trace/trace_packet.pb-c.h"
#include "test_service.h"
#include "tracegate/error.h"

#ifndef PROBES_PATH
#error "PROBES_PATH must name the tracegate-probes binary"
#endif

#define SESSION 77
#define WAIT_MS 20000

/* --- mountinfo ----------------------------------------------------------- */

static const tg_mount_t *mount_at(const tg_mountinfo_t *mi, const char *p) {
  for (size_t i = 0; i < mi->n; i++)
    if (strcmp(mi->v[i].point, p) == 0) return &mi->v[i];
  return NULL;
}

static void mountinfo_parses_escapes_and_skips_malformed_lines(void **state) {
  (void)state;
  static const char text[] =
      "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n"
      "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 shared:2 - ext3 /dev/root "
      "rw\n"
      "50 27 8:1 /a\\011tab /mnt/with\\040space rw - ext4 /dev/sda1 rw\n"
      "51 27 8:2 / /mnt/back\\134slash\\012nl rw - vfat  rw\n"
      "\n"
      "garbage\n"
      "52 27 8:3 / /mnt/nul\\000 rw - ext4 /dev/sda3 rw\n" /* a NUL */
      "53 27 8:4 / relative rw - ext4 /dev/sda4 rw\n"      /* not a path */
      "54 27 8x4 / /x rw - ext4 /dev/sda4 rw\n"            /* no major:minor */
      "55 27 8:5 / /y rw - ext4\n"                         /* cut short */
      "56 27 8:6 / /z rw shared:1 ext4 /dev/sda6 rw\n"     /* no separator */
      "57 27 8:7 / /short\\04 rw - ext4 /dev/sda7 rw";     /* no newline */
  tg_mountinfo_t mi;
  memset(&mi, 0, sizeof(mi));
  assert_int_equal(tg_mountinfo_parse(&mi, text, strlen(text)), 5);
  assert_int_equal(mi.bad_lines, 6);
  const tg_mount_t *m = mount_at(&mi, "/");
  assert_non_null(m);
  assert_int_equal(m->dev, makedev(254, 0));
  assert_int_equal(m->id, 27);
  assert_int_equal(m->parent, 1);
  assert_string_equal(m->fstype, "ext4");
  assert_non_null(m = mount_at(&mi, "/mnt2"));
  assert_string_equal(m->root, "/mnt1");
  assert_string_equal(m->fstype, "ext3");
  assert_int_equal(m->dev, makedev(98, 0));
  assert_non_null(m = mount_at(&mi, "/mnt/with space"));
  assert_string_equal(m->root, "/a\ttab");
  assert_int_equal(m->point_len, strlen("/mnt/with space"));
  /* An empty source is a field of its own. */
  assert_non_null(m = mount_at(&mi, "/mnt/back\\slash\nnl"));
  assert_string_equal(m->fstype, "vfat");
  /* A backslash without three octal digits stays as it is. */
  assert_non_null(mount_at(&mi, "/short\\04"));

  tg_mountinfo_sort(&mi);
  assert_true(tg_mountinfo_is_point(&mi, "/mnt2", 5));
  assert_true(tg_mountinfo_is_point(&mi, "/mnt2/x", 5));
  assert_false(tg_mountinfo_is_point(&mi, "/mnt", 4));
  assert_false(tg_mountinfo_is_point(&mi, "/mnt2/x", 7));
  assert_true(tg_mountinfo_is_point(&mi, "/", 1));
  /* Parsed again into the same table: replaced, nothing leaks. */
  assert_int_equal(tg_mountinfo_parse(&mi, text, 0), 0);
  assert_int_equal(mi.bad_lines, 0);
  tg_mountinfo_free(&mi);
}

static void mountinfo_reads_this_machines_root(void **state) {
  (void)state;
  tg_mountinfo_t mi;
  memset(&mi, 0, sizeof(mi));
  assert_true(tg_mountinfo_read(&mi, "/proc/self/mountinfo") > 0);
  struct stat st;
  assert_int_equal(stat("/", &st), 0);
  /* The last mount on "/" is the one stat sees. */
  const tg_mount_t *root = NULL;
  for (size_t i = 0; i < mi.n; i++)
    if (strcmp(mi.v[i].point, "/") == 0) root = &mi.v[i];
  assert_non_null(root);
  assert_int_equal(root->dev, (uint64_t)st.st_dev);
  assert_int_equal(tg_mountinfo_read(&mi, "/nonexistent/mountinfo"), -ENOENT);
  assert_int_equal(mi.n, 0);
  tg_mountinfo_free(&mi);
}

/* --- format roles and the encoder ---------------------------------------- */

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
  tg_ftrace_table_t table;
  tg_ftrace_encoder_t enc;
  assert_int_equal(tg_ftrace_table_init(&table), 0);
  add_format(&table, "ext4", ext4_format);
  add_format(&table, "filemap", filemap_format);
  add_format(&table, "writeback", writeback_format);
  add_format(&table, "block", block_format);
  assert_int_equal(tg_ftrace_encoder_init(&enc, &table, false, 4096), 0);
  tg_ftrace_page_layout_t l;
  assert_int_equal(tg_ftrace_header_page_parse(header_page_fixture,
                                               strlen(header_page_fixture), &l),
                   0);
  tg_pbw_t w;
  tg_pbw_init(&w, e->buf, sizeof(e->buf), NULL, NULL);
  enc.inodes = set;
  enc.inode_skip_pid = skip_pid;
  tg_ftrace_bundle_result_t res;
  tg_ftrace_encode_bundle(&enc, &w, 0, &l, p->b, sizeof(p->b), &res);
  assert_int_equal(tg_pbw_error(&w), 0);
  assert_false(res.corrupt);
  e->len = (size_t)tg_pbw_written(&w);
  e->bundle =
      perfetto__protos__ftrace_event_bundle__unpack(NULL, e->len, e->buf);
  assert_non_null(e->bundle);
  tg_ftrace_encoder_free(&enc);
  tg_ftrace_table_free(&table);
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
  assert_int_equal(set.n, 4);
  assert_true(has_pair(&set, 12, vda));
  assert_true(has_pair(&set, 2, vda));
  assert_true(has_pair(&set, 13, sdb1));
  assert_true(has_pair(&set, 15, vda));
  assert_false(has_pair(&set, 14, vda)); /* the scanner's own */
  assert_false(has_pair(&set, 99, vda)); /* a cgroup's */
  assert_false(has_pair(&set, 16, vda)); /* outside the record */
  assert_int_equal(set.dropped, 0);

  /* The generic events write their dev_t as st_dev too. */
  size_t devs = 0;
  for (size_t i = 0; i < e->bundle->n_event; i++) {
    const Perfetto__Protos__GenericFtraceEvent *g =
        e->bundle->event[i]->generic;
    if (!g) continue;
    for (size_t j = 0; j < g->n_field; j++) {
      const char *name = g->field[j]->name;
      if (strcmp(name, "dev") && strcmp(name, "s_dev") &&
          strcmp(name, "sb_dev"))
        continue;
      assert_int_equal(
          g->field[j]->value_case,
          PERFETTO__PROTOS__GENERIC_FTRACE_EVENT__FIELD__VALUE_UINT_VALUE);
      assert_true(g->field[j]->uint_value == vda ||
                  g->field[j]->uint_value == sdb1);
      devs++;
    }
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
  assert_int_equal(tiny.n, 2);
  assert_int_equal(tiny.dropped, 3);
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

/* --- the feed ------------------------------------------------------------ */

static int g_wakes;
static void count_wake(void *ctx) {
  (void)ctx;
  g_wakes++;
}

static void feed_hands_pairs_to_the_sessions_consumer_once(void **state) {
  (void)state;
  tg_inode_feed_t *f;
  assert_int_equal(tg_inode_feed_new(count_wake, NULL, &f), 0);
  g_wakes = 0;
  int32_t skip = -1;
  /* Nobody registered: nothing wanted, no lock needed. */
  assert_false(tg_inode_feed_wanted(f, 7, &skip));
  assert_int_equal(skip, 0);
  tg_inode_feed_consumer_t *c;
  assert_int_equal(tg_inode_feed_register(f, 0, 1, &c), -EINVAL);
  assert_int_equal(tg_inode_feed_register(f, 7, 4242, &c), 0);
  assert_true(tg_inode_feed_wanted(f, 7, &skip));
  assert_int_equal(skip, 4242);
  assert_false(tg_inode_feed_wanted(f, 8, &skip));
  assert_false(tg_inode_feed_wanted(f, 0, &skip));

  const tg_inode_key_t a[] = {{10, 1}, {0, 1}, {11, 1}, {10, 1}, {10, 2}};
  assert_int_equal(tg_inode_feed_publish(f, 7, a, 5), 1);
  assert_int_equal(tg_inode_feed_publish(f, 8, a, 5), 0);
  assert_int_equal(tg_inode_feed_publish(f, 7, a, 2), 1);
  assert_int_equal(g_wakes, 1);
  tg_inode_key_t out[8];
  assert_int_equal(tg_inode_feed_drain(f, c, out, 2), 2);
  assert_true(out[0].ino == 10 && out[0].dev == 1);
  assert_true(out[1].ino == 11 && out[1].dev == 1);
  assert_int_equal(tg_inode_feed_drain(f, c, out, 8), 1);
  assert_true(out[0].ino == 10 && out[0].dev == 2);
  assert_int_equal(tg_inode_feed_drain(f, c, out, 8), 0);
  assert_int_equal(tg_inode_feed_dropped(f, c), 0);
  tg_inode_feed_unregister(f, c);
  assert_false(tg_inode_feed_wanted(f, 7, &skip));
  assert_int_equal(tg_inode_feed_publish(f, 7, a, 5), 0);
  tg_inode_feed_free(f);
}

static void feed_counts_pairs_past_the_cap(void **state) {
  (void)state;
  tg_inode_feed_t *f;
  assert_int_equal(tg_inode_feed_new(NULL, NULL, &f), 0);
  tg_inode_feed_consumer_t *c;
  assert_int_equal(tg_inode_feed_register(f, 9, 0, &c), 0);
  size_t n = TG_INODE_FEED_CAP + 100;
  tg_inode_key_t *many = malloc(n * sizeof(*many));
  assert_non_null(many);
  for (size_t i = 0; i < n; i++) many[i] = (tg_inode_key_t){i + 1, 3};
  assert_int_equal(tg_inode_feed_publish(f, 9, many, n), 1);
  assert_int_equal(tg_inode_feed_dropped(f, c), 100);
  assert_int_equal(tg_inode_feed_drain(f, c, many, n), TG_INODE_FEED_CAP);
  assert_int_equal(tg_inode_feed_dropped(f, c), 100);
  free(many);
  /* Freed with a consumer still registered: nothing leaks (ASan). */
  tg_inode_feed_free(f);
}

/* --- a temporary tree ---------------------------------------------------- */

#define TREE_FILES 9

typedef struct tree {
  char root[512];
  uint64_t dev;
  /* Files and directories with their inodes, paths and types. */
  struct {
    char path[PATH_MAX];
    uint64_t ino;
    tg_inode_type_t type;
    bool found;
  } e[TREE_FILES + 4];
  size_t n;
  uint64_t hidden_ino; /* behind the symlink: must not be reached */
} tree_t;

static void tree_add(tree_t *t, const char *rel, tg_inode_type_t type) {
  /* Joined by hand: gcc -O3 takes root and path, two fields of |t|, for
   * overlapping snprintf arguments (-Wrestrict). */
  size_t rl = strlen(t->root), l = strlen(rel);
  assert_true(rl + 1 + l < PATH_MAX);
  char *p = t->e[t->n].path;
  memcpy(p, t->root, rl);
  p[rl] = '/';
  memcpy(p + rl + 1, rel, l + 1);
  if (type == TG_INODE_TYPE_DIRECTORY) {
    assert_int_equal(mkdir(t->e[t->n].path, 0755), 0);
  } else {
    int fd = open(t->e[t->n].path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    close(fd);
  }
  struct stat st;
  assert_int_equal(lstat(t->e[t->n].path, &st), 0);
  t->e[t->n].ino = st.st_ino;
  t->e[t->n].type = type;
  t->e[t->n].found = false;
  t->n++;
}

/* |base|/tg-inode-XXXXXX with a/, a/f0.. a/b/, a/b/f.., top, and a
 * symlink "link" to a directory outside the tree. */
static void tree_make(tree_t *t, const char *base) {
  memset(t, 0, sizeof(*t));
  int k = snprintf(t->root, sizeof(t->root), "%s/tg-inode-XXXXXX", base);
  assert_true(k > 0 && (size_t)k < sizeof(t->root));
  assert_non_null(mkdtemp(t->root));
  struct stat st;
  assert_int_equal(stat(t->root, &st), 0);
  t->dev = st.st_dev;
  tree_add(t, "a", TG_INODE_TYPE_DIRECTORY);
  tree_add(t, "a/b", TG_INODE_TYPE_DIRECTORY);
  tree_add(t, "top", TG_INODE_TYPE_FILE);
  for (int i = 0; i < TREE_FILES - 1; i++) {
    char rel[32];
    snprintf(rel, sizeof(rel), i % 2 ? "a/f%d" : "a/b/f%d", i);
    tree_add(t, rel, TG_INODE_TYPE_FILE);
  }
  char link[PATH_MAX + 8];
  snprintf(link, sizeof(link), "%s/link", t->root);
  char outside[PATH_MAX + 16];
  snprintf(outside, sizeof(outside), "%s-outside", t->root);
  assert_int_equal(mkdir(outside, 0755), 0);
  char hidden[PATH_MAX + 32];
  snprintf(hidden, sizeof(hidden), "%s/hidden", outside);
  int fd = open(hidden, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(stat(hidden, &st), 0);
  t->hidden_ino = st.st_ino;
  assert_int_equal(symlink(outside, link), 0);
}

static void tree_remove(const tree_t *t) {
  char p[PATH_MAX + 32];
  snprintf(p, sizeof(p), "%s-outside/hidden", t->root);
  unlink(p);
  snprintf(p, sizeof(p), "%s-outside", t->root);
  rmdir(p);
  snprintf(p, sizeof(p), "%s/link", t->root);
  unlink(p);
  for (size_t i = t->n; i-- > 0;) {
    if (t->e[i].type == TG_INODE_TYPE_DIRECTORY)
      rmdir(t->e[i].path);
    else
      unlink(t->e[i].path);
  }
  rmdir(t->root);
}

static const char *tmp_base(void) {
  const char *d = getenv("TMPDIR");
  return d && *d ? d : "/tmp";
}

/* --- the walk ------------------------------------------------------------ */

typedef struct walk {
  tree_t *t;
  size_t entries, link_seen, hidden_seen, skipped_dirs;
  const char *skip; /* a directory to stay out of */
  bool wrong_type, wrong_dev;
} walk_t;

static bool on_found(void *ctx, uint64_t dev, uint64_t ino, const char *path,
                     size_t len, tg_inode_type_t type) {
  walk_t *w = ctx;
  w->entries++;
  if (dev != w->t->dev) w->wrong_dev = true;
  if (strlen(path) != len) w->wrong_dev = true;
  if (ino == w->t->hidden_ino) w->hidden_seen++;
  if (len > 5 && strcmp(path + len - 5, "/link") == 0) {
    w->link_seen++;
    if (type != TG_INODE_TYPE_UNKNOWN) w->wrong_type = true;
  }
  for (size_t i = 0; i < w->t->n; i++) {
    if (w->t->e[i].ino != ino) continue;
    if (strcmp(w->t->e[i].path, path) != 0 || w->t->e[i].type != type)
      w->wrong_type = true;
    w->t->e[i].found = true;
  }
  return true;
}

static bool on_skip(void *ctx, const char *path, size_t len) {
  walk_t *w = ctx;
  bool skip =
      w->skip && strlen(w->skip) == len && memcmp(w->skip, path, len) == 0;
  w->skipped_dirs += skip;
  return skip;
}

static void scan_walks_the_tree_in_steps_without_following_links(void **state) {
  (void)state;
  tree_t *t = malloc(sizeof(*t));
  assert_non_null(t);
  tree_make(t, tmp_base());
  walk_t w = {.t = t};
  tg_inode_scan_cbs_t cbs = {on_found, on_skip, &w};
  tg_inode_scan_t *s;
  assert_int_equal(tg_inode_scan_new(&cbs, &s), 0);
  /* Trailing slashes do not double in the paths. */
  char root[PATH_MAX + 2];
  snprintf(root, sizeof(root), "%s//", t->root);
  assert_int_equal(tg_inode_scan_add_root(s, root, t->dev), 0);
  bool done = false;
  size_t steps = 0, total = 0;
  while (!done && steps < 1000) {
    size_t n = tg_inode_scan_step(s, 3, &done);
    assert_true(n <= 3);
    total += n;
    steps++;
  }
  assert_true(done);
  /* Every file and directory, the link itself, nothing behind it. */
  assert_int_equal(total, t->n + 1);
  assert_int_equal(w.entries, t->n + 1);
  assert_true(steps >= (t->n + 1 + 2) / 3);
  for (size_t i = 0; i < t->n; i++) assert_true(t->e[i].found);
  assert_int_equal(w.link_seen, 1);
  assert_int_equal(w.hidden_seen, 0);
  assert_false(w.wrong_type);
  assert_false(w.wrong_dev);
  assert_int_equal(tg_inode_scan_stats(s)->dirs, 3);

  /* A directory skip_dir names is reported but not entered. */
  char ab[PATH_MAX + 8];
  snprintf(ab, sizeof(ab), "%s/a/b", t->root);
  memset(&w, 0, sizeof(w));
  w.t = t;
  w.skip = ab;
  for (size_t i = 0; i < t->n; i++) t->e[i].found = false;
  assert_int_equal(tg_inode_scan_add_root(s, t->root, t->dev), 0);
  while (tg_inode_scan_step(s, 1000, &done), !done) {
  }
  assert_int_equal(w.skipped_dirs, 1);
  for (size_t i = 0; i < t->n; i++)
    assert_int_equal(t->e[i].found,
                     strncmp(t->e[i].path, ab, strlen(ab)) != 0 ||
                         strlen(t->e[i].path) == strlen(ab));

  /* A root on another device than said, a missing one, a symlink: not
   * walked. */
  uint64_t other = tg_inode_scan_stats(s)->other_dev;
  uint64_t errors = tg_inode_scan_stats(s)->open_errors;
  memset(&w, 0, sizeof(w));
  w.t = t;
  char link[PATH_MAX + 8];
  snprintf(link, sizeof(link), "%s/link", t->root);
  assert_int_equal(tg_inode_scan_add_root(s, t->root, t->dev + 1), 0);
  assert_int_equal(tg_inode_scan_add_root(s, "/nonexistent-tg-dir", t->dev), 0);
  assert_int_equal(tg_inode_scan_add_root(s, link, t->dev), 0);
  assert_int_equal(tg_inode_scan_step(s, 100, &done), 0);
  assert_true(done);
  assert_int_equal(w.entries, 0);
  assert_int_equal(tg_inode_scan_stats(s)->other_dev, other + 1);
  assert_int_equal(tg_inode_scan_stats(s)->open_errors, errors + 2);

  /* Abandoned halfway: everything it held is closed (ASan, fds). */
  assert_int_equal(tg_inode_scan_add_root(s, t->root, t->dev), 0);
  tg_inode_scan_step(s, 2, &done);
  assert_false(done);
  tg_inode_scan_free(s);
  tree_remove(t);
  free(t);
}

/* --- the data source's rounds -------------------------------------------- */

typedef struct sink_buf {
  uint8_t b[1 << 20];
  tg_pbw_t w;
  Perfetto__Protos__TracePacket *pk[256];
  size_t n;
} sink_buf_t;

static tg_pbw_t *buf_begin(void *ctx) {
  sink_buf_t *s = ctx;
  tg_pbw_init(&s->w, s->b, sizeof(s->b), NULL, NULL);
  return &s->w;
}

static void buf_end(void *ctx) {
  sink_buf_t *s = ctx;
  assert_int_equal(tg_pbw_error(&s->w), 0);
  assert_true(s->n < sizeof(s->pk) / sizeof(s->pk[0]));
  s->pk[s->n] = perfetto__protos__trace_packet__unpack(
      NULL, (size_t)tg_pbw_written(&s->w), s->b);
  assert_non_null(s->pk[s->n]);
  s->n++;
}

static void sink_clear(sink_buf_t *s) {
  for (size_t i = 0; i < s->n; i++)
    perfetto__protos__trace_packet__free_unpacked(s->pk[i], NULL);
  s->n = 0;
}

/* The mount point of |dev| with the whole file system ("/" as root). */
static void mount_point_of(uint64_t dev, char *out, size_t cap) {
  tg_mountinfo_t mi;
  memset(&mi, 0, sizeof(mi));
  assert_true(tg_mountinfo_read(&mi, "/proc/self/mountinfo") > 0);
  out[0] = '\0';
  for (size_t i = 0; i < mi.n; i++)
    if (mi.v[i].dev == dev && strcmp(mi.v[i].root, "/") == 0)
      snprintf(out, cap, "%s", mi.v[i].point);
  tg_mountinfo_free(&mi);
  assert_true(out[0] != '\0');
}

typedef struct ds_opts {
  uint32_t batch, delay, interval;
  bool do_not_scan;
  const char *mountpoint, *scan_root; /* a mapping, or NULL */
  bool no_session;
} ds_opts_t;

/* A linux.inode_file_map instance on |feed|, as the sampler builds it. */
static void *ds_instance(tg_inode_feed_t *feed, const ds_opts_t *o) {
  Perfetto__Protos__DataSourceConfig dsc =
      PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
  Perfetto__Protos__InodeFileConfig ic =
      PERFETTO__PROTOS__INODE_FILE_CONFIG__INIT;
  Perfetto__Protos__InodeFileConfig__MountPointMappingEntry me =
      PERFETTO__PROTOS__INODE_FILE_CONFIG__MOUNT_POINT_MAPPING_ENTRY__INIT;
  Perfetto__Protos__InodeFileConfig__MountPointMappingEntry *mep = &me;
  char *roots[1] = {(char *)o->scan_root};
  dsc.name = "linux.inode_file_map";
  dsc.has_tracing_session_id = !o->no_session;
  dsc.tracing_session_id = SESSION;
  dsc.inode_file_config = &ic;
  ic.has_scan_batch_size = ic.has_scan_delay_ms = ic.has_scan_interval_ms = 1;
  ic.scan_batch_size = o->batch;
  ic.scan_delay_ms = o->delay;
  ic.scan_interval_ms = o->interval;
  ic.has_do_not_scan = o->do_not_scan;
  ic.do_not_scan = o->do_not_scan;
  if (o->mountpoint) {
    me.mountpoint = (char *)o->mountpoint;
    me.n_scan_roots = 1;
    me.scan_roots = roots;
    ic.n_mount_point_mapping = 1;
    ic.mount_point_mapping = &mep;
  }
  size_t len = perfetto__protos__data_source_config__get_packed_size(&dsc);
  uint8_t *b = malloc(len);
  assert_non_null(b);
  perfetto__protos__data_source_config__pack(&dsc, b);
  _Alignas(max_align_t) unsigned char cfg[TG_PROBE_CFG_MAX];
  assert_int_equal(tg_inode_file_probe.parse_cfg(b, len, cfg), 0);
  free(b);
  const tg_inode_file_cfg_t *c = *(tg_inode_file_cfg_t *const *)cfg;
  assert_int_equal(c->scan_batch_size, o->batch);
  assert_int_equal(c->do_not_scan, o->do_not_scan);
  void *st = NULL;
  assert_int_equal(tg_inode_file_probe.create(cfg, feed, &st), 0);
  return st;
}

typedef struct seen {
  size_t entries, max_per_round, packets;
  bool bad;
} seen_t;

/* Checks the InodeFileMap packets in |s| against |t| (marking what was
 * found) and clears it; returns the entries. */
static size_t check_maps(sink_buf_t *s, tree_t *t, const char *mount_point,
                         seen_t *seen) {
  size_t n = 0;
  for (size_t i = 0; i < s->n; i++) {
    const Perfetto__Protos__InodeFileMap *m = s->pk[i]->inode_file_map;
    assert_non_null(m);
    assert_true(s->pk[i]->has_timestamp);
    seen->packets++;
    if (m->block_device_id != t->dev) seen->bad = true;
    bool point = false;
    for (size_t j = 0; j < m->n_mount_points; j++)
      point |= strcmp(m->mount_points[j], mount_point) == 0;
    if (!point) seen->bad = true;
    for (size_t j = 0; j < m->n_entries; j++) {
      const Perfetto__Protos__InodeFileMap__Entry *e = m->entries[j];
      bool known = false;
      for (size_t k = 0; k < t->n; k++) {
        if (t->e[k].ino != e->inode_number) continue;
        known = true;
        t->e[k].found = true;
        if (e->n_paths != 1 || strcmp(e->paths[0], t->e[k].path) != 0 ||
            (int)e->type != (int)t->e[k].type)
          seen->bad = true;
      }
      if (!known) seen->bad = true;
      n++;
    }
  }
  sink_clear(s);
  seen->entries += n;
  return n;
}

static void publish_tree(tg_inode_feed_t *f, const tree_t *t, uint64_t bogus) {
  tg_inode_key_t keys[TREE_FILES + 5];
  size_t n = 0;
  for (size_t i = 0; i < t->n; i++)
    keys[n++] = (tg_inode_key_t){t->e[i].ino, t->dev};
  keys[n++] = (tg_inode_key_t){bogus, t->dev};
  assert_int_equal(tg_inode_feed_publish(f, SESSION, keys, n), 1);
}

static void inode_file_resolves_in_batches_across_rounds(void **state) {
  (void)state;
  tree_t *t = malloc(sizeof(*t));
  sink_buf_t *sb = calloc(1, sizeof(*sb));
  assert_non_null(t);
  assert_non_null(sb);
  tree_make(t, tmp_base());
  char mp[PATH_MAX];
  mount_point_of(t->dev, mp, sizeof(mp));
  tg_inode_feed_t *f;
  assert_int_equal(tg_inode_feed_new(NULL, NULL, &f), 0);
  ds_opts_t o = {.batch = 4,
                 .delay = 100,
                 .interval = 50,
                 .mountpoint = mp,
                 .scan_root = t->root};
  void *x = ds_instance(f, &o);
  tg_probes_sink_t sink = {buf_begin, buf_end, sb};
  /* An inode no file of the tree has. */
  const uint64_t bogus = UINT64_C(0x7ffffffffff0);
  publish_tree(f, t, bogus);

  /* Taken at 0; the scan waits scan_delay_ms. */
  assert_int_equal(tg__inode_file_round(x, &sink, 0), 100);
  assert_int_equal(tg__inode_file_round(x, &sink, 60), 100);
  assert_int_equal(sb->n, 0);
  assert_int_equal(tg__inode_file_stats(x)->scans, 0);
  /* Then one batch of 4 entries per round, scan_interval_ms apart. */
  seen_t seen = {0};
  uint64_t now = 100, next;
  size_t rounds = 0;
  do {
    next = tg__inode_file_round(x, &sink, now);
    size_t n = check_maps(sb, t, mp, &seen);
    assert_true(n <= 4);
    rounds++;
    if (next != now + 50) break;
    now = next;
  } while (rounds < 100);
  assert_false(seen.bad);
  const tg_inode_file_stats_t *st = tg__inode_file_stats(x);
  assert_int_equal(st->scans, 1);
  assert_int_equal(st->rounds, rounds);
  /* The whole tree had to be walked: the bogus inode is not in it. */
  assert_true(rounds >= (t->n + 1 + 3) / 4);
  assert_int_equal(seen.entries, t->n);
  for (size_t i = 0; i < t->n; i++) assert_true(t->e[i].found);
  assert_int_equal(st->resolved, t->n);
  assert_int_equal(st->not_found, 1);
  /* Idle: the feed is looked at again within TG_INODE_IDLE_POLL_MS. */
  assert_int_equal(next, now + TG_INODE_IDLE_POLL_MS);

  /* Named again soon: written already, nothing to do; the bogus one is
   * not scanned for again. */
  publish_tree(f, t, bogus);
  now += 1000;
  assert_int_equal(tg__inode_file_round(x, &sink, now),
                   now + TG_INODE_IDLE_POLL_MS);
  assert_int_equal(sb->n, 0);
  assert_int_equal(st->scans, 1);
  assert_int_equal(st->not_scanned, 1);
  /* Named again later: written again, from the cache, in one packet. */
  publish_tree(f, t, bogus);
  now += TG_INODE_REWRITE_MS;
  for (size_t i = 0; i < t->n; i++) t->e[i].found = false;
  assert_int_equal(tg__inode_file_take(x, &sink, now), t->n);
  seen_t again = {0};
  assert_int_equal(check_maps(sb, t, mp, &again), t->n);
  assert_false(again.bad);
  assert_int_equal(again.packets, 1);
  assert_int_equal(st->from_cache, t->n);
  assert_int_equal(st->scans, 1);

  tg_inode_file_probe.destroy(x);
  /* Gone: the session has no consumer any more. */
  int32_t skip;
  assert_false(tg_inode_feed_wanted(f, SESSION, &skip));
  tg_inode_feed_free(f);
  tree_remove(t);
  free(t);
  free(sb);
}

static void inode_file_do_not_scan_answers_from_the_cache_only(void **state) {
  (void)state;
  tree_t *t = malloc(sizeof(*t));
  sink_buf_t *sb = calloc(1, sizeof(*sb));
  assert_non_null(t);
  assert_non_null(sb);
  tree_make(t, tmp_base());
  tg_inode_feed_t *f;
  assert_int_equal(tg_inode_feed_new(NULL, NULL, &f), 0);
  ds_opts_t o = {.batch = 1000, .delay = 1, .interval = 1, .do_not_scan = true};
  void *x = ds_instance(f, &o);
  tg_probes_sink_t sink = {buf_begin, buf_end, sb};
  publish_tree(f, t, 12345);
  for (uint64_t now = 0; now < 50; now += 5)
    tg__inode_file_round(x, &sink, now);
  assert_int_equal(sb->n, 0);
  const tg_inode_file_stats_t *st = tg__inode_file_stats(x);
  assert_int_equal(st->scans, 0);
  assert_int_equal(st->not_scanned, t->n + 1);
  tg_inode_file_probe.destroy(x);

  /* Without a tracing_session_id nothing is registered. */
  o.no_session = true;
  x = ds_instance(f, &o);
  int32_t skip;
  assert_false(tg_inode_feed_wanted(f, SESSION, &skip));
  assert_int_equal(tg__inode_file_take(x, &sink, 0), 0);
  tg_inode_file_probe.destroy(x);
  tg_inode_feed_free(f);
  tree_remove(t);
  free(t);
  free(sb);
}

static void inode_file_config_reads_the_lists_and_defaults(void **state) {
  (void)state;
  Perfetto__Protos__DataSourceConfig dsc =
      PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
  uint8_t b[64];
  size_t len = perfetto__protos__data_source_config__pack(&dsc, b);
  tg_inode_file_cfg_t *c;
  assert_int_equal(tg_inode_file_cfg_parse(b, len, &c), 0);
  assert_int_equal(c->scan_interval_ms, TG_INODE_SCAN_INTERVAL_MS);
  assert_int_equal(c->scan_delay_ms, TG_INODE_SCAN_DELAY_MS);
  assert_int_equal(c->scan_batch_size, TG_INODE_SCAN_BATCH);
  assert_int_equal(c->n_mappings, 0);
  tg_inode_file_cfg_free(c);

  Perfetto__Protos__InodeFileConfig ic =
      PERFETTO__PROTOS__INODE_FILE_CONFIG__INIT;
  char *points[] = {"/", "/data"};
  char *roots[] = {"/data/app", "/data/misc"};
  Perfetto__Protos__InodeFileConfig__MountPointMappingEntry me =
      PERFETTO__PROTOS__INODE_FILE_CONFIG__MOUNT_POINT_MAPPING_ENTRY__INIT;
  Perfetto__Protos__InodeFileConfig__MountPointMappingEntry *mep = &me;
  me.mountpoint = "/data";
  me.n_scan_roots = 2;
  me.scan_roots = roots;
  ic.n_scan_mount_points = 2;
  ic.scan_mount_points = points;
  ic.n_mount_point_mapping = 1;
  ic.mount_point_mapping = &mep;
  ic.has_scan_batch_size = 1;
  ic.scan_batch_size = UINT64_C(1) << 40;
  dsc.inode_file_config = &ic;
  uint8_t big[512];
  len = perfetto__protos__data_source_config__get_packed_size(&dsc);
  assert_true(len <= sizeof(big));
  perfetto__protos__data_source_config__pack(&dsc, big);
  assert_int_equal(tg_inode_file_cfg_parse(big, len, &c), 0);
  assert_int_equal(c->scan_batch_size, TG_INODE_SCAN_BATCH_MAX);
  assert_int_equal(c->n_scan_mount_points, 2);
  assert_string_equal(c->scan_mount_points[1], "/data");
  assert_int_equal(c->n_mappings, 1);
  assert_string_equal(c->mappings[0].mountpoint, "/data");
  assert_int_equal(c->mappings[0].n_roots, 2);
  assert_string_equal(c->mappings[0].roots[1], "/data/misc");
  assert_false(c->truncated);
  tg_inode_file_cfg_free(c);
  /* Every field of InodeFileConfig is acted on: nothing to warn of. */
  char names[256];
  assert_int_equal(tg_probes_unacted_fields("linux.inode_file_map", big, len,
                                            names, sizeof(names)),
                   0);
  assert_string_equal(names, "");

  /* A path too long for the file system is refused; garbage too. */
  char *longp = malloc(PATH_MAX + 1);
  assert_non_null(longp);
  memset(longp, 'a', PATH_MAX);
  longp[PATH_MAX] = '\0';
  points[1] = longp;
  uint8_t *huge = malloc(PATH_MAX + 256);
  assert_non_null(huge);
  len = perfetto__protos__data_source_config__pack(&dsc, huge);
  assert_int_equal(tg_inode_file_cfg_parse(huge, len, &c), TG_EBAD_CONFIG);
  assert_null(c);
  free(huge);
  free(longp);
  const uint8_t junk[] = {0x0a, 0xff};
  assert_int_equal(tg_inode_file_cfg_parse(junk, sizeof(junk), &c),
                   TG_EBAD_CONFIG);
}

/* --- end to end ---------------------------------------------------------- */

static bool have_ftrace(char *why, size_t n) {
  char root[TG_TRACEFS_PATH_MAX];
  if (geteuid() != 0) {
    snprintf(why, n, "not root (euid %d): tracefs needs root", (int)geteuid());
    return false;
  }
  int rv = tg_tracefs_find(root);
  if (rv < 0) {
    snprintf(why, n, "tracefs is not available: %s", strerror(-rv));
    return false;
  }
  return true;
}

static void require_ftrace(void) {
  char why[160];
  if (have_ftrace(why, sizeof(why))) return;
  if (getenv("TG_REQUIRE_FTRACE"))
    fail_msg("TG_REQUIRE_FTRACE is set but %s", why);
  fprintf(stderr, "skipped: %s\n", why);
  skip();
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms) {
  struct timespec ts = {.tv_sec = ms / 1000,
                        .tv_nsec = (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static pid_t spawn_probes(const test_service_t *ts, const char *err_path) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) dup2(fd, STDERR_FILENO);
  execl(PROBES_PATH, PROBES_PATH, "--socket", ts->producer_sock, "--log-level",
        "info", (char *)NULL);
  _exit(127);
}

static void stop_probes(pid_t pid, const char *err_path) {
  kill(pid, SIGTERM);
  int pidfd = pidfd_open(pid, 0);
  struct pollfd p = {.fd = pidfd, .events = POLLIN};
  bool killed = pidfd < 0 || poll(&p, 1, WAIT_MS) != 1;
  if (killed) kill(pid, SIGKILL);
  if (pidfd >= 0) close(pidfd);
  int status = -1;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (killed || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    static char err[65536];
    err[0] = '\0';
    FILE *fp = fopen(err_path, "r");
    if (fp) {
      err[fread(err, 1, sizeof(err) - 1, fp)] = '\0';
      fclose(fp);
    }
    fail_msg("tracegate-probes exit status %#x; stderr:\n%s", status, err);
  }
}

/* Waits until the service lists tracegate-probes' six data sources. */
static void wait_data_sources(const test_service_t *ts) {
  raw_consumer_t c;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  uint64_t end = now_ms() + WAIT_MS;
  bool ok = false;
  while (!ok && now_ms() < end) {
    size_t p, d, s, r;
    ok = raw_consumer_query_all(&c, WAIT_MS, &p, &d, &s, &r) == 0 && d >= 6;
    if (!ok) sleep_ms(20);
  }
  raw_consumer_close(&c);
  assert_true(ok);
}

static void flush(raw_consumer_t *c) {
  Perfetto__Protos__FlushRequest fr = PERFETTO__PROTOS__FLUSH_REQUEST__INIT;
  fr.has_timeout_ms = true;
  fr.timeout_ms = 5000;
  int64_t rid = raw_invoke(&c->conn, "Flush", &fr.base, -1, false);
  assert_true(rid > 0);
  raw_frame_t fr_reply;
  assert_int_equal(raw_wait(&c->conn, (uint64_t)rid, WAIT_MS, &fr_reply), 1);
  tg_ipc_frame_free(fr_reply.frame);
}

typedef struct e2e_found {
  size_t maps, entries, ftrace_packets;
  bool entry, right_dev, right_path;
} e2e_found_t;

/* Reads what the session has and looks for |ino|'s entry. */
static void e2e_read(raw_consumer_t *c, uint64_t ino, uint64_t dev,
                     const char *name, e2e_found_t *f) {
  size_t n = 0;
  Perfetto__Protos__TracePacket **pk = raw_consumer_read(c, &n);
  assert_non_null(pk);
  size_t name_len = strlen(name);
  for (size_t i = 0; i < n; i++) {
    if (pk[i]->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
      f->ftrace_packets++;
    const Perfetto__Protos__InodeFileMap *m = pk[i]->inode_file_map;
    if (pk[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_INODE_FILE_MAP)
      continue;
    f->maps++;
    for (size_t j = 0; j < m->n_entries; j++) {
      const Perfetto__Protos__InodeFileMap__Entry *e = m->entries[j];
      f->entries++;
      if (e->inode_number != ino) continue;
      f->entry = true;
      f->right_dev = m->block_device_id == dev;
      for (size_t k = 0; k < e->n_paths; k++) {
        size_t l = strlen(e->paths[k]);
        if (l > name_len && e->paths[k][l - name_len - 1] == '/' &&
            strcmp(e->paths[k] + l - name_len, name) == 0 &&
            e->type == PERFETTO__PROTOS__INODE_FILE_MAP__ENTRY__TYPE__FILE)
          f->right_path = true;
      }
    }
  }
  free_packets(pk, n);
}

/* linux.ftrace (ext4_sync_file_enter, or filemap's page cache adds when
 * the directory is on another file system) and linux.inode_file_map in one
 * session: a file this test writes and fsyncs gets its InodeFileMap entry
 * with its st_dev, its inode and its name. */
static void inode_file_map_resolves_a_file_named_by_ftrace(void **state) {
  require_ftrace();
  test_service_t *ts = *state;
  /* Under / as the kernel events see it; scanned alone (mapping). */
  char dir[] = "/tg-inode-e2e-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[sizeof(dir) + 32];
  snprintf(path, sizeof(path), "%s/synced-file", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  struct stat st;
  assert_int_equal(fstat(fd, &st), 0);
  struct statfs sfs;
  assert_int_equal(fstatfs(fd, &sfs), 0);
  bool ext4 = sfs.f_type == 0xEF53; /* EXT4_SUPER_MAGIC */
  char mp[PATH_MAX];
  mount_point_of(st.st_dev, mp, sizeof(mp));

  char err_path[160];
  snprintf(err_path, sizeof(err_path), "%s/probes.err", ts->dir);
  pid_t probes = spawn_probes(ts, err_path);
  assert_true(probes > 0);
  wait_data_sources(ts);

  simple_cfg_t sc;
  simple_cfg_init(
      &sc, 8 * 1024,
      PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD,
      "linux.ftrace");
  Perfetto__Protos__FtraceConfig fc;
  perfetto__protos__ftrace_config__init(&fc);
  char *events[] = {ext4 ? "ext4/ext4_sync_file_enter"
                         : "filemap/mm_filemap_add_to_page_cache"};
  fc.n_ftrace_events = 1;
  fc.ftrace_events = events;
  fc.has_buffer_size_kb = true;
  fc.buffer_size_kb = 1024;
  fc.has_drain_period_ms = true;
  fc.drain_period_ms = 50;
  sc.dsc.ftrace_config = &fc;
  Perfetto__Protos__TraceConfig__DataSource ds2, *dsp[2];
  Perfetto__Protos__DataSourceConfig dsc2;
  Perfetto__Protos__InodeFileConfig ic;
  Perfetto__Protos__InodeFileConfig__MountPointMappingEntry me, *mep = &me;
  perfetto__protos__trace_config__data_source__init(&ds2);
  perfetto__protos__data_source_config__init(&dsc2);
  perfetto__protos__inode_file_config__init(&ic);
  perfetto__protos__inode_file_config__mount_point_mapping_entry__init(&me);
  char *roots[] = {dir};
  me.mountpoint = mp;
  me.n_scan_roots = 1;
  me.scan_roots = roots;
  ic.n_mount_point_mapping = 1;
  ic.mount_point_mapping = &mep;
  ic.has_scan_delay_ms = ic.has_scan_interval_ms = 1;
  ic.scan_delay_ms = 10;
  ic.scan_interval_ms = 10;
  dsc2.name = "linux.inode_file_map";
  dsc2.inode_file_config = &ic;
  ds2.config = &dsc2;
  dsp[0] = &sc.ds;
  dsp[1] = &ds2;
  sc.cfg.n_data_sources = 2;
  sc.cfg.data_sources = dsp;
  raw_consumer_t c;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);

  /* Written and synced until the entry shows up: the first fsyncs may
   * come before both data sources run. */
  e2e_found_t f = {0};
  uint64_t end = now_ms() + WAIT_MS;
  while (!f.entry && now_ms() < end) {
    assert_int_equal(pwrite(fd, "data\n", 5, 0), 5);
    assert_int_equal(fsync(fd), 0);
    sleep_ms(100);
    flush(&c);
    e2e_read(&c, st.st_ino, st.st_dev, "synced-file", &f);
  }
  assert_int_equal(raw_consumer_disable(&c, WAIT_MS), 0);
  e2e_read(&c, st.st_ino, st.st_dev, "synced-file", &f);
  raw_consumer_close(&c);
  print_message(
      "%s: %zu ftrace packets, %zu InodeFileMap packets with %zu "
      "entries\n",
      events[0], f.ftrace_packets, f.maps, f.entries);
  close(fd);
  unlink(path);
  rmdir(dir);
  stop_probes(probes, err_path);
  assert_true(f.entry);
  assert_true(f.right_dev);
  assert_true(f.right_path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(mountinfo_parses_escapes_and_skips_malformed_lines),
      cmocka_unit_test(mountinfo_reads_this_machines_root),
      cmocka_unit_test(format_marks_inode_and_dev_fields),
      cmocka_unit_test(encoder_collects_inode_device_pairs),
      cmocka_unit_test(block_dev_is_written_as_st_dev_by_plans_and_fields),
      cmocka_unit_test(feed_hands_pairs_to_the_sessions_consumer_once),
      cmocka_unit_test(feed_counts_pairs_past_the_cap),
      cmocka_unit_test(scan_walks_the_tree_in_steps_without_following_links),
      cmocka_unit_test(inode_file_resolves_in_batches_across_rounds),
      cmocka_unit_test(inode_file_do_not_scan_answers_from_the_cache_only),
      cmocka_unit_test(inode_file_config_reads_the_lists_and_defaults),
      cmocka_unit_test_setup_teardown(
          inode_file_map_resolves_a_file_named_by_ftrace, test_service_setup,
          test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
