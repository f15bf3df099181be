/* linux.inode_file_map: the mountinfo parser; the feed that hands the
 * (inode, device) pairs over per session; the bounded directory walk on a
 * temporary tree; the data source's rounds (batches across rounds on a
 * clock of the test's own, the cache, do_not_scan, what a full scan
 * missed) and its config. The pairs linux.ftrace's encoder collects are
 * test_ftrace_inode_fields'; end to end, with a real tracegated and
 * tracegate-probes, test_inode_file_map_e2e.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/probes/inode_feed.h"
#include "agent/probes/inode_file.h"
#include "agent/probes/inode_scan.h"
#include "agent/probes/mountinfo.h"
#include "agent/probes/probes.h"
#include "agent/probes/probes_config.h"
#include "abi/config_fields.h"
#include "pb/config/data_source_config.pb-c.h"
#include "pb/trace/trace_packet.pb-c.h"
#include "probes_fixtures.h"
#include "tracegate/error.h"

#define SESSION 77

/* --- mountinfo ----------------------------------------------------------- */

static const tg_mount_t *mount_at(const tg_mountinfo_t *mi, const char *p) {
  for (size_t i = 0; i < mi->n; i++)
    if (strcmp(mi->v[i].point, p) == 0) return &mi->v[i];
  return NULL;
}

/* Which mounts a scan walks: a device mounted whole twice once, a bind
 * mount of a part of it not at all unless a mount hides that part from
 * the whole one, and a root that only shares a name prefix is no part. */
static void mounts_covered_by_another_are_not_walked_twice(void **state) {
  (void)state;
  static const char text[] =
      "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"
      "2 1 8:1 / /mnt/host rw - ext4 /dev/sda1 rw\n"
      "3 1 8:1 /srv /x rw - ext4 /dev/sda1 rw\n"
      "4 1 8:2 / /home rw - ext4 /dev/sda2 rw\n"
      "5 1 8:1 /home/u /y rw - ext4 /dev/sda1 rw\n"
      "6 1 8:1 /srvx /z rw - ext4 /dev/sda1 rw\n";
  tg_mountinfo_t mi = {0};
  assert_int_equal(tg_mountinfo_parse(&mi, text, sizeof(text) - 1), 6);
  tg_mountinfo_sort(&mi);
  const tg_mount_t *root = mount_at(&mi, "/");
  const tg_mount_t *host = mount_at(&mi, "/mnt/host");
  const tg_mount_t *x = mount_at(&mi, "/x"), *home = mount_at(&mi, "/home");
  const tg_mount_t *y = mount_at(&mi, "/y"), *z = mount_at(&mi, "/z");
  assert_non_null(root);
  assert_non_null(host);
  assert_non_null(x);
  assert_non_null(home);
  assert_non_null(y);
  assert_non_null(z);
  /* The whole device twice: each covers the other. */
  assert_true(tg__inode_mount_covers(&mi, root, host));
  assert_true(tg__inode_mount_covers(&mi, host, root));
  /* /srv at /x is /srv in the whole view; not the other way. */
  assert_true(tg__inode_mount_covers(&mi, root, x));
  assert_false(tg__inode_mount_covers(&mi, x, root));
  /* /home/u lies under /home, where sda2 hides it from the walk of /. */
  assert_false(tg__inode_mount_covers(&mi, root, y));
  /* /srvx is not inside /srv; another device is never covered. */
  assert_false(tg__inode_mount_covers(&mi, x, z));
  assert_true(tg__inode_mount_covers(&mi, root, z));
  assert_false(tg__inode_mount_covers(&mi, root, home));
  tg_mountinfo_free(&mi);
}

/* A table longer than the file cap still gives its first mounts, and
 * says that some were skipped. */
static void mountinfo_past_the_file_cap_keeps_its_first_mounts(void **state) {
  (void)state;
  char path[] = "/tmp/tg-mountinfo-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "w");
  assert_non_null(f);
  size_t bytes = 0;
  for (unsigned i = 0; bytes <= TG_MOUNTINFO_FILE_MAX; i++) {
    int w = fprintf(f, "%u 1 0:%u / /m/%u rw - tmpfs t rw\n", i + 2, i % 256,
                    i);
    assert_true(w > 0);
    bytes += (size_t)w;
  }
  assert_int_equal(fclose(f), 0);
  tg_mountinfo_t mi = {0};
  assert_int_equal(tg_mountinfo_read(&mi, path), TG_MOUNTINFO_MAX);
  assert_true(mi.skipped > 0);
  assert_int_equal(mi.bad_lines, 0); /* no cut line parsed */
  tg_mountinfo_free(&mi);
  unlink(path);
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

/* Every directory a test makes under $TMPDIR is named here and removed,
 * with all it holds, by remove_made(): the teardown, which cmocka runs
 * after the test whether its assertions held or not. */
#define MAX_MADE 4
static char g_made[MAX_MADE][PATH_MAX];
static size_t g_n_made;

static void made(const char *path) {
  assert_true(g_n_made < MAX_MADE);
  assert_true(strlen(path) < PATH_MAX);
  strcpy(g_made[g_n_made++], path);
}

static int remove_entry(const char *path, const struct stat *st, int flag,
                        struct FTW *at) {
  (void)st, (void)flag, (void)at;
  remove(path); /* best effort: what stays is left, not fatal */
  return 0;
}

static int remove_made(void **state) {
  (void)state;
  for (size_t i = 0; i < g_n_made; i++)
    nftw(g_made[i], remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  g_n_made = 0;
  return 0;
}

static const char *tmp_base(void) {
  const char *d = getenv("TMPDIR");
  return d && *d ? d : "/tmp";
}

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
  made(t->root);
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
  made(outside);
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

/* A tree (tree_make) under $TMPDIR; the test's teardown (remove_made)
 * removes it, tree_free frees it. */
static tree_t *tree_new(void) {
  tree_t *t = malloc(sizeof(*t));
  assert_non_null(t);
  tree_make(t, tmp_base());
  return t;
}

static void tree_free(tree_t *t) { free(t); }

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
  tree_t *t = tree_new();
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

  /* Roots it refuses: relative, empty, and one of PATH_MAX bytes or more
   * even when trimming its trailing slashes would bring it under. */
  assert_int_equal(tg_inode_scan_add_root(s, "tmp", t->dev), -EINVAL);
  assert_int_equal(tg_inode_scan_add_root(s, "", t->dev), -EINVAL);
  static char long_root[PATH_MAX + 101];
  memset(long_root, 'a', sizeof(long_root) - 1);
  long_root[0] = '/';
  long_root[PATH_MAX - 1] = '/';
  memset(long_root + PATH_MAX, '/', 100);
  assert_int_equal(tg_inode_scan_add_root(s, long_root, t->dev),
                   -ENAMETOOLONG);

  /* Abandoned halfway: everything it held is closed (ASan, fds). */
  assert_int_equal(tg_inode_scan_add_root(s, t->root, t->dev), 0);
  tg_inode_scan_step(s, 2, &done);
  assert_false(done);
  tg_inode_scan_free(s);
  tree_free(t);
}

/* Directory fds this process holds below |root| (as the kernel names it:
 * a $TMPDIR behind a symlink resolves). */
static int fds_below(const char *path) {
  char root[PATH_MAX];
  assert_non_null(realpath(path, root));
  int n = 0;
  size_t rl = strlen(root);
  for (int fd = 0; fd < 1024; fd++) {
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t k = readlink(link, target, sizeof(target) - 1);
    if (k < 0) continue;
    target[k] = '\0';
    if ((size_t)k >= rl && memcmp(target, root, rl) == 0) n++;
  }
  return n;
}

/* Between two steps the walk holds nothing open below its roots, so a file
 * system it scans could be unmounted; the walk still ends with every entry
 * seen once. */
static void scan_holds_no_directory_open_between_steps(void **state) {
  (void)state;
  tree_t *t = tree_new();
  walk_t w = {.t = t};
  tg_inode_scan_cbs_t cbs = {on_found, NULL, &w};
  tg_inode_scan_t *s;
  assert_int_equal(tg_inode_scan_new(&cbs, &s), 0);
  assert_int_equal(tg_inode_scan_add_root(s, t->root, t->dev), 0);
  bool done = false;
  size_t steps = 0;
  while (!done && steps < 1000) {
    tg_inode_scan_step(s, 1, &done);
    steps++;
    assert_int_equal(fds_below(t->root), 0);
  }
  assert_true(done);
  assert_int_equal(w.entries, t->n + 1);
  for (size_t i = 0; i < t->n; i++) assert_true(t->e[i].found);
  assert_int_equal(tg_inode_scan_stats(s)->changed, 0);
  tg_inode_scan_free(s);
  tree_free(t);
}

#define BIG_DIR_FILES 300

typedef struct count_walk {
  uint64_t ino[BIG_DIR_FILES];
  unsigned seen[BIG_DIR_FILES];
  size_t others;
  int last; /* the file seen last */
} count_walk_t;

static bool on_count(void *ctx, uint64_t dev, uint64_t ino, const char *path,
                     size_t len, tg_inode_type_t type) {
  (void)dev, (void)path, (void)len, (void)type;
  count_walk_t *c = ctx;
  for (size_t i = 0; i < BIG_DIR_FILES; i++)
    if (c->ino[i] == ino) {
      c->seen[i]++;
      c->last = (int)i;
      return true;
    }
  c->others++;
  return true;
}

/* Long names: a 4 KiB read of the directory holds a few dozen of them. */
static void big_name(char path[PATH_MAX], const char *root, int i) {
  snprintf(path, PATH_MAX,
           "%s/file-%03d-with-a-long-name-so-that-one-read-of-the-directory"
           "-holds-only-a-few-dozen-entries",
           root, i);
}

/* A directory of BIG_DIR_FILES long names, $TMPDIR/tg-inode-TAG-XXXXXX
 * (its path into |root|: 512 bytes), queued in a new scan whose found()
 * counts them into |c|. */
static tg_inode_scan_t *big_dir_scan(char *root, const char *tag,
                                     count_walk_t *c) {
  snprintf(root, 512, "%s/tg-inode-%s-XXXXXX", tmp_base(), tag);
  assert_non_null(mkdtemp(root));
  made(root);
  struct stat st;
  assert_int_equal(stat(root, &st), 0);
  memset(c, 0, sizeof(*c));
  char path[PATH_MAX];
  for (int i = 0; i < BIG_DIR_FILES; i++) {
    big_name(path, root, i);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    struct stat fst;
    assert_int_equal(fstat(fd, &fst), 0);
    c->ino[i] = fst.st_ino;
    close(fd);
  }
  tg_inode_scan_cbs_t cbs = {on_count, NULL, c};
  tg_inode_scan_t *s;
  assert_int_equal(tg_inode_scan_new(&cbs, &s), 0);
  assert_int_equal(tg_inode_scan_add_root(s, root, st.st_dev), 0);
  return s;
}

/* A directory that takes many getdents64 reads, walked a few entries a
 * step: each step reopens it and seeks past what was taken, so every
 * entry comes exactly once, wherever a step ends in a read. */
static void scan_resumes_a_large_directory_entry_by_entry(void **state) {
  (void)state;
  char root[512];
  static count_walk_t c;
  tg_inode_scan_t *s = big_dir_scan(root, "big", &c);
  bool done = false;
  size_t steps = 0;
  while (!done && steps < 10 * BIG_DIR_FILES) {
    assert_true(tg_inode_scan_step(s, 7, &done) <= 7);
    steps++;
  }
  assert_true(done);
  for (int i = 0; i < BIG_DIR_FILES; i++) assert_int_equal(c.seen[i], 1);
  assert_int_equal(c.others, 0);
  assert_int_equal(tg_inode_scan_stats(s)->changed, 0);
  tg_inode_scan_free(s);
}

/* Entries already taken are removed while the walk is parked in their
 * directory, the last one taken among them: every entry still there is
 * found all the same (the directory is read again from its start, since
 * where it was left cannot be checked), and the walk ends. */
static void scan_finds_every_entry_after_removals_while_parked(void **state) {
  (void)state;
  char root[512], path[PATH_MAX];
  static count_walk_t c;
  tg_inode_scan_t *s = big_dir_scan(root, "rm", &c);
  bool done = false;
  size_t steps = 0, seen = 0;
  while (!done && seen < BIG_DIR_FILES / 2) {
    seen += tg_inode_scan_step(s, 7, &done);
    steps++;
  }
  assert_false(done);
  /* The entry taken last goes, where the walk will look for it, and up
   * to 40 others taken before it. */
  bool removed[BIG_DIR_FILES] = {false};
  big_name(path, root, c.last);
  assert_int_equal(unlink(path), 0);
  removed[c.last] = true;
  unsigned n_removed = 1;
  for (int i = 0; i < BIG_DIR_FILES && n_removed < 40; i++) {
    if (!c.seen[i] || removed[i]) continue;
    big_name(path, root, i);
    assert_int_equal(unlink(path), 0);
    removed[i] = true;
    n_removed++;
  }
  assert_true(n_removed > 0);
  while (!done && steps < 10 * BIG_DIR_FILES) {
    tg_inode_scan_step(s, 7, &done);
    steps++;
  }
  assert_true(done);
  for (int i = 0; i < BIG_DIR_FILES; i++) {
    if (removed[i]) assert_int_equal(c.seen[i], 1); /* before it went */
    else assert_true(c.seen[i] >= 1);
  }
  assert_int_equal(c.others, 0);
  /* Its last entry was not found again: read again from its start. */
  assert_int_equal(tg_inode_scan_stats(s)->changed, 1);
  tg_inode_scan_free(s);
}

typedef struct moved_walk {
  char below[PATH_MAX]; /* "ROOT/a/b/": entries here after the move are wrong */
  bool moved;
  size_t in_b, after_move;
} moved_walk_t;

static bool on_moved(void *ctx, uint64_t dev, uint64_t ino, const char *path,
                     size_t len, tg_inode_type_t type) {
  (void)dev, (void)ino, (void)len, (void)type;
  moved_walk_t *m = ctx;
  if (strncmp(path, m->below, strlen(m->below)) == 0) {
    m->in_b++;
    if (m->moved) m->after_move++;
  }
  return true;
}

/* A directory renamed while the walk is parked in it is not read on under
 * its old path: it is left (counted) and the walk goes on in its parent. */
static void scan_leaves_a_directory_moved_between_steps(void **state) {
  (void)state;
  tree_t *t = tree_new();
  static moved_walk_t m;
  memset(&m, 0, sizeof(m));
  snprintf(m.below, sizeof(m.below), "%s/a/b/", t->root);
  tg_inode_scan_cbs_t cbs = {on_moved, NULL, &m};
  tg_inode_scan_t *s;
  assert_int_equal(tg_inode_scan_new(&cbs, &s), 0);
  assert_int_equal(tg_inode_scan_add_root(s, t->root, t->dev), 0);
  bool done = false;
  size_t steps = 0;
  char from[PATH_MAX + 8], to[PATH_MAX + 8];
  snprintf(from, sizeof(from), "%s/a/b", t->root);
  snprintf(to, sizeof(to), "%s/a/moved", t->root);
  while (!done && steps < 1000) {
    tg_inode_scan_step(s, 1, &done);
    steps++;
    if (!m.moved && m.in_b == 1) {
      assert_int_equal(rename(from, to), 0);
      m.moved = true;
    }
  }
  assert_true(done);
  assert_true(m.moved);
  assert_int_equal(m.after_move, 0);
  /* The moved directory; its parent too where the rename shifted the
   * parent's entries (tmpfs gives the new name a new offset), which is then
   * read again and walks the directory under its new name. */
  assert_true(tg_inode_scan_stats(s)->changed >= 1);
  tg_inode_scan_free(s);
  tree_free(t);
}

/* --- the data source's rounds -------------------------------------------- */

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
  _Alignas(max_align_t) unsigned char cfg[TG_PROBE_CFG_MAX];
  probe_parse_cfg(&tg_inode_file_probe, &dsc, cfg);
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
  sink_buf_clear(s);
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
  tree_t *t = tree_new();
  sink_buf_t *sb = calloc(1, sizeof(*sb));
  assert_non_null(sb);
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
  tg_probes_sink_t sink = sink_buf_sink(sb);
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
  tree_free(t);
  free(sb);
}

static void inode_file_do_not_scan_answers_from_the_cache_only(void **state) {
  (void)state;
  tree_t *t = tree_new();
  sink_buf_t *sb = calloc(1, sizeof(*sb));
  assert_non_null(sb);
  tg_inode_feed_t *f;
  assert_int_equal(tg_inode_feed_new(NULL, NULL, &f), 0);
  ds_opts_t o = {.batch = 1000, .delay = 1, .interval = 1, .do_not_scan = true};
  void *x = ds_instance(f, &o);
  tg_probes_sink_t sink = sink_buf_sink(sb);
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
  tree_free(t);
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

/* A test that makes directories: removed after it, passed or failed. */
#define MAKES_DIRS(f) cmocka_unit_test_teardown(f, remove_made)

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(mountinfo_parses_escapes_and_skips_malformed_lines),
      cmocka_unit_test(mountinfo_reads_this_machines_root),
      cmocka_unit_test(mountinfo_past_the_file_cap_keeps_its_first_mounts),
      cmocka_unit_test(mounts_covered_by_another_are_not_walked_twice),
      cmocka_unit_test(feed_hands_pairs_to_the_sessions_consumer_once),
      cmocka_unit_test(feed_counts_pairs_past_the_cap),
      MAKES_DIRS(scan_walks_the_tree_in_steps_without_following_links),
      MAKES_DIRS(scan_holds_no_directory_open_between_steps),
      MAKES_DIRS(scan_resumes_a_large_directory_entry_by_entry),
      MAKES_DIRS(scan_leaves_a_directory_moved_between_steps),
      MAKES_DIRS(scan_finds_every_entry_after_removals_while_parked),
      MAKES_DIRS(inode_file_resolves_in_batches_across_rounds),
      MAKES_DIRS(inode_file_do_not_scan_answers_from_the_cache_only),
      cmocka_unit_test(inode_file_config_reads_the_lists_and_defaults),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
