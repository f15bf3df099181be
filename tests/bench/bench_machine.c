/* What this machine charges for entering its kernel: a system call, a page
 * fault of each kind, a process started and reaped. CI's time is mostly
 * those (docs/operations.md, "CI's time"): the ASan tests start about
 * 14,000 processes and take about 20 million faults, and every compile is
 * a process. Two machines of the same kind (2 cores, 24 GiB) have differed
 * by ten times here, and CI's run by nearly three, so `.ci/run` prints
 * these figures first, and a CI time reads against them.
 *
 * The same-run baseline is a memcpy of a page; beside the figures, those
 * measured with loops like these on the machine of 2026-11-29, where
 * `.ci/run` took 1365 s.
 *
 * libc only (and bench_args.c), so that `.ci/run` builds it with one cc
 * before anything else: `cc -D_GNU_SOURCE -O2 bench_machine.c bench_args.c`.
 */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_args.h"

extern char **environ;

#define PAGE 4096u

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_machine [MIB]\n"
          "  The costs of this machine's kernel entries: getppid(2), a read\n"
          "  fault on the shared zero page, a first write to anonymous\n"
          "  memory, the same again after munmap, and /bin/true started and\n"
          "  reaped; each beside a memcpy of a page and the figures of the\n"
          "  machine where .ci/run took 1365 s (2026-11-29).\n"
          "  MIB: memory each fault loop touches (default 64, 1-1024).\n"
          "Output: one line per figure: name, value, unit, and where known\n"
          "'(machine of 2026-11-29: N)'.\n");
}

/* One figure: name, this machine's value, the 2026-11-29 machine's. */
static void put(const char *name, double v, const char *unit, double then) {
  if (then > 0)
    printf("%-28s %9.3f %s (machine of 2026-11-29: %.2f)\n", name, v, unit,
           then);
  else
    printf("%-28s %9.3f %s\n", name, v, unit);
}

static char *map(size_t n) {
  char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  if (p == MAP_FAILED) return NULL;
  /* 4 KiB faults, as most of a process's are: no transparent huge page. */
  (void)madvise(p, n, MADV_NOHUGEPAGE);
  return p;
}

/* Microseconds per page of a first read (|write| 0) or write over |n|. */
static double touch_us(char *p, size_t n, int write) {
  volatile char sink = 0;
  double t = bench_wall_s();
  for (size_t i = 0; i < n; i += PAGE) {
    if (write)
      p[i] = 1;
    else
      sink += p[i];
  }
  (void)sink;
  return (bench_wall_s() - t) * 1e6 / (double)(n / PAGE);
}

int main(int argc, char **argv) {
  uint64_t mib = 64;
  const bench_arg_t args[] = {{"MIB", 1, 1024, &mib}};
  int a = bench_args_parse("bench_machine", argc, argv, args, 1, usage, NULL);
  if (a) return a > 0 ? 0 : 2;
  size_t n = (size_t)mib << 20;

  /* The baseline: a page copied, in cache. */
  static char src[PAGE], dst[PAGE];
  memcpy(dst, src, PAGE); /* their first touch is not the figure */
  double t = bench_wall_s();
  for (int i = 0; i < 100000; i++) {
    memcpy(dst, src, PAGE);
    __asm__ __volatile__("" : : "r"(dst) : "memory");
  }
  put("memcpy of a page", (bench_wall_s() - t) * 1e6 / 100000, "us", 0);

  t = bench_wall_s();
  for (int i = 0; i < 200000; i++) (void)getppid();
  put("getppid(2)", (bench_wall_s() - t) * 1e6 / 200000, "us", 1.05);

  char *p = map(n);
  if (!p) {
    fprintf(stderr, "bench_machine: mmap of %zu MiB: %s\n", (size_t)mib,
            strerror(errno));
    return 1;
  }
  put("fault: zero page read", touch_us(p, n, 0), "us", 9.9);
  munmap(p, n);
  if (!(p = map(n))) return 1;
  put("fault: first write", touch_us(p, n, 1), "us", 12.0);
  munmap(p, n);
  /* The pages just freed come back at once: what a process's next
   * allocation pays when the host has not taken them back. */
  if (!(p = map(n))) return 1;
  put("fault: write, pages reused", touch_us(p, n, 1), "us", 0);
  munmap(p, n);

  const int runs = 50;
  char *const av[] = {"true", NULL};
  t = bench_wall_s();
  for (int i = 0; i < runs; i++) {
    pid_t pid;
    int st;
    if (posix_spawn(&pid, "/bin/true", NULL, NULL, av, environ) != 0 ||
        waitpid(pid, &st, 0) != pid) {
      fprintf(stderr, "bench_machine: /bin/true: %s\n", strerror(errno));
      return 1;
    }
  }
  put("/bin/true started, reaped", (bench_wall_s() - t) * 1e3 / runs, "ms", 0);
  return 0;
}
