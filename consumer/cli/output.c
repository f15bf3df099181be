/* The trace file. Written to ".NAME.tmp-<random>" next to the final path and
 * renamed over it once complete, so a failed or interrupted recording never
 * leaves a half-written file under the name the user asked for. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tracegate/pb_wire.h"
#include "consumer/cli/cli.h"
#include "tracegate/error.h"

#define OUT_BUF_SIZE (256u * 1024u)
#define SCAN_BLOCK_SIZE (16u * 1024u)
#define TRACE_PACKET_TAG TG_PB_TAG(1, TG_PB_WT_LEN) /* Trace.packet */

int cli_output_open(cli_output_t *o, const char *path) {
  memset(o, 0, sizeof(*o));
  o->fd = -1;
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    fprintf(stderr, CLI_PROG ": cannot write %s: it is a directory\n", path);
    return -1;
  }
  char *copy = strdup(path), *copy2 = strdup(path);
  o->path = strdup(path);
  o->buf = malloc(OUT_BUF_SIZE);
  if (!copy || !copy2 || !o->path || !o->buf) {
    free(copy);
    free(copy2);
    fprintf(stderr, CLI_PROG ": out of memory\n");
    cli_output_discard(o);
    return -1;
  }
  const char *dir = dirname(copy), *base = basename(copy2);
  size_t n = strlen(dir) + strlen(base) + 16;
  o->tmp = malloc(n);
  if (o->tmp) {
    /* mkostemp() replaces the template's six trailing 'X's. */
    int k = snprintf(o->tmp, n, "%s/.%s.tmp-", dir, base);
    memset(o->tmp + k, 'X', 6);
    o->tmp[k + 6] = 0;
  }
  free(copy);
  free(copy2);
  if (!o->tmp) {
    fprintf(stderr, CLI_PROG ": out of memory\n");
    cli_output_discard(o);
    return -1;
  }
  o->fd = mkostemp(o->tmp, O_CLOEXEC);
  if (o->fd < 0) {
    int err = errno;
    free(o->tmp);
    o->tmp = NULL;
    fprintf(stderr, CLI_PROG ": cannot write %s: %s\n", path, strerror(err));
    cli_output_discard(o);
    return -1;
  }
  return 0;
}

static int write_all(int fd, const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return -errno;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int flush_buf(cli_output_t *o) {
  if (o->err) return o->err;
  int rv = write_all(o->fd, o->buf, o->len);
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
  if (o->len + h + total > OUT_BUF_SIZE && flush_buf(o) < 0) return o->err;
  if (h + total > OUT_BUF_SIZE) { /* large: straight to the file */
    int rv = write_all(o->fd, hdr, h);
    if (rv == 0) rv = write_all(o->fd, p, n);
    if (rv == 0 && extra_n) rv = write_all(o->fd, extra, extra_n);
    if (rv < 0) return o->err = rv;
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
  if (rename(o->tmp, o->path) < 0) {
    fprintf(stderr, CLI_PROG ": cannot rename %s to %s: %s\n", o->tmp, o->path,
            strerror(errno));
    *rv = -1;
    return;
  }
  free(o->tmp);
  o->tmp = NULL;
}

int cli_output_commit(cli_output_t *o) {
  if (o->fd < 0) return -1;
  int rv = 0;
  if (o->len) flush_buf(o);
  if (o->by_service) {
    int err = cli_output_scan(o);
    if (err == 0 && o->scan_off != o->bytes)
      err = TG_EPROTO_DECODE; /* a truncated packet at the end */
    if (err) {
      fprintf(stderr, CLI_PROG ": %s: the trace file is damaged (%s)\n",
              o->path, tg_strerror(err));
      rv = -1;
    }
  }
  if (o->err) {
    fprintf(stderr, CLI_PROG ": cannot write %s: %s\n", o->path,
            tg_strerror(o->err));
    rv = -1;
  }
  if (rv == 0 && fsync(o->fd) < 0 && errno != EINVAL) {
    fprintf(stderr, CLI_PROG ": cannot write %s: %s\n", o->path, strerror(errno));
    rv = -1;
  }
  if (rv == 0 && o->packets == 0) {
    fprintf(stderr, CLI_PROG ": the trace is empty: nothing written to %s\n",
            o->path);
    rv = -1;
  }
  if (rv == 0) rename_to_final(o, &rv);
  cli_output_discard(o);
  return rv;
}

void cli_output_keep_partial(cli_output_t *o) {
  if (o->fd >= 0) {
    if (o->len) flush_buf(o);
    if (o->by_service) cli_output_scan(o);
    if (o->packets > 0) {
      int rv = 0;
      rename_to_final(o, &rv);
      if (rv == 0)
        fprintf(stderr, CLI_PROG ": kept the partial trace (%llu packets) in %s\n",
                (unsigned long long)o->packets, o->path);
    }
  }
  cli_output_discard(o);
}

int cli_output_rename_now(cli_output_t *o) {
  int rv = 0;
  rename_to_final(o, &rv);
  return rv;
}

void cli_output_discard(cli_output_t *o) {
  if (o->fd >= 0) close(o->fd);
  o->fd = -1;
  if (o->tmp) unlink(o->tmp);
  free(o->tmp);
  o->tmp = NULL;
  free(o->path);
  o->path = NULL;
  free(o->buf);
  o->buf = NULL;
}
