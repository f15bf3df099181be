/* bench_perf's workload (not named bench_*: `make bench` runs those): a fixed amount of CPU work on two threads, each
 * a small call tree (main -> work_a -> work_b -> spin, and
 * worker -> worker_a -> spin), timed from the threads' start to their
 * join. Prints one line "work_s W cpu_s C" (wall and CPU seconds of the
 * work) on stdout.
 *
 * usage: perf_workload UNITS   (each thread spins UNITS million times;
 *                                 0: until SIGTERM, and prints nothing)
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static volatile uint64_t sink;
static volatile sig_atomic_t stopped;
static unsigned long g_units;

static void on_term(int sig) {
  (void)sig;
  stopped = 1;
}

__attribute__((noinline)) static void spin(void) {
  for (int i = 0; i < 1000000; i++) sink += (uint64_t)i;
}

__attribute__((noinline)) static void work_b(unsigned long units) {
  for (unsigned long u = 0; (units == 0 || u < units) && !stopped; u++) spin();
  sink++;
}

__attribute__((noinline)) static void work_a(unsigned long units) {
  work_b(units);
  sink++;
}

__attribute__((noinline)) static void worker_a(unsigned long units) {
  for (unsigned long u = 0; (units == 0 || u < units) && !stopped; u++) spin();
  sink++;
}

static void *worker(void *arg) {
  (void)arg;
  worker_a(g_units);
  return NULL;
}

static double now_s(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: perf_workload UNITS\n");
    return 2;
  }
  char *end;
  g_units = strtoul(argv[1], &end, 10);
  if (*end != 0) return 2;
  signal(SIGTERM, on_term);
  double t0 = now_s(CLOCK_MONOTONIC);
  pthread_t t;
  if (pthread_create(&t, NULL, worker, NULL) != 0) return 1;
  work_a(g_units);
  pthread_join(t, NULL);
  double wall = now_s(CLOCK_MONOTONIC) - t0;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
  if (g_units > 0) printf("work_s %.4f cpu_s %.4f\n", wall, cpu);
  return 0;
}
