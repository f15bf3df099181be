/* In-process host and client for the IPC unit tests (ipc_fixture.h). */
#include "ipc_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_proc.h"
#include "test_wait.h"

/* --- the host's services ----------------------------------------------- */

static void echo(void *ctx, tg_ipc_call_t call, const uint8_t *args,
                 size_t len) {
  ipc_fixture_t *fx = ctx;
  fx->handler_calls++;
  tg_ipc_reply_bytes(&call, true, false, args, len, -1);
}

static void hold(void *ctx, tg_ipc_call_t call, const uint8_t *args,
                 size_t len) {
  (void)args;
  (void)len;
  ipc_fixture_t *fx = ctx;
  fx->handler_calls++;
  if (fx->n_held < IPC_MAX_HELD) fx->held[fx->n_held++] = call;
}

static void stream(void *ctx, tg_ipc_call_t call, const uint8_t *args,
                   size_t len) {
  tg_ipc_reply_bytes(&call, true, true, (const uint8_t *)"first", 5, -1);
  hold(ctx, call, args, len);
}

static void ping(void *ctx, tg_ipc_call_t call, const uint8_t *args,
                 size_t len) {
  (void)args;
  (void)len;
  ipc_fixture_t *fx = ctx;
  fx->handler_calls++;
  tg_ipc_reply_bytes(&call, true, false, (const uint8_t *)"pong", 4, -1);
}

/* Held calls die with their connection. */
static void on_disconnect(void *ctx, tg_ipc_host_conn_t *conn) {
  ipc_fixture_t *fx = ctx;
  fx->disconnects++;
  size_t kept = 0;
  for (size_t i = 0; i < fx->n_held; i++)
    if (fx->held[i].conn != conn) fx->held[kept++] = fx->held[i];
  fx->n_held = kept;
}

static const tg_ipc_method_def_t test_methods[] = {
    {"Echo", echo},
    {"Hold", hold},
    {"Stream", stream},
    {"Unimplemented", NULL},
};
static const tg_ipc_method_def_t other_methods[] = {{"Ping", ping}};

static tg_ipc_service_def_t services[] = {
    {.name = "Test",
     .methods = test_methods,
     .n_methods = sizeof(test_methods) / sizeof(test_methods[0]),
     .on_disconnect = on_disconnect},
    {.name = "Other",
     .methods = other_methods,
     .n_methods = 1,
     .on_disconnect = on_disconnect},
};

/* --- fixture ------------------------------------------------------------ */

int ipc_fixture_setup(void **state) {
  static ipc_fixture_t fx;
  memset(&fx, 0, sizeof(fx));
  if (uv_loop_init(&fx.loop) != 0) return -1;
  if (tg_test_mkdtemp(fx.dir, sizeof(fx.dir), "ipc") < 0) return -1;
  snprintf(fx.sock, sizeof(fx.sock), "%s/sock", fx.dir);
  for (size_t i = 0; i < sizeof(services) / sizeof(services[0]); i++)
    services[i].ctx = &fx;
  if (tg_ipc_host_listen(&fx.loop, fx.sock, 0600, services,
                         sizeof(services) / sizeof(services[0]), 8,
                         &fx.host) != 0)
    return -1;
  *state = &fx;
  return 0;
}

static void on_host_closed(void *arg) { ((ipc_fixture_t *)arg)->host_closed = true; }

static bool host_closed(void *arg) { return ((ipc_fixture_t *)arg)->host_closed; }

int ipc_fixture_teardown(void **state) {
  ipc_fixture_t *fx = *state;
  tg_ipc_host_close(fx->host, on_host_closed, fx);
  bool closed = tg_test_run_loop_until(&fx->loop, host_closed, fx, IPC_WAIT_MS);
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  int rv = uv_loop_close(&fx->loop);
  tg_test_rm_rf(fx->dir);
  return closed && rv == 0 ? 0 : -1;
}

/* --- clients ------------------------------------------------------------ */

static void on_client_close(tg_ipc_client_t *c, int status) {
  ipc_client_t *cl = c->data;
  cl->closed = true;
  cl->close_status = status;
  cl->close_event = ++cl->events;
}

static const tg_ipc_client_cbs_t client_cbs = {.on_close = on_client_close};

void ipc_client_connect(ipc_fixture_t *fx, ipc_client_t *cl) {
  memset(cl, 0, sizeof(*cl));
  cl->fx = fx;
  assert_int_equal(tg_unix_transport_connect(&fx->loop, &cl->ut, fx->sock), 0);
  tg_ipc_client_init(&cl->c, &cl->ut.base, &client_cbs, cl);
}

static bool client_closed(void *arg) { return ((ipc_client_t *)arg)->closed; }

bool ipc_wait_closed(ipc_client_t *cl) {
  return tg_test_run_loop_until(&cl->fx->loop, client_closed, cl, IPC_WAIT_MS);
}

void ipc_client_finish(ipc_client_t *cl) {
  tg_ipc_client_close(&cl->c, 0);
  assert_true(ipc_wait_closed(cl));
}

static void on_bind(tg_ipc_client_t *c, void *ctx, int status,
                    const tg_ipc_remote_service_t *svc) {
  ipc_result_t *r = ctx;
  r->calls++;
  r->finals++;
  r->status = status;
  r->svc = svc;
  r->last_event = ++((ipc_client_t *)c->data)->events;
}

static void on_reply(tg_ipc_client_t *c, void *ctx, int status, bool has_more,
                     const uint8_t *reply, size_t len) {
  ipc_result_t *r = ctx;
  r->calls++;
  if (!has_more) r->finals++;
  r->status = status;
  r->has_more = has_more;
  r->had_reply = reply != NULL;
  size_t n = len < sizeof(r->reply) - 1 ? len : sizeof(r->reply) - 1;
  if (reply) memcpy(r->reply, reply, n);
  r->reply[reply ? n : 0] = '\0';
  r->last_event = ++((ipc_client_t *)c->data)->events;
}

tg_ipc_bind_cb ipc_bind_cb(void) { return on_bind; }
tg_ipc_reply_cb ipc_reply_cb(void) { return on_reply; }

static bool final_seen(void *arg) { return ((ipc_result_t *)arg)->finals > 0; }

bool ipc_wait_final(ipc_fixture_t *fx, ipc_result_t *r) {
  return tg_test_run_loop_until(&fx->loop, final_seen, r, IPC_WAIT_MS);
}

int ipc_bind_wait(ipc_client_t *cl, const char *service, ipc_result_t *r) {
  memset(r, 0, sizeof(*r));
  r->cl = cl;
  assert_int_equal(tg_ipc_client_bind(&cl->c, service, on_bind, r), 0);
  assert_true(ipc_wait_final(cl->fx, r));
  assert_int_equal(r->calls, 1);
  return r->status;
}

typedef struct held_wait {
  ipc_fixture_t *fx;
  size_t n;
} held_wait_t;

static bool enough_held(void *arg) {
  held_wait_t *w = arg;
  return w->fx->n_held >= w->n;
}

bool ipc_wait_held(ipc_fixture_t *fx, size_t n) {
  held_wait_t w = {fx, n};
  return tg_test_run_loop_until(&fx->loop, enough_held, &w, IPC_WAIT_MS);
}
