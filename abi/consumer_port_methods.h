/* The ConsumerPort's methods (proto/ipc/consumer_port.proto), one row
 * each: what every module that names a method reads, so that adding one is
 * a row here plus its handler in service/consumer_port.c.
 *
 *   X(id, Name, snake, role, traffic, refusal)
 *
 * id       the method's id in tracegated's BindServiceReply: the row's
 *          place, 1-based (service/consumer_port.c indexes its handlers by
 *          it). Clients and the relay look ids up by name in that reply,
 *          so a service numbering them otherwise (Perfetto's traced gives
 *          SaveTraceForBugreport 14 and CloneSession 15, by declaration
 *          order) is served alike.
 * Name     the method; its request and reply are perfetto.protos.
 *          <Name>Request and <Name>Response (protobuf-c:
 *          Perfetto__Protos__<Name>Request,
 *          perfetto__protos__<snake>_request__descriptor).
 * role     the least role a remote client needs (auth/authz.h): OBSERVE,
 *          RECORD, or NONE (no remote client may call it).
 * traffic  BULK: the reply carries the trace itself (the relay's replay
 *          window, compression); POLL: state a client asks for over and
 *          over (the relay does not audit it); CONTROL: everything else.
 * refusal  how the relay's refusal of a call says why
 *          (relay/filter_frames.c builds each shape once): NOTE, the reply
 *          has no field for a reason, so a RequestError goes just before
 *          it; DISABLED, EnableTracingResponse{disabled, error}; ERROR,
 *          CloneSessionResponse{success: false, error}; MSG,
 *          SaveTraceForBugreportResponse{success: false, msg}. A new
 *          method whose reply has a reason field of another shape adds
 *          one there.
 *
 * tests/abi/test_consumer_port_methods.c holds the rows to the .proto's
 * service; docs/check-methods.py holds security.md's role table to them.
 * Header only: pure macros and lookups, no library to link.
 */
#ifndef TRACEGATE_ABI_CONSUMER_PORT_METHODS_H
#define TRACEGATE_ABI_CONSUMER_PORT_METHODS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TG_CPORT_METHODS(X)                                                  \
  X(1, EnableTracing, enable_tracing, RECORD, CONTROL, DISABLED)             \
  X(2, DisableTracing, disable_tracing, RECORD, CONTROL, NOTE)               \
  X(3, ReadBuffers, read_buffers, RECORD, BULK, NOTE)                        \
  X(4, FreeBuffers, free_buffers, RECORD, CONTROL, NOTE)                     \
  X(5, Flush, flush, RECORD, CONTROL, NOTE)                                  \
  X(6, StartTracing, start_tracing, RECORD, CONTROL, NOTE)                   \
  X(7, ChangeTraceConfig, change_trace_config, RECORD, CONTROL, NOTE)        \
  X(8, Detach, detach, RECORD, CONTROL, NOTE)                                \
  X(9, Attach, attach, RECORD, CONTROL, NOTE)                                \
  X(10, GetTraceStats, get_trace_stats, OBSERVE, POLL, NOTE)                 \
  X(11, ObserveEvents, observe_events, OBSERVE, CONTROL, NOTE)               \
  X(12, QueryServiceState, query_service_state, OBSERVE, POLL, NOTE)         \
  X(13, QueryCapabilities, query_capabilities, OBSERVE, CONTROL, NOTE)       \
  X(14, CloneSession, clone_session, RECORD, CONTROL, ERROR)                 \
  X(15, SaveTraceForBugreport, save_trace_for_bugreport, NONE, CONTROL, MSG)

/* TG_CPORT_EnableTracing, ...: a row's id. */
typedef enum tg_cport_id {
#define TG__CPORT_ID(id, Name, snake, role, traffic, refusal) \
  TG_CPORT_##Name = (id),
  TG_CPORT_METHODS(TG__CPORT_ID)
#undef TG__CPORT_ID
} tg_cport_id_t;

#define TG__CPORT_ONE(id, Name, snake, role, traffic, refusal) +1
/* How many rows (the last id). */
#define TG_CPORT_N_METHODS (0 TG_CPORT_METHODS(TG__CPORT_ONE))

typedef enum tg_cport_traffic {
  TG_CPORT_CONTROL,
  TG_CPORT_POLL,
  TG_CPORT_BULK,
} tg_cport_traffic_t;

typedef enum tg_cport_refusal {
  TG_CPORT_REFUSE_NOTE,
  TG_CPORT_REFUSE_DISABLED,
  TG_CPORT_REFUSE_ERROR,
  TG_CPORT_REFUSE_MSG,
} tg_cport_refusal_t;

typedef struct tg_cport_method {
  tg_cport_id_t id;
  const char *name;
  tg_cport_traffic_t traffic;
  tg_cport_refusal_t refusal;
} tg_cport_method_t;

/* The rows, each at [id - 1]. */
static inline const tg_cport_method_t *tg__cport_rows(void) {
#define TG__CPORT_ROW(id, Name, snake, role, traffic, refusal)             \
  [(id) - 1] = {TG_CPORT_##Name, #Name, TG_CPORT_##traffic,               \
                TG_CPORT_REFUSE_##refusal},
  static const tg_cport_method_t rows[] = {TG_CPORT_METHODS(TG__CPORT_ROW)};
#undef TG__CPORT_ROW
  _Static_assert(sizeof(rows) / sizeof(rows[0]) == TG_CPORT_N_METHODS,
                 "ids are 1..TG_CPORT_N_METHODS, each once");
  return rows;
}

/* The row of |id|; NULL for an id no row has. */
static inline const tg_cport_method_t *tg_cport_method(uint32_t id) {
  if (id < 1 || id > TG_CPORT_N_METHODS) return NULL;
  const tg_cport_method_t *m = &tg__cport_rows()[id - 1];
  return m->name ? m : NULL;
}

/* The row named |name| (exact match); NULL for a method no row has
 * (another service's, or one of a newer Perfetto's). */
static inline const tg_cport_method_t *tg_cport_method_by_name(
    const char *name) {
  if (!name) return NULL;
  for (uint32_t i = 0; i < TG_CPORT_N_METHODS; i++) {
    const tg_cport_method_t *m = &tg__cport_rows()[i];
    if (m->name && !strcmp(m->name, name)) return m;
  }
  return NULL;
}

/* The name of a row's method: tg_cport_name(TG_CPORT_Flush) is "Flush". */
static inline const char *tg_cport_name(tg_cport_id_t id) {
  const tg_cport_method_t *m = tg_cport_method(id);
  return m ? m->name : "?";
}

#endif /* TRACEGATE_ABI_CONSUMER_PORT_METHODS_H */
