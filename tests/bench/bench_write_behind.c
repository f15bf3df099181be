/* A trace file's writes: plain, with write-behind (common/write_behind.h)
 * and direct (common/direct_write.h).
 *
 * The same bytes, in the CLI's 256 KiB writes, into a new file in DIR,
 * ended by the fsync() every trace file gets; rounds alternate the
 * ways so that all see the same state of the page cache:
 *   plain          write() alone: the baseline;
 *   write-behind   write() then tg_write_behind_wrote() (tracegated's
 *                  write_into_file, and the CLI where O_DIRECT is refused);
 *   direct         tg_direct_writer_append() (the CLI's own files).
 * Per way it prints the MB/s to the end of the fsync(), how long the
 * fsync() waited, and the process's CPU s per GB (user and system, the
 * direct writer's thread included: the kernel's copy into the page cache
 * is most of it where there is one).
 *
 * usage: bench_write_behind [DIR [MB [ROUNDS]]]   (default . 1024 3)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/fd_write.h"
#include "common/direct_write.h"
#include "common/write_behind.h"

#define WRITE_SIZE (256u * 1024u)

typedef enum { PLAIN, BEHIND, DIRECT } how_t;

typedef struct way {
  const char *name;
  how_t how;
  double wall_s, fsync_s, cpu_s;
  double bytes;
} way_t;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double process_cpu_s(void) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return (double)r.ru_utime.tv_sec + (double)r.ru_utime.tv_usec / 1e6 +
         (double)r.ru_stime.tv_sec + (double)r.ru_stime.tv_usec / 1e6;
}

static int run(way_t *w, const char *dir, size_t mb, uint8_t *chunk) {
  char path[4200];
  snprintf(path, sizeof(path), "%s/bench-write-behind-XXXXXX", dir);
  int fd = mkstemp(path);
  if (fd < 0) {
    fprintf(stderr, "bench_write_behind: cannot create a file in %s: %s\n",
            dir, strerror(errno));
    return -1;
  }
  tg_write_behind_t wb;
  tg_write_behind_init(&wb, fd);
  size_t total = mb << 20;
  double t0 = now_s(), c0 = process_cpu_s();
  tg_direct_writer_t *dw = NULL;
  int rv = 0;
  if (w->how == DIRECT && (rv = tg_direct_writer_start(fd, &dw)) < 0)
    fprintf(stderr, "bench_write_behind: %s refused direct writes (%s): "
                    "its row is plain writes\n", dir, strerror(-rv));
  rv = 0;
  for (size_t done = 0; done < total && rv == 0; done += WRITE_SIZE) {
    if (dw) {
      rv = tg_direct_writer_append(dw, chunk, WRITE_SIZE);
      continue;
    }
    rv = tg_write_all(fd, chunk, WRITE_SIZE);
    if (rv == 0 && w->how == BEHIND) tg_write_behind_wrote(&wb, WRITE_SIZE);
  }
  if (dw) {
    int fin = tg_direct_writer_finish(dw);
    if (rv == 0) rv = fin;
    tg_direct_writer_free(dw);
  }
  double t1 = now_s();
  if (rv == 0 && fsync(fd) < 0) rv = -errno;
  double t2 = now_s(), c2 = process_cpu_s();
  close(fd);
  unlink(path);
  if (rv < 0) {
    fprintf(stderr, "bench_write_behind: writing %s: %s\n", path,
            strerror(-rv));
    return -1;
  }
  if (w->how == BEHIND && !tg_write_behind_active(&wb))
    fprintf(stderr, "bench_write_behind: %s refused write-behind: its row "
                    "is plain writes\n", dir);
  w->wall_s += t2 - t0;
  w->fsync_s += t2 - t1;
  w->cpu_s += c2 - c0;
  w->bytes += (double)total;
  return 0;
}

static int parse(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf("usage: bench_write_behind [DIR [MB [ROUNDS]]]\n"
           "  Writes MB (1-65536, default 1024) into a new file in DIR\n"
           "  (default .) in 256 KiB writes and fsyncs it: plain, with\n"
           "  write-behind and direct, ROUNDS times each (1-20, default 3),\n"
           "  alternating.\n");
    return 0;
  }
  const char *dir = argc > 1 ? argv[1] : ".";
  long mb = 1024, rounds = 3;
  if ((argc > 2 && parse(argv[2], 1, 65536, &mb) < 0) ||
      (argc > 3 && parse(argv[3], 1, 20, &rounds) < 0) || argc > 4) {
    fprintf(stderr, "bench_write_behind: bad arguments (see --help)\n");
    return 2;
  }
  uint8_t *chunk = malloc(WRITE_SIZE);
  if (!chunk) return 1;
  memset(chunk, 0x5a, WRITE_SIZE);
  way_t ways[3] = {{.name = "plain", .how = PLAIN},
                   {.name = "write-behind", .how = BEHIND},
                   {.name = "direct", .how = DIRECT}};
  printf("bench_write_behind: %ld MB in 256 KiB writes + fsync into %s, "
         "%ld rounds each, alternating\n", mb, dir, rounds);
  for (long r = 0; r < rounds; r++)
    for (int i = 0; i < 3; i++) {
      way_t *w = &ways[(r & 1) ? 2 - i : i];
      if (run(w, dir, (size_t)mb, chunk) < 0) return 1;
    }
  for (int i = 0; i < 3; i++) {
    way_t *w = &ways[i];
    double gb = w->bytes / 1e9;
    printf("  %-13s %7.1f MB/s to the end of fsync, fsync waited %5.2f s, "
           "CPU %5.2f s/GB\n",
           w->name, w->bytes / 1e6 / w->wall_s, w->fsync_s / (double)rounds,
           w->cpu_s / gb);
  }
  for (int i = 1; i < 3; i++)
    printf("  %s CPU s/GB against plain: %.2fx\n", ways[i].name,
           (ways[i].cpu_s / ways[i].bytes) / (ways[0].cpu_s / ways[0].bytes));
  free(chunk);
  return 0;
}
