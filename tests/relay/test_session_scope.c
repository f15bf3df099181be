/* Session scoping (relay/session_scope.h), pure: names namespaced by
 * identity, clones limited to the identity's own sessions, other
 * identities' sessions removed from QueryServiceState replies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pb/common/tracing_service_state.pb-c.h"
#include "pb/config/trace_config.pb-c.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "relay/session_scope.h"

static size_t pack(const ProtobufCMessage *m, uint8_t *buf, size_t cap) {
  size_t n = protobuf_c_message_get_packed_size(m);
  assert_true(n <= cap);
  protobuf_c_message_pack(m, buf);
  return n;
}

static const char *scoped_enable_name(const char *name, char *why,
                                      size_t whylen, char *out, size_t cap) {
  Perfetto__Protos__TraceConfig cfg = PERFETTO__PROTOS__TRACE_CONFIG__INIT;
  cfg.unique_session_name = (char *)name;
  Perfetto__Protos__EnableTracingRequest req =
      PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
  req.trace_config = &cfg;
  uint8_t buf[512];
  size_t n = pack(&req.base, buf, sizeof(buf));
  tg_buf_t b;
  tg_buf_init(&b, 0);
  int rv = tg_relay_scope_enable("alice", "~relay-1-1", buf, n, &b, why,
                                 whylen);
  if (rv < 0) {
    tg_buf_free(&b);
    return NULL;
  }
  Perfetto__Protos__EnableTracingRequest *r =
      perfetto__protos__enable_tracing_request__unpack(NULL, tg_buf_size(&b),
                                                       tg_buf_begin(&b));
  assert_non_null(r);
  snprintf(out, cap, "%s", r->trace_config->unique_session_name);
  perfetto__protos__enable_tracing_request__free_unpacked(r, NULL);
  tg_buf_free(&b);
  return out;
}

static void scope_names_sessions_under_the_identity(void **state) {
  (void)state;
  char why[256], name[512];
  assert_string_equal(scoped_enable_name("alpha", why, sizeof(why), name,
                                         sizeof(name)),
                      "alice/alpha");
  assert_string_equal(scoped_enable_name(NULL, why, sizeof(why), name,
                                         sizeof(name)),
                      "alice/~relay-1-1");
  /* A client cannot pick another identity's namespace. */
  assert_null(scoped_enable_name("bob/alpha", why, sizeof(why), name,
                                 sizeof(name)));
  assert_non_null(strstr(why, "'/'"));
  /* No config: passed as it is (the service refuses it). */
  tg_buf_t b;
  tg_buf_init(&b, 0);
  assert_int_equal(tg_relay_scope_enable("alice", "x", (const uint8_t *)"", 0,
                                         &b, why, sizeof(why)), 0);
  assert_int_equal(tg_buf_size(&b), 0);
  assert_int_equal(tg_relay_scope_enable("alice", "x",
                                         (const uint8_t *)"\x0a\x05", 2, &b,
                                         why, sizeof(why)), -1);
  tg_buf_free(&b);
}

static int clone(const Perfetto__Protos__CloneSessionRequest *req,
                 const uint64_t *owned, size_t n_owned, char *name,
                 size_t cap) {
  uint8_t buf[256];
  size_t n = pack(&req->base, buf, sizeof(buf));
  tg_buf_t b;
  tg_buf_init(&b, 0);
  char why[256];
  int rv = tg_relay_scope_clone("alice", owned, n_owned, buf, n, &b, why,
                                sizeof(why));
  if (rv == 0 && name) {
    Perfetto__Protos__CloneSessionRequest *r =
        perfetto__protos__clone_session_request__unpack(
            NULL, tg_buf_size(&b), tg_buf_begin(&b));
    assert_non_null(r);
    snprintf(name, cap, "%s",
             r->selector_case ==
                     PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_UNIQUE_SESSION_NAME
                 ? r->unique_session_name
                 : "");
    perfetto__protos__clone_session_request__free_unpacked(r, NULL);
  }
  tg_buf_free(&b);
  return rv;
}

static void scope_lets_clone_reach_only_own_sessions(void **state) {
  (void)state;
  Perfetto__Protos__CloneSessionRequest req =
      PERFETTO__PROTOS__CLONE_SESSION_REQUEST__INIT;
  char name[512];
  req.selector_case =
      PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_UNIQUE_SESSION_NAME;
  req.unique_session_name = "alpha";
  assert_int_equal(clone(&req, NULL, 0, name, sizeof(name)), 0);
  assert_string_equal(name, "alice/alpha");
  req.unique_session_name = "bob/alpha";
  assert_int_equal(clone(&req, NULL, 0, NULL, 0), -1);
  const uint64_t owned[] = {7, 9};
  req.selector_case = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_SESSION_ID;
  req.session_id = 9;
  assert_int_equal(clone(&req, owned, 2, NULL, 0), 0);
  req.session_id = 8;
  assert_int_equal(clone(&req, owned, 2, NULL, 0), -1);
  req.selector_case = PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR__NOT_SET;
  assert_int_equal(clone(&req, owned, 2, NULL, 0), -1);
}

static void note(void *ctx, uint64_t id) {
  uint64_t *seen = ctx;
  seen[++seen[0]] = id;
}

static void scope_hides_other_identities_sessions(void **state) {
  (void)state;
  /* Only exactly "alice/<name>" is alice's: not a longer identity that
   * starts the same, nor a name under "alice/ops" (which no identity may
   * be), nor "alice/" alone. */
  Perfetto__Protos__TracingServiceState__TracingSession s[7];
  Perfetto__Protos__TracingServiceState__TracingSession *sp[7];
  const char *names[7] = {"alice/a", "bob/b",       "alicex/c", NULL,
                          "alice/ops/ops-private", "alice/", "alice"};
  for (int i = 0; i < 7; i++) {
    perfetto__protos__tracing_service_state__tracing_session__init(&s[i]);
    s[i].has_id = 1;
    s[i].id = (uint64_t)i + 1;
    s[i].unique_session_name = (char *)names[i];
    s[i].state = "STARTED";
    sp[i] = &s[i];
  }
  Perfetto__Protos__TracingServiceState st =
      PERFETTO__PROTOS__TRACING_SERVICE_STATE__INIT;
  st.n_tracing_sessions = 7;
  st.tracing_sessions = sp;
  st.has_num_sessions = st.has_num_sessions_started = 1;
  st.num_sessions = st.num_sessions_started = 7;
  st.tracing_service_version = "v1";
  Perfetto__Protos__QueryServiceStateResponse r =
      PERFETTO__PROTOS__QUERY_SERVICE_STATE_RESPONSE__INIT;
  r.service_state = &st;
  uint8_t buf[1024];
  size_t n = pack(&r.base, buf, sizeof(buf));
  tg_buf_t b;
  tg_buf_init(&b, 0);
  uint64_t seen[8] = {0};
  assert_int_equal(
      tg_relay_scope_service_state("alice", buf, n, &b, note, seen), 0);
  Perfetto__Protos__QueryServiceStateResponse *out =
      perfetto__protos__query_service_state_response__unpack(
          NULL, tg_buf_size(&b), tg_buf_begin(&b));
  assert_non_null(out);
  assert_int_equal(out->service_state->n_tracing_sessions, 1);
  assert_string_equal(out->service_state->tracing_sessions[0]->unique_session_name,
                      "alice/a");
  assert_int_equal(out->service_state->num_sessions, 1);
  assert_int_equal(out->service_state->num_sessions_started, 1);
  assert_string_equal(out->service_state->tracing_service_version, "v1");
  assert_int_equal(seen[0], 1);
  assert_int_equal(seen[1], 1);
  perfetto__protos__query_service_state_response__free_unpacked(out, NULL);
  /* An empty reply stays empty; garbage is refused. */
  tg_buf_reset(&b);
  assert_int_equal(tg_relay_scope_service_state("alice", NULL, 0, &b, NULL,
                                                NULL), 0);
  assert_int_equal(tg_buf_size(&b), 0);
  assert_int_equal(tg_relay_scope_service_state(
                       "alice", (const uint8_t *)"\x0a\x09", 2, &b, NULL, NULL),
                   -1);
  tg_buf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(scope_names_sessions_under_the_identity),
      cmocka_unit_test(scope_lets_clone_reach_only_own_sessions),
      cmocka_unit_test(scope_hides_other_identities_sessions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
