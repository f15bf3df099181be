/* The relay's own calls to the service: the disconnect lease
 * (TracegateConsumer) and the drop-time Detach (relay/own_calls.h).
 * Builds them, tracks them under the reserved ids, and reads their replies
 * once tg_relay_filter_upstream() has matched them; never matches a reply
 * itself and never lets one reach the client. */
#include "relay/own_calls.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pb/ipc/consumer_port.pb-c.h"
#include "abi/consumer_port_methods.h"
#include "pb/tracegate/consumer_lease.pb-c.h"
#include "relay/filter_internal.h"
#include "tracegate/pb_wire.h"

/* "<identity>/<key>" into |ns|; false when it does not fit (SetSessionKey
 * checked the length, so it does). */
static bool namespaced_key(const tg_relay_filter_t *f, char *ns, size_t cap) {
  return (size_t)snprintf(ns, cap, "%s/%s", f->identity, f->session_key) <
         cap;
}

void tg__relay_lease_bind_reply(tg_relay_filter_t *f, const uint8_t *bind,
                                size_t len, tg_relay_verdict_t *v) {
  v->effect.kind = TG_RELAY_EFFECT_OWN_LEASE_REPLY;
  v->action = TG_RELAY_DROP; /* the client never asked */
  tg__relay_set_method(v, "BindService " TG_RELAY_LEASE_SERVICE);
  f->lease = TG_LEASE_UNSUPPORTED;
  /* Nested messages have no unpack helper in protobuf-c. */
  Perfetto__Protos__IPCFrame__BindServiceReply *r =
      (Perfetto__Protos__IPCFrame__BindServiceReply *)protobuf_c_message_unpack(
          &perfetto__protos__ipcframe__bind_service_reply__descriptor, NULL,
          len, bind);
  if (r && r->success && r->has_service_id) {
    for (size_t i = 0; i < r->n_methods; i++) {
      const Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo *m =
          r->methods[i];
      if (m->has_id && m->id && m->name &&
          !strcmp(m->name, "SetDisconnectLease")) {
        f->lease = TG_LEASE_BOUND;
        f->lease_service_id = r->service_id;
        f->lease_method_id = m->id;
      }
    }
  }
  if (r) protobuf_c_message_free_unpacked(&r->base, NULL);
  v->allowed = f->lease == TG_LEASE_BOUND;
  if (v->allowed)
    tg__relay_say(v, TG_N_RELAY_LEASE,
                  "the service keeps sessions past a lost connection");
  else
    tg__relay_say(v, TG_N_RELAY_LEASE,
                  "the service has no %s (Perfetto's traced?): a session "
                  "survives its client's lost link (the relay detaches it) "
                  "but not a crash of the relay", TG_RELAY_LEASE_SERVICE);
}

void tg__relay_lease_reply(tg_relay_filter_t *f, const uint8_t *reply,
                           size_t len, bool success, tg_relay_verdict_t *v) {
  v->effect.kind = TG_RELAY_EFFECT_OWN_LEASE_REPLY;
  v->action = TG_RELAY_DROP;
  v->allowed = success;
  v->audit = true; /* whether a session outlives the relay */
  tg__relay_set_method(v, TG_RELAY_LEASE_SERVICE ".SetDisconnectLease");
  f->lease_in_flight = false;
  uint64_t ms = 0;
  tg_pb_reader_t r;
  tg_pb_field_t fld;
  tg_pb_reader_init(&r, reply, len);
  while (tg_pb_reader_next(&r, &fld) == 1) {
    /* InvokeMethodReply.reply_proto = 3: SetDisconnectLeaseResponse. */
    if (fld.id != 3 || fld.type != TG_PB_WT_LEN) continue;
    tg_pb_reader_t rr;
    tg_pb_field_t ff;
    tg_pb_reader_init(&rr, fld.data, fld.size);
    while (tg_pb_reader_next(&rr, &ff) == 1)
      if (ff.id == 1 && ff.type == TG_PB_WT_VARINT) ms = ff.value;
  }
  if (success)
    tg__relay_say(v, TG_N_RELAY_LEASE,
                  "the service keeps the session of key '%s/%s' for "
                  "%" PRIu64 " ms if the relay goes away", f->identity,
                  f->lease_key, ms);
  else
    tg__relay_say(v, TG_N_RELAY_LEASE,
                  "the service refused a disconnect lease for key "
                  "'%s/%s': a crash of the relay would end the session",
                  f->identity, f->lease_key);
  if (!success) f->lease_key[0] = 0;
}

int tg_relay_filter_lease_frames(tg_relay_filter_t *f, uint64_t lease_ms,
                                 tg_buf_t *out) {
  if (!f->session_key[0] || f->lease_in_flight ||
      f->lease == TG_LEASE_BINDING || f->lease == TG_LEASE_UNSUPPORTED ||
      !strcmp(f->lease_key, f->session_key))
    return 0;
  if (f->n_tracked == TG_RELAY_FILTER_MAX_TRACKED) return 0;
  int rv;
  if (f->lease == TG_LEASE_UNKNOWN) {
    rv = tg__relay_append_bind(TG_RELAY_LEASE_BIND_REQUEST_ID,
                               TG_RELAY_LEASE_SERVICE, out);
    if (rv < 0) return rv;
    tg__relay_track(f, TG_RELAY_LEASE_BIND_REQUEST_ID,
                    TG_TRACK_OWN_LEASE_BIND);
    f->lease = TG_LEASE_BINDING;
    return 1;
  }
  char ns[TG_DETACH_KEY_MAX + 1];
  if (!namespaced_key(f, ns, sizeof(ns))) return 0;
  Perfetto__Protos__SetDisconnectLeaseRequest req =
      PERFETTO__PROTOS__SET_DISCONNECT_LEASE_REQUEST__INIT;
  req.key = ns;
  req.has_lease_ms = 1;
  req.lease_ms = lease_ms;
  uint8_t args[TG_DETACH_KEY_MAX + 32];
  size_t n =
      perfetto__protos__set_disconnect_lease_request__get_packed_size(&req);
  if (n > sizeof(args)) return 0;
  perfetto__protos__set_disconnect_lease_request__pack(&req, args);
  rv = tg__relay_append_invoke(TG_RELAY_LEASE_REQUEST_ID, f->lease_service_id,
                               f->lease_method_id, args, n, false, out);
  if (rv < 0) return rv;
  tg__relay_track(f, TG_RELAY_LEASE_REQUEST_ID, TG_TRACK_OWN_LEASE);
  f->lease_in_flight = true;
  memcpy(f->lease_key, f->session_key, strlen(f->session_key) + 1);
  return 1;
}

int tg_relay_filter_detach_on_drop(tg_relay_filter_t *f, tg_buf_t *out,
                                   char *key, size_t keycap) {
  if (!f->session_active || !f->session_key[0] || !f->consumer_bound)
    return 0;
  uint32_t mid =
      tg__relay_consumer_method_id(f, tg_cport_name(TG_CPORT_Detach));
  if (mid == 0) return 0;
  char ns[TG_DETACH_KEY_MAX + 1];
  if (!namespaced_key(f, ns, sizeof(ns))) return 0;
  Perfetto__Protos__DetachRequest d = PERFETTO__PROTOS__DETACH_REQUEST__INIT;
  d.key = ns;
  uint8_t args[TG_DETACH_KEY_MAX + 16];
  size_t n = perfetto__protos__detach_request__get_packed_size(&d);
  if (n > sizeof(args)) return 0;
  perfetto__protos__detach_request__pack(&d, args);
  /* Replace any stale entry so the reply is recognised; the client is
   * gone, so one of its calls gives way when the table is full. */
  size_t at;
  if (tg__relay_tracked(f, TG_RELAY_DETACH_REQUEST_ID, &at) != TG_TRACK_NONE)
    tg__relay_untrack(f, at);
  if (f->n_tracked == TG_RELAY_FILTER_MAX_TRACKED) tg__relay_untrack(f, 0);
  tg__relay_track(f, TG_RELAY_DETACH_REQUEST_ID, TG_TRACK_OWN_DETACH);
  int rv = tg__relay_append_invoke(TG_RELAY_DETACH_REQUEST_ID, f->consumer_id,
                                   mid, args, n, false, out);
  if (rv < 0) return rv;
  if (key && keycap) snprintf(key, keycap, "%s", ns);
  return 1;
}
