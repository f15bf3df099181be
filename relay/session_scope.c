/* Session names namespaced by identity; other identities' sessions hidden. */
#include "relay/session_scope.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi/consumer_port_methods.h"
#include "pb/common/tracing_service_state.pb-c.h"
#include "pb/config/trace_config.pb-c.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "relay/relay_service.h"

/* "<identity>/<name>" into |dst|; false when it does not fit. */
static bool scoped(char *dst, size_t cap, const char *identity,
                   const char *name) {
  return (size_t)snprintf(dst, cap, "%s/%s", identity, name) < cap;
}

static int pack_into(const ProtobufCMessage *m, tg_buf_t *out) {
  size_t n = protobuf_c_message_get_packed_size(m);
  if (n == 0) return 0; /* an empty message is no bytes */
  uint8_t *p = tg_buf_reserve(out, n);
  if (!p) return -1;
  protobuf_c_message_pack(m, p);
  tg_buf_commit(out, n);
  return 0;
}

int tg_relay_scope_enable(const char *identity, const char *fallback,
                          const uint8_t *args, size_t len, tg_buf_t *out,
                          char *why, size_t whylen) {
  Perfetto__Protos__EnableTracingRequest *req =
      perfetto__protos__enable_tracing_request__unpack(NULL, len, args);
  if (!req) {
    snprintf(why, whylen, "EnableTracingRequest does not decode");
    return -1;
  }
  int rv = -1;
  Perfetto__Protos__TraceConfig *c = req->trace_config;
  if (!c) {
    rv = tg_buf_append(out, args, len) == 0 ? 0 : -1;
    if (rv < 0) snprintf(why, whylen, "out of memory");
    goto out;
  }
  const char *name = c->unique_session_name;
  const char *bad = NULL;
  if (name && name[0] && !tg_relay_key_valid(name, &bad)) {
    snprintf(why, whylen, "unique_session_name: %s", bad);
    goto out;
  }
  char ns[TG_RELAY_SCOPED_NAME_MAX];
  if (!scoped(ns, sizeof(ns), identity, name && name[0] ? name : fallback)) {
    snprintf(why, whylen, "identity and unique_session_name too long");
    goto out;
  }
  char *old = c->unique_session_name;
  c->unique_session_name = ns;
  rv = pack_into(&req->base, out);
  c->unique_session_name = old; /* freed with the request */
  if (rv < 0) snprintf(why, whylen, "out of memory");
  else snprintf(why, whylen, "session named '%s'", ns);
out:
  perfetto__protos__enable_tracing_request__free_unpacked(req, NULL);
  return rv;
}

int tg_relay_scope_clone(const char *identity, const uint64_t *owned,
                         size_t n_owned, const uint8_t *args, size_t len,
                         tg_buf_t *out, char *why, size_t whylen) {
  Perfetto__Protos__CloneSessionRequest *req =
      perfetto__protos__clone_session_request__unpack(NULL, len, args);
  if (!req) {
    snprintf(why, whylen, "CloneSessionRequest does not decode");
    return -1;
  }
  int rv = -1;
  switch (req->selector_case) {
    case PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_UNIQUE_SESSION_NAME: {
      const char *bad = NULL;
      char ns[TG_RELAY_SCOPED_NAME_MAX];
      if (!tg_relay_key_valid(req->unique_session_name, &bad)) {
        snprintf(why, whylen, "unique_session_name: %s", bad);
        break;
      }
      if (!scoped(ns, sizeof(ns), identity, req->unique_session_name)) {
        snprintf(why, whylen, "identity and unique_session_name too long");
        break;
      }
      char *old = req->unique_session_name;
      req->unique_session_name = ns;
      rv = pack_into(&req->base, out);
      req->unique_session_name = old;
      if (rv < 0) snprintf(why, whylen, "out of memory");
      else snprintf(why, whylen, "clone of session '%s'", ns);
      break;
    }
    case PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_SESSION_ID:
      for (size_t i = 0; i < n_owned; i++)
        if (owned[i] == req->session_id) rv = 0;
      if (rv < 0) {
        snprintf(why, whylen,
                 "session %" PRIu64 " is not one this identity started "
                 "through the relay (clone by unique_session_name, or "
                 "QueryServiceState first)",
                 req->session_id);
        break;
      }
      if (tg_buf_append(out, args, len) < 0) {
        snprintf(why, whylen, "out of memory");
        rv = -1;
        break;
      }
      snprintf(why, whylen, "clone of session %" PRIu64 " (its own)",
               req->session_id);
      break;
    default:
      snprintf(why, whylen, "%s names no session",
               tg_cport_name(TG_CPORT_CloneSession));
      break;
  }
  perfetto__protos__clone_session_request__free_unpacked(req, NULL);
  return rv;
}

/* Exactly "<identity>/<name>" with a name of its own: no '/' after the
 * identity's, so "alice/ops/x" (made for identity "alice/ops", were it
 * one) is never "alice"'s. */
static bool owned_by(const Perfetto__Protos__TracingServiceState__TracingSession *s,
                     const char *identity) {
  size_t n = strlen(identity);
  const char *name = s->unique_session_name;
  return n > 0 && name && !strncmp(name, identity, n) && name[n] == '/' &&
         name[n + 1] && !strchr(name + n + 1, '/');
}

int tg_relay_scope_service_state(const char *identity, const uint8_t *body,
                                 size_t len, tg_buf_t *out,
                                 void (*on_owned)(void *ctx, uint64_t id),
                                 void *ctx) {
  static const uint8_t empty[1];
  Perfetto__Protos__QueryServiceStateResponse *r =
      perfetto__protos__query_service_state_response__unpack(
          NULL, len, body ? body : empty);
  if (!r) return -1;
  Perfetto__Protos__TracingServiceState *st = r->service_state;
  if (!st) {
    int rv = pack_into(&r->base, out);
    perfetto__protos__query_service_state_response__free_unpacked(r, NULL);
    return rv;
  }
  size_t n_all = st->n_tracing_sessions;
  Perfetto__Protos__TracingServiceState__TracingSession **all =
      st->tracing_sessions;
  Perfetto__Protos__TracingServiceState__TracingSession **kept =
      n_all ? calloc(n_all, sizeof(*kept)) : NULL;
  if (n_all && !kept) {
    perfetto__protos__query_service_state_response__free_unpacked(r, NULL);
    return -1;
  }
  size_t n_kept = 0, n_started = 0;
  for (size_t i = 0; i < n_all; i++) {
    if (!owned_by(all[i], identity)) continue;
    kept[n_kept++] = all[i];
    if (all[i]->state && !strcmp(all[i]->state, "STARTED")) n_started++;
    if (on_owned && all[i]->has_id) on_owned(ctx, all[i]->id);
  }
  /* Counts of other identities' sessions would tell them apart too. */
  bool had_num = st->has_num_sessions, had_started = st->has_num_sessions_started;
  int32_t num = st->num_sessions, started = st->num_sessions_started;
  st->tracing_sessions = kept;
  st->n_tracing_sessions = n_kept;
  st->has_num_sessions = st->has_num_sessions_started = 1;
  st->num_sessions = (int32_t)n_kept;
  st->num_sessions_started = (int32_t)n_started;
  int rv = pack_into(&r->base, out);
  /* Back as unpacked, so that everything is freed. */
  st->tracing_sessions = all;
  st->n_tracing_sessions = n_all;
  st->has_num_sessions = had_num;
  st->has_num_sessions_started = had_started;
  st->num_sessions = num;
  st->num_sessions_started = started;
  free(kept);
  perfetto__protos__query_service_state_response__free_unpacked(r, NULL);
  return rv;
}
