/* One recording on a real tracegated, as most end-to-end service tests run
 * it: a raw producer of one data source (and, when asked, a second one
 * that only fires triggers), a raw consumer, and a one-buffer config the
 * test may change before it is enabled; then the session runs to the
 * test's condition, ends, and its trace is read and counted. Every step
 * asserts (cmocka) and waits with a bound; scenario_close() frees and
 * closes all of it. The service itself comes from test_service_setup. */
#ifndef TRACEGATE_TESTS_SERVICE_SCENARIO_H
#define TRACEGATE_TESTS_SERVICE_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "test_service.h"

/* Who takes part. Zero fields take the defaults named. */
typedef struct scenario_opts {
  const char *producer; /* the producer's name; NULL: "test.producer" */
  const char *ds;       /* its data source, and the config's */
  uint32_t buffer_kb;   /* the session's one buffer; 0: 64 */
  int policy;           /* its fill policy: 1 RING_BUFFER, 2 DISCARD; 0: 1 */
  uint32_t page_kb;     /* SMB page hint; 0: 4 (with smb_kb 0: 64) */
  uint32_t smb_kb;
  bool trigger_producer; /* also "trigger.producer", no data source */
} scenario_opts_t;

typedef Perfetto__Protos__TraceConfig__TriggerConfig__TriggerMode
    scenario_trigger_mode_t;
#define SCENARIO_START_TRACING \
  PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__START_TRACING
#define SCENARIO_STOP_TRACING \
  PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__STOP_TRACING
#define SCENARIO_CLONE_SNAPSHOT \
  PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__CLONE_SNAPSHOT

/* A trigger config with one trigger (tr), for a simple_cfg_t. */
typedef struct trigger_cfg {
  Perfetto__Protos__TraceConfig__TriggerConfig tc;
  Perfetto__Protos__TraceConfig__TriggerConfig__Trigger tr, *trp;
} trigger_cfg_t;

/* Puts |t|, with the one trigger |name| in |mode| (trigger_timeout_ms
 * |timeout_ms| when not 0), into |sc|. Not movable: |t| points into
 * itself. */
void trigger_cfg_init(trigger_cfg_t *t, simple_cfg_t *sc,
                      scenario_trigger_mode_t mode, const char *name,
                      uint32_t timeout_ms);

typedef struct scenario {
  raw_producer_t p; /* the data source's producer */
  raw_producer_t t; /* fires triggers (opts.trigger_producer) */
  bool has_t;
  raw_consumer_t c;
  simple_cfg_t sc; /* the config scenario_enable() sends */
  trigger_cfg_t trig; /* what scenario_trigger() put into sc */
  Perfetto__Protos__TracePacket **pk; /* the trace, once read */
  size_t n;
} scenario_t;

/* Connects the producer(s) then the consumer and makes the config; the
 * session is not enabled yet. Not movable: sc points into itself. */
void scenario_open(scenario_t *s, const test_service_t *ts,
                   scenario_opts_t opts);
/* trigger_cfg_init() of s->trig into s->sc (s->trig.tr is the trigger,
 * for the test to add to). */
void scenario_trigger(scenario_t *s, scenario_trigger_mode_t mode,
                      const char *name, uint32_t timeout_ms);
/* EnableTracing with s->sc (the reply comes when the session ends). */
void scenario_enable(scenario_t *s);
/* scenario_enable(), then the producer's StartDataSource. */
void scenario_start(scenario_t *s);
/* scenario_start() sending |fd| with EnableTracing (write_into_file). */
void scenario_start_into(scenario_t *s, int fd);
/* |n| test packets ("|str|", |first|, |first| + 1...) of writer 1 in
 * (page 0, chunk 0), committed; the commit acks flush |flush_id| when it
 * is not 0. */
void scenario_commit(scenario_t *s, uint32_t chunk_id, const char *str,
                     uint32_t first, unsigned n, uint64_t flush_id);
/* ActivateTriggers |name| from the trigger producer; raw_call's result. */
int scenario_fire(scenario_t *s, const char *name);
/* DisableTracing and its end. */
void scenario_stop(scenario_t *s);
/* The session ends by itself (the EnableTracing reply, no error). */
void scenario_wait_end(scenario_t *s);
/* ReadBuffers to the end into s->pk / s->n. */
void scenario_read(scenario_t *s);
/* The test packets of s->pk carrying |str|; their values must run from
 * |first| up, in order. */
size_t scenario_count(const scenario_t *s, const char *str, uint32_t first);
/* The test packets among |pk| carrying |str|, in any order. */
size_t count_test_str(Perfetto__Protos__TracePacket **pk, size_t n,
                      const char *str);
/* Frees the trace and closes the consumer and the producers. */
void scenario_close(scenario_t *s);

#endif /* TRACEGATE_TESTS_SERVICE_SCENARIO_H */
