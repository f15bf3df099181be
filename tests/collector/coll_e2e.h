/* tracegate-collector as a child of a cmocka test, against hosts of the
 * fleet harness (fleet_harness.h): its config in the fleet directory, its
 * start (on --ready-fd) and stop, and HTTP requests to its API made by a
 * child (tg-test-http, libcurl), so that a request can be in flight while
 * the test answers the producers' flushes. Shared by the collector's end
 * to end tests; every function asserts (cmocka) rather than returns an
 * error, and every wait is bounded (FLEET_WAIT_MS unless it says).
 *
 * Pointers: the structs are the caller's and must not move while they hold
 * a child; paths are borrowed for the call. Ids come back in a static
 * buffer, valid until the next call.
 */
#ifndef TRACEGATE_TESTS_COLL_E2E_H
#define TRACEGATE_TESTS_COLL_E2E_H

#include <stddef.h>
#include <sys/types.h>

#include "fleet_harness.h"

typedef struct collector {
  pid_t pid;
  int port;
  int health_port; /* health_listen's, from the ready line; 0: none */
} collector_t;

/* Starts tracegate-collector on fleet_in_dir("collector.conf"), its log
 * in collector.log; back once it wrote "ready <port>". */
void collector_start(collector_t *c);
/* The same with more arguments (NULL-terminated, at most 8; borrowed for
 * the call), e.g. "--shard", "1/2". */
void collector_start_args(collector_t *c, const char *const *extra);
/* The same run by |wrapper| (NULL-terminated, at most 12: a program by
 * its path and its arguments, to which the collector's path and arguments
 * are appended, e.g. setpriv as another user) and from |collector| (NULL:
 * the build's). All borrowed for the call. */
void collector_start_wrapped(collector_t *c, const char *const *wrapper,
                             const char *collector, const char *const *extra);
/* SIGTERM: it must exit 0 (and a sanitizer report would fail it). */
void collector_stop(collector_t *c);
/* Prints collector.log to stderr, for a failure's diagnosis. */
void collector_dump_log(void);

/* An HTTP request by a child (tg-test-http, over libcurl): the body goes
 * to |out|, the status to |out|.status (0: no HTTP answer). Returns the
 * child (reap with http_wait). */
pid_t http_spawn(const collector_t *c, const char *method, const char *path,
                 const char *out);
/* The same over HTTPS as client |who| (pki/WHO.pem and .key, made by
 * tg-certs in the fleet directory; "-": no certificate), verifying the
 * collector against pki/ca.pem; NULL |who|: plain HTTP. A refused
 * handshake shows as status 0. */
pid_t http_spawn_as(const collector_t *c, const char *who, const char *method,
                    const char *path, const char *out);
int https_as(const collector_t *c, const char *who, const char *method,
             const char *path, const char *out);
/* Reaps the request; returns its HTTP status. */
int http_wait(pid_t pid, const char *out);
/* The Content-Length of the answer a request wrote to |out|; -1: none. */
long long http_length(const char *out);
/* Both: returns the status. */
int http(const collector_t *c, const char *method, const char *path,
         const char *out);

/* Until every one of |n| hosts says |state|. */
void wait_hosts(const collector_t *c, size_t n, const char *state);
/* An operator's snapshot, waited for while the first |n_ack| producers
 * answer the clone's flush. Returns the id (a static buffer) from |json|. */
const char *snapshot(const collector_t *c, fleet_host_t *hosts, size_t n_ack,
                     const char *json);
/* A snapshot begun, with |reason|, then the collector SIGKILLed while
 * the two hosts' clones wait on their flush, which each then answers:
 * the id (a static buffer; its row is PENDING until the collector starts
 * again, which fails it as interrupted). |json| takes the POST's answer. */
const char *snapshot_killed_under_way(collector_t *c, fleet_host_t h[2],
                                      const char *reason, const char *json);
/* The snapshot's trace through the API, into |out|. */
void download(const collector_t *c, const char *id, const char *out);
/* The index, in the snapshot answer |json| (GET /api/v1/snapshots/ID), of
 * the host row spelt |spec| among its first |n| rows; fails the test when
 * none is. */
size_t snapshot_host_row(const char *json, const char *spec, size_t n);
/* Host row |row|'s links count |field| in the snapshot answer |json|;
 * fails the test when the row has none. */
long long snapshot_row_link(const char *json, size_t row, const char *field);

/* |n| hosts of the fleet harness, each with a producer of "fleet.ds". */
void start_hosts(fleet_host_t *h, size_t n);
/* The inventory: |n| hosts from |hosts| (name=relay.test), replacing the
 * file by a rename as tools replace files. */
void write_hosts(fleet_host_t *hosts, size_t n);
/* The config for |n| hosts (write_hosts), the store in store/, then
 * |extra| lines (or NULL). */
void write_config(fleet_host_t *hosts, size_t n, const char *extra);
/* The same with the relays' certificates checked against |ca| (a path in
 * the fleet directory) instead of pki/ca.pem. */
void write_config_ca(fleet_host_t *hosts, size_t n, const char *ca,
                     const char *extra);

/* Replaces the first |from| by |to| in the collector's config file. */
void edit_config(const char *from, const char *to);
/* An app on |h| fires trigger |name| (ActivateTriggers, as
 * tg_agent_activate_triggers does). */
void host_fire_trigger(fleet_host_t *h, const char *name);
/* Until GET |path| (a snapshot) says a state other than "pending";
 * the answer is in |out|. */
void wait_snapshot_stored(const collector_t *c, const char *path,
                          const char *out);
/* Until GET |query| (a list of snapshots) lists one; the answer in |out|.
 * Returns the first one's id (a static buffer). */
const char *wait_listed(const collector_t *c, const char *query,
                        const char *out);
/* Until /metrics holds |line| (with its newline); the text in |out|. */
void wait_metric(const collector_t *c, const char *line, const char *out);

/* Two hosts, the config (plus |extra_config| lines, or NULL), the
 * collector; back once both rings trace. */
void fleet_up(fleet_host_t h[2], collector_t *c, const char *extra_config);

/* The whole of file |path| (malloc'd; *n its size). */
uint8_t *coll_slurp(const char *path, size_t *n);
/* The program |bin| (tracegate) with |argv| (NULL-terminated, argv[0]
 * its first argument), stdout to /dev/null, stderr into file |err|:
 * its exit status. */
int coll_run_cli(const char *bin, const char *const *argv, const char *err);
/* Files |a| and |b| hold the same bytes. */
void assert_same_file(const char *a, const char *b);

#endif /* TRACEGATE_TESTS_COLL_E2E_H */
