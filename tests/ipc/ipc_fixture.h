/* An in-process IPC host and client on one uv loop, for the host and
 * client unit tests: a host on a temporary UNIX socket exposing two test
 * services, and helpers to connect an async client and drive the loop.
 *
 * Services: "Test" with methods Echo (replies with its args), Hold (keeps
 * the call, never answers by itself), Stream (one reply with has_more, then
 * holds) and Unimplemented (no handler); "Other" with Ping.
 */
#ifndef TRACEGATE_TESTS_IPC_FIXTURE_H
#define TRACEGATE_TESTS_IPC_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "ipc/client.h"
#include "ipc/host.h"
#include "ipc/unix_transport.h"

#define IPC_WAIT_MS 5000
#define IPC_MAX_HELD 8

typedef struct ipc_fixture {
  uv_loop_t loop;
  char dir[64];
  char sock[96];
  tg_ipc_host_t *host;
  bool host_closed;
  unsigned handler_calls; /* any method handler ran */
  tg_ipc_call_t held[IPC_MAX_HELD];
  size_t n_held;
  unsigned disconnects;
} ipc_fixture_t;

/* One client connection and what happened on it. */
typedef struct ipc_client {
  ipc_fixture_t *fx;
  tg_unix_transport_t ut;
  tg_ipc_client_t c;
  bool closed;
  int close_status;
  unsigned events; /* callbacks of any kind so far, on_close included */
  unsigned close_event; /* events when on_close ran */
} ipc_client_t;

/* What one request's callbacks saw. */
typedef struct ipc_result {
  ipc_client_t *cl;
  unsigned calls;      /* callback runs */
  unsigned finals;     /* runs with has_more == false */
  int status;          /* of the last run */
  bool has_more;       /* of the last run */
  bool had_reply;      /* the last run had a reply body */
  char reply[64];      /* the last reply body, NUL-terminated */
  unsigned last_event; /* the client's event count at the last run */
  const tg_ipc_remote_service_t *svc; /* bind results */
} ipc_result_t;

/* cmocka setup/teardown: *state is the ipc_fixture_t; the teardown closes
 * the host, runs the loop dry and fails unless uv_loop_close() == 0. */
int ipc_fixture_setup(void **state);
int ipc_fixture_teardown(void **state);

/* Connects |cl| to the fixture's host. */
void ipc_client_connect(ipc_fixture_t *fx, ipc_client_t *cl);
/* Closes |cl| (if not yet) and waits for its on_close. */
void ipc_client_finish(ipc_client_t *cl);

tg_ipc_bind_cb ipc_bind_cb(void);
tg_ipc_reply_cb ipc_reply_cb(void);

/* Binds |service| and waits for the answer; returns its status. */
int ipc_bind_wait(ipc_client_t *cl, const char *service, ipc_result_t *r);

/* Runs the loop until |r| saw a final callback. */
bool ipc_wait_final(ipc_fixture_t *fx, ipc_result_t *r);
/* Runs the loop until |n| calls are held by the host. */
bool ipc_wait_held(ipc_fixture_t *fx, size_t n);
/* Runs the loop until |cl|'s on_close ran. */
bool ipc_wait_closed(ipc_client_t *cl);

#endif /* TRACEGATE_TESTS_IPC_FIXTURE_H */
