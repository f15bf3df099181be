/* ConsumerPort's ReadBuffers (consumer_port_internal.h): packets are
 * serialised straight into the socket's output queue as
 * ReadBuffersResponse slices in frames of at most 128 KiB, with no
 * intermediate copy of the packet bytes; when the peer reads slowly the
 * job pauses at the high-water mark and resumes on drain.
 */
#include <errno.h>

#include "pb/ipc/consumer_port.pb-c.h"
#include "common/log.h"
#include "service/consumer_port_internal.h"
#include "service/readout.h"
#include "tracegate/error.h"

/* Adds one packet to the ReadBuffers reply; stops at the budget, and as
 * soon as the socket did not take a frame whole (on_drain resumes). */
static int frame_emit(void *ctx, const uint8_t *const *pieces,
                      const size_t *lens, unsigned n, unsigned n_stable,
                      size_t total) {
  tg_consumer_conn_t *c = ctx;
  if (tg_read_frames_add(c->frames, pieces, lens, n, n_stable, total) < 0)
    return 1;
  if (c->read_budget <= total) {
    c->read_budget = 0;
    return 1;
  }
  c->read_budget -= total;
  return tg_ipc_chan_congested(&c->conn->chan);
}

static void read_job_run(tg_consumer_conn_t *c) {
  tg_session_t *s = c->session;
  tg_read_frames_begin(c->frames, &c->conn->chan, c->read_call.request_id);
  int more = s ? tg__readout_drain(s, frame_emit, c) : 0;
  int err = tg_read_frames_end(c->frames);
  if (!err && more < 0) err = more;
  if (err) {
    /* A consumer that goes away in the middle of a read (Ctrl-C) is no
     * failure of ours. */
    if (err == -EPIPE || err == -ECONNRESET)
      TG_INFO("consumer pid %d went away during ReadBuffers",
              (int)c->conn->chan.peer_pid);
    else
      TG_WARN("consumer pid %d: ReadBuffers failed: %s",
              (int)c->conn->chan.peer_pid, tg_strerror(err));
    c->reading = false;
    tg_ipc_host_conn_close(c->conn, err);
    return;
  }
  /* Congested: on_drain resumes the job. */
  if (more && c->read_budget > 0 && tg_ipc_chan_congested(&c->conn->chan)) return;
  c->reading = false;
  Perfetto__Protos__ReadBuffersResponse r = PERFETTO__PROTOS__READ_BUFFERS_RESPONSE__INIT;
  tg_ipc_reply(&c->read_call, true, false, &r.base, -1);
}

void tg__cport_read_resume(tg_consumer_conn_t *c) {
  if (c->reading) read_job_run(c);
}

/* The default send buffer of a UNIX socket (~208 KiB) makes a streaming
 * read-out a ping-pong: this loop fills it, waits, the reader (a relay, a
 * tunnel, the CLI) takes it, waits, neither end busy (docs/operations.md
 * has the figures). Asked for once per consumer, at its first
 * ReadBuffers: consumers that only control sessions keep the default. */
#define STREAM_SEND_BUFFER (4 << 20)

static void stream_send_buffer(tg_consumer_conn_t *c) {
  int got = tg_ipc_chan_set_send_buffer(&c->conn->chan, STREAM_SEND_BUFFER);
  if (got < 0) {
    TG_WARN("consumer pid %d: cannot set the socket's send buffer: %s",
            (int)c->conn->chan.peer_pid, tg_strerror(got));
  } else if (got < STREAM_SEND_BUFFER && !c->svc->sndbuf_cap_logged) {
    /* Once per run: the cap is the machine's, not this consumer's. */
    c->svc->sndbuf_cap_logged = true;
    TG_INFO("consumer sockets get a %d KiB send buffer, not %d: "
            "net.core.wmem_max caps it, and read-outs stream slower "
            "(docs/operations.md, 'Streaming read-outs')",
            got / 1024, STREAM_SEND_BUFFER / 1024);
  }
}

void tg__cport_read_buffers(tg_consumer_conn_t *c, tg_ipc_call_t call,
                            const void *req) {
  (void)req;
  if (!c->session || c->reading || call.drop_reply) {
    tg__cport_fail(call);
    return;
  }
  if (!c->frames) {
    c->frames = tg_read_frames_new();
    if (!c->frames) {
      tg__cport_fail(call);
      return;
    }
    /* Frames go out from the trace buffers in place, as long as nothing is
     * queued before them: the read-out stops at the first frame the socket
     * does not take whole and resumes once the queue is empty, with the
     * socket's own buffer as the only queue. */
    tg_ipc_chan_set_high_water(&c->conn->chan, 0);
    stream_send_buffer(c);
  }
  c->reading = true;
  c->read_call = call;
  /* Bounded: with producers still writing, a read must end some time. */
  uint64_t budget = 1u << 20;
  for (size_t i = 0; i < c->session->n_buffers; i++)
    budget += tg_trace_buffer_size(c->session->buffers[i].tb);
  c->read_budget = budget;
  read_job_run(c);
}
