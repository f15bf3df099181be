/* Opening the file behind a mapping (agent/perf/perf_open.h) in a root
 * made here as a container's would be: its own regular file opens; a
 * FIFO at the path is refused without blocking (an alarm fails the test
 * rather than let it hang); another inode at the same path, a directory,
 * inode 0 are refused; symlinks that point at a file outside the root
 * (absolute, or climbing with "..") resolve inside it and never reach
 * that file, by openat2 and by the walk used without it, which refuses
 * every symlink and "..". On an overlayfs (mounted here when allowed),
 * the file opens when named by the device and inode the kernel's own
 * maps line for it shows (the backing file's on some kernels, not what
 * fstat gives). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/perf/perf_maps.h"
#include "agent/perf/perf_open.h"

typedef struct fixture {
  char host[64]; /* outside the root: a file a container must not reach */
  char root[64];
  char secret[128];
  struct stat secret_st;
  int root_fd;
} fixture_t;

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void at(const fixture_t *fx, const char *rel, char *out, size_t n) {
  snprintf(out, n, "%s%s", fx->root, rel);
}

static int setup(void **state) {
  fixture_t *fx = calloc(1, sizeof(*fx));
  assert_non_null(fx);
  snprintf(fx->host, sizeof(fx->host), "/tmp/tg_perf_open_host_XXXXXX");
  snprintf(fx->root, sizeof(fx->root), "/tmp/tg_perf_open_root_XXXXXX");
  assert_non_null(mkdtemp(fx->host));
  assert_non_null(mkdtemp(fx->root));
  snprintf(fx->secret, sizeof(fx->secret), "%s/secret", fx->host);
  write_file(fx->secret, "host only\n");
  assert_int_equal(stat(fx->secret, &fx->secret_st), 0);
  char p[256];
  at(fx, "/lib", p, sizeof(p));
  assert_int_equal(mkdir(p, 0755), 0);
  at(fx, "/lib/own.so", p, sizeof(p));
  write_file(p, "the container's own file\n");
  /* Links out of the root, to the host file by its host path. */
  at(fx, "/lib/abs.so", p, sizeof(p));
  assert_int_equal(symlink(fx->secret, p), 0);
  char up[256];
  snprintf(up, sizeof(up), "../../../../../../../..%s", fx->secret);
  at(fx, "/lib/up.so", p, sizeof(p));
  assert_int_equal(symlink(up, p), 0);
  /* A link that stays inside. */
  at(fx, "/lib/in.so", p, sizeof(p));
  assert_int_equal(symlink("/lib/own.so", p), 0);
  at(fx, "/lib/fifo.so", p, sizeof(p));
  assert_int_equal(mkfifo(p, 0644), 0);
  char fmt[80];
  snprintf(fmt, sizeof(fmt), "%s", fx->root);
  fx->root_fd = tg_perf_open_root(fmt, 1);
  assert_true(fx->root_fd >= 0);
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fixture_t *fx = *state;
  close(fx->root_fd);
  char cmd[200];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", fx->root, fx->host);
  assert_int_equal(system(cmd), 0);
  free(fx);
  return 0;
}

static int open_as_mapped(const fixture_t *fx, const char *path,
                          const struct stat *as, tg_perf_open_why_t *why) {
  struct stat st;
  return tg_perf_open_mapped(fx->root_fd, path, major(as->st_dev),
                             minor(as->st_dev), as->st_ino, &st, why);
}

static void own_regular_file_opens(void **state) {
  fixture_t *fx = *state;
  char p[256];
  at(fx, "/lib/own.so", p, sizeof(p));
  struct stat want, st;
  assert_int_equal(stat(p, &want), 0);
  tg_perf_open_why_t why;
  int fd = tg_perf_open_mapped(fx->root_fd, "/lib/own.so",
                               major(want.st_dev), minor(want.st_dev),
                               want.st_ino, &st, &why);
  assert_true(fd >= 0);
  assert_int_equal(why, TG_PERF_OPEN_OK);
  assert_true(st.st_ino == want.st_ino && st.st_dev == want.st_dev);
  int fl = fcntl(fd, F_GETFL);
  assert_true((fl & O_ACCMODE) == O_RDONLY && (fl & O_NONBLOCK));
  assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
  char buf[8];
  assert_int_equal(read(fd, buf, 3), 3);
  assert_memory_equal(buf, "the", 3);
  close(fd);
  /* A symlink inside the root, to the same file, is followed. */
  fd = open_as_mapped(fx, "/lib/in.so", &want, &why);
  assert_true(fd >= 0);
  close(fd);
}

static void fifo_is_refused_without_blocking(void **state) {
  fixture_t *fx = *state;
  char p[256];
  at(fx, "/lib/fifo.so", p, sizeof(p));
  struct stat want;
  assert_int_equal(stat(p, &want), 0);
  tg_perf_open_why_t why;
  /* Even with the FIFO's own device and inode, as a maps line could
   * claim: no writer ever comes, and the open must not wait for one. */
  assert_true(open_as_mapped(fx, "/lib/fifo.so", &want, &why) < 0);
  assert_int_equal(why, TG_PERF_OPEN_NOT_REGULAR);
  at(fx, "/lib", p, sizeof(p));
  assert_int_equal(stat(p, &want), 0);
  assert_true(open_as_mapped(fx, "/lib", &want, &why) < 0);
  assert_int_equal(why, TG_PERF_OPEN_NOT_REGULAR);
}

static void another_inode_at_the_path_is_refused(void **state) {
  fixture_t *fx = *state;
  char p[256], kept[256];
  at(fx, "/lib/swap.so", p, sizeof(p));
  write_file(p, "mapped\n");
  struct stat mapped;
  assert_int_equal(stat(p, &mapped), 0);
  /* The mapped file moves away (its inode stays taken), another takes
   * its path. */
  at(fx, "/kept.so", kept, sizeof(kept));
  assert_int_equal(rename(p, kept), 0);
  write_file(p, "swapped\n");
  tg_perf_open_why_t why;
  assert_int_equal(open_as_mapped(fx, "/lib/swap.so", &mapped, &why),
                   -ESTALE);
  assert_int_equal(why, TG_PERF_OPEN_OTHER_FILE);
  /* Inode 0 (what maps shows where it has none) cannot be checked. */
  struct stat now, st;
  assert_int_equal(stat(p, &now), 0);
  assert_true(tg_perf_open_mapped(fx->root_fd, "/lib/swap.so",
                                  major(now.st_dev), minor(now.st_dev), 0,
                                  &st, &why) < 0);
  assert_int_equal(why, TG_PERF_OPEN_OTHER_FILE);
  /* The right device but the wrong inode, and the reverse. */
  assert_true(tg_perf_open_mapped(fx->root_fd, "/lib/swap.so",
                                  major(now.st_dev), minor(now.st_dev),
                                  now.st_ino + 1, &st, &why) < 0);
  assert_true(tg_perf_open_mapped(fx->root_fd, "/lib/swap.so",
                                  major(now.st_dev) + 1, minor(now.st_dev),
                                  now.st_ino, &st, &why) < 0);
  assert_int_equal(why, TG_PERF_OPEN_OTHER_FILE);
}

static void links_out_of_the_root_never_reach_the_host(void **state) {
  fixture_t *fx = *state;
  tg_perf_open_why_t why;
  /* The maps line claims the host file's device and inode: were the
   * link followed to the host, the check would pass. */
  assert_true(open_as_mapped(fx, "/lib/abs.so", &fx->secret_st, &why) < 0);
  assert_int_equal(why, TG_PERF_OPEN_MISSING);
  assert_true(open_as_mapped(fx, "/lib/up.so", &fx->secret_st, &why) < 0);
  assert_int_equal(why, TG_PERF_OPEN_MISSING);
  /* The host's path itself, and climbing to it, name the root's. */
  assert_true(open_as_mapped(fx, fx->secret, &fx->secret_st, &why) < 0);
  char up[256];
  snprintf(up, sizeof(up), "/../../../..%s", fx->secret);
  assert_true(open_as_mapped(fx, up, &fx->secret_st, &why) < 0);

  /* The resolutions themselves: openat2 stays in the root (the target
   * does not exist there)... */
  assert_int_equal(tg__perf_open_resolve(fx->root_fd, "/lib/abs.so", false),
                   -ENOENT);
  assert_int_equal(tg__perf_open_resolve(fx->root_fd, "/lib/up.so", false),
                   -ENOENT);
  int fd = tg__perf_open_resolve(fx->root_fd, "/lib/in.so", false);
  assert_true(fd >= 0);
  close(fd);
  /* ...and the walk refuses every link and "..". */
  assert_int_equal(tg__perf_open_resolve(fx->root_fd, "/lib/abs.so", true),
                   -ELOOP);
  assert_int_equal(tg__perf_open_resolve(fx->root_fd, "/lib/up.so", true),
                   -ELOOP);
  assert_int_equal(tg__perf_open_resolve(fx->root_fd, "/lib/in.so", true),
                   -ELOOP);
  assert_int_equal(tg__perf_open_resolve(fx->root_fd, up, true), -EXDEV);
  fd = tg__perf_open_resolve(fx->root_fd, "//lib/./own.so", true);
  assert_true(fd >= 0);
  struct stat st, want;
  char p[256];
  at(fx, "/lib/own.so", p, sizeof(p));
  assert_int_equal(stat(p, &want), 0);
  assert_int_equal(fstat(fd, &st), 0);
  assert_true(st.st_ino == want.st_ino);
  close(fd);
  assert_string_equal(tg_perf_open_why_name(TG_PERF_OPEN_ESCAPE), "escape");
}

static void overlay_file_opens_by_its_backing_inode(void **state) {
  (void)state;
  char dir[] = "/tmp/tg_perf_open_ovl_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char l[64], u[64], w[64], m[64], opts[256], lib[96], cmd[128];
  /* The kernel's own line for a file of an overlay. */
  snprintf(l, sizeof(l), "%s/l", dir);
  snprintf(u, sizeof(u), "%s/u", dir);
  snprintf(w, sizeof(w), "%s/w", dir);
  snprintf(m, sizeof(m), "%s/m", dir);
  assert_int_equal(mkdir(l, 0755) | mkdir(u, 0755) | mkdir(w, 0755) |
                       mkdir(m, 0755), 0);
  snprintf(lib, sizeof(lib), "%s/lib.so", l);
  write_file(lib, "lower\n");
  snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s", l, u, w);
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  if (mount("overlay", m, "overlay", 0, opts) != 0) {
    assert_int_equal(system(cmd), 0);
    skip(); /* not allowed here (no root, or no overlayfs) */
  }
  /* This process maps the overlay's file: its own maps line is what a
   * container process's line shows. */
  char path[128];
  snprintf(path, sizeof(path), "%s/lib.so", m);
  int mfd = open(path, O_RDONLY);
  assert_true(mfd >= 0);
  void *at = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, mfd, 0);
  assert_true(at != MAP_FAILED);
  close(mfd);
  tg_perf_maps_t self = {0};
  assert_true(tg_perf_maps_read(0, "/proc/self/maps", false, &self) > 0);
  const tg_perf_map_t *line = tg_perf_maps_find(&self, (uintptr_t)at);
  assert_non_null(line);
  struct stat st;
  int root = tg_perf_open_root(m, 0);
  assert_true(root >= 0);
  tg_perf_open_why_t why;
  int fd = tg_perf_open_mapped(root, "/lib.so", line->dev_major,
                               line->dev_minor, line->inode, &st, &why);
  assert_true(fd >= 0);
  assert_int_equal(why, TG_PERF_OPEN_OK);
  close(fd);
  /* Another inode of that device is still refused. */
  assert_true(tg_perf_open_mapped(root, "/lib.so", line->dev_major,
                                  line->dev_minor, line->inode + 1, &st,
                                  &why) < 0);
  assert_int_equal(why, TG_PERF_OPEN_OTHER_FILE);
  tg_perf_maps_free(&self);
  munmap(at, 4096);
  close(root);
  assert_int_equal(umount(m), 0);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  /* A blocked open fails the test instead of hanging it. */
  alarm(60);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(own_regular_file_opens, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(fifo_is_refused_without_blocking, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(another_inode_at_the_path_is_refused,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          links_out_of_the_root_never_reach_the_host, setup, teardown),
      cmocka_unit_test(overlay_file_opens_by_its_backing_inode),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
