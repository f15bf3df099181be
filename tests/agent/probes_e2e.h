/* The end-to-end harness of the probes' kernel tests: a real tracegated
 * (test_service.h), a real tracegate-probes in a child, raw consumers
 * recording sessions of it, and the tracefs of this machine. Shared by
 * test_ftrace_e2e, test_ftrace_pids_e2e, test_ftrace_ksyms_e2e,
 * test_inode_file_map_e2e and test_tools_e2e.
 *
 * Every helper fails the running cmocka test on error (it asserts, and
 * returns no error code), so call them from a test only. Every wait is
 * bounded by E2E_WAIT_MS. What e2e_start_probes starts, e2e_stop_probes
 * stops and reaps; a test that fails half-way leaves its tracegate-probes
 * to PR_SET_PDEATHSIG.
 *
 * Pointers: sessions and packet lists are the caller's (usually on its
 * stack) and must not move once enabled: a session's config points into
 * itself. Paths and names are borrowed for the call only. Packets that
 * e2e_read_more collects belong to the list until e2e_packets_free.
 * Nothing here starts a thread; the tracefs root found by
 * e2e_require_ftrace is the only state.
 */
#ifndef TRACEGATE_TESTS_AGENT_PROBES_E2E_H
#define TRACEGATE_TESTS_AGENT_PROBES_E2E_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pb/config/trace_config.pb-c.h"
#include "pb/trace/trace_packet.pb-c.h"
#include "test_service.h"

/* The bound of every wait of these tests. */
#define E2E_WAIT_MS 20000

/* --- environment --------------------------------------------------------- */

/* Returns if this test may trace the kernel (root, tracefs mounted);
 * otherwise skips the test with the reason, or fails it with the reason if
 * TG_REQUIRE_FTRACE is set (CI runs as root on machines with tracefs). */
void e2e_require_ftrace(void);
/* tracefs' mount point, as e2e_require_ftrace found it ("" before). */
const char *e2e_tracefs_root(void);

/* --- clocks and files ---------------------------------------------------- */

/* CLOCK_BOOTTIME in ns: the clock of the probes' packets. */
uint64_t e2e_boottime_ns(void);
void e2e_sleep_ms(unsigned ms);
/* The start of the file |path| (at most |cap| - 1 bytes), NUL-terminated;
 * "" if it cannot be read. */
void e2e_read_text(const char *path, char *out, size_t cap);

/* --- tracegate-probes ---------------------------------------------------- */

/* Runs tracegate-probes (PROBES_PATH, a definition of this library) on
 * |ts|'s producer socket at log level info, its stderr into |err_path|. As
 * nobody if |drop_root|: then from a copy in ts->dir, which the caller made
 * reachable (0755). Returns the pid, or -1 (the copy failed). */
pid_t e2e_spawn_probes(const test_service_t *ts, const char *err_path,
                       bool drop_root);
/* e2e_spawn_probes with its stderr into ts->dir/|name| (the path written
 * into |err_path|, |cap| bytes), once the service lists at least
 * |data_sources| data sources. Returns the pid. */
pid_t e2e_start_probes(const test_service_t *ts, char *err_path, size_t cap,
                       const char *name, bool drop_root, size_t data_sources);
/* SIGTERM, then fails the test with the child's stderr (|err_path|) unless
 * it exited with status 0 within E2E_WAIT_MS. Always reaps. */
void e2e_stop_probes(pid_t pid, const char *err_path);
/* Waits until the service |c| is connected to lists at least |n| data
 * sources. */
bool e2e_wait_data_sources(raw_consumer_t *c, size_t n);
/* The tracefs instances of tracegate-probes |pid| (one per session with
 * linux.ftrace). After e2e_require_ftrace. */
size_t e2e_instances_of(pid_t pid);
/* The path of |pid|'s one instance into |dir| (|cap| bytes): the files of
 * a session's own tracefs state (its trace_marker). Fails the test unless
 * |pid| has exactly one. */
void e2e_only_instance_of(pid_t pid, char *dir, size_t cap);
/* Waits until |pid| has |n| instances. tracefs has no change
 * notification, so this polls. */
bool e2e_wait_instances(pid_t pid, size_t n);

/* --- recording ----------------------------------------------------------- */

typedef struct e2e_packets {
  Perfetto__Protos__TracePacket **pk;
  size_t n, cap;
} e2e_packets_t;

/* Appends what the session's buffer holds now (ReadBuffers drains it). */
void e2e_read_more(raw_consumer_t *c, e2e_packets_t *all);
void e2e_packets_free(e2e_packets_t *all);
/* A consumer Flush: producers commit what they buffered. */
void e2e_flush(raw_consumer_t *c);

/* --- linux.ftrace sessions ----------------------------------------------- */

/* A raw consumer's session with linux.ftrace (and, if added, a second data
 * source) and the packets read of it. Not movable: the config points into
 * itself. */
typedef struct e2e_session {
  raw_consumer_t c;
  simple_cfg_t sc;
  Perfetto__Protos__FtraceConfig fc;
  Perfetto__Protos__FtraceConfig__CompactSchedConfig cs;
  Perfetto__Protos__TraceConfig__DataSource ds2, *dsp[2];
  e2e_packets_t got;
} e2e_session_t;

/* A linux.ftrace session's config in |s|: |events| (borrowed until
 * e2e_session_enable), compact_sched if |compact|, a 32 MiB buffer, 2 MiB
 * of kernel buffer per CPU, drained every 50 ms. Tests may change it
 * before e2e_session_enable. */
void e2e_session_config(e2e_session_t *s, char **events, size_t n,
                        bool compact);
/* Adds the data source |dsc| (borrowed until e2e_session_enable) to the
 * session, on its buffer. */
void e2e_session_add_source(e2e_session_t *s,
                            Perfetto__Protos__DataSourceConfig *dsc);
/* Connects and enables the session configured in |s|. */
void e2e_session_enable(e2e_session_t *s, const test_service_t *ts);
/* e2e_session_config, then e2e_session_enable. */
void e2e_session_begin(e2e_session_t *s, const test_service_t *ts,
                       char **events, size_t n, bool compact);
/* Reads until the session's start stats arrived: its instance records. */
void e2e_wait_started(e2e_session_t *s);
/* Frees the packets read and closes the consumer (disabled or not). */
void e2e_session_close(e2e_session_t *s);

/* TracePacket.data is a oneof: a member is valid only for its case. */
const Perfetto__Protos__FtraceEventBundle *e2e_bundle_of(
    const Perfetto__Protos__TracePacket *p);
/* The last ftrace_stats of |p| with |phase| (1: start, 2: end), or NULL.
 * linux.ftrace writes a pair at every flush and at stop, every START with
 * the counters of its start: the last END covers the whole session. */
const Perfetto__Protos__FtraceStats *e2e_find_stats(const e2e_packets_t *p,
                                                    int phase);

#endif /* TRACEGATE_TESTS_AGENT_PROBES_E2E_H */
