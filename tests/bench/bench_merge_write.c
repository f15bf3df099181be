/* The merged fleet file against the disk (issue 13: "the merged file
 * written at disk speed").
 *
 * HOSTS service+relay pairs on loopback, each with a tracegate-emit at full
 * rate (1 KiB raw packets), recorded for SECONDS by the real CLI,
 * `tracegate record -H ... --merge -o FILE` (zstd on the wire, as by
 * default): every byte is decrypted, decompressed, reassembled, given its
 * machine and sequence ids and written, then the file is fsync'ed. The
 * CLI's user and system CPU give its MB per CPU-second: how fast it would
 * write the merged file with one core to itself.
 *
 * The baseline, in the same run and directory: write() of as many bytes
 * in 256 KiB blocks (the CLI's output buffer) and one fsync, timed in wall
 * and CPU, once before the recording and once right after it, with the
 * merged file still there. The kernel's cost of taking written pages
 * swings several-fold with how much memory it must reclaim first, so the
 * goal is judged against the second, made in the same state as the CLI's
 * writes: it holds when the CLI's MB per CPU-second is at least that
 * MB/s, i.e. given one core the CLI outpaces the disk. The CLI's user
 * time alone is its own work (TLS, zstd, reassembly, the merge); its
 * system time is mostly those same write()s.
 *
 * On 2 cores the emitters, services and relays share the machine with the
 * CLI: its wall-clock rate is theirs, its CPU per MB is its own.
 *
 * usage: bench_merge_write [HOSTS [SECONDS]]   (default 4 4)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_children.h"
#include "bench_remote.h"
#include "test_service.h"

#ifndef TRACEGATE_EMIT_PATH
#error "TRACEGATE_EMIT_PATH must name the tracegate-emit binary"
#endif
#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif

#define MAX_HOSTS 16
#define READY_MS 10000
#define STOP_MS 5000
#define BLOCK (256u * 1024u)
#define BUFFER_MB 256u

typedef struct host {
  test_service_t ts;
  bench_relay_t relay;
  pid_t emit;
} host_t;

static double tv_s(struct timeval tv) {
  return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static long long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* Writes |bytes| in BLOCK-sized write()s and fsyncs: the disk's speed for
 * what the CLI writes. Returns MB/s (0 on failure) and the CPU seconds. */
static double disk_baseline(const char *dir, long long bytes, double *cpu_s) {
  char path[256];
  snprintf(path, sizeof(path), "%s/baseline.bin", dir);
  static uint8_t block[BLOCK];
  for (size_t i = 0; i < sizeof(block); i++) block[i] = (uint8_t)(i * 131u);
  struct rusage r0, r1;
  getrusage(RUSAGE_SELF, &r0);
  double t0 = bench_now_ms();
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  long long left = bytes;
  while (left > 0) {
    size_t n = left < (long long)BLOCK ? (size_t)left : BLOCK;
    ssize_t w = write(fd, block, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    left -= w;
  }
  int ok = left == 0 && fsync(fd) == 0;
  close(fd);
  double wall = (bench_now_ms() - t0) / 1e3;
  getrusage(RUSAGE_SELF, &r1);
  *cpu_s = tv_s(r1.ru_utime) - tv_s(r0.ru_utime) + tv_s(r1.ru_stime) -
           tv_s(r0.ru_stime);
  unlink(path);
  return ok && wall > 0 ? (double)bytes / 1e6 / wall : 0;
}

static int start_host(host_t *h, const char *dir, unsigned idx) {
  if (test_service_start(&h->ts) < 0) return -1;
  bench_adopt(h->ts.pid);
  bench_remove_at_exit(h->ts.dir);
  char log[256];
  snprintf(log, sizeof(log), "%s/emit-%u.log", dir, idx);
  const char *argv[] = {TRACEGATE_EMIT_PATH, "--socket", h->ts.producer_sock,
                        "--rate", "0", "--size", "1024", "--threads", "1",
                        "--log-level", "warn", NULL};
  if ((h->emit = bench_spawn(argv, -1, log)) < 0) return -1;
  return bench_relay_spawn(&h->relay, dir, idx, h->ts.consumer_sock);
}

static int write_config(const char *path, unsigned seconds) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f,
          "buffers { size_kb: %u fill_policy: RING_BUFFER }\n"
          "data_sources { config { name: \"tracegate.emit\" } }\n"
          "duration_ms: %u\n",
          BUFFER_MB * 1024, seconds * 1000);
  return fclose(f) == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
  unsigned n_hosts = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 4;
  unsigned seconds = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 4;
  if (n_hosts < 1 || n_hosts > MAX_HOSTS || seconds < 1 || seconds > 60) {
    fprintf(stderr, "usage: bench_merge_write [HOSTS (1-%d) [SECONDS (1-60)]]\n",
            MAX_HOSTS);
    return 2;
  }
  bench_children_init();
  bench_deadline(seconds + 120);
  char dir[128];
  if (bench_tempdir(dir, sizeof(dir), "merge") < 0 ||
      bench_certs(dir, BENCH_HOST, BENCH_CLIENT) < 0)
    return 1;

  host_t hosts[MAX_HOSTS];
  memset(hosts, 0, sizeof(hosts));
  for (unsigned i = 0; i < n_hosts; i++)
    if (start_host(&hosts[i], dir, i) < 0) {
      fprintf(stderr, "bench_merge_write: host %u did not start\n", i);
      return 1;
    }
  for (unsigned i = 0; i < n_hosts; i++)
    if (bench_relay_wait(&hosts[i].relay, READY_MS) < 0) return 1;

  char cfg[256], out[256], log[256], ca[256], cert[256], key[256];
  snprintf(cfg, sizeof(cfg), "%s/config.pbtxt", dir);
  snprintf(out, sizeof(out), "%s/merged.pftrace", dir);
  snprintf(log, sizeof(log), "%s/cli.log", dir);
  snprintf(ca, sizeof(ca), "%s/pki/ca.pem", dir);
  snprintf(cert, sizeof(cert), "%s/pki/%s.pem", dir, BENCH_CLIENT);
  snprintf(key, sizeof(key), "%s/pki/%s.key", dir, BENCH_CLIENT);
  if (write_config(cfg, seconds) < 0) return 1;

  /* The first baseline with a size of the expected order; the second with
   * the merged file's own. */
  double cpu_b1 = 0, cpu_b2 = 0;
  double disk1 = disk_baseline(dir, 512ll << 20, &cpu_b1);

  static char hostarg[MAX_HOSTS][32];
  const char *cli[16 + 2 * MAX_HOSTS] = {
      TRACEGATE_CLI_PATH, "record", "-c", cfg, "--txt", "--merge", "-o", out,
      "--ca", ca, "--cert", cert, "--key", key, "--tls-server-name",
      BENCH_HOST};
  size_t n = 16;
  for (unsigned i = 0; i < n_hosts; i++) {
    snprintf(hostarg[i], sizeof(hostarg[i]), "127.0.0.1:%d", hosts[i].relay.port);
    cli[n++] = "-H";
    cli[n++] = hostarg[i];
  }
  cli[n] = NULL;
  struct rusage c0, c1;
  getrusage(RUSAGE_CHILDREN, &c0);
  double t0 = bench_now_ms();
  pid_t pid = bench_spawn(cli, -1, log);
  if (pid < 0) return 1;
  double cpu = 0;
  int st = bench_wait_cpu(pid, (int)seconds * 1000 + 60000, &cpu);
  double wall = (bench_now_ms() - t0) / 1e3;
  getrusage(RUSAGE_CHILDREN, &c1);
  double user = tv_s(c1.ru_utime) - tv_s(c0.ru_utime);
  double sys = tv_s(c1.ru_stime) - tv_s(c0.ru_stime);
  long long bytes = file_size(out);
  bench_stop_all(STOP_MS);
  if (st != 0 || bytes <= 0) {
    fprintf(stderr, "bench_merge_write: tracegate record failed; see %s:\n", log);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "tail -n 20 '%s' >&2", log);
    if (system(cmd) != 0) fprintf(stderr, "(no log)\n");
    return 1;
  }
  double disk2 = disk_baseline(dir, bytes, &cpu_b2);
  unlink(out);
  double mb = (double)bytes / 1e6;
  double gb = mb / 1e3;
  double cli_rate = user + sys > 0 ? mb / (user + sys) : 0;

  printf("bench_merge_write: %u hosts, tracegate-emit at full rate (1 KiB "
         "packets), zstd on the wire, %us, tracegate record --merge\n",
         n_hosts, seconds);
  printf("  merged file:   %8.1f MB in %.1f s wall (the hosts' pace on this "
         "machine)\n", mb, wall);
  printf("  CLI CPU:       %.2f s/GB user + %.2f s/GB system; %.0f MB per "
         "CPU-second (%.0f per user CPU-second)\n",
         user / gb, sys / gb, cli_rate, user > 0 ? mb / user : 0.0);
  printf("  disk baseline: %.0f MB/s (CPU %.2f s/GB) before the recording, "
         "%.0f MB/s (CPU %.2f s/GB) after it\n",
         disk1, cpu_b1 / 0.512 / 1.048576, disk2, cpu_b2 / gb);
  if (disk2 > 0)
    printf("  CLI MB per CPU-second / disk MB/s after: %.2fx (goal >= 1x: the "
           "disk sets the pace)\n", cli_rate / disk2);
  return 0;
}
