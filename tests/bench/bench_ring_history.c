/* How much history a flight-recorder ring holds: tracegated's central
 * buffer beside Perfetto's traced, with the same producer and config.
 *
 * One tracegate-emit writes track event slices (--track-events, one
 * thread, RATE per second of SIZE payload bytes: bench_collector's writer
 * by default) into a RING_BUFFER session of RING_KB that nobody reads.
 * Once the ring must have wrapped (the payload written is WRAP times the
 * ring), the session is cloned and the clone's trace decoded here:
 * - payload per ring byte: the producer's packets (trusted sequence id
 *   above the service's 1, the service's own trusted fields left out) over
 *   the ring's size;
 * - seconds of history: newest minus oldest producer packet timestamp;
 * - whether the ring wrapped (chunks_overwritten in the clone's stats).
 * The same run against Perfetto's traced when PERFETTO_BIN names the
 * directory of its binaries (traced and the perfetto CLI): the emit is the
 * same agent, so the chunks it commits are the same; only what each
 * service's ring keeps of them differs. Both services run at once, each
 * with its own producer, so they see the same machine.
 *
 * usage: bench_ring_history [RING_KB [SIZE [RATE [WRAP]]]]
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_children.h"
#include "pb/trace/trace.pb-c.h"
#include "test_service.h"

#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif
#ifndef TRACEGATE_EMIT_PATH
#error "TRACEGATE_EMIT_PATH must name the tracegate-emit binary"
#endif

#define PROG "bench_ring_history"
#define SESSION "ring-history"
#define STEP_MS 15000
#define TRACE_MAX (256u << 20)

typedef struct side {
  const char *name;
  char dir[128];
  char producer_sock[160], consumer_sock[160];
  pid_t service, emit, session;
  /* From the clone. */
  bool ok, wrapped;
  uint64_t payload, packets, overwritten, lost;
  double first_s, last_s;
} side_t;

static void sleep_s(double s) {
  struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&t, NULL);
}

static int write_config(const char *path, unsigned ring_kb, bool detach) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f,
          "buffers { size_kb: %u fill_policy: RING_BUFFER }\n"
          "data_sources { config { name: \"track_event\" } }\n"
          "unique_session_name: \"" SESSION "\"\n"
          "%s",
          ring_kb, detach ? "" : "duration_ms: 3600000\n");
  return fclose(f) == 0 ? 0 : -1;
}

static pid_t start_emit(const side_t *s, uint64_t rate, uint64_t size) {
  char r[24], sz[24], log[200];
  snprintf(r, sizeof(r), "%" PRIu64, rate);
  snprintf(sz, sizeof(sz), "%" PRIu64, size);
  snprintf(log, sizeof(log), "%s/emit.log", s->dir);
  const char *argv[] = {TRACEGATE_EMIT_PATH, "--socket", s->producer_sock,
                        "--track-events", "--rate", r, "--size", sz,
                        "--threads", "1", "--log-level", "error", NULL};
  return bench_spawn(argv, -1, log);
}

/* Waits for |pid| to exit by itself; its exit code, or -1. */
static int wait_exit(pid_t pid, int timeout_ms) {
  double cpu;
  int st = bench_wait_cpu(pid, timeout_ms, &cpu);
  return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The clone's trace into |s|'s figures. */
static int measure(side_t *s, const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) < 0 || st.st_size <= 0 || (uint64_t)st.st_size > TRACE_MAX) {
    close(fd);
    return -1;
  }
  uint8_t *buf = malloc((size_t)st.st_size);
  size_t n = 0;
  ssize_t r;
  while (buf && n < (size_t)st.st_size &&
         (r = read(fd, buf + n, (size_t)st.st_size - n)) > 0)
    n += (size_t)r;
  close(fd);
  Perfetto__Protos__Trace *t =
      buf && n == (size_t)st.st_size ? perfetto__protos__trace__unpack(NULL, n, buf)
                                     : NULL;
  free(buf);
  if (!t) return -1;
  uint64_t first = UINT64_MAX, last = 0;
  for (size_t i = 0; i < t->n_packet; i++) {
    Perfetto__Protos__TracePacket *p = t->packet[i];
    if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_STATS &&
        p->trace_stats->n_buffer_stats > 0) {
      const Perfetto__Protos__TraceStats__BufferStats *b =
          p->trace_stats->buffer_stats[0];
      s->overwritten = b->chunks_overwritten;
      s->lost = b->trace_writer_packet_loss + b->chunks_discarded +
                b->abi_violations;
    }
    if (p->optional_trusted_packet_sequence_id_case !=
            PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID ||
        p->trusted_packet_sequence_id <= 1)
      continue;
    /* What the producer wrote: without the fields the service adds. */
    p->has_trusted_pid = 0;
    p->optional_trusted_uid_case =
        PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_UID__NOT_SET;
    p->optional_trusted_packet_sequence_id_case =
        PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID__NOT_SET;
    s->payload += protobuf_c_message_get_packed_size(&p->base);
    s->packets++;
    if (p->has_timestamp) {
      if (p->timestamp < first) first = p->timestamp;
      if (p->timestamp > last) last = p->timestamp;
    }
  }
  perfetto__protos__trace__free_unpacked(t, NULL);
  s->wrapped = s->overwritten > 0;
  s->first_s = first == UINT64_MAX ? 0 : (double)first / 1e9;
  s->last_s = (double)last / 1e9;
  s->ok = s->packets > 0;
  return s->ok ? 0 : -1;
}

/* --- tracegated ------------------------------------------------------------ */

static test_service_t g_ts;

static int ours_start(side_t *s, unsigned ring_kb, uint64_t rate, uint64_t size) {
  if (test_service_start(&g_ts) < 0) return -1;
  bench_adopt(g_ts.pid);
  bench_remove_at_exit(g_ts.dir);
  snprintf(s->dir, sizeof(s->dir), "%s", g_ts.dir);
  snprintf(s->producer_sock, sizeof(s->producer_sock), "%s", g_ts.producer_sock);
  snprintf(s->consumer_sock, sizeof(s->consumer_sock), "%s", g_ts.consumer_sock);
  s->service = g_ts.pid;
  if ((s->emit = start_emit(s, rate, size)) < 0) return -1;
  char cfg[200];
  snprintf(cfg, sizeof(cfg), "%s/ring.pbtxt", s->dir);
  if (write_config(cfg, ring_kb, true) < 0) return -1;
  /* A detached session: nobody reads the ring until the clone. */
  const char *argv[] = {TRACEGATE_CLI_PATH, "record", "--socket",
                        s->consumer_sock, "-c", cfg, "--txt", "--detach",
                        SESSION, NULL};
  pid_t cli = bench_spawn(argv, -1, NULL);
  return cli > 0 && wait_exit(cli, STEP_MS) == 0 ? 0 : -1;
}

static int ours_clone(side_t *s) {
  char out[200];
  snprintf(out, sizeof(out), "%s/clone.pftrace", s->dir);
  const char *argv[] = {TRACEGATE_CLI_PATH, "record", "--socket",
                        s->consumer_sock, "--clone-by-name", SESSION, "-o",
                        out, NULL};
  pid_t cli = bench_spawn(argv, -1, NULL);
  if (cli < 0 || wait_exit(cli, STEP_MS) != 0) return -1;
  return measure(s, out);
}

/* --- Perfetto's traced ------------------------------------------------------- */

static int theirs_start(side_t *s, const char *bin, unsigned ring_kb,
                        uint64_t rate, uint64_t size) {
  if (bench_tempdir(s->dir, sizeof(s->dir), "ring-traced") < 0) return -1;
  snprintf(s->producer_sock, sizeof(s->producer_sock), "%s/p.sock", s->dir);
  snprintf(s->consumer_sock, sizeof(s->consumer_sock), "%s/c.sock", s->dir);
  /* Perfetto's binaries find their sockets in the environment only. */
  setenv("PERFETTO_PRODUCER_SOCK_NAME", s->producer_sock, 1);
  setenv("PERFETTO_CONSUMER_SOCK_NAME", s->consumer_sock, 1);
  char path[400], log[200];
  snprintf(path, sizeof(path), "%s/traced", bin);
  snprintf(log, sizeof(log), "%s/traced.log", s->dir);
  const char *argv[] = {path, NULL};
  if ((s->service = bench_spawn(argv, -1, log)) < 0) return -1;
  for (int i = 0; i < 100 && access(s->consumer_sock, F_OK) != 0; i++)
    sleep_s(0.05);
  if (access(s->consumer_sock, F_OK) != 0) return -1;
  if ((s->emit = start_emit(s, rate, size)) < 0) return -1;
  char cfg[200], out[200], cli[400];
  snprintf(cfg, sizeof(cfg), "%s/ring.pbtxt", s->dir);
  snprintf(out, sizeof(out), "%s/session.pftrace", s->dir);
  snprintf(cli, sizeof(cli), "%s/perfetto", bin);
  if (write_config(cfg, ring_kb, false) < 0) return -1;
  snprintf(log, sizeof(log), "%s/perfetto.log", s->dir);
  const char *rec[] = {cli, "--txt", "-c", cfg, "-o", out, NULL};
  return (s->session = bench_spawn(rec, -1, log)) > 0 ? 0 : -1;
}

static int theirs_clone(side_t *s, const char *bin) {
  char out[200], cli[400], log[200];
  snprintf(out, sizeof(out), "%s/clone.pftrace", s->dir);
  snprintf(cli, sizeof(cli), "%s/perfetto", bin);
  snprintf(log, sizeof(log), "%s/clone.log", s->dir);
  const char *argv[] = {cli, "--clone-by-name", SESSION, "-o", out, NULL};
  pid_t pid = bench_spawn(argv, -1, log);
  if (pid < 0 || wait_exit(pid, STEP_MS) != 0) return -1;
  return measure(s, out);
}

/* --- report ---------------------------------------------------------------- */

static void report(const side_t *s, unsigned ring_kb, double written_s) {
  if (!s->ok) {
    printf("  %-10s: no clone to measure (see its logs)\n", s->name);
    return;
  }
  double ring = (double)ring_kb * 1024.0;
  printf("  %-10s: %7.1f s of history in the ring, %5.1f %% payload per "
         "ring byte (%.0f KiB of producer packets, %" PRIu64 " packets)%s%s\n",
         s->name, s->last_s - s->first_s, 100.0 * (double)s->payload / ring,
         (double)s->payload / 1024.0, s->packets,
         s->wrapped ? "" : "; NOT wrapped: a lower bound",
         s->lost ? "; LOSS counted" : "");
  (void)written_s;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: " PROG " [RING_KB [SIZE [RATE [WRAP]]]]\n"
          "  one tracegate-emit writing RATE track events per second (1-100000,\n"
          "  default 18) of SIZE payload bytes (16-65536, default 1024) into an\n"
          "  unread RING_BUFFER session of RING_KB KiB (64-65536, default 1024):\n"
          "  bench_collector's writer. After the payload written reaches WRAP\n"
          "  times the ring (1-10, default 2), the session is cloned and the\n"
          "  clone measured: seconds of history and payload per ring byte, for\n"
          "  tracegated and, with PERFETTO_BIN set, Perfetto's traced beside it.\n");
}

int main(int argc, char **argv) {
  uint64_t ring_kb = 1024, size = 1024, rate = 18, wrap = 2;
  const bench_arg_t args[] = {
      {"RING_KB", 64, 65536, &ring_kb},
      {"SIZE", 16, 65536, &size},
      {"RATE", 1, 100000, &rate},
      {"WRAP", 1, 10, &wrap},
  };
  int rv = bench_args_parse(PROG, argc, argv, args, 4, usage, NULL);
  if (rv != 0) return rv > 0 ? 0 : 2;
  double fill_s = (double)wrap * (double)ring_kb * 1024.0 / (double)(rate * size);
  bench_children_init();
  bench_deadline((unsigned)fill_s + 120);
  const char *bin = getenv("PERFETTO_BIN");
  side_t ours = {.name = "tracegated"}, theirs = {.name = "traced"};
  if (ours_start(&ours, (unsigned)ring_kb, rate, size) < 0) {
    fprintf(stderr, PROG ": cannot start tracegated and its session\n");
    return 1;
  }
  bool with_traced = bin && *bin;
  if (with_traced && theirs_start(&theirs, bin, (unsigned)ring_kb, rate, size) < 0) {
    fprintf(stderr, PROG ": cannot start traced (PERFETTO_BIN=%s)\n", bin);
    return 1;
  }
  printf(PROG ": tracegate-emit --track-events 1 thread x %" PRIu64 "/s x %" PRIu64
         " B into a %" PRIu64 " KiB ring; cloned after %.0f s (%" PRIu64
         "x the ring in payload)\n",
         rate, size, ring_kb, fill_s, wrap);
  fflush(stdout);
  sleep_s(fill_s);
  if (ours_clone(&ours) < 0) fprintf(stderr, PROG ": tracegated's clone failed\n");
  if (with_traced && theirs_clone(&theirs, bin) < 0)
    fprintf(stderr, PROG ": traced's clone failed\n");
  report(&ours, (unsigned)ring_kb, fill_s);
  if (with_traced)
    report(&theirs, (unsigned)ring_kb, fill_s);
  else
    printf("  traced    : not measured (set PERFETTO_BIN to the directory of "
           "Perfetto's binaries)\n");
  if (with_traced && ours.ok && theirs.ok)
    printf("  tracegated keeps %.2fx the history of traced\n",
           (ours.last_s - ours.first_s) / (theirs.last_s - theirs.first_s));
  bench_stop_all(STEP_MS);
  g_ts.pid = 0; /* stopped above */
  test_service_stop(&g_ts);
  return ours.ok && (!with_traced || theirs.ok) ? 0 : 1;
}
