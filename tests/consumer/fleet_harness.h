/* The fleet end-to-end harness: simulated hosts (a real tracegated, a real
 * tracegate-relay in front of it on a loopback TLS port, a raw producer
 * from tests/support), the tracegate CLI as a child, and the temporary
 * directory that holds the certificates, the relays' logs and the traces.
 * Shared by test_fleet_e2e, test_fleet_netfail, test_fleet_partition and
 * test_relay_survival_e2e; the trace files they read are fleet_trace.h's,
 * the cutting proxy fleet_proxy.h's.
 *
 * Every helper but the two group fixtures fails the running cmocka test on
 * error (it asserts and returns no error code), so call them from a test
 * only. Every wait has a deadline (FLEET_WAIT_MS unless it says
 * otherwise). What a *_start starts, the matching *_stop stops and reaps;
 * a test calls them itself. Tests are declared with FLEET_TEST(), whose
 * teardown kills and reaps the children of a test that failed half-way
 * (its relays, services, collector, CLI), so the next test of the binary
 * does not meet them; a test that passes without stopping one fails.
 *
 * Pointers: the structs (fleet_relay_t, fleet_host_t, fleet_cli_t) are the
 * caller's, usually on its stack, and must not move while they hold a
 * child. Every other pointer argument (paths, tags, argument lists) is
 * borrowed for the call only; nothing here keeps or frees it. What is
 * returned points into the caller's struct or into a static buffer, as
 * each function says; nothing returned is for the caller to free.
 *
 * The certificates, made once per test binary with deploy/certs/tg-certs:
 * a CA, a relay certificate for "relay.test" at 127.0.0.1 that every relay
 * uses (the CLI connects to 127.0.0.1 with --tls-server-name relay.test),
 * and a client "alice" with the record role.
 */
#ifndef TRACEGATE_TESTS_CONSUMER_FLEET_HARNESS_H
#define TRACEGATE_TESTS_CONSUMER_FLEET_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fault_proxy.h"
#include "hostile_relay.h"
#include "test_notice.h"
#include "test_proc.h"
#include "test_service.h"

/* A cmocka test entry of a binary built on this harness. */
#define FLEET_TEST(f) cmocka_unit_test_teardown(f, tg_test_children_teardown)

#define FLEET_WAIT_MS 30000
#define FLEET_BIG 1000 /* payload bytes of a fleet_commit_big() packet */

/* --- the directory ---------------------------------------------------------- */

/* For a cmocka group setup: ignores SIGPIPE, makes the directory
 * "/tmp/tg-test-<tag>-XXXXXX" and the certificates in it. Returns 0 or -1
 * (cmocka's convention). |tag| need only last through the call. */
int fleet_dir_create(const char *tag);
/* A cmocka group teardown: removes the directory and all below it. */
int fleet_dir_teardown(void **state);
/* |name| in the directory. The result is one of 8 static buffers used in
 * turn: copy it if it must outlive 7 more calls. */
const char *fleet_in_dir(const char *name);

/* The TLS arguments every remote command takes (alice's certificate).
 * Expands to 8 argv words; fleet_in_dir()'s buffers are among them. */
#define FLEET_TLS_ARGS                                                         \
  "--tls-server-name", "relay.test", "--cert", fleet_in_dir("pki/alice.pem"), \
      "--key", fleet_in_dir("pki/alice.key"), "--ca", fleet_in_dir("pki/ca.pem")

/* --- relays ------------------------------------------------------------------- */

typedef struct fleet_relay {
  pid_t pid; /* 0 once stopped */
  int port;
  char log[256]; /* the file its stderr (at level info) is appended to */
} fleet_relay_t;

/* Starts tracegate-relay on 127.0.0.1:|port| (0: any; r->port says which)
 * in front of |consumer_sock|, with the directory's relay certificate, CA
 * and authz, and waits for its ready line. |extra_args|: NULL, or more
 * arguments, NULL-terminated. The strings need only last through the
 * call; |r| is the caller's and is overwritten. */
void fleet_relay_start(fleet_relay_t *r, const char *consumer_sock, int port,
                       const char *log, const char *const *extra_args);
/* fleet_relay_start() as on a host that rebooted: the relay runs in a
 * mount namespace of its own where /proc/sys/kernel/random/boot_id reads
 * |boot_id| (what GetHostInfo says). Needs root and mounts: returns false,
 * with nothing started, where the namespace cannot be made (the test then
 * skips). */
bool fleet_relay_start_rebooted(fleet_relay_t *r, const char *consumer_sock,
                                int port, const char *log,
                                const char *boot_id);
/* Sends |sig| and reaps (SIGKILL after 10 s). Nothing if not running. */
void fleet_relay_stop(fleet_relay_t *r, int sig);

/* Writes the directory's "fake-ssh": a script that writes its arguments
 * (-o BatchMode=yes, user@host, the remote command) to the directory's
 * "ssh-args" and runs the relay in --stdio mode in front of
 * |consumer_sock|, as sshd would run the remote command. Returns the
 * script's path (fleet_in_dir's rotating buffers: copy it to keep it);
 * the CLI runs it when TRACEGATE_SSH names it. */
const char *fleet_fake_ssh(const char *consumer_sock);

/* --- hosts ---------------------------------------------------------------------- */

/* A simulated host. The caller owns it (usually on its stack); everything
 * in it is started and stopped through the fleet_host_* calls. */
typedef struct fleet_host {
  test_service_t ts;
  fleet_relay_t relay;
  raw_producer_t p; /* valid while has_p */
  bool has_p;
  char spec[64]; /* "127.0.0.1:<relay port>", for -H */
} fleet_host_t;

/* Zeroes |h|, starts its tracegated (test_service_start) and its relay
 * (fleet_host_start_relay). */
void fleet_host_start(fleet_host_t *h, const char *relay_log,
                      const char *const *relay_args);
/* The relay half, for a host whose tracegated the caller started itself
 * into a zeroed |h| (a service with other arguments); sets h->spec. */
void fleet_host_start_relay(fleet_host_t *h, const char *relay_log,
                            const char *const *relay_args);
/* raw_producer_connect() on h->ts with these arguments, into h->p. */
void fleet_host_connect_producer(fleet_host_t *h, const char *name,
                                 const char *ds_name, uint32_t page_kb,
                                 uint32_t smb_kb, bool will_notify_on_stop);
/* Closes the producer, if any. */
void fleet_host_drop_producer(fleet_host_t *h);
/* The producer, the relay (SIGTERM) and tracegated, in that order;
 * tracegated must exit with status 0. */
void fleet_host_stop(fleet_host_t *h);

/* Starts a hostile relay (hostile_relay.h) in |mode| in front of |h|'s
 * relay: the directory's relay.test certificate toward clients, alice's
 * toward the relay. h->spec names it from then on, so that -H and the
 * collector's inventory reach the host through it. The caller stops it
 * with tg_hostile_relay_stop() before fleet_host_stop(). */
tg_hostile_relay_t *fleet_hostile_start(fleet_host_t *h, tg_hostile_mode_t mode);

/* --- producer steps ---------------------------------------------------------------- */

/* |n| small test packets "tag" (values first, first + 1, ...) in one chunk
 * (page 0, chunk 0, writer 1, id |chunk_id|), committed. */
void fleet_commit_packets(raw_producer_t *p, uint32_t chunk_id, const char *tag,
                          uint32_t first, unsigned n);
/* The same with |n| (at most 24) packets of FLEET_BIG payload bytes
 * ("tag:" padded with 'x'), which needs a page of at least 32 KiB. */
void fleet_commit_big(raw_producer_t *p, uint32_t chunk_id, const char *tag,
                      uint32_t first, unsigned n);
/* linux.ftrace's start and end stats (make_ftrace_stats_packet) with
 * these overruns of |n_cpus| CPUs (at most 4), in one chunk (page 0,
 * chunk 0, writer 1, id |chunk_id|), committed. */
void fleet_commit_ftrace_stats(raw_producer_t *p, uint32_t chunk_id,
                               const uint64_t *start, const uint64_t *end,
                               size_t n_cpus);
/* linux.ftrace's start stats as tracegate-probes write them when tracefs
 * cannot be opened: |events| (|n| of them) failed, no CPU's counters; in
 * one chunk (page 0, chunk 0, writer 1, id |chunk_id|), committed. */
/* The same from probes whose ring buffer opened (one CPU's counters):
 * linux.ftrace runs, without |events|. */
void fleet_commit_ftrace_refused(raw_producer_t *p, uint32_t chunk_id,
                                 char **events, size_t n);
void fleet_commit_ftrace_failure(raw_producer_t *p, uint32_t chunk_id,
                                 char **events, size_t n);
/* Waits for the next flush request and acknowledges it. */
void fleet_ack_flush(raw_producer_t *p);

/* --- the CLI as a child -------------------------------------------------------------- */

/* The caller owns it; between fleet_cli_spawn() and fleet_cli_wait() it
 * holds a child and the read end of its stderr pipe. */
typedef struct fleet_cli {
  pid_t pid;
  int err_fd; /* -1 once closed */
  char err[65536]; /* its stderr so far, NUL-terminated */
  size_t n_err;
} fleet_cli_t;

/* Starts tracegate with |args| (NULL-terminated, without argv[0], at most
 * 46; they need only last through the call): stdin and stdout /dev/null,
 * stderr collected, SIGINT at its default. Overwrites |c|. */
void fleet_cli_spawn(fleet_cli_t *c, const char *const *args);
/* Reads its stderr until |needle| shows, at most |timeout_ms|; fails the
 * test past it or if stderr closes first. Returns where the needle starts
 * in c->err (valid until the next read into c). */
const char *fleet_cli_read_until(fleet_cli_t *c, const char *needle,
                                 int64_t timeout_ms);
/* The same until a whole line carries notice |n|; copies it into |line|. */
void fleet_cli_read_notice(fleet_cli_t *c, tg_notice_t n, char *line,
                           size_t cap, int64_t timeout_ms);
/* Collects stderr until the child closes it, then reaps it, and prints
 * what it said. Returns the exit code (128 + the signal when killed by
 * one), or -1 (after killing it) past FLEET_WAIT_MS. A sanitizer report
 * fails the test. */
int fleet_cli_wait(fleet_cli_t *c);

/* --- an app on a host ------------------------------------------------------------------ */

/* tracegate-emit (|emit|: its path) on |h| with |mode_args|
 * (NULL-terminated, at most 12), its stderr into emit<i>.log of the fleet
 * directory. With |port|, an rpc server (--rpc-server): back once its
 * "ready PORT" line gave *|port|. Returns its pid (stop it with
 * tg_test_stop). */
pid_t fleet_emit_start(const char *emit, const fleet_host_t *h, int i,
                       const char *const *mode_args, unsigned *port);

/* Trace processor's counts of the requests between tracegate-emit's
 * --rpc-client and --rpc-server in the trace at |path|: flows from an
 * rpc.call slice to an rpc.serve one, the slices of each name, the
 * requests seen on both ends (matched by their traceparent argument,
 * whether trace processor joined their flow or not) and of those the ones
 * whose rpc.serve begins before its rpc.call. (A server's slice may end
 * after its answer reached the client: it goes on after sending.) False
 * without trace processor (PERFETTO_BIN unset); a failed query fails the
 * test. */
bool fleet_rpc_counts(const char *path, unsigned long long *flows,
                      unsigned long long *calls, unsigned long long *serves,
                      unsigned long long *early, unsigned long long *pairs);

/* --- waits -------------------------------------------------------------------------- */

/* Waits until the file |path| (a daemon's log: it has no other way to say
 * so) holds |needle| in its first 128 KiB, looking every 20 ms, at most
 * FLEET_WAIT_MS. Returns tg_test_now_ms() when it was seen. */
int64_t fleet_wait_log(const char *path, const char *needle);
/* Waits until |n| bytes went to the client through |px| past |base|, then
 * until a few hundred more did (heartbeat and stats replies, which the
 * relay sends after a read's end): the read that carried them is over. */
void fleet_wait_read_through(tg_fault_proxy_t *px, uint64_t base, uint64_t n);

#endif /* TRACEGATE_TESTS_CONSUMER_FLEET_HARNESS_H */
