/* Reading a bulk frame stream from a UNIX socket: the channel's reads into
 * the frame being assembled (ipc/channel.c) against the reader it replaced.
 *
 * A thread writes MB of frames, mostly 128 KiB (a ReadBuffers reply
 * stream), into one end of a socket pair; the loop thread reads the other
 * end, rounds alternating between:
 *   chunk + feed   recv() into a 64 KiB buffer, tg_frame_decoder_feed():
 *                  a frame spanning reads is copied into the decoder;
 *   channel        tg_ipc_chan: the rest of a split frame read in place.
 * Per way: MB/s, the reading thread's CPU s per GB (user + system: the
 * kernel's copy out of the socket is most of it) and the share of the
 * stream the decoder copied.
 *
 * usage: bench_frame_reads [MB [ROUNDS]]   (default 2048 3)
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "abi/ipc_frame.h"
#include "ipc/channel.h"
#include "tracegate/pb_wire.h"

#define OLD_CHUNK (64u * 1024)

typedef struct run {
  int wr, rd;
  uint64_t want_bytes, frames, bytes, copied;
  uint32_t sum; /* touches every frame's first and last byte */
  bool done, closed;
  /* The replaced reader. */
  uv_poll_t poll;
  tg_frame_decoder_t dec;
  uint8_t *rbuf;
} run_t;

static size_t frame_len(uint64_t i) {
  return i % 16 == 15 ? 300 : TG_IPC_FRAME_MAX_PAYLOAD;
}

static void *writer_main(void *arg) {
  run_t *r = arg;
  static uint8_t buf[TG_IPC_FRAME_BUFFER_SIZE];
  memset(buf, 0x5a, sizeof(buf));
  uint64_t sent = 0;
  for (uint64_t i = 0; sent < r->want_bytes; i++) {
    size_t n = frame_len(i);
    tg_pb_write_le32(buf, (uint32_t)n);
    const uint8_t *p = buf;
    size_t left = 4 + n;
    while (left) {
      ssize_t k = write(r->wr, p, left);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return NULL;
      p += k;
      left -= (size_t)k;
    }
    sent += 4 + n;
  }
  return NULL;
}

static void count(run_t *r, const uint8_t *p, size_t n) {
  r->sum += p[0] + p[n - 1];
  r->frames++;
  r->bytes += 4 + n;
  if (r->bytes >= r->want_bytes) r->done = true;
}

/* --- the replaced reader ---------------------------------------------------
 */

static int old_frame(void *ctx, const uint8_t *p, size_t n) {
  count(ctx, p, n);
  return 0;
}

static void old_on_poll(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  run_t *r = h->data;
  for (int round = 0; round < 16; round++) {
    ssize_t n = recv(r->rd, r->rbuf, OLD_CHUNK, 0);
    if (n <= 0) break;
    tg_frame_decoder_feed(&r->dec, r->rbuf, (size_t)n, old_frame, r);
    if ((size_t)n < OLD_CHUNK) break;
  }
  if (r->done) uv_poll_stop(h);
}

/* --- the channel -----------------------------------------------------------
 */

static int chan_frame(tg_ipc_chan_t *ch, const uint8_t *p, size_t n) {
  run_t *r = ch->data;
  count(r, p, n);
  if (r->done) tg_ipc_chan_pause_reading(ch, true);
  return 0;
}

static void chan_closed(tg_ipc_chan_t *ch, int status) {
  (void)status;
  ((run_t *)ch->data)->closed = true;
}

static const tg_ipc_chan_cbs_t chan_cbs = {.on_frame = chan_frame,
                                           .on_close = chan_closed};

static double now_s(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct way {
  const char *name;
  double wall, cpu;
  uint64_t bytes, copied;
} way_t;

static int one_round(way_t *w, bool channel, uint64_t want) {
  uv_loop_t loop;
  if (uv_loop_init(&loop)) return -1;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) return -1;
  static run_t r;
  memset(&r, 0, sizeof(r));
  r.wr = sv[1];
  r.rd = sv[0];
  r.want_bytes = want;
  tg_ipc_chan_t ch;
  if (channel) {
    if (tg_ipc_chan_open(&loop, &ch, sv[0], &chan_cbs, &r)) return -1;
  } else {
    tg_frame_decoder_init(&r.dec);
    r.rbuf = malloc(OLD_CHUNK);
    uv_poll_init(&loop, &r.poll, sv[0]);
    r.poll.data = &r;
    uv_poll_start(&r.poll, UV_READABLE, old_on_poll);
  }
  pthread_t t;
  double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
  if (pthread_create(&t, NULL, writer_main, &r)) return -1;
  while (!r.done && uv_run(&loop, UV_RUN_ONCE)) {
  }
  double w1 = now_s(CLOCK_MONOTONIC), c1 = now_s(CLOCK_THREAD_CPUTIME_ID);
  if (channel) {
    r.copied = ch.dec.copied;
    tg_ipc_chan_close(&ch, 0);
  } else {
    r.copied = r.dec.copied;
    uv_close((uv_handle_t *)&r.poll, NULL);
    close(sv[0]);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  close(sv[1]); /* the writer is done: it wrote exactly what was read */
  pthread_join(t, NULL);
  if (!channel) {
    tg_frame_decoder_free(&r.dec);
    free(r.rbuf);
  }
  uv_loop_close(&loop);
  w->wall += w1 - w0;
  w->cpu += c1 - c0;
  w->bytes += r.bytes;
  w->copied += r.copied;
  return r.done ? 0 : -1;
}

int main(int argc, char **argv) {
  long mb = argc > 1 ? atol(argv[1]) : 2048;
  long rounds = argc > 2 ? atol(argv[2]) : 3;
  if (mb < 16 || mb > 65536 || rounds < 1 || rounds > 20) {
    fprintf(stderr,
            "usage: bench_frame_reads [MB (16-65536) [ROUNDS (1-20)]]\n");
    return 2;
  }
  way_t ways[2] = {{.name = "chunk + feed (before)"}, {.name = "channel"}};
  uint64_t want = (uint64_t)mb << 20;
  printf(
      "bench_frame_reads: %ld MB per way and round, %ld rounds alternating, "
      "128 KiB frames (1 in 16 small), socket pair, one writer thread\n",
      mb, rounds);
  for (long i = 0; i < rounds; i++)
    for (int k = 0; k < 2; k++) {
      int w = (int)((i + k) % 2);
      if (one_round(&ways[w], w == 1, want)) {
        fprintf(stderr, "bench_frame_reads: round %ld of '%s' failed\n", i,
                ways[w].name);
        return 1;
      }
    }
  printf("  %-24s %9s %14s %16s\n", "reader", "MB/s", "CPU s per GB",
         "decoder copied");
  for (int w = 0; w < 2; w++) {
    double gb = (double)ways[w].bytes / 1e9;
    printf("  %-24s %9.0f %14.3f %15.1f%%\n", ways[w].name,
           (double)ways[w].bytes / 1e6 / ways[w].wall, ways[w].cpu / gb,
           100.0 * (double)ways[w].copied / (double)ways[w].bytes);
  }
  printf("  channel CPU per GB / before: %.2f\n",
         (ways[1].cpu / (double)ways[1].bytes) /
             (ways[0].cpu / (double)ways[0].bytes));
  return 0;
}
