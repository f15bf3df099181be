/* tracegate-collector at fleet scale: HOSTS rings held by one collector,
 * then one operator snapshot of them all.
 *
 * Hosts are simulated as bench_fanout --cli does: GROUP_HOSTS inventory
 * entries per tracegated + tracegate-relay pair, the entries of one relay
 * being distinct spellings of 127.0.0.1 (so each gets a ring of its own:
 * the collector keys rings by the spec's FNV), and one tracegate-emit per
 * pair writing track events into every ring of its tracegated. A group is
 * 8 hosts because a producer serves at most TG_DS_MAX_INSTANCES sessions
 * of one data source: a bigger group would leave rings empty.
 *
 * The collector is the real tracegate-collector, a child configured as the
 * end-to-end test configures it (TLS toward the relays with certificates
 * of deploy/certs/tg-certs, listen 127.0.0.1:0 told by --ready-fd), driven
 * over its HTTP API by a blocking HTTP/1.1 client here (loopback only).
 * Measured, each next to the goal of the collector's issue:
 * 1. memory per host: (VmRSS with HOSTS rings tracing - VmRSS with a
 *    one-host inventory, a separate short run) / (HOSTS - 1); VmHWM too;
 * 2. idle CPU with every ring held: the collector's utime+stime over
 *    IDLE_S seconds, as a share of one core (the producers stopped by
 *    then: on a fleet they have the hosts' cores, here they would take
 *    the collector's);
 * 3. trigger -> every CloneSession requested: from the POST's send to the
 *    collector's debug line "all N clones requested" (its timestamp, ms,
 *    same machine clock), and that line's own figure on the collector's
 *    clock (uv_hrtime from the snapshot's start);
 * 4. trigger -> the merged snapshot stored (POST wait=1's round trip) and
 *    listed (GET /api/v1/snapshots), with its bytes, MB/s and per-host
 *    outcomes; the rings are given time to fill first (less stored per
 *    host than the producers wrote shows they wrapped);
 * 5. the snapshot's skew: the spread over hosts of the moment each clone's
 *    answer came back (the collector's per-host debug lines, its clock).
 *
 *
 * With --silent instead: one host of HOSTS silent (its inventory entry is
 * a fault proxy in front of its relay, stalled: nothing moves, nothing
 * closes) while two operator triggers come SECOND_AFTER_MS apart:
 * 6. trigger -> stored for the others: each snapshot's POST to its row
 *    stored (PARTIAL, the silent host failed for clone_timeout), next to
 *    the goal (10 s); and for the second trigger, fired while the
 *    first still waits on the silent host, POST -> its clones requested
 *    ("cloning" logged), next to the goal of 100 ms.
 *
 * With --host-part instead: one host's part of a big snapshot.
 * 7. A synthetic snapshot of HOSTS hosts of HOST_KB each (default 1000 x
 *    2 MiB: 2 GB) is written into a store the way snap.c writes one (the
 *    hosts' bytes interleaved a 64 KiB read at a time, each run fed to the
 *    host index, finished with its index), then served by the real
 *    tracegate-collector over that store: GET .../trace?host=H of one host
 *    (its bytes counted, its time next to the goal of 1 s), beside the
 *    whole file over the same API. The pieces are synthetic bytes, not
 *    packets: the route never looks inside them. The file was just
 *    written, so both read from the page cache.
 *
 * With --store instead: the directory store and the bucket store side by
 * side (bench_collector_store.c).
 * 8. An MB megabyte snapshot stored in each (default 300): begin ->
 *    finished, next to the goal of 1.5x the directory's for the bucket,
 *    and the last byte -> listed, next to the goal of 1 s. With PACE_MBPS,
 *    the bytes come at that rate, as hosts' answers do (a 1000-host
 *    snapshot arrives at about 50 MB/s here, section 4).
 *
 * usage: bench_collector [HOSTS [RING_KB [IDLE_S]]]  (default 1000 1024 10)
 *        bench_collector --silent [HOSTS [RING_KB]]
 *        bench_collector --host-part [HOSTS [HOST_KB]]  (default 1000 2048)
 *        bench_collector --store [MB [PART_MB [UPLOADERS [PACE_MBPS]]]]
 *                                                  (default 300 8 4 0)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_children.h"
#include "bench_collector_store.h"
#include "collector/store/snap_index.h"
#include "collector/store/store.h"
#include "common/json.h"
#include "bench_remote.h"
#include "fault_proxy.h"
#include "test_service.h"

#ifndef TRACEGATE_COLLECTOR_PATH
#error "TRACEGATE_COLLECTOR_PATH must name the tracegate-collector binary"
#endif
#ifndef TRACEGATE_EMIT_PATH
#error "TRACEGATE_EMIT_PATH must name the tracegate-emit binary"
#endif

#define PROG "bench_collector"
#define HOSTS_MAX 1024
#define GROUP_HOSTS 8 /* TG_DS_MAX_INSTANCES: sessions one producer feeds */
#define MAX_GROUPS (HOSTS_MAX / GROUP_HOSTS)
#define SESSION_KEY "bench-collector"
#define EMIT_SIZE 1024 /* payload bytes of each track event slice */
/* The producers' payload would fill a ring in FILL_S (a ring keeps what
 * its chunks hold, plus a record header each); the snapshot comes
 * FILL_WAIT_S after the last ring started, once the rings wrapped. */
#define FILL_S 60
#define FILL_WAIT_S 75
#define STEP_MS 15000          /* spawning, a ready line, a stop */
#define TRACING_WAIT_MS 180000 /* every ring tracing */
#define HTTP_MS 30000          /* a plain request */
#define SNAPSHOT_MS 200000     /* POST wait=1 (the collector's own bound: 120 s) */
#define POLL_MS 250

/* The goals (the collector's issue, docs/collector.md "Sizing"). */
#define GOAL_MEM_KB 200.0
#define GOAL_IDLE_CPU_PCT 2.0
#define GOAL_CLONES_MS 100.0
#define GOAL_STORED_S 10.0
#define GOAL_HOST_PART_S 1.0

typedef struct group {
  test_service_t ts;
  bench_relay_t relay;
  pid_t emit;
} group_t;

typedef struct collector {
  pid_t pid;
  int port;
  char log[160];
} collector_t;

static group_t g_groups[MAX_GROUPS];
/* --silent: the last host's entry is this port (a fault proxy); 0: none. */
static int g_silent_port;

static double real_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* --- the fleet ------------------------------------------------------------ */

/* The k-th of 64 spellings of 127.0.0.1 (bench_fanout's). */
static void spelling(unsigned k, char *out, size_t n) {
  static const char *const zero[] = {"0", "00", "000", "0000"};
  static const char *const one[] = {"1", "01", "001", "0001"};
  snprintf(out, n, "127.%s.%s.%s", zero[k % 4], zero[(k / 4) % 4],
           one[(k / 16) % 4]);
}

/* Units per second of each producer: a RING_KB ring filled in FILL_S. */
static unsigned emit_rate(unsigned ring_kb) {
  unsigned r = (ring_kb * 1024u + EMIT_SIZE * FILL_S - 1) / (EMIT_SIZE * FILL_S);
  return r ? r : 1;
}

static int start_groups(unsigned ng, const char *dir, unsigned rate) {
  /* Every host of the fleet is one identity's connection to a few
   * relays: all 128 slots may be that identity's. */
  static const char *const relay_extra[] = {
      "--max-conns", "128", "--max-conns-per-identity", "128", NULL};
  for (unsigned i = 0; i < ng; i++) {
    if (test_service_start(&g_groups[i].ts) < 0) {
      fprintf(stderr, PROG ": cannot start tracegated %u\n", i);
      return -1;
    }
    bench_adopt(g_groups[i].ts.pid);
    bench_remove_at_exit(g_groups[i].ts.dir);
  }
  for (unsigned i = 0; i < ng; i++)
    if (bench_relay_spawn_with(&g_groups[i].relay, dir, i,
                               g_groups[i].ts.consumer_sock, relay_extra) < 0)
      return -1;
  for (unsigned i = 0; i < ng; i++)
    if (bench_relay_wait(&g_groups[i].relay, STEP_MS) < 0) return -1;
  char r[24], sz[24];
  snprintf(r, sizeof(r), "%u", rate);
  snprintf(sz, sizeof(sz), "%u", EMIT_SIZE);
  for (unsigned i = 0; i < ng; i++) {
    char log[160];
    snprintf(log, sizeof(log), "%s/emit%u.log", dir, i);
    const char *argv[] = {TRACEGATE_EMIT_PATH, "--socket",
                          g_groups[i].ts.producer_sock, "--track-events",
                          "--rate", r, "--size", sz, "--threads", "1",
                          "--log-level", "error", NULL};
    if ((g_groups[i].emit = bench_spawn(argv, -1, log)) < 0) return -1;
  }
  return 0;
}

/* CPU seconds so far of every relay and service. */
static double groups_cpu(unsigned ng) {
  double s = 0;
  for (unsigned i = 0; i < ng; i++)
    s += bench_proc_cpu_s(g_groups[i].relay.pid) +
         bench_proc_cpu_s(g_groups[i].ts.pid);
  return s;
}

static int write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "we");
  if (!f) return -1;
  int rv = fputs(text, f) < 0 ? -1 : 0;
  return fclose(f) != 0 ? -1 : rv;
}

static int write_hosts(const char *path, unsigned hosts) {
  FILE *f = fopen(path, "we");
  if (!f) return -1;
  for (unsigned i = 0; i < hosts; i++) {
    char a[32];
    spelling(i % GROUP_HOSTS, a, sizeof(a));
    if (g_silent_port && i == hosts - 1)
      fprintf(f, "127.0.0.1:%d\n", g_silent_port);
    else
      fprintf(f, "%s:%d\n", a, g_groups[i / GROUP_HOSTS].relay.port);
  }
  return fclose(f) != 0 ? -1 : 0;
}

/* <dir>/<tag>.conf over <dir>/<tag>.hosts, store <dir>/<tag>-store. */
static int write_config(const char *dir, const char *tag, unsigned hosts,
                        unsigned ring_kb) {
  char path[200], text[2048];
  snprintf(path, sizeof(path), "%s/%s.hosts", dir, tag);
  if (write_hosts(path, hosts) < 0) return -1;
  snprintf(path, sizeof(path), "%s/flight.pbtxt", dir);
  snprintf(text, sizeof(text),
           "buffers { size_kb: %u fill_policy: RING_BUFFER }\n"
           "data_sources { config { name: \"track_event\" } }\n",
           ring_kb);
  if (write_text(path, text) < 0) return -1;
  snprintf(path, sizeof(path), "%s/%s.conf", dir, tag);
  snprintf(text, sizeof(text),
           "hosts = %s/%s.hosts\n"
           "ca = %s/pki/ca.pem\n"
           "cert = %s/pki/%s.pem\n"
           "key = %s/pki/%s.key\n"
           "tls_server_name = %s\n"
           "trace_config = %s/flight.pbtxt\n"
           "store = %s/%s-store\n"
           "listen = 127.0.0.1:0\n"
           "session_key = " SESSION_KEY "\n"
           "coalesce_window = 0s\n"
           "max_snapshots_per_minute = 600\n",
           dir, tag, dir, dir, BENCH_CLIENT, dir, BENCH_CLIENT, BENCH_HOST,
           dir, dir, tag);
  return write_text(path, text);
}

static int collector_start(collector_t *c, const char *dir, const char *tag) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0) return -1;
  char conf[200], fd[16], line[64];
  snprintf(conf, sizeof(conf), "%s/%s.conf", dir, tag);
  snprintf(c->log, sizeof(c->log), "%s/%s.log", dir, tag);
  snprintf(fd, sizeof(fd), "%d", p[1]);
  const char *argv[] = {TRACEGATE_COLLECTOR_PATH, "--config", conf,
                        "--ready-fd", fd, "--log-level", "debug", NULL};
  c->pid = bench_spawn(argv, p[1], c->log);
  close(p[1]);
  int rv = c->pid > 0 ? bench_read_ready(p[0], STEP_MS, line, sizeof(line)) : -1;
  close(p[0]);
  if (rv < 0 || sscanf(line, "ready %d", &c->port) != 1 || c->port <= 0) {
    fprintf(stderr, PROG ": tracegate-collector did not get ready within "
            "%d ms; its log: %s\n", STEP_MS, c->log);
    return -1;
  }
  return 0;
}

/* SIGTERM; says so unless it exits 0. */
static void collector_stop(collector_t *c) {
  if (c->pid <= 0) return;
  int st = bench_stop(c->pid, STEP_MS);
  if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    fprintf(stderr, PROG ": tracegate-collector did not exit 0 on SIGTERM "
            "(wait status %d); its log: %s\n", st, c->log);
  c->pid = 0;
}

/* --- HTTP: one request per connection, loopback ---------------------------- */

typedef struct http_resp {
  int status;
  char *body; /* NUL-terminated, malloc'ed */
  size_t len;
  double sent_real_ms, sent_mono_ms; /* the request's last byte written */
} http_resp_t;

static int http(const collector_t *c, const char *method, const char *path,
                int timeout_ms, http_resp_t *r) {
  memset(r, 0, sizeof(*r));
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  char req[512];
  int n = snprintf(req, sizeof(req),
                   "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                   "%s\r\n",
                   method, path, strcmp(method, "POST") ? "" : "Content-Length: 0\r\n");
  if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
      write(fd, req, (size_t)n) != n) {
    close(fd);
    return -1;
  }
  r->sent_real_ms = real_ms();
  r->sent_mono_ms = bench_now_ms();
  size_t cap = 1 << 16, got = 0;
  char *buf = malloc(cap + 1);
  double end = bench_now_ms() + timeout_ms;
  long want = -1; /* the whole response's length, once the head is in */
  while (buf) {
    if (want >= 0 && got >= (size_t)want) break;
    double left = end - bench_now_ms();
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (left <= 0 || poll(&p, 1, (int)left) != 1) {
      fprintf(stderr, PROG ": %s %s: no whole answer within %d ms\n", method,
              path, timeout_ms);
      free(buf);
      buf = NULL;
      break;
    }
    if (got == cap) {
      char *nb = realloc(buf, cap * 2 + 1);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    ssize_t k = read(fd, buf + got, cap - got);
    if (k <= 0) break;
    got += (size_t)k;
    buf[got] = 0;
    char *head_end = want < 0 ? strstr(buf, "\r\n\r\n") : NULL;
    if (head_end) {
      const char *cl = strcasestr(buf, "\r\ncontent-length:");
      if (cl && cl < head_end)
        want = (head_end + 4 - buf) + strtol(cl + 17, NULL, 10);
    }
  }
  close(fd);
  if (!buf) return -1;
  buf[got] = 0;
  char *body = strstr(buf, "\r\n\r\n");
  if (sscanf(buf, "HTTP/1.%*d %d", &r->status) != 1 || !body) {
    fprintf(stderr, PROG ": %s %s: not an HTTP answer\n", method, path);
    free(buf);
    return -1;
  }
  body += 4;
  r->len = got - (size_t)(body - buf);
  memmove(buf, body, r->len + 1);
  r->body = buf;
  return 0;
}

/* The collector's answer |body| as JSON (jansson); NULL when it is none
 * (said). */
static json_t *answer_json(const char *body) {
  json_error_t e;
  json_t *j = body ? json_loads(body, JSON_REJECT_DUPLICATES, &e) : NULL;
  if (!j)
    fprintf(stderr, PROG ": the collector's answer is not JSON: %s\n",
            body ? e.text : "no body");
  return j;
}

/* o[key] if it is a string, else "". */
static const char *jtext(const json_t *o, const char *key) {
  const char *v = json_string_value(json_object_get(o, key));
  return v ? v : "";
}

/* o[key] if it is a number (a count above 2^63 - 1 in its string form
 * too), else -1. */
static double jnum(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  uint64_t u;
  if (json_is_number(v)) return json_number_value(v);
  return tg_json_get_u64(v, &u) == 0 ? (double)u : -1;
}

/* The first element of the array |a| whose |key| is |value|, at or after
 * index *i (advanced past it); NULL if none. */
static const json_t *next_row(const json_t *a, const char *key,
                              const char *value, size_t *i) {
  for (; *i < json_array_size(a); (*i)++) {
    const json_t *row = json_array_get(a, *i);
    if (!strcmp(jtext(row, key), value)) {
      (*i)++;
      return row;
    }
  }
  return NULL;
}

/* Elements of the array |a| whose |key| is |value|. */
static unsigned count_rows(const json_t *a, const char *key, const char *value) {
  unsigned n = 0;
  for (size_t i = 0; next_row(a, key, value, &i);) n++;
  return n;
}

/* Hosts of GET /api/v1/hosts's |body| in |state|. */
static unsigned hosts_in(const char *body, const char *state) {
  json_t *j = answer_json(body);
  unsigned n = count_rows(json_object_get(j, "hosts"), "state", state);
  json_decref(j);
  return n;
}

/* Polls GET /api/v1/hosts until |n| hosts are tracing, for |timeout_ms|.
 * Returns the ms it took, or -1 (said, with the states then). */
static double wait_tracing(const collector_t *c, unsigned n, int timeout_ms) {
  double t0 = bench_now_ms();
  unsigned tracing = 0, last_print = 0;
  for (;;) {
    http_resp_t r;
    if (http(c, "GET", "/api/v1/hosts", HTTP_MS, &r) == 0 && r.status == 200) {
      tracing = hosts_in(r.body, "tracing");
      if (tracing >= n) {
        free(r.body);
        return bench_now_ms() - t0;
      }
      double now = bench_now_ms();
      if (now - t0 > timeout_ms) {
        fprintf(stderr,
                PROG ": only %u of %u hosts tracing after %d ms (connecting "
                "%u, reconnecting %u, failed %u); the first others:\n",
                tracing, n, timeout_ms,
                hosts_in(r.body, "connecting"), hosts_in(r.body, "reconnecting"),
                hosts_in(r.body, "failed"));
        json_t *j = answer_json(r.body);
        const json_t *hs = json_object_get(j, "hosts");
        for (size_t i = 0, shown = 0; i < json_array_size(hs) && shown < 5; i++) {
          const json_t *h = json_array_get(hs, i);
          if (!strcmp(jtext(h, "state"), "tracing")) continue;
          char *row = json_dumps(h, JSON_COMPACT);
          fprintf(stderr, "  %s\n", row ? row : "?");
          free(row);
          shown++;
        }
        json_decref(j);
        free(r.body);
        return -1;
      }
      if (n > 50 && tracing / 100 != last_print / 100) {
        fprintf(stderr, PROG ": %u of %u hosts tracing (%.1f s)\n", tracing, n,
                (now - t0) / 1e3);
        last_print = tracing;
      }
      free(r.body);
    } else {
      if (r.body) free(r.body);
      if (bench_now_ms() - t0 > timeout_ms) {
        fprintf(stderr, PROG ": GET /api/v1/hosts fails\n");
        return -1;
      }
    }
    usleep(POLL_MS * 1000);
  }
}

/* --- the collector's log -------------------------------------------------- */

/* "2026-01-02T03:04:05.678Z ..." as epoch ms; -1 if not a log line. */
static double log_time_ms(const char *line) {
  struct tm tm = {0};
  int ms;
  if (sscanf(line, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon,
             &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
    return -1;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return (double)timegm(&tm) * 1e3 + ms;
}

typedef struct snap_log {
  double cloning_real_ms;  /* "cloning N of M hosts" (info), -1: none */
  double all_real_ms;      /* "all N clones requested" (debug), -1: none */
  double all_after_ms;     /* its figure: since the snapshot's start */
  unsigned cloned;         /* per-host "cloned T ms after the trigger" */
  double cloned_min, cloned_max, cloned_median;
  unsigned warnings;       /* "warn" lines about this snapshot */
  char first_warning[300];
} snap_log_t;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void read_snap_log(const char *log, const char *id, unsigned hosts,
                          snap_log_t *out) {
  memset(out, 0, sizeof(*out));
  out->cloning_real_ms = out->all_real_ms = out->all_after_ms = -1;
  double *t = calloc(hosts ? hosts : 1, sizeof(double));
  FILE *f = fopen(log, "re");
  char line[1200], tag[40];
  snprintf(tag, sizeof(tag), "snapshot %s", id);
  while (f && t && fgets(line, sizeof(line), f)) {
    const char *p = strstr(line, tag);
    if (!p) continue;
    const char *q;
    if (strstr(p, "): cloning ")) {
      out->cloning_real_ms = log_time_ms(line);
    } else if ((q = strstr(p, " clones requested, "))) {
      out->all_real_ms = log_time_ms(line);
      out->all_after_ms = strtod(q + strlen(" clones requested, "), NULL);
    } else if ((q = strstr(p, ": cloned ")) && out->cloned < hosts) {
      t[out->cloned++] = strtod(q + strlen(": cloned "), NULL);
    } else if (strstr(line, " warn ")) {
      if (!out->warnings++)
        snprintf(out->first_warning, sizeof(out->first_warning), "%.*s",
                 (int)strcspn(line, "\n"), line);
    }
  }
  if (f) fclose(f);
  if (t && out->cloned) {
    qsort(t, out->cloned, sizeof(double), cmp_double);
    out->cloned_min = t[0];
    out->cloned_max = t[out->cloned - 1];
    out->cloned_median = t[out->cloned / 2];
  }
  free(t);
}

/* --- the runs ----------------------------------------------------------------- */

static const char *met(bool ok) { return ok ? "met" : "NOT met"; }

static int baseline_run(const char *dir, unsigned ring_kb, long *rss_kb,
                        long *hwm_kb) {
  collector_t c = {0};
  if (write_config(dir, "one", 1, ring_kb) < 0 ||
      collector_start(&c, dir, "one") < 0)
    return -1;
  if (wait_tracing(&c, 1, STEP_MS * 2) < 0) {
    collector_stop(&c);
    return -1;
  }
  sleep(1); /* the first heartbeats and stats calls */
  *rss_kb = bench_proc_status_kb(c.pid, "VmRSS");
  *hwm_kb = bench_proc_status_kb(c.pid, "VmHWM");
  collector_stop(&c);
  return 0;
}

static int run(unsigned hosts, unsigned ring_kb, unsigned idle_s) {
  unsigned ng = (hosts + GROUP_HOSTS - 1) / GROUP_HOSTS;
  unsigned rate = emit_rate(ring_kb);
  char dir[96];
  if (bench_tempdir(dir, sizeof(dir), "collector") < 0 ||
      bench_certs(dir, BENCH_HOST, BENCH_CLIENT) < 0) {
    fprintf(stderr, PROG ": cannot make certificates\n");
    return 1;
  }
  double t_spawn = bench_now_ms();
  if (start_groups(ng, dir, rate) < 0) return 1;
  t_spawn = bench_now_ms() - t_spawn;
  fprintf(stderr, PROG ": %u tracegated + tracegate-relay + tracegate-emit "
          "groups up in %.0f ms\n", ng, t_spawn);

  /* 1-host run first: its ring is the first host's of the full run, which
   * attaches to it (the same key). */
  long rss1 = -1, hwm1 = -1;
  if (baseline_run(dir, ring_kb, &rss1, &hwm1) < 0) {
    fprintf(stderr, PROG ": the one-host run failed\n");
    return 1;
  }

  collector_t c = {0};
  if (write_config(dir, "all", hosts, ring_kb) < 0 ||
      collector_start(&c, dir, "all") < 0)
    return 1;
  double t_tracing = wait_tracing(&c, hosts, TRACING_WAIT_MS);
  if (t_tracing < 0) {
    collector_stop(&c);
    return 1;
  }
  double t_all_tracing = bench_now_ms();
  double cpu_to_tracing = bench_proc_cpu_s(c.pid);
  sleep(2); /* past the connect burst: the steady state */
  long rss = bench_proc_status_kb(c.pid, "VmRSS");
  long hwm = bench_proc_status_kb(c.pid, "VmHWM");

  /* Full rings: FILL_WAIT_S after the last one started. Then the
   * producers stop: in a fleet they run on the hosts' own cores, here they
   * would share the collector's two (the rings keep what they hold; a
   * clone's flush then has no producer to wait for). */
  uint64_t idle0, all0, idle1, all1;
  bench_machine_ticks(&idle0, &all0);
  double emit_cpu = 0;
  double fill_left = t_all_tracing + FILL_WAIT_S * 1e3 - bench_now_ms();
  if (fill_left > 0) usleep((useconds_t)(fill_left * 1e3));
  bench_machine_ticks(&idle1, &all1);
  double fill_idle =
      all1 > all0 ? 100.0 * (double)(idle1 - idle0) / (double)(all1 - all0) : 0;
  for (unsigned i = 0; i < ng; i++) {
    double cpu_s = 0;
    bench_stop_cpu(g_groups[i].emit, STEP_MS, &cpu_s);
    emit_cpu += cpu_s;
    g_groups[i].emit = 0;
  }

  /* Idle: every ring held, nothing asked of the collector. */
  bench_machine_ticks(&idle0, &all0);
  double others0 = groups_cpu(ng);
  double cpu0 = bench_proc_cpu_s(c.pid), t_idle = bench_now_ms();
  sleep(idle_s);
  double cpu1 = bench_proc_cpu_s(c.pid);
  double others = groups_cpu(ng) - others0;
  t_idle = bench_now_ms() - t_idle;
  bench_machine_ticks(&idle1, &all1);
  double idle_pct = 100.0 * (cpu1 - cpu0) / (t_idle / 1e3);
  double machine_idle =
      all1 > all0 ? 100.0 * (double)(idle1 - idle0) / (double)(all1 - all0) : 0;
  http_resp_t r;
  unsigned still = 0;
  if (http(&c, "GET", "/api/v1/hosts", HTTP_MS, &r) == 0) {
    still = hosts_in(r.body, "tracing");
    free(r.body);
  }

  /* The trigger. */
  long hwm_before_snap = bench_proc_status_kb(c.pid, "VmHWM");
  double snap_cpu0 = bench_proc_cpu_s(c.pid);
  if (http(&c, "POST", "/api/v1/snapshots?wait=1&reason=bench", SNAPSHOT_MS,
           &r) < 0) {
    collector_stop(&c);
    return 1;
  }
  double round_trip_ms = bench_now_ms() - r.sent_mono_ms;
  double post_real_ms = r.sent_real_ms;
  double snap_cpu = bench_proc_cpu_s(c.pid) - snap_cpu0;
  long hwm_after_snap = bench_proc_status_kb(c.pid, "VmHWM");
  if (r.status != 200) {
    fprintf(stderr, PROG ": POST /api/v1/snapshots?wait=1: %d %.300s\n",
            r.status, r.body);
    free(r.body);
    collector_stop(&c);
    return 1;
  }
  char id[24], state[24];
  json_t *answer = answer_json(r.body);
  const json_t *snap = json_object_get(answer, "snapshot");
  const json_t *rows = json_object_get(answer, "hosts");
  snprintf(id, sizeof(id), "%s", jtext(snap, "id"));
  snprintf(state, sizeof(state), "%s", jtext(snap, "state"));
  double bytes = jnum(snap, "bytes"), loss = jnum(snap, "loss");
  double packets = jnum(snap, "packets");
  double started = jnum(snap, "started_ms"), finished = jnum(snap, "finished_ms");
  unsigned ok = count_rows(rows, "outcome", "ok");
  unsigned failed = count_rows(rows, "outcome", "failed");
  char first_error[300] = "";
  size_t at = 0;
  const json_t *fe = next_row(rows, "outcome", "failed", &at);
  if (fe)
    snprintf(first_error, sizeof(first_error), "%s: %.200s", jtext(fe, "host"),
             jtext(fe, "error"));
  json_decref(answer);
  free(r.body);

  /* Listed. */
  double t_list = bench_now_ms();
  bool listed = false;
  if (http(&c, "GET", "/api/v1/snapshots", HTTP_MS, &r) == 0) {
    json_t *list = r.status == 200 ? answer_json(r.body) : NULL;
    size_t at_id = 0;
    listed = next_row(json_object_get(list, "snapshots"), "id", id, &at_id);
    json_decref(list);
    free(r.body);
  }
  t_list = bench_now_ms() - t_list;

  snap_log_t sl;
  read_snap_log(c.log, id, hosts, &sl);
  collector_stop(&c);

  /* --- the report --- */
  double per_host_kb = (double)(rss - rss1) / (hosts > 1 ? hosts - 1 : 1);
  double per_host_hwm_kb = (double)(hwm - hwm1) / (hosts > 1 ? hosts - 1 : 1);
  double clones_ms = sl.all_real_ms >= 0 ? sl.all_real_ms - post_real_ms : -1;
  double mb = bytes / 1e6;
  printf(PROG ": %u hosts (%u tracegated + tracegate-relay pairs of %u "
         "rings, started in %.0f ms; tracegate-emit --track-events %u x %u B "
         "per s per ring), rings of %u KiB, one tracegate-collector\n",
         hosts, ng, GROUP_HOSTS, t_spawn, rate, EMIT_SIZE, ring_kb);
  printf("  all rings tracing                       : %8.1f s after the start "
         "(collector CPU by then %.2f s)\n",
         t_tracing / 1e3, cpu_to_tracing);
  printf("  1. memory per host                      : %8.1f KiB  (goal <= "
         "%.0f KB: %s)  VmRSS %ld KiB with %u hosts, %ld with one\n",
         per_host_kb, GOAL_MEM_KB, met(per_host_kb * 1.024 <= GOAL_MEM_KB),
         rss, hosts, rss1);
  printf("     peak (VmHWM) per host                : %8.1f KiB  (VmHWM %ld "
         "KiB with %u hosts, %ld with one; %ld -> %ld KiB over the snapshot)\n",
         per_host_hwm_kb, hwm, hosts, hwm1, hwm_before_snap, hwm_after_snap);
  printf("  2. idle CPU, every ring held            : %8.2f %% of a core  "
         "(goal <= %.0f %%: %s)  %.2f s over %.1f s; machine idle %.0f %% of "
         "%ld cores (producers stopped; relays + services used %.2f s); %u of %u "
         "hosts tracing after\n",
         idle_pct, GOAL_IDLE_CPU_PCT, met(idle_pct <= GOAL_IDLE_CPU_PCT),
         cpu1 - cpu0, t_idle / 1e3, machine_idle, sysconf(_SC_NPROCESSORS_ONLN),
         others, still, hosts);
  if (clones_ms >= 0)
    printf("  3. trigger -> every clone requested     : %8.0f ms  (goal <= "
           "%.0f: %s)  POST sent -> the collector's debug line, 1 ms log "
           "resolution; on its own clock %.1f ms from the snapshot's start "
           "(\"cloning\" logged %.0f ms after the POST)\n",
           clones_ms, GOAL_CLONES_MS, met(clones_ms <= GOAL_CLONES_MS),
           sl.all_after_ms,
           sl.cloning_real_ms >= 0 ? sl.cloning_real_ms - post_real_ms : -1);
  else
    printf("  3. trigger -> every clone requested     :   never  (goal <= "
           "%.0f: NOT met)  the collector never logged \"all N clones "
           "requested\": some host failed before its CloneSession\n",
           GOAL_CLONES_MS);
  printf("  4. trigger -> snapshot stored           : %8.2f s  (goal <= %.0f "
         "s: %s)  POST wait=1 round trip; state %s, listed by GET "
         "/api/v1/snapshots: %s (%.0f ms); the collector's row: %.2f s\n",
         round_trip_ms / 1e3, GOAL_STORED_S,
         met(round_trip_ms / 1e3 <= GOAL_STORED_S &&
             !strcmp(state, "complete") && listed),
         state, listed ? "yes" : "NO", t_list,
         finished >= 0 && started >= 0 ? (finished - started) / 1e3 : -1);
  printf("     stored                               : %8.1f MB  (%.1f MB/s; "
         "%.0f packets, loss %.0f; collector CPU %.2f s)\n",
         mb, round_trip_ms > 0 ? mb / (round_trip_ms / 1e3) : 0, packets, loss,
         snap_cpu);
  printf("     the producers while the rings filled : %8.1f s CPU over %d s "
         "(machine idle %.0f %%), stopped before the idle window\n",
         emit_cpu, FILL_WAIT_S, fill_idle);
  /* Less stored than written: the rings wrapped, i.e. were full. */
  double written_kib = (double)rate * EMIT_SIZE * FILL_WAIT_S / 1024.0;
  double host_bytes = bytes / hosts;
  printf("     per host                             : %8.0f KiB stored of "
         ">= %.0f KiB of payload written (%s)\n",
         host_bytes / 1024.0, written_kib,
         host_bytes / 1024.0 < written_kib ? "less: the rings wrapped, full"
                                           : "NOT less: rings not full");
  /* What a ring kept, in bytes and in seconds of its producer's writing
   * (stored bytes over the payload rate: the packets' own fields and the
   * service's packets make it a little more than the payload's span). */
  printf("     history per ring                     : %8.1f s  (%.1f %% of "
         "each %u KiB ring is trace: %.2f stored bytes per ring byte)\n",
         host_bytes / ((double)rate * EMIT_SIZE), 100.0 * host_bytes / (ring_kb * 1024.0),
         ring_kb, host_bytes / (ring_kb * 1024.0));
  printf("     hosts' outcomes                      : %8u ok, %u failed%s%s\n",
         ok, failed, failed ? "; first: " : "", failed ? first_error : "");
  if (sl.cloned)
    printf("  5. snapshot skew (clone answers)        : %8.1f ms  max - min "
           "over %u hosts (first %.1f, median %.1f, last %.1f ms after the "
           "trigger, the collector's clock)\n",
           sl.cloned_max - sl.cloned_min, sl.cloned, sl.cloned_min,
           sl.cloned_median, sl.cloned_max);
  else
    printf("  5. snapshot skew (clone answers)        :   none logged\n");
  if (sl.warnings)
    printf("  collector warnings about the snapshot   : %8u  (first: %s)\n",
           sl.warnings, sl.first_warning);
  bool all_ok = listed && ok == hosts && !strcmp(state, "complete");
  if (!all_ok)
    fprintf(stderr, PROG ": the snapshot was not complete (state %s, %u of "
            "%u hosts ok, listed: %s)\n", state, ok, hosts, listed ? "yes" : "no");
  bench_stop_all(STEP_MS);
  for (unsigned i = 0; i < ng; i++) {
    g_groups[i].ts.pid = 0; /* stopped above */
    test_service_stop(&g_groups[i].ts);
  }
  return all_ok ? 0 : 1;
}

/* --- one silent host --------------------------------------------------------- */

#define SILENT_FILL_S 5      /* the rings fill a little before the stall */
#define SECOND_AFTER_MS 2000 /* the second trigger, while the first waits */

/* Polls GET /api/v1/snapshots/ID until stored; the body in |r|. Returns
 * the ms since |t0| (bench_now_ms) when seen stored, or -1. */
static double wait_stored(const collector_t *c, const char *id, double t0,
                          http_resp_t *r) {
  char path[64];
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s", id);
  while (bench_now_ms() - t0 < SNAPSHOT_MS) {
    if (http(c, "GET", path, HTTP_MS, r) == 0 && r->status == 200) {
      json_t *j = answer_json(r->body);
      bool stored = strcmp(jtext(json_object_get(j, "snapshot"), "state"),
                           "pending") != 0;
      json_decref(j);
      if (stored) return bench_now_ms() - t0;
    }
    free(r->body);
    r->body = NULL;
    usleep(20 * 1000);
  }
  return -1;
}

/* One snapshot's line of the report; true if it met the goal with every
 * host but the silent one ok. */
static bool silent_report(const char *what, const char *body, double ms,
                          unsigned hosts) {
  json_t *answer = answer_json(body);
  const json_t *rows = json_object_get(answer, "hosts");
  unsigned ok = count_rows(rows, "outcome", "ok");
  char state[24], err[200] = "";
  snprintf(state, sizeof(state), "%s",
           jtext(json_object_get(answer, "snapshot"), "state"));
  size_t at = 0;
  const json_t *fe = next_row(rows, "outcome", "failed", &at);
  if (fe) snprintf(err, sizeof(err), "%s", jtext(fe, "error"));
  json_decref(answer);
  bool good = ms >= 0 && ms / 1e3 <= GOAL_STORED_S && ok == hosts - 1;
  printf("  6. %s trigger -> stored for the others : %6.2f s  (goal <= %.0f "
         "s: %s)  state %s, %u of %u hosts ok; the silent one: %s\n",
         what, ms / 1e3, GOAL_STORED_S, met(good), state, ok, hosts, err);
  return good;
}

static int silent_run(unsigned hosts, unsigned ring_kb) {
  unsigned ng = (hosts + GROUP_HOSTS - 1) / GROUP_HOSTS;
  char dir[96];
  if (bench_tempdir(dir, sizeof(dir), "collector") < 0 ||
      bench_certs(dir, BENCH_HOST, BENCH_CLIENT) < 0) {
    fprintf(stderr, PROG ": cannot make certificates\n");
    return 1;
  }
  if (start_groups(ng, dir, emit_rate(ring_kb)) < 0) return 1;
  tg_fault_proxy_t *px;
  if (tg_fault_proxy_start(g_groups[(hosts - 1) / GROUP_HOSTS].relay.port,
                           &px) < 0) {
    fprintf(stderr, PROG ": cannot start the fault proxy\n");
    return 1;
  }
  g_silent_port = tg_fault_proxy_port(px);
  collector_t c = {0};
  int rv = 1;
  if (write_config(dir, "silent", hosts, ring_kb) < 0 ||
      collector_start(&c, dir, "silent") < 0)
    goto out;
  if (wait_tracing(&c, hosts, TRACING_WAIT_MS) < 0) goto out;
  sleep(SILENT_FILL_S);
  tg_fault_proxy_stall(px);
  http_resp_t r1, r2, s1 = {0}, s2 = {0};
  if (http(&c, "POST", "/api/v1/snapshots?reason=silent-1", HTTP_MS, &r1) < 0)
    goto out;
  char id1[24], id2[24];
  json_t *a1 = answer_json(r1.body);
  snprintf(id1, sizeof(id1), "%s", jtext(a1, "id"));
  json_decref(a1);
  free(r1.body);
  usleep(SECOND_AFTER_MS * 1000);
  if (http(&c, "POST", "/api/v1/snapshots?reason=silent-2", HTTP_MS, &r2) < 0)
    goto out;
  json_t *a2 = answer_json(r2.body);
  snprintf(id2, sizeof(id2), "%s", jtext(a2, "id"));
  json_decref(a2);
  free(r2.body);
  if (!id1[0] || !id2[0]) {
    fprintf(stderr, PROG ": a trigger got no snapshot id (%s, %s)\n", id1, id2);
    goto out;
  }
  double ms1 = wait_stored(&c, id1, r1.sent_mono_ms, &s1);
  double ms2 = wait_stored(&c, id2, r2.sent_mono_ms, &s2);
  snap_log_t sl;
  read_snap_log(c.log, id2, hosts, &sl);
  double begun_ms =
      sl.cloning_real_ms >= 0 ? sl.cloning_real_ms - r2.sent_real_ms : -1;
  printf(PROG " --silent: %u hosts, one of them silent (a stalled proxy), "
         "rings of %u KiB; two operator triggers %d ms apart\n",
         hosts, ring_kb, SECOND_AFTER_MS);
  bool good = silent_report("first ", s1.body ? s1.body : "", ms1, hosts);
  good &= silent_report("second", s2.body ? s2.body : "", ms2, hosts);
  printf("     second trigger -> begun           : %6.0f ms  (goal for its "
         "clones <= %.0f: %s)  POST sent -> \"cloning\" logged (1 ms log "
         "resolution): the clones on standby connections are sent by then; "
         "hosts whose standby the first still held dial their own\n",
         begun_ms, GOAL_CLONES_MS, met(begun_ms >= 0 && begun_ms <= GOAL_CLONES_MS));
  if (sl.cloned)
    printf("     second trigger -> clone answers   : first %.0f, median %.0f, "
           "last %.0f ms  (%u hosts, the collector's clock)\n",
           sl.cloned_min, sl.cloned_median, sl.cloned_max, sl.cloned);
  free(s1.body);
  free(s2.body);
  rv = good ? 0 : 1;
out:
  tg_fault_proxy_resume(px);
  collector_stop(&c);
  bench_stop_all(STEP_MS);
  for (unsigned i = 0; i < ng; i++) {
    g_groups[i].ts.pid = 0; /* stopped above */
    test_service_stop(&g_groups[i].ts);
  }
  tg_fault_proxy_stop(px);
  return rv;
}

/* --- one host's part of a big snapshot ------------------------------------ */

#define PART_PIECE (64u << 10) /* one host's bytes between two others' */
#define PART_HEAD 4096u        /* the trace's head: the collector's packets */
#define PART_WRITE (1u << 20)  /* bytes per write, as snap.c's WRITE_CHUNK */
#define PART_TRIES 5

/* GET |path|, the body counted and dropped: its status, bytes and ms. */
static int http_count(const collector_t *c, const char *path, int timeout_ms,
                      int *status, uint64_t *bytes, double *ms) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  char req[512], buf[1 << 16], head[4096];
  int n = snprintf(req, sizeof(req),
                   "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close"
                   "\r\n\r\n", path);
  double t0 = bench_now_ms();
  if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
      write(fd, req, (size_t)n) != n) {
    close(fd);
    return -1;
  }
  size_t hn = 0;
  uint64_t body = 0;
  long long want = -1;
  *status = 0;
  for (;;) {
    double left = t0 + timeout_ms - bench_now_ms();
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (left <= 0 || poll(&p, 1, (int)left) != 1) break;
    ssize_t k = read(fd, buf, sizeof(buf));
    if (k <= 0) break;
    if (want < 0) { /* still in the head */
      size_t take = (size_t)k < sizeof(head) - 1 - hn ? (size_t)k
                                                      : sizeof(head) - 1 - hn;
      memcpy(head + hn, buf, take);
      hn += take;
      head[hn] = 0;
      char *end = strstr(head, "\r\n\r\n");
      if (!end) continue;
      const char *cl = strcasestr(head, "\r\ncontent-length:");
      if (sscanf(head, "HTTP/1.%*d %d", status) != 1 || !cl || cl > end) break;
      want = strtoll(cl + 17, NULL, 10);
      body = (uint64_t)k - (uint64_t)(end + 4 - head);
    } else {
      body += (uint64_t)k;
    }
    if (want >= 0 && body >= (uint64_t)want) break;
  }
  *ms = bench_now_ms() - t0;
  close(fd);
  *bytes = body;
  return want >= 0 && body == (uint64_t)want ? 0 : -1;
}

/* The synthetic snapshot: HOSTS hosts' bytes interleaved a piece at a
 * time after the head, fed to the index as snap.c feeds it. */
static int part_write(const char *store_dir, unsigned hosts,
                      unsigned host_kb, uint64_t *id, uint64_t *bytes,
                      double *ms) {
  tg_coll_store_config_t cfg = {.dir = store_dir};
  tg_coll_store_t *st = NULL;
  tg_coll_writer_t *w = NULL;
  tg_coll_index_builder_t *b = tg_coll_index_builder_new(hosts);
  tg_coll_host_result_t *hr = calloc(hosts, sizeof(*hr));
  char (*names)[32] = calloc(hosts, sizeof(*names));
  uint8_t *buf = malloc(PART_WRITE);
  int rv = -1;
  double t0 = bench_now_ms();
  if (!b || !hr || !names || !buf || tg_coll_store_open(&cfg, &st, NULL) < 0)
    goto out;
  tg_coll_begin_t bg = {.trigger = "operator", .reason = "bench", .origin = ""};
  if (tg_coll_store_begin(st, &bg, &w, id) < 0) goto out;
  for (size_t i = 0; i < PART_WRITE; i++) buf[i] = (uint8_t)(i * 131 + 7);
  for (unsigned k = 0; k < hosts; k++) {
    snprintf(names[k], sizeof(names[k]), "host-%04u.bench:7467", k);
    tg_coll_index_name(b, k, names[k]);
    hr[k] = (tg_coll_host_result_t){.host = names[k],
                                    .outcome = TG_COLL_HOST_OK,
                                    .bytes = (uint64_t)host_kb << 10,
                                    .packets = 1};
  }
  if (tg_coll_writer_write(w, buf, PART_HEAD) < 0) goto out;
  tg_coll_index_head(b, PART_HEAD);
  uint64_t off = PART_HEAD, per_host = (uint64_t)host_kb << 10;
  size_t pending = 0;
  for (uint64_t done = 0; done < per_host; done += PART_PIECE) {
    uint64_t piece = per_host - done < PART_PIECE ? per_host - done : PART_PIECE;
    for (unsigned k = 0; k < hosts; k++) {
      tg_coll_index_add(b, k, off, piece);
      off += piece;
      pending += piece;
      if (pending >= PART_WRITE) {
        if (tg_coll_writer_write(w, buf, pending) < 0) goto out;
        pending = 0;
      }
    }
  }
  if (pending && tg_coll_writer_write(w, buf, pending) < 0) goto out;
  tg_coll_writer_set_index(w, b);
  tg_coll_result_t r = {.packets = hosts, .hosts = hr, .n_hosts = hosts};
  *bytes = tg_coll_writer_bytes(w);
  rv = tg_coll_store_finish(st, w, &r);
  w = NULL;
out:
  if (w) tg_coll_store_abort(st, w, "bench");
  tg_coll_store_close(st);
  *ms = bench_now_ms() - t0;
  tg_coll_index_builder_free(b);
  free(hr);
  free(names);
  free(buf);
  return rv;
}

static int cmp_ms(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int part_run(unsigned hosts, unsigned host_kb) {
  char dir[96], path[300], text[2048];
  if (bench_tempdir(dir, sizeof(dir), "collector") < 0 ||
      bench_certs(dir, BENCH_HOST, BENCH_CLIENT) < 0) {
    fprintf(stderr, PROG ": cannot make certificates\n");
    return 1;
  }
  snprintf(path, sizeof(path), "%s/part-store", dir);
  uint64_t id = 0, bytes = 0;
  double write_ms;
  if (part_write(path, hosts, host_kb, &id, &bytes, &write_ms) < 0) {
    fprintf(stderr, PROG ": cannot write the synthetic snapshot\n");
    return 1;
  }
  /* The collector serves that store; its one host (nobody listens there)
   * only reconnects meanwhile. */
  snprintf(path, sizeof(path), "%s/part.hosts", dir);
  if (write_text(path, "127.0.0.1:1\n") < 0) return 1;
  snprintf(path, sizeof(path), "%s/flight.pbtxt", dir);
  if (write_text(path, "buffers { size_kb: 64 fill_policy: RING_BUFFER }\n"
                       "data_sources { config { name: \"track_event\" } }\n") < 0)
    return 1;
  snprintf(path, sizeof(path), "%s/part.conf", dir);
  snprintf(text, sizeof(text),
           "hosts = %s/part.hosts\nca = %s/pki/ca.pem\n"
           "cert = %s/pki/%s.pem\nkey = %s/pki/%s.key\n"
           "tls_server_name = %s\ntrace_config = %s/flight.pbtxt\n"
           "store = %s/part-store\nlisten = 127.0.0.1:0\n"
           "session_key = " SESSION_KEY "\n",
           dir, dir, dir, BENCH_CLIENT, dir, BENCH_CLIENT, BENCH_HOST, dir, dir);
  if (write_text(path, text) < 0) return 1;
  collector_t c = {0};
  if (collector_start(&c, dir, "part") < 0) return 1;
  char idt[24];
  snprintf(idt, sizeof(idt), "%016" PRIx64, id);
  int rv = 1, status = 0;
  uint64_t got = 0, want_part = PART_HEAD + ((uint64_t)host_kb << 10);
  double one[PART_TRIES], whole_ms = -1;
  unsigned k = hosts / 2;
  for (int t = 0; t < PART_TRIES; t++) {
    snprintf(path, sizeof(path),
             "/api/v1/snapshots/%s/trace?host=host-%04u.bench:7467", idt,
             (k + (unsigned)t) % hosts);
    if (http_count(&c, path, SNAPSHOT_MS, &status, &got, &one[t]) < 0 ||
        status != 200 || got != want_part) {
      fprintf(stderr, PROG ": GET %s: status %d, %" PRIu64 " of %" PRIu64
              " bytes\n", path, status, got, want_part);
      goto out;
    }
  }
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/trace", idt);
  if (http_count(&c, path, SNAPSHOT_MS, &status, &got, &whole_ms) < 0 ||
      status != 200 || got != bytes) {
    fprintf(stderr, PROG ": GET %s: status %d, %" PRIu64 " of %" PRIu64
            " bytes\n", path, status, got, bytes);
    goto out;
  }
  double first = one[0];
  qsort(one, PART_TRIES, sizeof(one[0]), cmp_ms);
  printf(PROG " --host-part: a synthetic snapshot of %u hosts x %u KiB "
         "(%.1f MB, written with its index in %.1f s), served by "
         "tracegate-collector over loopback HTTP\n",
         hosts, host_kb, (double)bytes / 1e6, write_ms / 1e3);
  printf("  7. one host's part (?host=)             : %8.1f ms  (goal <= "
         "%.0f s: %s)  first %.1f ms, median of %d hosts %.1f ms; %.1f MB "
         "each\n",
         one[PART_TRIES - 1], GOAL_HOST_PART_S,
         met(one[PART_TRIES - 1] <= GOAL_HOST_PART_S * 1e3), first, PART_TRIES,
         one[PART_TRIES / 2], (double)want_part / 1e6);
  printf("     the whole file, same API             : %8.1f ms  (%.1f MB, "
         "%.0f MB/s)\n",
         whole_ms, (double)bytes / 1e6, (double)bytes / 1e3 / whole_ms);
  rv = one[PART_TRIES - 1] <= GOAL_HOST_PART_S * 1e3 ? 0 : 1;
out:
  collector_stop(&c);
  return rv;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: " PROG " [HOSTS [RING_KB [IDLE_S]]]\n"
          "  tracegate-collector holding HOSTS rings (2-%d, default 1000) of\n"
          "  RING_KB KiB each (4-65536, default 1024), %d hosts per\n"
          "  tracegated + tracegate-relay pair with a tracegate-emit writing\n"
          "  track events; measures its memory per host, its CPU over IDLE_S\n"
          "  idle seconds (1-600, default 10), then one operator snapshot:\n"
          "  trigger to every clone requested, trigger to stored and listed,\n"
          "  and the clones' skew. Each figure is printed next to its goal.\n"
          "usage: " PROG " --silent [HOSTS [RING_KB]]\n"
          "  the same fleet with one host silent: two triggers %d ms apart,\n"
          "  each one's trigger to stored for the others, and the second's\n"
          "  trigger to its clones requested.\n"
          "usage: " PROG " --host-part [HOSTS [HOST_KB]]\n"
          "  a synthetic snapshot of HOSTS hosts (default 1000) of HOST_KB KiB\n"
          "  each (64-65536, default 2048) written into a store with its host\n"
          "  index, then one host's part and the whole file downloaded from\n"
          "  tracegate-collector; the part's time is printed next to its goal.\n"
          "usage: " PROG " --store [MB [PART_MB [UPLOADERS [PACE_MBPS]]]]\n"
          "  an MB megabyte snapshot (1-4096, default 300) stored in a\n"
          "  directory store and in a bucket on a Ceph gateway started here\n"
          "  (parts of PART_MB MiB, 5-256, default 8, sent by UPLOADERS\n"
          "  threads, 1-16, default 4); each one's time to stored and its\n"
          "  last byte to listed, next to their goals, beside one plain PUT\n"
          "  of the same bytes to the same gateway. PACE_MBPS (0-4096,\n"
          "  default 0: at once) writes the bytes at that rate, as hosts'\n"
          "  answers come, into each store (no plain PUT then).\n",
          HOSTS_MAX, GROUP_HOSTS, SECOND_AFTER_MS);
}

int main(int argc, char **argv) {
  if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    usage(stdout);
    return 0;
  }
  uint64_t hosts = 1000, ring_kb = 1024, idle_s = 10;
  if (argc > 1 && !strcmp(argv[1], "--store")) {
    uint64_t mb = 300, part_mb = 8, uploaders = 4, pace = 0;
    if (argc > 6 ||
        (argc > 2 && bench_parse_uint(PROG, "MB", argv[2], 1, 4096, &mb) < 0) ||
        (argc > 3 &&
         bench_parse_uint(PROG, "PART_MB", argv[3], 5, 256, &part_mb) < 0) ||
        (argc > 4 &&
         bench_parse_uint(PROG, "UPLOADERS", argv[4], 1, 16, &uploaders) < 0) ||
        (argc > 5 &&
         bench_parse_uint(PROG, "PACE_MBPS", argv[5], 0, 4096, &pace) < 0)) {
      usage(stderr);
      return 2;
    }
    bench_deadline(1800);
    return bench_store_run(mb, (unsigned)part_mb, (unsigned)uploaders,
                           (unsigned)pace);
  }
  if (argc > 1 && !strcmp(argv[1], "--host-part")) {
    uint64_t host_kb = 2048;
    if (argc > 4 ||
        (argc > 2 && bench_parse_uint(PROG, "HOSTS", argv[2], 1, HOSTS_MAX, &hosts) < 0) ||
        (argc > 3 && bench_parse_uint(PROG, "HOST_KB", argv[3], 64, 65536, &host_kb) < 0)) {
      usage(stderr);
      return 2;
    }
    bench_children_init();
    bench_deadline(600);
    return part_run((unsigned)hosts, (unsigned)host_kb);
  }
  bool silent = argc > 1 && !strcmp(argv[1], "--silent");
  if (silent) {
    argv++;
    argc--;
  }
  if (argc > (silent ? 3 : 4) ||
      (argc > 1 && bench_parse_uint(PROG, "HOSTS", argv[1], 2, HOSTS_MAX, &hosts) < 0) ||
      (argc > 2 && bench_parse_uint(PROG, "RING_KB", argv[2], 4, 65536, &ring_kb) < 0) ||
      (argc > 3 && bench_parse_uint(PROG, "IDLE_S", argv[3], 1, 600, &idle_s) < 0)) {
    usage(stderr);
    return 2;
  }
  bench_children_init();
  if (silent) {
    bench_deadline((unsigned)(60 + TRACING_WAIT_MS / 1000 + SILENT_FILL_S +
                              2 * SNAPSHOT_MS / 1000 + 60));
    return silent_run((unsigned)hosts, (unsigned)ring_kb);
  }
  /* Start, the one-host run, tracing, the fill, the snapshot, the stop. */
  bench_deadline((unsigned)(60 + 30 + TRACING_WAIT_MS / 1000 + FILL_WAIT_S +
                            idle_s + SNAPSHOT_MS / 1000 + 60));
  return run((unsigned)hosts, (unsigned)ring_kb, (unsigned)idle_s);
}
