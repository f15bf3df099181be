/* The trace file. Where -o points decides how it is written:
 *
 * - a regular file, or nothing yet: into "NAME.partial-<random>" next to it,
 *   renamed over NAME once complete, so a failed run never leaves half a
 *   trace under the name asked for. The partial name is visible: a run
 *   that is killed leaves no hidden file, and one that is aborted keeps
 *   its partial trace there and says so.
 * - a symlink: the same for the file it points to (followed here, link by
 *   link), so the link itself stays.
 * - anything else (/dev/null, a FIFO, a terminal, a device) and "-"
 *   (stdout): written straight into it; renaming over it would replace
 *   it with a regular file.
 *
 * Every write, fsync and close is checked: a trace that did not reach
 * its destination is a failure, never a success.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tracegate/pb_wire.h"
#include "cli/cli.h"
#include "common/direct_write.h"
#include "common/fd_write.h"
#include "common/write_behind.h"
#include "tracegate/error.h"

#define OUT_BUF_SIZE (256u * 1024u)
#define SCAN_BLOCK_SIZE (16u * 1024u)
#define TRACE_PACKET_TAG TG_PB_TAG(1, TG_PB_WT_LEN) /* Trace.packet */
#define MAX_LINK_HOPS 40 /* as the kernel's own limit (ELOOP) */
#define PARTIAL_SUFFIX ".partial-"

/* |rel| taken relative to the directory holding |link| (what a relative
 * symlink target means). */
static char *next_to(const char *link, const char *rel) {
  if (rel[0] == '/') return strdup(rel);
  char *copy = strdup(link);
  if (!copy) return NULL;
  const char *dir = dirname(copy);
  size_t n = strlen(dir) + strlen(rel) + 2;
  char *out = malloc(n);
  if (out) snprintf(out, n, "%s/%s", dir, rel);
  free(copy);
  return out;
}

/* Follows |path| through its symlinks to the file they end at: *|final|
 * (malloc'd) and whether it exists (then *|st| is its lstat). Returns 0 or
 * a negative errno. */
static int follow_links(const char *path, char **final, struct stat *st,
                        bool *exists) {
  char *cur = strdup(path);
  if (!cur) return -ENOMEM;
  for (int hop = 0; hop <= MAX_LINK_HOPS; hop++) {
    if (lstat(cur, st) < 0) {
      if (errno != ENOENT) break;
      *exists = false;
      *final = cur;
      return 0;
    }
    if (!S_ISLNK(st->st_mode)) {
      *exists = true;
      *final = cur;
      return 0;
    }
    char target[PATH_MAX];
    ssize_t n = readlink(cur, target, sizeof(target));
    if (n < 0) break;
    if ((size_t)n == sizeof(target)) { /* cut: not the link's target */
      errno = ENAMETOOLONG;
      break;
    }
    target[n] = 0;
    char *next = next_to(cur, target);
    free(cur);
    cur = next;
    if (!cur) return -ENOMEM;
    errno = ELOOP;
  }
  int err = -errno;
  free(cur);
  return err;
}

/* --- SIGTERM and SIGHUP ---------------------------------------------------
 *
 * The recordings handle Ctrl-C and SIGTERM themselves (a clean stop, as
 * Perfetto's); a SIGHUP, or a SIGTERM anywhere else, ends the process. The partial files are visible anyway, but the user is told
 * where they are: a handler names each (removing an empty one) and dies by
 * the signal. It runs on the loop thread, the only one that does not block
 * these signals' delivery in practice (Linux prefers the main thread), and
 * only reads the slots: a name is cleared before it is freed. */

#define ANNOUNCED_MAX 64 /* more partial files are not named, only kept */

static struct {
  _Atomic(const char *) name; /* NULL: free */
  _Atomic int fd;
} announced[ANNOUNCED_MAX];
static _Atomic bool handler_installed;
static bool stderr_is_tty;

static void put(const char *s) {
  (void)tg_write_all(STDERR_FILENO, s, strlen(s));
}

static void on_fatal_signal(int sig) {
  int saved = errno;
  for (size_t i = 0; i < ANNOUNCED_MAX; i++) {
    const char *name = atomic_load(&announced[i].name);
    if (!name) continue;
    struct stat st;
    if (fstat(atomic_load(&announced[i].fd), &st) == 0 && st.st_size == 0) {
      unlink(name);
      continue;
    }
    if (stderr_is_tty) put("\r\033[K"); /* over a progress line */
    put(CLI_PROG ": ");
    put(tg_notice_tag(TG_N_PARTIAL_KEPT)); /* a static string: safe here */
    put(" interrupted: the partial trace is in ");
    put(name);
    put("\n");
  }
  signal(sig, SIG_DFL);
  errno = saved;
  raise(sig);
}

static void install_handler(void) {
  if (atomic_exchange(&handler_installed, true)) return;
  stderr_is_tty = isatty(STDERR_FILENO);
  static const int sigs[] = {SIGTERM, SIGHUP};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
    struct sigaction old, sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    /* nohup: an ignored SIGHUP stays ignored; and a handler already in
     * place (the recordings' clean stop on SIGTERM, through the loop)
     * stays too. */
    if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_DFL)
      continue;
    sigaction(sigs[i], &sa, NULL);
  }
}

static void announce(const cli_output_t *o) {
  install_handler();
  for (size_t i = 0; i < ANNOUNCED_MAX; i++) {
    const char *none = NULL;
    if (atomic_load(&announced[i].name)) continue;
    atomic_store(&announced[i].fd, o->fd);
    if (atomic_compare_exchange_strong(&announced[i].name, &none, o->tmp)) return;
  }
}

/* Before |o->tmp| is freed or renamed. */
static void release(cli_output_t *o, bool remove_tmp);

static void unannounce(const cli_output_t *o) {
  for (size_t i = 0; o->tmp && i < ANNOUNCED_MAX; i++) {
    const char *name = o->tmp;
    if (atomic_compare_exchange_strong(&announced[i].name, &name, NULL)) return;
  }
}

static int open_failed(cli_output_t *o, const char *path, int err) {
  fprintf(stderr, CLI_PROG ": %s cannot write %s: %s\n",
          TG_NOTE(OUTPUT_UNWRITABLE), path, tg_strerror(err));
  cli_output_discard(o);
  return -1;
}

/* A regular file (or none yet) at |final|: the partial file next to it. */
static int open_partial(cli_output_t *o, const char *final) {
  char *copy = strdup(final), *copy2 = strdup(final);
  o->final = strdup(final);
  size_t n = strlen(final) + sizeof(PARTIAL_SUFFIX) + 8;
  o->tmp = malloc(n);
  if (!copy || !copy2 || !o->final || !o->tmp) {
    free(copy);
    free(copy2);
    free(o->tmp);
    o->tmp = NULL; /* not a file: nothing to unlink */
    return -ENOMEM;
  }
  /* mkostemp() replaces the template's six trailing 'X's. */
  int k = snprintf(o->tmp, n, "%s/%s" PARTIAL_SUFFIX, dirname(copy),
                   basename(copy2));
  free(copy);
  free(copy2);
  if (k < 0 || (size_t)k + 7 > n) {
    free(o->tmp);
    o->tmp = NULL;
    return -ENAMETOOLONG;
  }
  memset(o->tmp + k, 'X', 6);
  o->tmp[k + 6] = 0;
  o->fd = mkostemp(o->tmp, O_CLOEXEC);
  if (o->fd < 0) {
    int err = -errno;
    free(o->tmp);
    o->tmp = NULL;
    return err;
  }
  announce(o);
  return 0;
}

/* Write-behind where the fd is a regular file (stdout redirected to one
 * included); a no-op for pipes and devices. */
static int opened(cli_output_t *o) {
  tg_write_behind_init(&o->wb, o->fd);
  return 0;
}

int cli_output_open(cli_output_t *o, const char *path) {
  memset(o, 0, sizeof(*o));
  o->fd = -1;
  o->wb.fd = -1;
  bool to_stdout = !strcmp(path, "-");
  o->path = strdup(to_stdout ? "standard output" : path);
  o->buf = malloc(OUT_BUF_SIZE);
  if (!o->path || !o->buf) return open_failed(o, path, -ENOMEM);
  if (to_stdout) {
    o->direct = true;
    o->fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    return o->fd < 0 ? open_failed(o, o->path, -errno) : opened(o);
  }
  char *final = NULL;
  struct stat st;
  bool exists = false;
  int rv = follow_links(path, &final, &st, &exists);
  if (rv < 0) return open_failed(o, path, rv);
  if (exists && S_ISDIR(st.st_mode)) {
    free(final);
    fprintf(stderr, CLI_PROG ": %s cannot write %s: it is a directory\n",
            TG_NOTE(OUTPUT_UNWRITABLE), path);
    cli_output_discard(o);
    return -1;
  }
  if (exists && !S_ISREG(st.st_mode)) {
    /* A FIFO blocks here until a reader opens it, as with `> fifo`. */
    free(final);
    o->direct = true;
    o->fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
    return o->fd < 0 ? open_failed(o, path, -errno) : opened(o);
  }
  rv = open_partial(o, final);
  free(final);
  return rv < 0 ? open_failed(o, path, rv) : opened(o);
}

/* A partial file we write ourselves goes direct from its first flush on
 * (offset 0, so aligned), when the file system and the process's writer
 * budget allow; else it stays with write-behind. Not for files the service
 * writes into (they share our file description, and its flags). */
static void maybe_go_direct(cli_output_t *o) {
  if (o->dw_tried || !o->tmp || o->by_service) return;
  o->dw_tried = true;
  if (tg_direct_writer_start(o->fd, &o->dw) < 0) o->dw = NULL;
}

/* Everything handed to the direct writer written, the writer gone. */
static void finish_direct(cli_output_t *o) {
  if (!o->dw) return;
  int rv = tg_direct_writer_finish(o->dw);
  tg_direct_writer_free(o->dw);
  o->dw = NULL;
  if (rv < 0 && !o->err) o->err = rv;
}

static int flush_buf(cli_output_t *o) {
  if (o->err) return o->err;
  maybe_go_direct(o);
  int rv;
  if (o->dw) {
    rv = tg_direct_writer_append(o->dw, o->buf, o->len);
  } else {
    rv = tg_write_all(o->fd, o->buf, o->len);
    if (rv == 0) tg_write_behind_wrote(&o->wb, o->len);
  }
  o->len = 0;
  if (rv < 0) o->err = rv;
  return rv;
}

int cli_output_packet(cli_output_t *o, const uint8_t *p, size_t n) {
  return cli_output_packet_ex(o, p, n, NULL, 0);
}

int cli_output_packet_ex(cli_output_t *o, const uint8_t *p, size_t n,
                         const uint8_t *extra, size_t extra_n) {
  if (o->err) return o->err;
  uint8_t hdr[1 + TG_PB_MAX_VARINT_SIZE];
  hdr[0] = TRACE_PACKET_TAG;
  size_t total = n + extra_n;
  size_t h = (size_t)(tg_pb_write_varint(hdr + 1, total) - hdr);
  /* With the direct writer, o->buf stays empty. */
  if (!o->dw && o->len + h + total > OUT_BUF_SIZE && flush_buf(o) < 0)
    return o->err;
  /* The flush may have started the direct writer: from then on every byte
   * goes through it, or the file would get them out of order. */
  if (o->dw) { /* straight into the writer's block: one copy */
    int rv = tg_direct_writer_append(o->dw, hdr, h);
    if (rv == 0) rv = tg_direct_writer_append(o->dw, p, n);
    if (rv == 0 && extra_n) rv = tg_direct_writer_append(o->dw, extra, extra_n);
    if (rv < 0) return o->err = rv;
    o->bytes += h + total;
    o->packets++;
    return 0;
  }
  if (h + total > OUT_BUF_SIZE) { /* large: straight to the file */
    int rv = tg_write_all(o->fd, hdr, h);
    if (rv == 0) rv = tg_write_all(o->fd, p, n);
    if (rv == 0 && extra_n) rv = tg_write_all(o->fd, extra, extra_n);
    if (rv < 0) return o->err = rv;
    tg_write_behind_wrote(&o->wb, h + total);
  } else {
    memcpy(o->buf + o->len, hdr, h);
    memcpy(o->buf + o->len + h, p, n);
    if (extra_n) memcpy(o->buf + o->len + h + n, extra, extra_n);
    o->len += h + total;
  }
  o->bytes += h + total;
  o->packets++;
  return 0;
}

/* Walks the packet headers in |blk|, |n| bytes read at o->scan_off of a
 * file of |size| bytes, counting whole packets. Returns 1 to read on from
 * the new o->scan_off, 0 when the file ends inside a packet (still being
 * written), or TG_EPROTO_DECODE. */
static int scan_block(cli_output_t *o, const uint8_t *blk, size_t n,
                      uint64_t size) {
  size_t pos = 0;
  while (pos < n) {
    if (blk[pos] != TRACE_PACKET_TAG) return TG_EPROTO_DECODE;
    uint64_t len;
    size_t k = tg_pb_read_varint(blk + pos + 1, blk + n, &len);
    if (k == 0) {
      if (n - pos > TG_PB_MAX_VARINT_SIZE) return TG_EPROTO_DECODE;
      /* Cut by the block's end (read again from it), or being written. */
      return pos > 0;
    }
    /* The length is the file's word: compared without overflow. */
    uint64_t body = o->scan_off + 1 + k;
    if (len > size - body) return 0; /* the body is still being written */
    o->scan_off = body + len;
    o->packets++;
    if (1 + k + len > n - pos) return 1; /* the next header is past |blk| */
    pos += 1 + k + (size_t)len;
  }
  return 1;
}

int cli_output_scan(cli_output_t *o) {
  struct stat st;
  if (o->fd < 0 || fstat(o->fd, &st) < 0) return -errno;
  uint64_t size = (uint64_t)st.st_size;
  /* One read covers the headers of many small packets; a large packet's
   * body is jumped over. */
  uint8_t blk[SCAN_BLOCK_SIZE];
  while (o->scan_off < size) {
    size_t want = size - o->scan_off < sizeof(blk) ? (size_t)(size - o->scan_off)
                                                    : sizeof(blk);
    ssize_t r = pread(o->fd, blk, want, (off_t)o->scan_off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return r < 0 ? -errno : 0;
    int rv = scan_block(o, blk, (size_t)r, size);
    if (rv < 0) return rv;
    if (rv == 0) break;
  }
  o->bytes = size;
  return 0;
}

static void rename_to_final(cli_output_t *o, int *rv) {
  if (!o->tmp) return; /* written in place */
  unannounce(o);
  if (rename(o->tmp, o->final) < 0) {
    fprintf(stderr, CLI_PROG ": %s cannot rename %s to %s: %s\n",
            TG_NOTE(OUTPUT_UNWRITABLE), o->tmp, o->final, strerror(errno));
    *rv = -1;
    return;
  }
  free(o->tmp);
  o->tmp = NULL;
}

/* Closes the fd, reporting what close() says: some file systems only
 * report a failed write there. */
static int close_checked(cli_output_t *o) {
  unannounce(o); /* the handler must not fstat a closed, reused fd */
  int fd = o->fd;
  o->fd = -1;
  if (close(fd) < 0 && errno != EINTR) return -errno;
  return 0;
}

int cli_output_commit(cli_output_t *o) {
  if (o->fd < 0) return -1;
  int rv = 0;
  if (o->len) flush_buf(o);
  finish_direct(o);
  if (o->by_service) {
    int err = cli_output_scan(o);
    if (err == 0 && o->scan_off != o->bytes)
      err = TG_EPROTO_DECODE; /* a truncated packet at the end */
    if (err) {
      fprintf(stderr, CLI_PROG ": %s %s: the trace file is damaged (%s)\n",
              TG_NOTE(TRACE_DAMAGED), o->path, tg_strerror(err));
      rv = -1;
    }
  }
  if (rv == 0 && !o->err && o->packets == 0) {
    fprintf(stderr, CLI_PROG ": %s the trace is empty: nothing written to %s\n",
            TG_NOTE(TRACE_EMPTY), o->path);
    rv = -1;
  }
  /* Pipes, terminals and devices cannot be synced (EINVAL): what
   * they accepted is all there is to check. */
  if (rv == 0 && !o->err && fsync(o->fd) < 0 && errno != EINVAL)
    o->err = -errno;
  if (rv == 0 && !o->err) o->err = close_checked(o);
  if (o->err) {
    fprintf(stderr, CLI_PROG ": %s cannot write %s: %s\n",
            TG_NOTE(OUTPUT_UNWRITABLE), o->path, tg_strerror(o->err));
    rv = -1;
  }
  if (rv == 0) rename_to_final(o, &rv);
  cli_output_discard(o);
  return rv;
}

void cli_output_keep_partial(cli_output_t *o) {
  if (o->fd >= 0) {
    if (o->len) flush_buf(o);
    finish_direct(o);
    if (o->by_service) cli_output_scan(o);
    if (o->packets > 0 && !o->err && close_checked(o) == 0) {
      int rv = 0;
      rename_to_final(o, &rv);
      if (rv == 0)
        fprintf(stderr, CLI_PROG ": %s kept the partial trace (%llu packets) "
                "in %s\n", TG_NOTE(PARTIAL_KEPT),
                (unsigned long long)o->packets, o->path);
    }
  }
  cli_output_discard(o);
}

void cli_output_abandon(cli_output_t *o) {
  if (o->fd >= 0 && o->tmp) {
    if (o->len) flush_buf(o);
    finish_direct(o);
    struct stat st;
    if (fstat(o->fd, &st) == 0 && st.st_size > 0) {
      /* Left as it is, under its visible name. */
      fprintf(stderr, CLI_PROG ": %s the partial trace is in %s\n",
              TG_NOTE(PARTIAL_KEPT), o->tmp);
      unannounce(o);
      free(o->tmp);
      o->tmp = NULL;
    }
  }
  cli_output_discard(o);
}

int cli_output_rename_now(cli_output_t *o) {
  int rv = 0;
  rename_to_final(o, &rv);
  return rv;
}

void cli_output_discard(cli_output_t *o) { release(o, true); }

void cli_output_forget(cli_output_t *o) { release(o, false); }

static void release(cli_output_t *o, bool remove_tmp) {
  unannounce(o);
  tg_direct_writer_free(o->dw); /* before its fd closes */
  o->dw = NULL;
  if (o->fd >= 0) close(o->fd);
  o->fd = -1;
  if (o->tmp && remove_tmp) unlink(o->tmp);
  free(o->tmp);
  o->tmp = NULL;
  free(o->final);
  o->final = NULL;
  free(o->path);
  o->path = NULL;
  free(o->buf);
  o->buf = NULL;
}
