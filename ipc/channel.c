/* tg_ipc_chan: recvmsg/sendmsg on a uv_poll_t, frames in, frames out. */
#include "ipc/channel.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tracegate/error.h"
#include "common/log.h"

/* Output above this pauses producers of bulk data (on_drain resumes them). */
#define DEFAULT_HIGH_WATER (4u * 1024 * 1024)
/* Input read at once under an output limit: small, so the replies one read
 * can cause stay small (a 20-byte BindService is answered with ~330 bytes),
 * and smaller still while output is already queued. */
#define LIMITED_READ_CHUNK (16 * 1024)
#define BACKLOGGED_READ_CHUNK 4096

static void on_poll(uv_poll_t *h, int status, int events);

static void update_poll(tg_ipc_chan_t *ch) {
  if (ch->state != TG_CHAN_OPEN) return;
  int ev = 0;
  if (!ch->reading_paused && !ch->input_held) ev |= UV_READABLE;
  /* Also while above the high-water mark with nothing queued (a send
   * emptied the queue itself): the next writable event reports the drain,
   * which a send must not do from inside itself. */
  if (tg_buf_size(&ch->out) > 0 || ch->above_high_water) ev |= UV_WRITABLE;
  if (ev == ch->poll_events) return;
  ch->poll_events = ev;
  if (ev)
    uv_poll_start(&ch->poll, ev, on_poll);
  else
    uv_poll_stop(&ch->poll);
}

static void close_in_fds(tg_ipc_chan_t *ch) {
  for (unsigned i = 0; i < ch->n_in_fds; i++) close(ch->in_fds[i]);
  ch->n_in_fds = 0;
}

static void on_handle_closed(uv_handle_t *h) {
  tg_ipc_chan_t *ch = h->data;
  ch->state = TG_CHAN_CLOSED;
  close(ch->fd);
  ch->fd = -1;
  close_in_fds(ch);
  for (unsigned i = 0; i < ch->n_out_fds; i++) close(ch->out_fds[i].fd);
  ch->n_out_fds = 0;
  tg_frame_decoder_free(&ch->dec);
  tg_buf_free(&ch->out);
  free(ch->rbuf);
  ch->rbuf = NULL;
  ch->cbs->on_close(ch, ch->close_status);
}

void tg_ipc_chan_close(tg_ipc_chan_t *ch, int status) {
  if (ch->state != TG_CHAN_OPEN) return;
  ch->state = TG_CHAN_CLOSING;
  ch->close_status = status;
  uv_poll_stop(&ch->poll);
  uv_close((uv_handle_t *)&ch->poll, on_handle_closed);
}

int tg_ipc_chan_set_send_buffer(tg_ipc_chan_t *ch, int bytes) {
  if (setsockopt(ch->fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes)) < 0)
    return -errno;
  int got = 0;
  socklen_t len = sizeof(got);
  if (getsockopt(ch->fd, SOL_SOCKET, SO_SNDBUF, &got, &len) < 0) return -errno;
  return got;
}

int tg_ipc_chan_open(uv_loop_t *loop, tg_ipc_chan_t *ch, int fd,
                     const tg_ipc_chan_cbs_t *cbs, void *data) {
  memset(ch, 0, sizeof(*ch));
  ch->fd = fd;
  ch->cbs = cbs;
  ch->data = data;
  ch->high_water = DEFAULT_HIGH_WATER;
  tg_frame_decoder_init(&ch->dec);
  tg_buf_init(&ch->out, 0);
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
      fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
    int err = -errno;
    close(fd);
    return err;
  }
  struct ucred cred;
  socklen_t clen = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) {
    ch->peer_pid = cred.pid;
    ch->peer_uid = cred.uid;
    ch->peer_gid = cred.gid;
  } else {
    ch->peer_pid = -1;
    ch->peer_uid = (uid_t)-1;
    ch->peer_gid = (gid_t)-1;
  }
  ch->rbuf = malloc(TG_IPC_READ_CHUNK);
  if (!ch->rbuf) {
    close(fd);
    return -ENOMEM;
  }
  int rv = uv_poll_init(loop, &ch->poll, fd);
  if (rv < 0) {
    free(ch->rbuf);
    close(fd);
    return rv;
  }
  ch->poll.data = ch;
  ch->state = TG_CHAN_OPEN;
  update_poll(ch);
  return 0;
}

static int on_decoded(void *ctx, const uint8_t *p, size_t n) {
  tg_ipc_chan_t *ch = ctx;
  if (ch->state != TG_CHAN_OPEN) return 1;
  int rv = ch->cbs->on_frame(ch, p, n);
  if (ch->state != TG_CHAN_OPEN) return 1;
  return rv;
}

/* Feeds what a read brought: first the bytes it wrote in place into the
 * decoder's partial frame (|in_place|), then those in the chunk buffer.
 * Returns 0 to read on, non-zero when the channel closed or stopped. */
static int take_input(tg_ipc_chan_t *ch, size_t in_place, size_t in_rbuf) {
  int rv = 0;
  if (in_place) rv = tg_frame_decoder_wrote(&ch->dec, in_place, on_decoded, ch);
  if (rv == 0 && in_rbuf && ch->state == TG_CHAN_OPEN)
    rv = tg_frame_decoder_feed(&ch->dec, ch->rbuf, in_rbuf, on_decoded, ch);
  if (rv == TG_EFRAME_TOO_LARGE || rv == -ENOMEM) {
    TG_WARN("ipc: peer pid %d: %s; closing", (int)ch->peer_pid,
            tg_strerror(rv));
    tg_ipc_chan_close(ch, rv);
    return 1;
  }
  if (ch->state != TG_CHAN_OPEN) return 1;
  if (tg_frame_decoder_pending(&ch->dec) == 0) close_in_fds(ch);
  return 0;
}

/* Bytes read into the chunk buffer on a bulk stream, past the end of the
 * frame being assembled in place (or with nothing partial): the next
 * frame's start, which the decoder then copies; the rest of that frame is
 * read in place by the next call: one or two syscalls per frame, and only
 * this tail is ever copied. */
#define BULK_TAIL_READ 4096

static void do_read(tg_ipc_chan_t *ch) {
  /* Bounded per wakeup so one busy peer cannot monopolise the loop. */
  for (int round = 0; round < 16 && ch->state == TG_CHAN_OPEN &&
                      !ch->reading_paused && !ch->input_held;
       round++) {
    size_t chunk = TG_IPC_READ_CHUNK;
    if (ch->input_hold_water)
      chunk = tg_buf_size(&ch->out) > 0 ? BACKLOGGED_READ_CHUNK
                                        : LIMITED_READ_CHUNK;
    /* The rest of a split frame goes straight where the decoder assembles
     * it (a 128 KiB ReadBuffers reply spans two 64 KiB reads), so a bulk
     * stream's bytes are not copied a second time. */
    uint8_t *at = NULL;
    size_t room = tg_frame_decoder_room(&ch->dec, &at);
    if (ch->input_hold_water) {
      if (room > chunk) room = chunk;
      chunk -= room;
    } else if (tg_frame_decoder_bulk(&ch->dec)) {
      chunk = BULK_TAIL_READ;
    }
    union {
      struct cmsghdr align;
      char buf[CMSG_SPACE(sizeof(int) * TG_IPC_MAX_FDS_IN_FLIGHT)];
    } cbuf;
    struct iovec iov[2] = {{.iov_base = at, .iov_len = room},
                           {.iov_base = ch->rbuf, .iov_len = chunk}};
    struct msghdr msg = {.msg_iov = room ? iov : iov + 1,
                         .msg_iovlen = room ? (chunk ? 2 : 1) : 1,
                         .msg_control = cbuf.buf,
                         .msg_controllen = sizeof(cbuf.buf)};
    ssize_t n = recvmsg(ch->fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      tg_ipc_chan_close(ch, -errno);
      return;
    }
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      int fds[TG_IPC_MAX_FDS_IN_FLIGHT];
      if (nfds > TG_IPC_MAX_FDS_IN_FLIGHT) nfds = TG_IPC_MAX_FDS_IN_FLIGHT;
      memcpy(fds, CMSG_DATA(c), nfds * sizeof(int));
      for (size_t i = 0; i < nfds; i++) {
        if (ch->n_in_fds < TG_IPC_MAX_FDS_IN_FLIGHT)
          ch->in_fds[ch->n_in_fds++] = fds[i];
        else
          close(fds[i]); /* more than any method takes: drop it */
      }
    }
    if (msg.msg_flags & MSG_CTRUNC) {
      TG_WARN("ipc: peer pid %d sent truncated control data; closing",
              (int)ch->peer_pid);
      tg_ipc_chan_close(ch, -EBADMSG);
      return;
    }
    if (n == 0) {
      tg_ipc_chan_close(ch, TG_EPEER_CLOSED);
      return;
    }
    size_t got = (size_t)n, in_place = got < room ? got : room;
    if (take_input(ch, in_place, got - in_place)) return;
    if (got < room + chunk) return; /* drained the socket */
  }
}

/* Sends as much of the output queue as the socket takes, attaching each
 * queued fd to the first byte of its frame. */
static int do_write(tg_ipc_chan_t *ch) {
  while (tg_buf_size(&ch->out) > 0) {
    size_t len = tg_buf_size(&ch->out);
    union {
      struct cmsghdr align;
      char buf[CMSG_SPACE(sizeof(int))];
    } cbuf;
    struct msghdr msg = {0};
    struct iovec iov = {.iov_base = tg_buf_begin(&ch->out)};
    bool with_fd = false;
    if (ch->n_out_fds > 0) {
      uint64_t at = ch->out_fds[0].at;
      if (at == ch->out_sent) {
        with_fd = true;
        memset(&cbuf, 0, sizeof(cbuf));
        msg.msg_control = cbuf.buf;
        msg.msg_controllen = sizeof(cbuf.buf);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &ch->out_fds[0].fd, sizeof(int));
        if (ch->n_out_fds > 1 && ch->out_fds[1].at - at < len)
          len = (size_t)(ch->out_fds[1].at - at);
      } else if (at - ch->out_sent < len) {
        len = (size_t)(at - ch->out_sent); /* stop before the fd's frame */
      }
    }
    iov.iov_len = len;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    ssize_t n = sendmsg(ch->fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) break;
      return -errno;
    }
    if (with_fd) {
      close(ch->out_fds[0].fd);
      memmove(&ch->out_fds[0], &ch->out_fds[1],
              (ch->n_out_fds - 1) * sizeof(ch->out_fds[0]));
      ch->n_out_fds--;
    }
    tg_buf_consume(&ch->out, (size_t)n);
    ch->out_sent += (uint64_t)n;
  }
  return 0;
}

/* Input stops above the hold mark and resumes at a quarter of it, whichever
 * write (from the loop or inside a send) brought the queue there. */
static void update_input_hold(tg_ipc_chan_t *ch) {
  if (!ch->input_hold_water) return;
  size_t pending = tg_buf_size(&ch->out);
  if (pending > ch->input_hold_water)
    ch->input_held = true;
  else if (ch->input_held && pending <= ch->input_hold_water / 4)
    ch->input_held = false;
}

/* Marks and limits after the queue grew; the queue was just written as far
 * as the socket took it. */
static void settle_output(tg_ipc_chan_t *ch) {
  size_t pending = tg_buf_size(&ch->out);
  if (pending > ch->high_water) ch->above_high_water = true;
  if (ch->output_hard_cap && pending > ch->output_hard_cap) {
    tg_ipc_chan_close(ch, -ENOBUFS);
    return;
  }
  update_input_hold(ch);
  update_poll(ch);
}

static void after_output_change(tg_ipc_chan_t *ch) {
  int rv = do_write(ch);
  if (rv < 0) {
    tg_ipc_chan_close(ch, rv);
    return;
  }
  settle_output(ch);
}

static void on_poll(uv_poll_t *h, int status, int events) {
  tg_ipc_chan_t *ch = h->data;
  if (status < 0) {
    /* libuv reports any socket error (POLLERR) as UV_EBADF; the socket
     * says which it was, and with none pending the peer went away. */
    if (status == UV_EBADF) {
      int err = 0;
      socklen_t len = sizeof(err);
      if (getsockopt(ch->fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0)
        status = err ? -err : TG_EPEER_CLOSED;
    }
    tg_ipc_chan_close(ch, status);
    return;
  }
  if (events & UV_WRITABLE) {
    int rv = do_write(ch);
    if (rv < 0) {
      tg_ipc_chan_close(ch, rv);
      return;
    }
    if (ch->above_high_water && tg_buf_size(&ch->out) <= ch->high_water / 4) {
      ch->above_high_water = false;
      if (ch->cbs->on_drain) ch->cbs->on_drain(ch);
      if (ch->state != TG_CHAN_OPEN) return;
    }
    update_input_hold(ch);
  }
  if ((events & (UV_READABLE | UV_DISCONNECT)) && ch->state == TG_CHAN_OPEN)
    do_read(ch);
  update_poll(ch);
}

int tg_ipc_chan_send(tg_ipc_chan_t *ch, const uint8_t *frame, size_t len,
                     int fd) {
  if (ch->state != TG_CHAN_OPEN) {
    if (fd >= 0) close(fd);
    return -EPIPE;
  }
  if (fd >= 0) {
    if (ch->n_out_fds >= TG_IPC_MAX_FDS_IN_FLIGHT) {
      close(fd);
      return -EMFILE;
    }
    ch->out_fds[ch->n_out_fds].at = ch->out_sent + tg_buf_size(&ch->out);
    ch->out_fds[ch->n_out_fds++].fd = fd;
  }
  int rv = tg_buf_append(&ch->out, frame, len);
  if (rv < 0) {
    if (fd >= 0) close(ch->out_fds[--ch->n_out_fds].fd);
    return rv;
  }
  after_output_change(ch);
  return 0;
}

int tg_ipc_chan_sendv(tg_ipc_chan_t *ch, const struct iovec *iov, int iovcnt) {
  if (ch->state != TG_CHAN_OPEN) return -EPIPE;
  if (iovcnt < 0 || iovcnt > IOV_MAX) return -EINVAL;
  size_t total = 0;
  for (int i = 0; i < iovcnt; i++) total += iov[i].iov_len;
  if (total == 0) return 0;
  size_t sent = 0;
  /* Only an empty queue lets bytes pass it (queued fds ride with queued
   * frames, so none is pending either). */
  if (tg_buf_size(&ch->out) == 0) {
    struct msghdr msg = {.msg_iov = (struct iovec *)iov,
                         .msg_iovlen = (size_t)iovcnt};
    ssize_t n = sendmsg(ch->fd, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      int err = -errno;
      tg_ipc_chan_close(ch, err);
      return err;
    }
    if (n > 0) {
      sent = (size_t)n;
      ch->out_sent += (uint64_t)n;
    }
  }
  if (sent < total) {
    uint8_t *p = tg_buf_reserve(&ch->out, total - sent);
    if (!p) {
      /* Part of the frame may be out: the stream cannot go on. */
      tg_ipc_chan_close(ch, -ENOMEM);
      return -ENOMEM;
    }
    size_t skip = sent, at = 0;
    for (int i = 0; i < iovcnt; i++) {
      size_t len = iov[i].iov_len;
      if (skip >= len) {
        skip -= len;
        continue;
      }
      memcpy(p + at, (const uint8_t *)iov[i].iov_base + skip, len - skip);
      at += len - skip;
      skip = 0;
    }
    tg_buf_commit(&ch->out, total - sent);
  }
  settle_output(ch);
  return 0;
}

void tg_ipc_chan_set_high_water(tg_ipc_chan_t *ch, size_t bytes) {
  ch->high_water = bytes;
}

int tg_ipc_chan_take_fd(tg_ipc_chan_t *ch) {
  if (ch->n_in_fds == 0) return -1;
  int fd = ch->in_fds[0];
  memmove(&ch->in_fds[0], &ch->in_fds[1], (ch->n_in_fds - 1) * sizeof(int));
  ch->n_in_fds--;
  return fd;
}

void tg_ipc_chan_pause_reading(tg_ipc_chan_t *ch, bool paused) {
  ch->reading_paused = paused;
  update_poll(ch);
}

void tg_ipc_chan_limit_output(tg_ipc_chan_t *ch, size_t hold,
                              size_t hard_cap) {
  ch->input_hold_water = hold;
  ch->output_hard_cap = hard_cap;
  if (!hold) ch->input_held = false;
  update_poll(ch);
}

int tg_ipc_connect_unix(const char *addr) {
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  size_t n = strlen(addr);
  socklen_t salen;
  if (addr[0] == '@') {
    if (n > sizeof(sa.sun_path)) return -ENAMETOOLONG;
    memcpy(sa.sun_path + 1, addr + 1, n - 1); /* sun_path[0] = 0: abstract */
    salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
  } else {
    if (n >= sizeof(sa.sun_path)) return -ENAMETOOLONG;
    memcpy(sa.sun_path, addr, n);
    salen = (socklen_t)sizeof(sa);
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (connect(fd, (struct sockaddr *)&sa, salen) < 0) {
    int err = -errno;
    close(fd);
    return err;
  }
  return fd;
}

const char *tg_ipc_default_socket(bool producer) {
  const char *env = getenv(producer ? "PERFETTO_PRODUCER_SOCK_NAME"
                                    : "PERFETTO_CONSUMER_SOCK_NAME");
  if (env && env[0]) return env;
  if (access("/run/perfetto/", X_OK) == 0)
    return producer ? "/run/perfetto/traced-producer.sock"
                    : "/run/perfetto/traced-consumer.sock";
  return producer ? "/tmp/perfetto-producer" : "/tmp/perfetto-consumer";
}
