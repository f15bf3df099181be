/* Responses going out: what the owner may send (validated here, so no
 * byte of its headers can split a response), and the writer that hands
 * them to lws one WRITEABLE at a time.
 *
 * Headers are built with lws's header helpers (lws_add_http_header_*) and
 * written with lws_finalize_write_http_header(); bodies with lws_write()
 * from a buffer with LWS_PRE bytes in front, as lws-write.h asks. lws keeps
 * what the socket did not take and holds WRITEABLE back until it is sent,
 * so one chunk per WRITEABLE is all the flow control there is to do.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "collector/http/http_internal.h"
#include "common/log.h"

#define MAX_NAME 64
#define MAX_CONTENT_TYPE 255
#define MAX_DOWNLOAD_NAME 255

/* Names the layer writes itself. */
static const char *const reserved_names[] = {
    "content-length",    "content-type",          "content-disposition",
    "transfer-encoding", "connection",            "x-content-type-options",
    "keep-alive",        "upgrade",
};

/* RFC 9110 token characters. */
static bool is_tchar(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
         (c >= 'A' && c <= 'Z') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool name_ok(const char *name, size_t n) {
  if (n == 0 || n > MAX_NAME) return false;
  for (size_t i = 0; i < n; i++)
    if (!is_tchar((unsigned char)name[i])) return false;
  for (size_t i = 0; i < sizeof(reserved_names) / sizeof(reserved_names[0]);
       i++)
    if (strcasecmp(name, reserved_names[i]) == 0) return false;
  return true;
}

/* A field value: no CR, LF, NUL or other control byte but HTAB, which is
 * what would let a value start a header or a response of its own. */
static bool value_ok(const char *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)v[i];
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  }
  return true;
}

int tg_http_add_header(tg_http_exchange_t *x, const char *name,
                       const char *value) {
  if (!x || !name || !value) return -EINVAL;
  if (x->state != TG_HTTP_X_OWNED) return -EALREADY;
  size_t nl = strlen(name), vl = strlen(value);
  if (!name_ok(name, nl) || !value_ok(value, vl)) {
    TG_WARN("http: header refused for %s %s (not a token, or control bytes)",
            x->req.method, x->req.path);
    return -EINVAL;
  }
  if (x->n_hdrs == TG_HTTP_MAX_HEADERS ||
      vl > TG_HTTP_MAX_HEADER_BYTES - x->hdr_bytes ||
      nl + 4 > TG_HTTP_MAX_HEADER_BYTES - x->hdr_bytes - vl)
    return -E2BIG;
  /* lws writes the name as given: with its colon. */
  char *n = malloc(nl + 2);
  char *v = strdup(value);
  if (!n || !v) {
    free(n);
    free(v);
    return -ENOMEM;
  }
  memcpy(n, name, nl);
  n[nl] = ':';
  n[nl + 1] = '\0';
  x->hdr_names[x->n_hdrs] = n;
  x->hdr_values[x->n_hdrs] = v;
  x->n_hdrs++;
  x->hdr_bytes += nl + vl + 4;
  return 0;
}

static bool has_header(const tg_http_exchange_t *x, const char *name) {
  size_t nl = strlen(name);
  for (size_t i = 0; i < x->n_hdrs; i++)
    if (strncasecmp(x->hdr_names[i], name, nl) == 0 &&
        x->hdr_names[i][nl] == ':')
      return true;
  return false;
}

/* What both respond calls check before taking anything. */
static int check_answer(const tg_http_exchange_t *x, int status,
                        const char *content_type, uint64_t len) {
  if (!x) return -EINVAL;
  if (x->state != TG_HTTP_X_OWNED) return -EALREADY;
  if (status < 200 || status > 599) return -EINVAL;
  if ((status == 204 || status == 304) && len) return -EINVAL;
  if (content_type) {
    size_t n = strlen(content_type);
    if (n == 0 || n > MAX_CONTENT_TYPE || !value_ok(content_type, n))
      return -EINVAL;
  }
  return 0;
}

/* Seconds the client has to take what was written so far, or 0 when it
 * is already late: the response may take cfg.timeout_s plus what its bytes
 * written are worth at cfg.min_rate, counted from the answer. The clock
 * never restarts, so a reader that takes a little now and then still
 * meets the deadline of the bytes it has not taken. */
static int seconds_left(const tg_http_exchange_t *x) {
  const tg_http_server_t *s = x->srv;
  uint64_t allowed_ms = (uint64_t)s->timeout_s * 1000 +
                        x->resp_off / s->min_rate * 1000 +
                        x->resp_off % s->min_rate * 1000 / s->min_rate;
  uint64_t spent_ms = tg_clock_ms(s->clock) - x->answered_ms;
  if (spent_ms >= allowed_ms) return 0;
  uint64_t left = (allowed_ms - spent_ms + 999) / 1000;
  return left > INT32_MAX ? INT32_MAX : (int)left;
}

/* The exchange becomes the layer's: asks lws for a WRITEABLE. */
static void start_answer(tg_http_exchange_t *x, int status) {
  x->status = status;
  x->answered_ms = tg_clock_ms(x->srv->clock);
  tg__http_x_set(x, TG_HTTP_X_RESPONDING, "answered");
  /* From here a client that stops reading is a slow client: lws ends the
   * connection when its time is up (seconds_left()). */
  lws_set_timeout(x->wsi, PENDING_TIMEOUT_HTTP_CONTENT, seconds_left(x));
  lws_callback_on_writable(x->wsi);
}

int tg_http_respond(tg_http_exchange_t *x, int status, const char *content_type,
                    const void *body, size_t len) {
  int rc = check_answer(x, status, content_type, len);
  if (rc < 0) return rc;
  if (len && !body) return -EINVAL;
  uint8_t *copy = malloc(len ? len : 1);
  char *ct = content_type ? strdup(content_type) : NULL;
  if (!copy || (content_type && !ct)) {
    free(copy);
    free(ct);
    return -ENOMEM;
  }
  if (len) memcpy(copy, body, len);
  x->resp = copy;
  x->content_type = ct;
  x->resp_len = len;
  start_answer(x, status);
  return 0;
}

static bool download_name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > MAX_DOWNLOAD_NAME) return false;
  for (size_t i = 0; i < n; i++)
    if (s[i] < 0x20 || s[i] > 0x7e || s[i] == '"' || s[i] == '\\')
      return false;
  return true;
}

int tg_http_respond_file(tg_http_exchange_t *x, int status,
                         const char *content_type, int fd, uint64_t size,
                         const char *download_name) {
  return tg_http_respond_extents(x, status, content_type, fd,
                                 &(tg_http_extent_t){0, size, false}, 1,
                                 download_name);
}

int tg_http_respond_extents(tg_http_exchange_t *x, int status,
                            const char *content_type, int fd,
                            const tg_http_extent_t *ext, size_t n,
                            const char *download_name) {
  return tg_http_respond_extents2(x, status, content_type, fd, -1, ext, n,
                                  download_name);
}

int tg_http_respond_extents2(tg_http_exchange_t *x, int status,
                             const char *content_type, int fd, int fd2,
                             const tg_http_extent_t *ext, size_t n,
                             const char *download_name) {
  uint64_t size = 0;
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    if (ext[i].len > UINT64_MAX - size || ext[i].len > UINT64_MAX - ext[i].off ||
        (ext[i].second && fd2 < 0))
      rc = -EINVAL;
    else
      size += ext[i].len;
  }
  if (rc == 0) rc = check_answer(x, status, content_type, size);
  if (rc == 0 && (fd < 0 || (download_name && !download_name_ok(download_name))))
    rc = -EINVAL;
  char *ct = NULL, *disp = NULL;
  tg_http_extent_t *copy = NULL;
  if (rc == 0 && content_type && !(ct = strdup(content_type))) rc = -ENOMEM;
  if (rc == 0 && n && !(copy = malloc(n * sizeof(*copy)))) rc = -ENOMEM;
  if (rc == 0 && download_name) {
    static const char fmt[] = "attachment; filename=\"%s\"";
    size_t cap = sizeof(fmt) + strlen(download_name);
    if (!(disp = malloc(cap)))
      rc = -ENOMEM;
    else
      snprintf(disp, cap, fmt, download_name);
  }
  if (rc < 0) {
    if (fd >= 0) close(fd);
    if (fd2 >= 0) close(fd2);
    free(ct);
    free(disp);
    free(copy);
    return rc;
  }
  if (n) memcpy(copy, ext, n * sizeof(*copy));
  x->fd = fd;
  x->fd2 = fd2;
  x->is_file = true;
  x->ext = copy;
  x->n_ext = n;
  x->ext_i = 0;
  x->ext_pos = 0;
  x->content_type = ct;
  x->disposition = disp;
  x->resp_len = size;
  start_answer(x, status);
  return 0;
}

/* --- the writer ------------------------------------------------------------- */

static int add(struct lws *wsi, const char *name, const char *value,
               unsigned char **p, unsigned char *end) {
  return lws_add_http_header_by_name(wsi, (const unsigned char *)name,
                                     (const unsigned char *)value,
                                     (int)strlen(value), p, end);
}

static int finish(tg_http_exchange_t *x) {
  TG_DEBUG("http: %s %s -> %d (%llu bytes%s)", x->req.method, x->req.path,
           x->status, (unsigned long long)x->resp_off,
           x->is_file ? ", file" : "");
  return 1;
}

static int write_headers(tg_http_exchange_t *x) {
  struct lws *wsi = x->wsi;
  size_t cap = 512 + x->hdr_bytes +
               (x->content_type ? strlen(x->content_type) : 0) +
               (x->disposition ? strlen(x->disposition) : 0);
  unsigned char *buf = malloc(LWS_PRE + cap);
  if (!buf) return -1;
  unsigned char *start = buf + LWS_PRE, *p = start, *end = start + cap;
  /* No Server header: nothing to tell a scanner. */
  int bad = lws_add_http_header_status(
      wsi, (unsigned)x->status | LWSAHH_FLAG_NO_SERVER_NAME, &p, end);
  if (!bad && x->content_type)
    bad = lws_add_http_header_by_token(
        wsi, WSI_TOKEN_HTTP_CONTENT_TYPE,
        (const unsigned char *)x->content_type,
        (int)strlen(x->content_type), &p, end);
  if (!bad) bad = lws_add_http_header_content_length(wsi, x->resp_len, &p, end);
  if (!bad && !x->is_file && !has_header(x, "cache-control"))
    bad = add(wsi, "Cache-Control:", "no-store", &p, end);
  if (!bad && x->disposition)
    bad = add(wsi, "Content-Disposition:", x->disposition, &p, end);
  for (size_t i = 0; !bad && i < x->n_hdrs; i++)
    bad = add(wsi, x->hdr_names[i], x->hdr_values[i], &p, end);
  if (!bad) bad = lws_finalize_write_http_header(wsi, start, &p, end);
  free(buf);
  if (bad) {
    TG_WARN("http: %s %s: cannot write the response headers", x->req.method,
            x->req.path);
    return -1;
  }
  x->headers_sent = true;
  /* HEAD: the headers of the GET, without its body. */
  if (x->head || x->resp_len == 0) return finish(x);
  lws_callback_on_writable(wsi);
  return 0;
}

/* Reads the next |n| bytes of the body, from the file's ranges in turn,
 * into |dst|. Chunks are read once each, in order: the range being read
 * and the position in it are kept, not searched for. */
static int read_file_chunk(tg_http_exchange_t *x, uint8_t *dst, size_t n) {
  size_t got = 0;
  while (got < n) {
    if (x->ext_i >= x->n_ext) return -1; /* the lengths' sum is resp_len */
    const tg_http_extent_t *e = &x->ext[x->ext_i];
    uint64_t left = e->len - x->ext_pos;
    if (!left) {
      x->ext_i++;
      continue;
    }
    size_t want = n - got < left ? n - got : (size_t)left;
    uint64_t at = e->off + x->ext_pos;
    ssize_t r = pread(e->second ? x->fd2 : x->fd, dst + got, want, (off_t)at);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      TG_WARN("http: %s %s: file read at %llu: %s", x->req.method,
              x->req.path, (unsigned long long)at,
              r < 0 ? strerror(errno) : "file shorter than announced");
      return -1;
    }
    got += (size_t)r;
    x->ext_pos += (uint64_t)r;
    if (x->ext_pos == e->len) {
      x->ext_i++;
      x->ext_pos = 0;
    }
  }
  return 0;
}

static int write_chunk(tg_http_exchange_t *x) {
  uint64_t left = x->resp_len - x->resp_off;
  size_t n = left < TG_HTTP_CHUNK ? (size_t)left : TG_HTTP_CHUNK;
  unsigned char *buf = malloc(LWS_PRE + n);
  if (!buf) return -1;
  unsigned char *data = buf + LWS_PRE;
  if (x->is_file) {
    if (read_file_chunk(x, data, n) < 0) {
      free(buf);
      return -1;
    }
  } else {
    memcpy(data, x->resp + x->resp_off, n);
  }
  bool last = n == left;
  int w = lws_write(x->wsi, data, n, last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP);
  free(buf);
  if (w < 0) return -1;
  /* A short write is lws's to finish: it keeps the rest (lws-write.h). */
  x->resp_off += n;
  if (last) return finish(x);
  int secs = seconds_left(x);
  if (secs == 0) {
    TG_WARN("http: %s %s: the client reads slower than min_rate (%llu of "
            "%llu bytes taken in %llu ms): closed", x->req.method, x->req.path,
            (unsigned long long)x->resp_off, (unsigned long long)x->resp_len,
            (unsigned long long)(tg_clock_ms(x->srv->clock) - x->answered_ms));
    return -1;
  }
  lws_set_timeout(x->wsi, PENDING_TIMEOUT_HTTP_CONTENT, secs);
  lws_callback_on_writable(x->wsi);
  return 0;
}

int tg__http_x_write(tg_http_exchange_t *x) {
  if (x->state != TG_HTTP_X_RESPONDING && x->state != TG_HTTP_X_REFUSING)
    return 0; /* a WRITEABLE nobody asked for */
  return x->headers_sent ? write_chunk(x) : write_headers(x);
}
