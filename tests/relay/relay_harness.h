/* Test harness for tracegate-relay end to end: certificates made with
 * deploy/certs/tg-certs, the real relay binary as a child process, and
 * remote clients (tg_tls_chan or a pipe transport + the async IPC client)
 * on one uv loop, driven to completion of each step with bounded waits on
 * events, never sleeps. */
#ifndef TRACEGATE_TESTS_RELAY_HARNESS_H
#define TRACEGATE_TESTS_RELAY_HARNESS_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "common/notice.h"
#include "ipc/client.h"
#include "ipc/pipe_transport.h"
#include "tls/session.h"
#include "tls/dial.h"
#include "tls/transport.h"
#include "common/buf.h"
#include "test_notice.h"
#include "test_service.h"

#define STEP_MS 10000 /* bound of every awaited step */

/* --- certificates --------------------------------------------------------
 * CA "pki": host "localhost" (DNS SAN, + IP 127.0.0.1), clients alice
 * (record), bob (observe), carol (record), dave (certificate, no role),
 * old (expired, record), rev (revoked, record); CA "other": eve. */
int certs_setup(void);
void certs_teardown(void);
/* "<certs dir>/<dir>/<file>"; a static buffer (8 rotating). */
const char *cert_path(const char *dir, const char *file);
/* A client config: |name|.pem/.key of |dir| (NULL: no certificate),
 * trusting |ca_dir|/ca.pem. */
tg_tls_config_t *client_cfg(const char *dir, const char *name,
                            const char *ca_dir);

/* --- the relay process ------------------------------------------------------ */

typedef struct relay_proc {
  pid_t pid;
  int port;
  char dir[64];     /* temporary: authz, logs */
  char authz[128];  /* a copy of pki/authz the test may rewrite */
  char log[128];    /* the relay's stderr */
  char audit[128];  /* --audit-log */
  int exit_status;  /* wait status once reaped */
} relay_proc_t;

/* Starts tracegate-relay on 127.0.0.1:0 in front of |consumer_sock| and
 * waits for "ready PORT". |extra| (NULL-terminated, may be NULL) adds
 * flags. Returns 0 or -1 (the log is printed). */
int relay_start(relay_proc_t *rp, const char *consumer_sock,
                const char *const *extra);
/* --stdio: *to_relay is its stdin, *from_relay its stdout (both ours). */
int relay_start_stdio(relay_proc_t *rp, const char *consumer_sock,
                      int *to_relay, int *from_relay);
/* Waits (bounded) for the relay to exit by itself; returns the wait
 * status, or -1 after killing it. */
int relay_wait_exit(relay_proc_t *rp, int timeout_ms);
/* SIGTERM and reap (bounded); returns the wait status (-1: killed). */
int relay_terminate(relay_proc_t *rp);
/* Terminates if running and removes the directory. Returns the status. */
int relay_stop(relay_proc_t *rp);
/* Prints the relay's log and audit trail (on failure). */
void relay_dump(const relay_proc_t *rp);

/* --- files ---------------------------------------------------------------- */

/* (To wait until a file holds some text: tg_test_wait_file_text.) */
size_t file_count(const char *path, const char *needle);
/* --- the audit trail ------------------------------------------------------- */

/* What a line of the audit trail (relay/audit.h: TIME IDENTITY ADDRESS
 * WHAT VERDICT CODE REASON) must hold: |who|, |what| and |verdict| equal
 * to their fields (NULL: any), |code| the CODE field (TG_N_NONE: any),
 * and |data| within REASON (NULL: any). */
typedef struct audit_want {
  const char *who, *what, *verdict;
  tg_notice_t code;
  const char *data;
} audit_want_t;
/* AUDIT(who, what, verdict, code, data): the fields left out match any. */
#define AUDIT(...) AUDIT_(__VA_ARGS__, 0, 0, 0, 0, 0)
#define AUDIT_(who, what, verdict, code, data, ...) \
  ((audit_want_t){(who), (what), (verdict), (code), (data)})
/* How many lines of the audit trail |path| match |w|. */
size_t audit_count(const char *path, audit_want_t w);
/* True once |path| has a line matching |w|, waiting up to |timeout_ms|. */
bool audit_wait(const char *path, audit_want_t w, int timeout_ms);
/* In a cmocka test: |rp|'s audit trail gets a line matching |w| within
 * STEP_MS; prints the log and the trail when not. */
void audit_expect(const relay_proc_t *rp, audit_want_t w);
/* The sum of the counts that begin REASON on the lines matching |w| (the
 * "suppressed" lines). Fails the test when such a line has no count. */
uint64_t audit_sum(const char *path, audit_want_t w);

/* Replaces |path| atomically (write + rename). Returns 0 or -1. */
int file_replace(const char *path, const char *text);

/* --- the loop and remote clients -------------------------------------------- */

extern uv_loop_t *g_loop;
void loop_setup(void);
/* Runs the loop until the handles are gone; asserts uv_loop_close() == 0. */
void loop_teardown(void);
/* Runs the loop until cond(arg) or |ms| pass. Returns cond(arg). */
bool run_until(bool (*cond)(void *), void *arg, int ms);

typedef struct rc {
  tg_tls_chan_t *ch;
  tg_pipe_transport_t pipe;
  bool is_pipe;
  tg_ipc_client_t ipc;
  bool hs_done, closed;
  int hs_status, close_status;
  char error[600];
  const tg_ipc_remote_service_t *cp;    /* ConsumerPort once bound */
  const tg_ipc_remote_service_t *relay; /* TracegateRelay once bound */
  char bind_said[256]; /* the text of a RequestError that refused the bind */
} rc_t;

/* Connects to the relay on 127.0.0.1:|port| as |cfg|'s identity and waits
 * for the handshake (or the close). Returns the handshake status. */
int rc_connect(rc_t *rc, int port, tg_tls_config_t *cfg);
/* Opens a client over a pipe pair (ownership of the fds passes). */
int rc_open_pipe(rc_t *rc, int in_fd, int out_fd);
/* Binds ConsumerPort or TracegateRelay (sets rc->cp / rc->relay). */
int rc_bind(rc_t *rc, const char *service);
/* Closes and waits for on_close; frees the channel. */
void rc_close(rc_t *rc);
/* Waits for the relay to close the connection; true if it did. */
bool rc_wait_closed(rc_t *rc, int ms);

/* One call, possibly streaming. */
typedef struct call {
  bool done;
  int status;       /* of the last reply */
  size_t replies;
  tg_buf_t last;    /* body of the last reply */
  bool read_packets; /* ReadBuffers: reassemble test packets */
  tg_buf_t partial;
  uint32_t values[64]; /* seq_value of test packets: the first 64 (then
                       * a ring of the last 64) */
  size_t n_values;     /* all test packets seen */
  bool out_of_order;   /* a seq_value was not the previous one + 1 */
  size_t n_packets;
} call_t;

void call_init(call_t *c);
void call_free(call_t *c);
bool call_done(void *c);
/* Sends a call; the reply arrives while the loop runs. Returns 0 or error. */
int rc_start(rc_t *rc, const tg_ipc_remote_service_t *svc, const char *method,
             const ProtobufCMessage *args, call_t *c);
/* Sends and waits (STEP_MS); returns the status (0, TG_EREMOTE_FAILED,
 * ...) or -ETIMEDOUT. With |desc|, *reply is the unpacked last reply
 * (caller frees with protobuf_c_message_free_unpacked), or NULL. */
int rc_call(rc_t *rc, const tg_ipc_remote_service_t *svc, const char *method,
            const ProtobufCMessage *args,
            const ProtobufCMessageDescriptor *desc, ProtobufCMessage **reply);

/* --- the fixture every end-to-end relay test starts from ---------------------
 * A tracegated on temporary sockets, the loop, and (with relay_fx_setup)
 * tracegate-relay in front of the service. The group's certificates come
 * from relay_fx_group_setup. The teardown stops the relay and checks its
 * exit status, closes the loop (uv_loop_close() == 0) and stops the
 * service: a leaked handle or a dirty exit fails the test. */
typedef struct relay_fx {
  test_service_t ts;
  relay_proc_t rp;
  bool relay_up;         /* relay_stop in the teardown */
  int want_relay_status; /* the teardown's check of the relay's exit */
} relay_fx_t;

/* The service (with |service_args|, NULL-terminated, may be NULL) and
 * the loop; the test starts its relay itself (then sets relay_up). */
relay_fx_t *relay_fx_start(void **state, const char *const *service_args);
/* cmocka fixtures: the service and the loop; + the relay with no flags. */
int relay_fx_setup_service(void **state);
int relay_fx_setup(void **state);
int relay_fx_teardown(void **state);
/* A cmocka test on the fixture with its relay, and on the service alone. */
#define RELAY_T(fn) \
  cmocka_unit_test_setup_teardown(fn, relay_fx_setup, relay_fx_teardown)
#define RELAY_TS(fn) \
  cmocka_unit_test_setup_teardown(fn, relay_fx_setup_service, relay_fx_teardown)
/* cmocka group fixtures: SIGPIPE ignored, certificates made and removed. */
int relay_fx_group_setup(void **state);
int relay_fx_group_teardown(void **state);

/* Connects to |f|'s relay as pki client |name| and binds ConsumerPort;
 * fails the test (with the relay's log) when it cannot. *cfg is the
 * client's config, freed by relay_fx_disconnect. */
void relay_fx_connect(relay_fx_t *f, rc_t *rc, const char *name,
                      tg_tls_config_t **cfg);
void relay_fx_disconnect(rc_t *rc, tg_tls_config_t *cfg);
/* Detach or Attach (|method|) with |key| on ConsumerPort; the status. */
int rc_key_call(rc_t *rc, const char *method, const char *key);

/* |f|'s audit trail has a line matching AUDIT(...) within STEP_MS. */
#define expect_audit(f, ...) audit_expect(&(f)->rp, AUDIT(__VA_ARGS__))

#endif /* TRACEGATE_TESTS_RELAY_HARNESS_H */
