/* Racing the peers: one trace moved across loopback by each network path
 * a fleet operator could use, in one run on the same data.
 *
 * One tracegated with one tracegate-emit at full rate (1 KiB raw packets,
 * --rate 0) writing into a large ring, and `tracegate record` (the real
 * CLI, a child process) reading it for SECONDS over:
 *
 *   relay+zstd   tracegate-relay, mutual TLS, --compress zstd:1 (default)
 *   relay        tracegate-relay, mutual TLS, --compress none
 *   ssh -L       `ssh -L LOCAL.sock:CONSUMER.sock` to a loopback sshd this
 *                bench starts on a free port with a throwaway host key and
 *                user key; the CLI records from LOCAL.sock
 *   stunnel      stunnel4 client (UNIX -> TLS, client certificate) to a
 *                stunnel4 server (TLS -> the consumer socket)
 *
 * Every path's TCP connection crosses a counting forwarder of this process
 * (bench_forward.c: splice, so it adds little), which gives the bytes on
 * the wire. Per path: trace MB/s delivered (bytes of the trace file the
 * CLI wrote / the CLI's wall time: connect, stream, drain), the bytes on
 * the wire against the trace, CPU s per GB of trace at the serving end
 * (relay, sshd, stunnel server) and at the recording end (the CLI, plus
 * the ssh or stunnel client), from wait4's rusage of each process, which
 * starts and stops with its path. The servers' start-up (reading keys)
 * is in their figure too: small next to seconds of streaming.
 *
 * Then the compression ratio on two other kinds of data, with the relay
 * and zstd only: track events (tracegate-emit --track-events) and kernel
 * scheduling events (linux.ftrace from tracegate-probes, each event whole:
 * compact_sched off, as the goal on them was set; the compact format is
 * already dense and zstd takes little more off it; needs root and
 * tracefs, else skipped with the reason). Last, the goals next
 * to the figures, each met or not met.
 *
 * A path whose tool is missing (sshd, ssh, ssh-keygen, stunnel4) is
 * skipped with the reason. Every process started here is stopped here.
 *
 * The four paths run ROUNDS times, in alternating order (1 2 3 4, 4 3 2
 * 1, ...), and each path's figures are summed over its rounds: the
 * machine is shared, and a single pass would credit whichever path ran in
 * a quiet moment.
 *
 * The producer spins: at full rate it takes every cycle it gets, so on a
 * small machine the race also measures how the scheduler shares the cores
 * between it and each path's processes. --producer-nice N starts it under
 * nice N: at 19 it takes only what the paths leave (and the paths race
 * for the service's read-out alone); at 0, the default and how the peers were
 * measured, a path that needs less CPU leaves more to the service.
 *
 * usage: see usage() below, or run with --help.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_children.h"
#include "bench_forward.h"
#include "bench_remote.h"
#include "test_service.h"

#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif
#ifndef TRACEGATE_EMIT_PATH
#error "TRACEGATE_EMIT_PATH must name the tracegate-emit binary"
#endif
#ifndef TRACEGATE_PROBES_PATH
#error "TRACEGATE_PROBES_PATH must name the tracegate-probes binary"
#endif

#define SSHD_PATH "/usr/sbin/sshd"
#define SSH_PATH "/usr/bin/ssh"
#define SSH_KEYGEN_PATH "/usr/bin/ssh-keygen"
#define STUNNEL_PATH "/usr/bin/stunnel4"
#define READY_MS 10000 /* bound of a server's or a tunnel's start */
#define STOP_MS 5000
/* The whole run: 4 paths + 2 more kinds of data, SECONDS each, plus
 * start-up and draining a full ring per path. */
#define DEADLINE_FIXED_S 150

/* Goals. */
#define GOAL_SPEED_X 2.5   /* relay+zstd MB/s >= 2.5x stunnel's */
#define GOAL_CPU_X 0.3     /* at <= 0.3x stunnel's CPU s/GB */
#define GOAL_WIRE_TRACK (1.0 / 3.0)
#define GOAL_WIRE_SCHED (1.0 / 2.0)

typedef struct env {
  char dir[96];
  test_service_t ts;
  pid_t producer;
  unsigned seconds, buffer_mb, rounds;
  int producer_nice; /* nice(1) increment for tracegate-emit, 0..19 */
  char user[64];
} env_t;

typedef struct row {
  const char *name;
  bool ran;
  char skip[240]; /* why it did not run */
  uint64_t trace, up, down;
  double wall_s, cpu_server, cpu_client;
  double cpu_source; /* tracegated and the producer, during the CLI's run */
  unsigned rounds; /* summed into this row (UINT_MAX: one was skipped) */
} row_t;

typedef enum kind { K_RAW, K_TRACK, K_SCHED } kind_t;

static const char *const kind_ds[] = {"tracegate.emit", "track_event",
                                      "linux.ftrace"};

/* --- helpers --------------------------------------------------------------- */

static bool executable(const char *path) { return access(path, X_OK) == 0; }

static int write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "we");
  if (!f) return -1;
  int rv = fputs(text, f) < 0 ? -1 : 0;
  if (fclose(f) != 0) rv = -1;
  return rv;
}

/* CPU seconds (user + system) a live process has used so far, from
 * /proc/PID/stat; 0 when it cannot be read. For the processes that outlive
 * a path (tracegated, the producer), whose rusage wait4 gives only at the
 * end. */
static double proc_cpu_s(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = 0;
  /* The comm field may hold spaces and parentheses: fields count from
   * the last ')'. utime and stime are fields 14 and 15. */
  const char *p = strrchr(buf, ')');
  unsigned long long ut, st;
  if (!p || sscanf(p + 1,
                   " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                   &ut, &st) != 2)
    return 0;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double source_cpu_s(const env_t *e) {
  return proc_cpu_s(e->ts.pid) + (e->producer > 0 ? proc_cpu_s(e->producer) : 0);
}

static uint64_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Polls for |path| to exist (a tunnel's UNIX socket appears when it
 * listens; neither ssh nor stunnel says so on a pipe). Bounded. */
static bool wait_for_path(const char *path, pid_t owner, int timeout_ms) {
  double end = bench_now_ms() + timeout_ms;
  while (bench_now_ms() < end) {
    if (access(path, F_OK) == 0) return true;
    if (kill(owner, 0) != 0) return false;
    usleep(10000);
  }
  return false;
}

/* Polls a child's log for |text| (its "listening" line). Bounded. */
static bool wait_for_log(const char *log, const char *text, pid_t owner,
                         int timeout_ms) {
  double end = bench_now_ms() + timeout_ms;
  char buf[8192];
  while (bench_now_ms() < end) {
    FILE *f = fopen(log, "re");
    if (f) {
      size_t n = fread(buf, 1, sizeof(buf) - 1, f);
      fclose(f);
      buf[n] = 0;
      if (strstr(buf, text)) return true;
    }
    if (kill(owner, 0) != 0) return false;
    usleep(10000);
  }
  return false;
}

static void show_log(const char *what, const char *log) {
  fprintf(stderr, "bench_network_paths: %s; its log (%s):\n", what, log);
  char cmd[256];
  snprintf(cmd, sizeof(cmd), "tail -n 20 '%s' >&2", log);
  if (system(cmd) != 0) fprintf(stderr, "(no log)\n");
}

/* The TraceConfig of a kind of data, as text. */
static int write_config(const env_t *e, kind_t k, char *path, size_t len) {
  snprintf(path, len, "%s/config-%d.pbtxt", e->dir, (int)k);
  char text[1024];
  const char *ds_extra =
      k == K_SCHED ? " ftrace_config { ftrace_events: \"sched/sched_switch\" "
                     "ftrace_events: \"sched/sched_waking\" ftrace_events: "
                     "\"sched/sched_wakeup_new\" ftrace_events: "
                     "\"task/task_newtask\" ftrace_events: "
                     "\"sched/sched_process_exit\" "
                     "compact_sched { enabled: false } }"
                   : "";
  snprintf(text, sizeof(text),
           "buffers { size_kb: %u fill_policy: RING_BUFFER }\n"
           "data_sources { config { name: \"%s\"%s } }\n"
           "duration_ms: %u\n",
           e->buffer_mb * 1024, kind_ds[k], ds_extra, e->seconds * 1000);
  return write_file(path, text);
}

/* Runs `tracegate record -c CONFIG --txt -o OUT` + |extra| to its end.
 * Fills r->trace, r->wall_s and adds its CPU to r->cpu_client. */
static int run_cli(const env_t *e, kind_t k, row_t *r,
                   const char *const extra[]) {
  char cfg[160], out[160], log[160];
  if (write_config(e, k, cfg, sizeof(cfg)) < 0) return -1;
  snprintf(out, sizeof(out), "%s/out.pftrace", e->dir);
  snprintf(log, sizeof(log), "%s/cli.log", e->dir);
  unlink(out);
  unlink(log);
  const char *argv[40] = {TRACEGATE_CLI_PATH, "record", "-c", cfg, "--txt",
                          "-o", out};
  size_t n = 7;
  for (size_t i = 0; extra[i] && n + 1 < sizeof(argv) / sizeof(argv[0]); i++)
    argv[n++] = extra[i];
  argv[n] = NULL;
  double t0 = bench_now_ms(), src0 = source_cpu_s(e);
  pid_t pid = bench_spawn(argv, -1, log);
  if (pid < 0) return -1;
  double cpu = 0;
  int st = bench_wait_cpu(pid, (int)(e->seconds * 1000) + 60000, &cpu);
  r->wall_s = (bench_now_ms() - t0) / 1e3;
  r->cpu_source += source_cpu_s(e) - src0;
  r->cpu_client += cpu;
  r->trace = file_size(out);
  unlink(out);
  if (st != 0) {
    show_log("tracegate record failed", log);
    return -1;
  }
  return 0;
}

static void skip(row_t *r, const char *why) {
  snprintf(r->skip, sizeof(r->skip), "%s", why);
}

/* --- the paths ------------------------------------------------------------- */

static void path_relay(const env_t *e, kind_t k, const char *compress,
                       row_t *r) {
  bench_relay_t relay;
  if (bench_relay_spawn(&relay, e->dir, 0, e->ts.consumer_sock) < 0 ||
      bench_relay_wait(&relay, READY_MS) < 0) {
    skip(r, "tracegate-relay did not start");
    return;
  }
  int port;
  bench_forward_t *fw = bench_forward_start(relay.port, &port);
  if (!fw) {
    bench_stop(relay.pid, STOP_MS);
    skip(r, "no forwarder");
    return;
  }
  char host[32], ca[160], cert[160], key[160];
  snprintf(host, sizeof(host), "127.0.0.1:%d", port);
  snprintf(ca, sizeof(ca), "%s/pki/ca.pem", e->dir);
  snprintf(cert, sizeof(cert), "%s/pki/%s.pem", e->dir, BENCH_CLIENT);
  snprintf(key, sizeof(key), "%s/pki/%s.key", e->dir, BENCH_CLIENT);
  const char *extra[] = {"-H", host, "--ca", ca, "--cert", cert, "--key", key,
                         "--tls-server-name", BENCH_HOST, "--compress",
                         compress, NULL};
  int rv = run_cli(e, k, r, extra);
  bench_forward_stop(fw, &r->up, &r->down);
  bench_stop_cpu(relay.pid, STOP_MS, &r->cpu_server);
  if (rv < 0) skip(r, "the recording failed (log above)");
  else r->ran = true;
}

static int ssh_keys(const env_t *e) {
  char cmd[512];
  snprintf(cmd, sizeof(cmd),
           "cd '%s' && rm -f host_key host_key.pub user_key user_key.pub && "
           SSH_KEYGEN_PATH " -q -t ed25519 -N '' -f host_key && "
           SSH_KEYGEN_PATH " -q -t ed25519 -N '' -f user_key",
           e->dir);
  return system(cmd) == 0 ? 0 : -1;
}

static void path_ssh(const env_t *e, row_t *r) {
  if (!executable(SSHD_PATH) || !executable(SSH_PATH) ||
      !executable(SSH_KEYGEN_PATH)) {
    skip(r, "openssh-server or its client is not installed "
            "(apt-get install openssh-server)");
    return;
  }
  /* sshd insists on its privilege separation directory. */
  if (mkdir("/run/sshd", 0755) < 0 && errno != EEXIST) {
    skip(r, "cannot create /run/sshd, which sshd needs (not root?)");
    return;
  }
  if (ssh_keys(e) < 0) {
    skip(r, "ssh-keygen failed");
    return;
  }
  int sport = bench_free_port();
  char conf[160], text[1024], log[160];
  snprintf(conf, sizeof(conf), "%s/sshd_config", e->dir);
  snprintf(log, sizeof(log), "%s/sshd.log", e->dir);
  snprintf(text, sizeof(text),
           "ListenAddress 127.0.0.1\nPort %d\nHostKey %s/host_key\n"
           "AuthorizedKeysFile %s/user_key.pub\nPidFile none\n"
           "StrictModes no\nUsePAM no\nPasswordAuthentication no\n"
           "KbdInteractiveAuthentication no\n"
           "PermitRootLogin prohibit-password\n"
           "AllowStreamLocalForwarding yes\nStreamLocalBindUnlink yes\n",
           sport, e->dir, e->dir);
  if (sport < 0 || write_file(conf, text) < 0) {
    skip(r, "cannot write the sshd configuration");
    return;
  }
  /* -d: one connection, no fork of the listener, exit after it: the
   * session's work is all in this process tree's rusage. */
  const char *sargv[] = {SSHD_PATH, "-D", "-d", "-e", "-f", conf, NULL};
  unlink(log); /* its "listening" line must be this round's */
  pid_t sshd = bench_spawn(sargv, -1, log);
  if (sshd < 0 || !wait_for_log(log, "Server listening", sshd, READY_MS)) {
    show_log("sshd did not start", log);
    if (sshd > 0) bench_stop(sshd, STOP_MS);
    skip(r, "sshd did not start (log above)");
    return;
  }
  int port;
  bench_forward_t *fw = bench_forward_start(sport, &port);
  if (!fw) {
    bench_stop(sshd, STOP_MS);
    skip(r, "no forwarder");
    return;
  }
  char fwd[400], sock[160], ukey[160], portarg[16], dest[96], clog[160];
  snprintf(sock, sizeof(sock), "%s/ssh.sock", e->dir);
  snprintf(fwd, sizeof(fwd), "%s:%s", sock, e->ts.consumer_sock);
  snprintf(ukey, sizeof(ukey), "%s/user_key", e->dir);
  snprintf(portarg, sizeof(portarg), "%d", port);
  snprintf(dest, sizeof(dest), "%s@127.0.0.1", e->user);
  snprintf(clog, sizeof(clog), "%s/ssh.log", e->dir);
  unlink(sock); /* it appears when this round's forward listens */
  const char *cargv[] = {SSH_PATH, "-N", "-F", "/dev/null", "-i", ukey,
                         "-o", "IdentitiesOnly=yes",
                         "-o", "StrictHostKeyChecking=no",
                         "-o", "UserKnownHostsFile=/dev/null",
                         "-o", "BatchMode=yes",
                         "-o", "ExitOnForwardFailure=yes",
                         "-o", "LogLevel=ERROR",
                         "-p", portarg, "-L", fwd, dest, NULL};
  pid_t ssh = bench_spawn(cargv, -1, clog);
  int rv = -1;
  if (ssh > 0 && wait_for_path(sock, ssh, READY_MS)) {
    /* A tunnel carries no file descriptors: ReadBuffers, not
     * write_into_file. */
    const char *extra[] = {"--socket", sock, "--read-buffers", NULL};
    rv = run_cli(e, K_RAW, r, extra);
  } else {
    show_log("ssh -L did not set up the forward", clog);
    show_log("sshd", log);
  }
  double cpu = 0;
  bench_stop_cpu(ssh, STOP_MS, &cpu);
  r->cpu_client += cpu;
  /* The connection ends with the client: sshd -d then exits by itself. */
  bench_wait_cpu(sshd, STOP_MS, &r->cpu_server);
  bench_forward_stop(fw, &r->up, &r->down);
  if (rv < 0) skip(r, "the recording over ssh -L failed (log above)");
  else r->ran = true;
}

static pid_t start_stunnel(const env_t *e, const char *name, const char *text,
                           char *log, size_t loglen) {
  char conf[160];
  snprintf(conf, sizeof(conf), "%s/%s.conf", e->dir, name);
  snprintf(log, loglen, "%s/%s.log", e->dir, name);
  if (write_file(conf, text) < 0) return -1;
  unlink(log); /* its "Configuration successful" must be this round's */
  const char *argv[] = {STUNNEL_PATH, conf, NULL};
  pid_t pid = bench_spawn(argv, -1, log);
  if (pid > 0 && !wait_for_log(log, "Configuration successful", pid,
                               READY_MS)) {
    show_log("stunnel did not start", log);
    bench_stop(pid, STOP_MS);
    return -1;
  }
  return pid;
}

static void path_stunnel(const env_t *e, row_t *r) {
  if (!executable(STUNNEL_PATH)) {
    skip(r, "stunnel4 is not installed (apt-get install stunnel4)");
    return;
  }
  int sport = bench_free_port();
  char text[1024], slog[160], clog[160];
  /* Mutual TLS as the relay has it: the server asks for a certificate
   * signed by the bench CA. */
  snprintf(text, sizeof(text),
           "foreground = yes\npid =\n[server]\naccept = 127.0.0.1:%d\n"
           "connect = %s\ncert = %s/pki/%s.pem\nkey = %s/pki/%s.key\n"
           "CAfile = %s/pki/ca.pem\nverifyChain = yes\n",
           sport, e->ts.consumer_sock, e->dir, BENCH_HOST, e->dir, BENCH_HOST,
           e->dir);
  pid_t server = sport > 0 ? start_stunnel(e, "stunnel-server", text, slog,
                                           sizeof(slog))
                           : -1;
  if (server < 0) {
    skip(r, "the stunnel server did not start (log above)");
    return;
  }
  int port;
  bench_forward_t *fw = bench_forward_start(sport, &port);
  if (!fw) {
    bench_stop(server, STOP_MS);
    skip(r, "no forwarder");
    return;
  }
  char sock[160];
  snprintf(sock, sizeof(sock), "%s/stunnel.sock", e->dir);
  unlink(sock);
  snprintf(text, sizeof(text),
           "foreground = yes\npid =\n[client]\nclient = yes\naccept = %s\n"
           "connect = 127.0.0.1:%d\ncert = %s/pki/%s.pem\n"
           "key = %s/pki/%s.key\nCAfile = %s/pki/ca.pem\nverifyChain = yes\n"
           "checkHost = %s\n",
           sock, port, e->dir, BENCH_CLIENT, e->dir, BENCH_CLIENT, e->dir,
           BENCH_HOST);
  pid_t client = start_stunnel(e, "stunnel-client", text, clog, sizeof(clog));
  int rv = -1;
  if (client > 0) {
    const char *extra[] = {"--socket", sock, "--read-buffers", NULL};
    rv = run_cli(e, K_RAW, r, extra);
    if (rv < 0) show_log("stunnel client", clog);
    double cpu = 0;
    bench_stop_cpu(client, STOP_MS, &cpu);
    r->cpu_client += cpu;
  }
  bench_forward_stop(fw, &r->up, &r->down);
  bench_stop_cpu(server, STOP_MS, &r->cpu_server);
  if (rv < 0) skip(r, "the recording over stunnel failed (log above)");
  else r->ran = true;
}

/* --- producers ------------------------------------------------------------- */

static int start_producer(env_t *e, kind_t k, char *why, size_t whylen) {
  char log[160];
  snprintf(log, sizeof(log), "%s/producer-%d.log", e->dir, (int)k);
  if (k == K_SCHED) {
    if (geteuid() != 0) {
      snprintf(why, whylen, "not root: linux.ftrace needs root");
      return -1;
    }
    if (access("/sys/kernel/tracing/events/sched", F_OK) != 0 &&
        access("/sys/kernel/debug/tracing/events/sched", F_OK) != 0) {
      snprintf(why, whylen, "tracefs is not mounted");
      return -1;
    }
    const char *argv[] = {TRACEGATE_PROBES_PATH, "--socket",
                          e->ts.producer_sock, "--log-level", "warn", NULL};
    e->producer = bench_spawn(argv, -1, log);
  } else {
    /* Under nice(1) at every setting (at 0 it changes nothing), so that
     * every setting runs the same process tree. */
    char nice_n[8];
    snprintf(nice_n, sizeof(nice_n), "%d", e->producer_nice);
    const char *argv[] = {"/usr/bin/nice", "-n", nice_n, TRACEGATE_EMIT_PATH,
                          "--socket", e->ts.producer_sock, "--rate", "0", "--size", "1024", "--threads", "1",
                          "--log-level", "warn",
                          k == K_TRACK ? "--track-events" : NULL, NULL};
    e->producer = bench_spawn(argv, -1, log);
  }
  if (e->producer < 0) {
    snprintf(why, whylen, "cannot start the producer");
    return -1;
  }
  return 0;
}

static void stop_producer(env_t *e) {
  if (e->producer > 0) bench_stop(e->producer, STOP_MS);
  e->producer = -1;
}

/* --- the report ------------------------------------------------------------ */

/* A path's figures over rounds: sums (a skipped round skips the path). */
static void add_round(row_t *sum, const row_t *one) {
  if (!one->ran) {
    if (!sum->skip[0]) snprintf(sum->skip, sizeof(sum->skip), "%s", one->skip);
    sum->ran = false;
    sum->rounds = UINT_MAX; /* never counted as run again */
    return;
  }
  if (sum->rounds == UINT_MAX) return;
  sum->rounds++;
  sum->ran = true;
  sum->trace += one->trace;
  sum->up += one->up;
  sum->down += one->down;
  sum->wall_s += one->wall_s;
  sum->cpu_server += one->cpu_server;
  sum->cpu_client += one->cpu_client;
  sum->cpu_source += one->cpu_source;
}

static double mbps(const row_t *r) {
  return r->wall_s > 0 ? (double)r->trace / 1e6 / r->wall_s : 0;
}
static double per_gb(double cpu, const row_t *r) {
  return r->trace ? cpu / ((double)r->trace / 1e9) : 0;
}
/* Share of one core a process used while the path ran. */
static double busy(double cpu, const row_t *r) {
  return r->wall_s > 0 ? 100.0 * cpu / r->wall_s : 0;
}
static double wire_ratio(const row_t *r) {
  return r->trace ? (double)(r->up + r->down) / (double)r->trace : 0;
}

static void print_row(const row_t *r) {
  if (!r->ran) {
    printf("  %-12s skipped: %s\n", r->name, r->skip);
    return;
  }
  printf("  %-12s %8.1f MB/s  %8.1f MB trace  %8.1f MB wire (%5.3f of it)  "
         "CPU s/GB: serving %5.2f, recording %5.2f, both %5.2f\n",
         r->name, mbps(r), (double)r->trace / 1e6,
         (double)(r->up + r->down) / 1e6, wire_ratio(r),
         per_gb(r->cpu_server, r), per_gb(r->cpu_client, r),
         per_gb(r->cpu_server + r->cpu_client, r));
  printf("  %-12s busy: serving end %3.0f%%, recording end %3.0f%% of a core; "
         "tracegated + producer %3.0f%%\n",
         "", busy(r->cpu_server, r), busy(r->cpu_client, r),
         busy(r->cpu_source, r));
}

static const char *verdict(bool ok) { return ok ? "met" : "NOT met"; }

static void print_goals(const row_t *zstd, const row_t *plain,
                        const row_t *stunnel, const row_t *track,
                        const row_t *sched) {
  printf("goals:\n");
  if (!stunnel->ran || !zstd->ran) {
    printf("  relay+zstd >= %.1fx stunnel's MB/s at <= %.1fx its CPU s/GB: "
           "not measured (%s)\n",
           GOAL_SPEED_X, GOAL_CPU_X,
           !stunnel->ran ? stunnel->skip : zstd->skip);
  } else {
    double sx = mbps(zstd) / mbps(stunnel);
    double cx = per_gb(zstd->cpu_server + zstd->cpu_client, zstd) /
                per_gb(stunnel->cpu_server + stunnel->cpu_client, stunnel);
    printf("  relay+zstd MB/s >= %.1fx stunnel's        : %5.2fx  %s\n",
           GOAL_SPEED_X, sx, verdict(sx >= GOAL_SPEED_X));
    printf("  relay+zstd CPU s/GB <= %.1fx stunnel's    : %5.2fx  %s\n",
           GOAL_CPU_X, cx, verdict(cx <= GOAL_CPU_X));
  }
  if (track->ran)
    printf("  wire <= 1/3 of the trace, track events   : %5.3f   %s\n",
           wire_ratio(track), verdict(wire_ratio(track) <= GOAL_WIRE_TRACK));
  else
    printf("  wire <= 1/3 of the trace, track events   : not measured (%s)\n",
           track->skip);
  if (sched->ran)
    printf("  wire <= 1/2 of the trace, sched events   : %5.3f   %s\n",
           wire_ratio(sched), verdict(wire_ratio(sched) <= GOAL_WIRE_SCHED));
  else
    printf("  wire <= 1/2 of the trace, sched events   : skipped (%s)\n",
           sched->skip);
  /* A worker thread pays where one end of the connection uses a whole
   * core while the machine has another to give. */
  const row_t *relays[] = {zstd, plain};
  for (size_t i = 0; i < 2; i++) {
    const row_t *r = relays[i];
    if (!r->ran) continue;
    double b = busy(r->cpu_server, r) > busy(r->cpu_client, r)
                   ? busy(r->cpu_server, r)
                   : busy(r->cpu_client, r);
    printf("  %-10s one end at a full core?    : busiest end %3.0f%%  %s\n",
           r->name, b,
           b >= 90 ? "core-bound: worth a worker thread"
                   : "no: that end waits for the source, a thread would idle");
  }
  if (stunnel->ran && plain->ran)
    printf("  relay (no compression) MB/s >= stunnel's : %5.2fx  %s\n",
           mbps(plain) / mbps(stunnel), verdict(mbps(plain) >= mbps(stunnel)));
  else
    printf("  relay (no compression) MB/s >= stunnel's : not measured (%s)\n",
           !stunnel->ran ? stunnel->skip : plain->skip);
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_network_paths [--producer-nice N] [SECONDS [BUFFER_MB "
          "[ROUNDS]]]\n"
          "  Races tracegate-relay (with and without zstd), ssh -L and "
          "stunnel4 on\n"
          "  loopback, on the same trace, and prints MB/s, bytes on the wire "
          "and CPU s/GB\n"
          "  per path next to the goals.\n"
          "  SECONDS    recording time per path and round (1-60, default 3)\n"
          "  BUFFER_MB  tracegated's ring (1-1024, default 256)\n"
          "  ROUNDS     rounds in alternating order, summed (1-10, default "
          "3,\n"
          "             as the peers were measured)\n"
          "  --producer-nice N  run tracegate-emit under nice N (0-19, "
          "default 0)\n");
}

/* One number in [lo, hi], or a clear error. */
static int parse_uint(const char *what, const char *s, unsigned lo,
                      unsigned hi, unsigned *out) {
  uint64_t v;
  if (bench_parse_uint("bench_network_paths", what, s, lo, hi, &v) < 0)
    return -1;
  *out = (unsigned)v;
  return 0;
}

/* Returns 0, 1 after --help, or -1 after an error it reported. */
static int parse_args(env_t *e, int argc, char **argv) {
  e->seconds = 3;
  e->buffer_mb = 256;
  e->rounds = 3; /* three alternating rounds, as the peers were measured */
  unsigned pos = 0, nice_n = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int rv;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 1;
    } else if (!strcmp(a, "--producer-nice") && i + 1 < argc) {
      rv = parse_uint("--producer-nice", argv[++i], 0, 19, &nice_n);
    } else if (a[0] == '-') {
      fprintf(stderr, "bench_network_paths: unknown option or missing value "
                      "'%s'\n", a);
      usage(stderr);
      return -1;
    } else if (pos == 0) {
      rv = parse_uint("SECONDS", a, 1, 60, &e->seconds);
    } else if (pos == 1) {
      rv = parse_uint("BUFFER_MB", a, 1, 1024, &e->buffer_mb);
    } else if (pos == 2) {
      rv = parse_uint("ROUNDS", a, 1, 10, &e->rounds);
    } else {
      fprintf(stderr, "bench_network_paths: too many arguments\n");
      usage(stderr);
      return -1;
    }
    if (rv < 0) return -1;
    if (a[0] != '-') pos++;
  }
  e->producer_nice = (int)nice_n;
  return 0;
}

int main(int argc, char **argv) {
  static env_t env;
  env_t *e = &env;
  int parsed = parse_args(e, argc, argv);
  if (parsed != 0) return parsed > 0 ? 0 : 2;
  e->producer = -1;
  struct passwd *pw = getpwuid(geteuid());
  snprintf(e->user, sizeof(e->user), "%s", pw ? pw->pw_name : "root");
  bench_children_init();
  bench_deadline(DEADLINE_FIXED_S * e->rounds + 6 * e->rounds * e->seconds);
  if (bench_tempdir(e->dir, sizeof(e->dir), "paths") < 0 ||
      bench_certs(e->dir, BENCH_HOST, BENCH_CLIENT) < 0) {
    fprintf(stderr, "bench_network_paths: cannot make certificates\n");
    return 1;
  }
  if (test_service_start(&e->ts) < 0) {
    fprintf(stderr, "bench_network_paths: cannot start tracegated\n");
    return 1;
  }
  bench_adopt(e->ts.pid);
  bench_remove_at_exit(e->ts.dir);

  row_t rows[4] = {{.name = "relay+zstd"},
                   {.name = "relay"},
                   {.name = "ssh -L"},
                   {.name = "stunnel"}};
  row_t track = {.name = "relay+zstd"}, sched = {.name = "relay+zstd"};
  char why[200];
  if (start_producer(e, K_RAW, why, sizeof(why)) < 0) {
    fprintf(stderr, "bench_network_paths: %s\n", why);
    return 1;
  }
  /* Rounds in alternating order, summed per path: the machine is shared,
   * and one pass would hand whichever path ran in a quiet moment the win. */
  for (unsigned round = 0; round < e->rounds; round++) {
    for (int k = 0; k < 4; k++) {
      int i = round % 2 ? 3 - k : k;
      row_t one = {.name = rows[i].name};
      if (i == 0) path_relay(e, K_RAW, "zstd:1", &one);
      else if (i == 1) path_relay(e, K_RAW, "none", &one);
      else if (i == 2) path_ssh(e, &one);
      else path_stunnel(e, &one);
      add_round(&rows[i], &one);
    }
  }
  stop_producer(e);

  if (start_producer(e, K_TRACK, why, sizeof(why)) == 0) {
    path_relay(e, K_TRACK, "zstd:1", &track);
    track.rounds = 1;
    stop_producer(e);
  } else {
    skip(&track, why);
  }
  if (start_producer(e, K_SCHED, why, sizeof(why)) == 0) {
    path_relay(e, K_SCHED, "zstd:1", &sched);
    sched.rounds = 1;
    stop_producer(e);
  } else {
    skip(&sched, why);
  }

  printf("bench_network_paths: tracegate record over each path, %u s each, "
         "%u rounds summed, %u MB ring, loopback, %ld cores shared with "
         "whatever else runs\n",
         e->seconds, e->rounds, e->buffer_mb, sysconf(_SC_NPROCESSORS_ONLN));
  printf("tracegate-emit at full rate under nice %d, 1 KiB raw packets:\n",
         e->producer_nice);
  for (int i = 0; i < 4; i++) print_row(&rows[i]);
  printf("tracegate-emit --track-events (track events):\n");
  print_row(&track);
  printf("linux.ftrace sched_switch/sched_waking/... (kernel scheduling):\n");
  print_row(&sched);
  print_goals(&rows[0], &rows[1], &rows[3], &track, &sched);

  bench_stop_all(STOP_MS); /* tracegated; the directories go at exit */
  return 0;
}
