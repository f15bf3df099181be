/* tracegate-relay end to end: one identity cannot reach another's tracing
 * session, whatever it calls. alice records a session; carol (record role
 * too) and bob (observe) look for it with QueryServiceState, clone it by
 * id and by name, attach to it and ask for its stats: the relay scopes
 * every call to the caller's own sessions (relay/session_scope.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb/common/tracing_service_state.pb-c.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "relay_harness.h"
#include "test_wait.h"
#include "test_service.h"
#include "tracegate/error.h"

/* The sessions QueryServiceState shows |rc|: their count, and the id and
 * name of the first. */
static size_t sessions_seen(rc_t *rc, uint64_t *id, char *name, size_t cap,
                            int32_t *num_sessions) {
  ProtobufCMessage *m = NULL;
  assert_int_equal(
      rc_call(rc, rc->cp, "QueryServiceState", NULL,
              &perfetto__protos__query_service_state_response__descriptor,
              &m),
      0);
  assert_non_null(m);
  const Perfetto__Protos__TracingServiceState *st =
      ((Perfetto__Protos__QueryServiceStateResponse *)m)->service_state;
  assert_non_null(st);
  size_t n = st->n_tracing_sessions;
  if (n && id) *id = st->tracing_sessions[0]->id;
  if (n && name)
    snprintf(name, cap, "%s",
             st->tracing_sessions[0]->unique_session_name
                 ? st->tracing_sessions[0]->unique_session_name
                 : "");
  if (num_sessions) *num_sessions = st->num_sessions;
  protobuf_c_message_free_unpacked(m, NULL);
  return n;
}

/* A CloneSession refused by the relay (a failed call) or by the service
 * (as Perfetto's: a reply whose CloneSessionResponse says success=false)
 * reads TG_EREMOTE_FAILED; one that cloned reads 0. */
static int clone_call(rc_t *rc, const Perfetto__Protos__CloneSessionRequest *r) {
  ProtobufCMessage *m = NULL;
  int rv = rc_call(rc, rc->cp, "CloneSession", &r->base,
                   &perfetto__protos__clone_session_response__descriptor, &m);
  const Perfetto__Protos__CloneSessionResponse *resp = (const void *)m;
  if (rv == 0 && !(resp && resp->success)) rv = TG_EREMOTE_FAILED;
  if (m) protobuf_c_message_free_unpacked(m, NULL);
  return rv;
}

static int clone_by_id(rc_t *rc, uint64_t id) {
  Perfetto__Protos__CloneSessionRequest r =
      PERFETTO__PROTOS__CLONE_SESSION_REQUEST__INIT;
  r.selector_case = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_SESSION_ID;
  r.session_id = id;
  return clone_call(rc, &r);
}

static int clone_by_name(rc_t *rc, const char *name) {
  Perfetto__Protos__CloneSessionRequest r =
      PERFETTO__PROTOS__CLONE_SESSION_REQUEST__INIT;
  r.selector_case =
      PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_UNIQUE_SESSION_NAME;
  r.unique_session_name = (char *)name;
  return clone_call(rc, &r);
}

static void relay_scopes_sessions_to_their_identity(void **state) {
  relay_fx_t *f = *state;
  rc_t a, c, b;
  tg_tls_config_t *acfg, *ccfg, *bcfg;
  relay_fx_connect(f, &a, "alice", &acfg);
  relay_fx_connect(f, &c, "carol", &ccfg);
  relay_fx_connect(f, &b, "bob", &bcfg);

  /* alice records "alpha" (the relay names it "alice/alpha"). */
  simple_cfg_t sc;
  simple_cfg_init(&sc, 1024, 1, "test.ds");
  sc.cfg.unique_session_name = "alpha";
  Perfetto__Protos__EnableTracingRequest en =
      PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
  en.trace_config = &sc.cfg;
  call_t enable;
  call_init(&enable);
  assert_int_equal(rc_start(&a, a.cp, "EnableTracing", &en.base, &enable), 0);
  /* Answered after the EnableTracing: the session exists. */
  assert_int_equal(rc_call(&a, a.cp, "GetTraceStats", NULL, NULL, NULL), 0);

  uint64_t alpha = 0;
  char name[128] = "";
  int32_t num = -1;
  assert_int_equal(sessions_seen(&a, &alpha, name, sizeof(name), &num), 1);
  assert_string_equal(name, "alice/alpha");
  assert_int_equal(num, 1);
  assert_true(alpha > 0);

  /* Neither another recorder nor an observer sees it, not even counted. */
  assert_int_equal(sessions_seen(&c, NULL, NULL, 0, &num), 0);
  assert_int_equal(num, 0);
  assert_int_equal(sessions_seen(&b, NULL, NULL, 0, &num), 0);
  assert_int_equal(num, 0);

  /* carol cannot clone it by id, nor reach it by name. */
  assert_int_equal(clone_by_id(&c, alpha), TG_EREMOTE_FAILED);
  assert_int_equal(clone_by_name(&c, "alpha"), TG_EREMOTE_FAILED);
  assert_int_equal(clone_by_name(&c, "alice/alpha"), TG_EREMOTE_FAILED);
  /* Having no session of her own, she has no stats either. */
  assert_int_equal(rc_call(&c, c.cp, "GetTraceStats", NULL, NULL, NULL),
                   TG_EREMOTE_FAILED);

  /* alice parks it under a key; carol cannot attach to it. */
  assert_int_equal(rc_key_call(&a, "Detach", "k"), 0);
  assert_int_equal(rc_key_call(&c, "Attach", "k"), TG_EREMOTE_FAILED);
  assert_int_equal(rc_call(&c, c.cp, "GetTraceStats", NULL, NULL, NULL),
                   TG_EREMOTE_FAILED);
  assert_int_equal(sessions_seen(&c, NULL, NULL, 0, NULL), 0);
  /* alice, from the same or another connection, still can. */
  assert_int_equal(rc_key_call(&a, "Attach", "k"), 0);
  assert_int_equal(rc_call(&a, a.cp, "GetTraceStats", NULL, NULL, NULL), 0);
  assert_int_equal(rc_call(&a, a.cp, "DisableTracing", NULL, NULL, NULL), 0);

  relay_fx_disconnect(&b, bcfg);
  relay_fx_disconnect(&c, ccfg);
  relay_fx_disconnect(&a, acfg);
  call_free(&enable);

  char id[64];
  snprintf(id, sizeof(id), " %" PRIu64 " ", alpha);
  expect_audit(f, "carol", "CloneSession", "deny", TG_N_RELAY_SESSION_REFUSED,
               id);
  expect_audit(f, "carol", "CloneSession", "allow", TG_N_RELAY_SESSION_SCOPED,
               "'carol/alpha'");
  expect_audit(f, "carol", "CloneSession", "deny", TG_N_RELAY_SESSION_REFUSED,
               "unique_session_name");
  expect_audit(f, "alice", "EnableTracing", "allow", TG_N_RELAY_SESSION_SCOPED,
               "'alice/alpha'");
}

/* A session the client did not name gets one of the relay's, under its
 * identity, so it is still the identity's own. */
static void relay_names_unnamed_sessions_under_the_identity(void **state) {
  relay_fx_t *f = *state;
  rc_t a, c;
  tg_tls_config_t *acfg, *ccfg;
  relay_fx_connect(f, &a, "alice", &acfg);
  relay_fx_connect(f, &c, "carol", &ccfg);
  simple_cfg_t sc;
  simple_cfg_init(&sc, 1024, 1, "test.ds");
  Perfetto__Protos__EnableTracingRequest en =
      PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
  en.trace_config = &sc.cfg;
  call_t ea, ec;
  call_init(&ea);
  call_init(&ec);
  assert_int_equal(rc_start(&a, a.cp, "EnableTracing", &en.base, &ea), 0);
  assert_int_equal(rc_start(&c, c.cp, "EnableTracing", &en.base, &ec), 0);
  assert_int_equal(rc_call(&a, a.cp, "GetTraceStats", NULL, NULL, NULL), 0);
  assert_int_equal(rc_call(&c, c.cp, "GetTraceStats", NULL, NULL, NULL), 0);
  char name[128] = "";
  uint64_t ida = 0, idc = 0;
  assert_int_equal(sessions_seen(&a, &ida, name, sizeof(name), NULL), 1);
  assert_true(strncmp(name, "alice/~relay-", 13) == 0);
  assert_int_equal(sessions_seen(&c, &idc, name, sizeof(name), NULL), 1);
  assert_true(strncmp(name, "carol/~relay-", 13) == 0);
  assert_true(ida != idc);
  /* Each may clone its own by id (the service then says whether it can);
   * not the other's. */
  assert_int_equal(clone_by_id(&a, idc), TG_EREMOTE_FAILED);
  relay_fx_disconnect(&c, ccfg);
  relay_fx_disconnect(&a, acfg);
  call_free(&ea);
  call_free(&ec);
  char id[64];
  snprintf(id, sizeof(id), " %" PRIu64 " ", idc);
  expect_audit(f, "alice", "CloneSession", "deny", TG_N_RELAY_SESSION_REFUSED,
               id);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      RELAY_T(relay_scopes_sessions_to_their_identity),
      RELAY_T(relay_names_unnamed_sessions_under_the_identity),
  };
  return cmocka_run_group_tests(tests, relay_fx_group_setup,
                                relay_fx_group_teardown);
}
