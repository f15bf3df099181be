/* SPDX-License-Identifier: Apache-2.0 */
/* Spans into TracePackets; see otlp_write.h. Field numbers are
 * Perfetto's (trace_packet.proto, track_event.proto,
 * track_descriptor.proto, debug_annotation.proto). */
#include "agent/otlp/otlp_write.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/fnv1a.h"
#include "tracegate/trace_context.h"

#define F_TIMESTAMP 8
#define F_TRACK_EVENT 11
#define F_TRACK_DESCRIPTOR 60
#define TE_DEBUG_ANNOTATIONS 4
#define TE_TYPE 9
#define TE_TRACK_UUID 11
#define TE_NAME 23
#define TE_FLOW_IDS 47
#define TE_TERMINATING_FLOW_IDS 48
#define TE_SLICE_BEGIN 1
#define TE_SLICE_END 2
#define TE_INSTANT 3
#define TE_COUNTER 4
#define TE_COUNTER_VALUE 30
#define TD_COUNTER 8
#define DA_BOOL 2
#define DA_INT 4
#define DA_DOUBLE 5
#define DA_STRING 6
#define DA_NAME 10
#define TD_UUID 1
#define TD_NAME 2
#define TD_PROCESS 3
#define TD_PARENT_UUID 5
#define PD_PID 1
#define PD_NAME 6

#define MAX_KEY 256 /* an annotation's name is cut here */

void otlp_writer_init(otlp_writer_t *w, const otlp_out_t *out) {
  memset(w, 0, sizeof(*w));
  w->out = *out;
}

int64_t otlp_boot_offset(void) {
  struct timespec r, b;
  clock_gettime(CLOCK_REALTIME, &r);
  clock_gettime(CLOCK_BOOTTIME, &b);
  return ((int64_t)r.tv_sec - (int64_t)b.tv_sec) * 1000000000LL +
         ((int64_t)r.tv_nsec - (int64_t)b.tv_nsec);
}

void otlp_writer_begin(otlp_writer_t *w, int64_t boot_offset_ns) {
  w->mask = w->out.targets(w->out.ctx);
  w->boot_offset_ns = boot_offset_ns;
  memset(w->seen, 0, sizeof(w->seen));
  w->n_seen = 0;
}

int64_t otlp_track_pid(otlp_str_t service, int64_t pid) {
  if (pid > 0) return pid;
  uint64_t h = tg_fnv1a(TG_FNV1A_SEED, service.p, service.n);
  return (int64_t)((1u << 22) + h % ((1u << 31) - (1u << 22)));
}

/* True the first time |uuid| is seen in this request (its descriptor is
 * then to be written); a full table says true again, which only repeats
 * a descriptor. */
static bool first_use(otlp_writer_t *w, uint64_t uuid) {
  if (w->n_seen >= OTLP_TRACKS_SEEN / 2) return true;
  size_t i = (size_t)(uuid % OTLP_TRACKS_SEEN);
  while (w->seen[i]) {
    if (w->seen[i] == uuid) return false;
    i = (i + 1) % OTLP_TRACKS_SEEN;
  }
  w->seen[i] = uuid;
  w->n_seen++;
  return true;
}

static uint64_t boot_ts(const otlp_writer_t *w, uint64_t unix_ns) {
  int64_t off = w->boot_offset_ns;
  if (off >= 0 && unix_ns < (uint64_t)off) return 0;
  return unix_ns - (uint64_t)off;
}

static void put_str(tg_pbw_t *p, uint32_t field, otlp_str_t s, size_t max) {
  /* An absent string is (NULL, 0): written empty. */
  if (!s.p) s = (otlp_str_t){"", 0};
  tg_pbw_append_bytes(p, field, s.p, s.n < max ? s.n : max);
}

static void hex(char *out, const uint8_t *id, size_t n) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[id[i] >> 4];
    out[2 * i + 1] = digits[id[i] & 15];
  }
  out[2 * n] = '\0';
}

static void ann_str(tg_pbw_t *p, const char *name, otlp_str_t v) {
  tg_pbw_begin_nested(p, TE_DEBUG_ANNOTATIONS);
  tg_pbw_append_string(p, DA_NAME, name);
  put_str(p, DA_STRING, v, OTLP_MAX_VALUE);
  tg_pbw_end_nested(p);
}

static void ann_int(tg_pbw_t *p, const char *name, int64_t v) {
  tg_pbw_begin_nested(p, TE_DEBUG_ANNOTATIONS);
  tg_pbw_append_string(p, DA_NAME, name);
  tg_pbw_append_int(p, DA_INT, v);
  tg_pbw_end_nested(p);
}

static void ann_hex(tg_pbw_t *p, const char *name, const uint8_t *id,
                    size_t n) {
  char buf[33];
  hex(buf, id, n);
  ann_str(p, name, (otlp_str_t){buf, 2 * n});
}

/* One attribute as a debug annotation. Values longer than OTLP_MAX_VALUE
 * are cut to it; bytes and protobuf arrays and maps are shown by size. */
static void ann_attr(otlp_writer_t *w, tg_pbw_t *p, const otlp_attr_t *a) {
  tg_pbw_begin_nested(p, TE_DEBUG_ANNOTATIONS);
  put_str(p, DA_NAME, a->key, MAX_KEY);
  char buf[64];
  switch (a->type) {
    case OTLP_V_STRING:
      if (a->s.n > OTLP_MAX_VALUE) w->slices_cut_values++;
      put_str(p, DA_STRING, a->s, OTLP_MAX_VALUE);
      break;
    case OTLP_V_BOOL:
      tg_pbw_append_bool(p, DA_BOOL, a->v.b);
      break;
    case OTLP_V_INT:
      tg_pbw_append_int(p, DA_INT, a->v.i);
      break;
    case OTLP_V_DOUBLE:
      tg_pbw_append_double(p, DA_DOUBLE, a->v.d);
      break;
    case OTLP_V_ARRAY:
    case OTLP_V_KVLIST:
    case OTLP_V_BYTES: {
      if (a->type != OTLP_V_BYTES && a->json_text) {
        if (a->s.n > OTLP_MAX_VALUE) w->slices_cut_values++;
        put_str(p, DA_STRING, a->s, OTLP_MAX_VALUE);
        break;
      }
      /* Bytes, and protobuf arrays and maps, shown by their size. */
      const char *what = a->type == OTLP_V_ARRAY    ? "array"
                         : a->type == OTLP_V_KVLIST ? "kvlist"
                                                    : "bytes";
      int n = snprintf(buf, sizeof(buf), "(%s, %zu bytes)", what, a->s.n);
      tg_pbw_append_bytes(p, DA_STRING, buf, (size_t)n);
      break;
    }
    default:
      tg_pbw_append_bytes(p, DA_STRING, "", 0);
      break;
  }
  tg_pbw_end_nested(p);
}

static const char *kind_name(int kind) {
  static const char *const names[] = {"unspecified", "internal", "server",
                                      "client",      "producer", "consumer"};
  return kind >= 0 && kind <= 5 ? names[kind] : "unknown";
}

static void describe_process(otlp_writer_t *w, tg_pbw_t *p) {
  tg_pbw_begin_nested(p, F_TRACK_DESCRIPTOR);
  tg_pbw_append_varint(p, TD_UUID, w->proc_uuid);
  tg_pbw_begin_nested(p, TD_PROCESS);
  tg_pbw_append_int(p, PD_PID, w->pid);
  tg_pbw_append_string(p, PD_NAME, w->service);
  tg_pbw_end_nested(p);
  tg_pbw_end_nested(p);
}

/* A TracePacket holds one track_descriptor at most: a second descriptor
 * goes in a packet of its own, before the events that use it. */
static void write_descriptors(otlp_writer_t *w, unsigned inst,
                              uint64_t track, bool proc, bool trk) {
  if (proc) {
    tg_pbw_t *p = w->out.begin(w->out.ctx, inst);
    if (p) {
      describe_process(w, p);
      w->out.end(w->out.ctx, inst);
    }
  }
  if (trk) {
    tg_pbw_t *p = w->out.begin(w->out.ctx, inst);
    if (p) {
      tg_pbw_begin_nested(p, F_TRACK_DESCRIPTOR);
      tg_pbw_append_varint(p, TD_UUID, track);
      tg_pbw_append_varint(p, TD_PARENT_UUID, w->proc_uuid);
      tg_pbw_append_string(p, TD_NAME, "spans");
      tg_pbw_end_nested(p);
      w->out.end(w->out.ctx, inst);
    }
  }
}

/* Opens the packet's TrackEvent of |type| on |track| at |unix_ns|; the
 * caller adds its fields and closes it. */
static void open_event(otlp_writer_t *w, tg_pbw_t *p, uint64_t unix_ns,
                       int type, uint64_t track) {
  tg_pbw_append_varint(p, F_TIMESTAMP, boot_ts(w, unix_ns));
  tg_pbw_begin_nested(p, F_TRACK_EVENT);
  tg_pbw_append_varint(p, TE_TYPE, (uint64_t)type);
  tg_pbw_append_varint(p, TE_TRACK_UUID, track);
}

static void write_begin(otlp_writer_t *w, tg_pbw_t *p, uint64_t track,
                        const otlp_span_t *s) {
  open_event(w, p, s->start_unix_ns, TE_SLICE_BEGIN, track);
  put_str(p, TE_NAME, s->name, OTLP_MAX_VALUE);
  for (size_t i = 0; i < s->n_attrs; i++) ann_attr(w, p, &s->attrs[i]);
  const char *k = kind_name(s->kind);
  ann_str(p, "otel.kind", (otlp_str_t){k, strlen(k)});
  ann_hex(p, "otel.trace_id", s->trace_id, 16);
  ann_hex(p, "otel.span_id", s->span_id, 8);
  if (s->has_parent) ann_hex(p, "otel.parent_span_id", s->parent_span_id, 8);
  if (s->status_code != 0) {
    const char *c = s->status_code == 1 ? "ok" : s->status_code == 2 ? "error"
                                                                     : "unknown";
    ann_str(p, "otel.status_code", (otlp_str_t){c, strlen(c)});
    if (s->status_message.n) ann_str(p, "otel.status_message", s->status_message);
  }
  if (s->dropped_attrs) ann_int(p, "otel.dropped_attributes", (int64_t)s->dropped_attrs);
  if (s->dropped_events) ann_int(p, "otel.dropped_events", (int64_t)s->dropped_events);
  if (s->dropped_links) ann_int(p, "otel.dropped_links", (int64_t)s->dropped_links);
  /* A flow starts only where OTel's kinds say a span's context leaves
   * its process: a CLIENT's call, a PRODUCER's message. Its remote child
   * (below) or a span linking to it ends the flow. A flow begun by every
   * span would leave every leaf span an end without the other in a
   * snapshot's links (collector.md, "Requests across hosts"), hiding the
   * calls whose server is missing among them. */
  if (s->kind == OTLP_KIND_CLIENT || s->kind == OTLP_KIND_PRODUCER)
    tg_pbw_append_fixed64(p, TE_FLOW_IDS,
                          tg_flow_id_from_context(s->trace_id, s->span_id));
  bool remote_parent =
      s->kind == OTLP_KIND_SERVER || s->kind == OTLP_KIND_CONSUMER ||
      ((s->flags & OTLP_FLAG_HAS_IS_REMOTE) && (s->flags & OTLP_FLAG_IS_REMOTE));
  if (s->has_parent && remote_parent)
    tg_pbw_append_fixed64(
        p, TE_TERMINATING_FLOW_IDS,
        tg_flow_id_from_context(s->trace_id, s->parent_span_id));
  for (size_t i = 0; i < s->n_links; i++)
    tg_pbw_append_fixed64(p, TE_TERMINATING_FLOW_IDS,
                          tg_flow_id_from_context(s->links[i].trace_id,
                                                  s->links[i].span_id));
  tg_pbw_end_nested(p);
}

static void write_event(otlp_writer_t *w, tg_pbw_t *p, uint64_t track,
                        const otlp_event_t *e) {
  open_event(w, p, e->time_unix_ns, TE_INSTANT, track);
  put_str(p, TE_NAME, e->name, OTLP_MAX_VALUE);
  for (size_t i = 0; i < e->n_attrs; i++) ann_attr(w, p, &e->attrs[i]);
  tg_pbw_end_nested(p);
}

static void write_end(otlp_writer_t *w, tg_pbw_t *p, uint64_t track,
                      const otlp_span_t *s) {
  open_event(w, p, s->end_unix_ns, TE_SLICE_END, track);
  tg_pbw_end_nested(p);
}

/* The process track of |service| and |pid| (as the resource gave it)
 * becomes the current one. */
static void set_process(otlp_writer_t *w, otlp_str_t service, int64_t pid) {
  size_t n = service.n < sizeof(w->service) - 1 ? service.n
                                                : sizeof(w->service) - 1;
  if (n) memcpy(w->service, service.p, n);
  w->service[n] = '\0';
  w->pid = otlp_track_pid(service, pid);
  uint64_t h = tg_fnv1a(TG_FNV1A_SEED, "otlp-process", 12);
  h = tg_fnv1a(h, &w->pid, sizeof(w->pid));
  w->proc_uuid = tg_fnv1a(h, w->service, n) | 1u; /* never 0 */
}

static int on_resource(void *ctx, const otlp_resource_t *r) {
  set_process(ctx, r->service, r->pid);
  return 0;
}

void otlp_writer_counters(otlp_writer_t *w, otlp_str_t service, int64_t pid,
                          uint64_t boot_ns, const otlp_counter_t *c,
                          size_t n) {
  set_process(w, service, pid);
  for (unsigned m = w->mask, inst = 0; m; m >>= 1, inst++) {
    if (!(m & 1u)) continue;
    write_descriptors(w, inst, 0, true, false);
    for (size_t i = 0; i < n; i++) {
      uint64_t uuid = tg_fnv1a(w->proc_uuid, c[i].name, strlen(c[i].name)) | 1u;
      tg_pbw_t *p = w->out.begin(w->out.ctx, inst);
      if (p) {
        tg_pbw_begin_nested(p, F_TRACK_DESCRIPTOR);
        tg_pbw_append_varint(p, TD_UUID, uuid);
        tg_pbw_append_varint(p, TD_PARENT_UUID, w->proc_uuid);
        tg_pbw_append_string(p, TD_NAME, c[i].name);
        tg_pbw_begin_nested(p, TD_COUNTER);
        tg_pbw_end_nested(p);
        tg_pbw_end_nested(p);
        w->out.end(w->out.ctx, inst);
      }
      if ((p = w->out.begin(w->out.ctx, inst))) {
        tg_pbw_append_varint(p, F_TIMESTAMP, boot_ns);
        tg_pbw_begin_nested(p, F_TRACK_EVENT);
        tg_pbw_append_varint(p, TE_TYPE, TE_COUNTER);
        tg_pbw_append_varint(p, TE_TRACK_UUID, uuid);
        tg_pbw_append_int(p, TE_COUNTER_VALUE, (int64_t)c[i].value);
        tg_pbw_end_nested(p);
        w->out.end(w->out.ctx, inst);
      }
    }
  }
}

static int on_span(void *ctx, const otlp_span_t *s, bool *rejected) {
  otlp_writer_t *w = ctx;
  *rejected = false;
  uint64_t track = tg_fnv1a(w->proc_uuid, s->trace_id, 16) | 1u;
  bool proc = first_use(w, w->proc_uuid);
  bool trk = first_use(w, track);
  w->spans++;
  for (unsigned m = w->mask, inst = 0; m; m >>= 1, inst++) {
    if (!(m & 1u)) continue;
    if (proc || trk) write_descriptors(w, inst, track, proc, trk);
    tg_pbw_t *p = w->out.begin(w->out.ctx, inst);
    if (p) {
      write_begin(w, p, track, s);
      w->out.end(w->out.ctx, inst);
    }
    for (size_t i = 0; i < s->n_events; i++) {
      if (!(p = w->out.begin(w->out.ctx, inst))) continue;
      write_event(w, p, track, &s->events[i]);
      w->out.end(w->out.ctx, inst);
    }
    if ((p = w->out.begin(w->out.ctx, inst))) {
      write_end(w, p, track, s);
      w->out.end(w->out.ctx, inst);
    }
  }
  return 0;
}

otlp_sink_t otlp_writer_sink(otlp_writer_t *w) {
  return (otlp_sink_t){.resource = on_resource, .span = on_span, .ctx = w};
}
