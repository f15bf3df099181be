/* What `tracegate snapshot` (snapshot.c) and `tracegate snapshot check`
 * (snapshot_check.c) share (snapshot_req.h): the collector's address, the
 * command line's connection options checked, one HTTP request run to its
 * end, and the lines that say how it went. Below both commands: it calls
 * neither.
 *
 * The HTTP client is libwebsockets' own (lws_client_connect_via_info, as
 * its minimal-http-client-post example), on an lws event loop of its own
 * that runs until the one request ends: this file never writes or parses
 * HTTP itself. Over https:// the collector's certificate must chain to
 * --ca and carry the collector's name; our certificate is --cert/--key.
 * The reply is bounded (CLI_SNAP_REPLY_MAX) and so is the wait
 * (--timeout); every string from it reaches the terminal through
 * tg_printable().
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libwebsockets.h>
#include <netdb.h>
#if defined(LWS_OPENSSL_SUPPORT) && !defined(LWS_WITH_MBEDTLS)
#include <openssl/x509.h>
#define HAVE_OPENSSL_VERIFY 1
#endif

#include "common/fd_write.h"
#include "common/fsm.h"
#include "common/log.h"
#include "cli/cli.h"
#include "cli/snapshot_json.h"
#include "cli/snapshot_req.h"
#include "ipc/net_addr.h"

#define PROG CLI_PROG " snapshot"
#define API_PATH CLI_SNAP_API_PATH
#define REPLY_MAX CLI_SNAP_REPLY_MAX
#define REASON_MAX CLI_SNAP_REASON_MAX
#define GROUP_MAX CLI_SNAP_GROUP_MAX

/* --- the collector's address ---------------------------------------------------- */

/* "http://host:port", "https://host:port" or "host:port" (http): nothing
 * else (no path, no user, no default port). */
static int parse_addr(const char *s, collector_addr_t *a) {
  memset(a, 0, sizeof(*a));
  if (!strncmp(s, "https://", 8)) {
    a->https = true;
    s += 8;
  } else if (!strncmp(s, "http://", 7)) {
    s += 7;
  } else if (strstr(s, "://")) {
    return -EINVAL;
  }
  return tg_net_addr_parse(s, 0, 0, &a->net);
}

/* --- the request -------------------------------------------------------------- */

#define S(x) TG_FSM_BIT(REQ_##x)
static const uint32_t kNext[] = {
    [REQ_CONNECTING] = S(READING) | S(FAILED),
    [REQ_READING] = S(DONE) | S(FAILED),
    [REQ_DONE] = 0,
    [REQ_FAILED] = 0,
};
#undef S
static const char *const kNames[] = {"connecting", "reading", "done",
                                     "failed"};
_Static_assert(TG_FSM_COUNT(kNext) == REQ_FAILED + 1, "arrows per state");
_Static_assert(TG_FSM_COUNT(kNames) == TG_FSM_COUNT(kNext), "a name per state");
static const tg_fsm_def_t kDef = {"snapshot request", TG_FSM_COUNT(kNext),
                                  kNext, kNames};

/* Every transition, once: a request that ended stays ended, and what
 * comes after its end (lws's close after a complete reply, a second
 * failure) is no news. Other moves under common/fsm.h's policy. */
static void set_state(req_t *r, req_state_t to, const char *why) {
  if (r->state == REQ_DONE || r->state == REQ_FAILED) return;
  unsigned st = r->state;
  if (!tg_fsm_move(&kDef, &st, to, &r->bad_transitions, r->method, why))
    return;
  if (to == REQ_FAILED) tg_printable(r->why, sizeof(r->why), why);
  r->state = to;
}

static bool ended(const req_t *r) {
  return r->state == REQ_DONE || r->state == REQ_FAILED;
}

static int append_body(req_t *r, const void *in, size_t len) {
  if (r->out_fd >= 0 && r->status == 200) {
    int err = tg_write_all(r->out_fd, in, len);
    if (err == 0) {
      r->out_bytes += len;
      return 0;
    }
    char why[160];
    snprintf(why, sizeof(why), "cannot write the trace: %s", strerror(-err));
    set_state(r, REQ_FAILED, why);
    return -1;
  }
  int rv = tg_buf_append(&r->body, in, len);
  if (rv == 0) return 0;
  char why[128];
  snprintf(why, sizeof(why), "%s its reply is over %u MiB (%u bytes), the "
           "most this command takes", TG_NOTE(SNAPSHOT_REPLY_TOO_BIG),
           CLI_SNAP_REPLY_MAX >> 20, CLI_SNAP_REPLY_MAX);
  set_state(r, REQ_FAILED, rv == -ENOBUFS ? why : "out of memory");
  return -1;
}

static int on_lws(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                  void *in, size_t len) {
  req_t *r = lws_context_user(lws_get_context(wsi));
  switch (reason) {
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
      if (r->cert_why[0]) {
        /* lws's own words for it are OpenSSL's last error: often none. */
        char why[200];
        snprintf(why, sizeof(why), "its certificate: %s", r->cert_why);
        set_state(r, REQ_FAILED, why);
      }
      set_state(r, REQ_FAILED, in ? (const char *)in : "connection failed");
      r->wsi = NULL;
      return 0;
#ifdef HAVE_OPENSSL_VERIFY
    case LWS_CALLBACK_OPENSSL_PERFORM_SERVER_CERT_VERIFICATION:
      /* Only listens: 0 leaves OpenSSL's verdict (|len|: preverify_ok). */
      if (!len && !r->cert_why[0]) {
        int e = X509_STORE_CTX_get_error((X509_STORE_CTX *)user);
        bool name = e == X509_V_ERR_HOSTNAME_MISMATCH ||
                    e == X509_V_ERR_IP_ADDRESS_MISMATCH;
        snprintf(r->cert_why, sizeof(r->cert_why), "%s%s",
                 X509_verify_cert_error_string(e),
                 name ? " (the name it carries: --tls-server-name)" : "");
      }
      return 0;
#endif
    case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
      r->reached = true; /* connected (and TLS verified): the request goes */
      /* A POST without a body still says so: the collector reads a body
       * of Content-Length bytes. */
      if (strcmp(r->method, "POST")) return 0;
      unsigned char **p = (unsigned char **)in, *end = *p + len;
      if (lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH,
                                       (const unsigned char *)"0", 1, p, end))
        return -1;
      return 0;
    }
    case LWS_CALLBACK_ESTABLISHED_CLIENT_HTTP:
      r->status = (int)lws_http_client_http_response(wsi);
      set_state(r, REQ_READING, "headers in");
      return 0;
    case LWS_CALLBACK_RECEIVE_CLIENT_HTTP_READ:
      return append_body(r, in, len);
    case LWS_CALLBACK_RECEIVE_CLIENT_HTTP: {
      char buf[LWS_PRE + 4096], *p = buf + LWS_PRE;
      int n = (int)sizeof(buf) - LWS_PRE;
      /* Calls back RECEIVE_CLIENT_HTTP_READ with what came. */
      return lws_http_client_read(wsi, &p, &n) < 0 ? -1 : 0;
    }
    case LWS_CALLBACK_COMPLETED_CLIENT_HTTP:
      /* The connection stays for lws to close with the context. */
      set_state(r, REQ_DONE, "reply complete");
      return 0;
    case LWS_CALLBACK_CLOSED_CLIENT_HTTP:
      if (wsi == r->wsi) r->wsi = NULL;
      set_state(r, REQ_FAILED, "the collector closed the connection before "
                "its reply was complete");
      return 0;
    default:
      break;
  }
  return lws_callback_http_dummy(wsi, reason, user, in, len);
}

static const struct lws_protocols protocols[] = {
    {"tracegate-snapshot", on_lws, 0, 0, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

static void on_deadline(lws_sorted_usec_list_t *sul) {
  req_t *r = lws_container_of(sul, req_t, deadline);
  char why[64];
  snprintf(why, sizeof(why), "no reply within --timeout (%" PRIu64 " s)",
           r->timeout_s);
  set_state(r, REQ_FAILED, why);
  /* lws's documented way to close a connection from outside its
   * callbacks; its close callback comes on the next service. */
  if (r->wsi) lws_set_timeout(r->wsi, PENDING_TIMEOUT_USER_REASON_BASE,
                              LWS_TO_KILL_ASYNC);
}

/* lws's own warnings: the failure it leads to is said anyway. */
static void lws_log_emit(int level, const char *line) {
  size_t n = strlen(line);
  while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
  TG_DEBUG("lws%s: %.*s", (level & LLL_ERR) ? " error" : "", (int)n, line);
}

/* Why lws gave up on a connection without saying: a name that does not
 * resolve is the usual cause, and getaddrinfo() can say so. */
static const char *no_connection_why(const collector_addr_t *a) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
  int rv = getaddrinfo(a->net.host, NULL, &hints, &res);
  if (res) freeaddrinfo(res);
  return rv ? gai_strerror(rv) : "cannot connect";
}

/* Runs the request (r->method) to its end (r->state DONE or FAILED).
 * Returns -1 if lws could not even start (said why). */
int cli_snap_request(const snap_opts_t *o, const collector_addr_t *a,
                     const char *path, req_t *r) {
  lws_set_log_level(LLL_ERR | LLL_WARN, lws_log_emit);
  struct lws_context_creation_info ci;
  memset(&ci, 0, sizeof(ci));
  ci.port = CONTEXT_PORT_NO_LISTEN;
  ci.protocols = protocols;
  ci.user = r;
  ci.fd_limit_per_thread = 4; /* one connection, lws's own, spare */
  /* lws's own timeouts for a reply must not beat --timeout. */
  ci.timeout_secs = (unsigned)o->timeout_s + 5;
  ci.connect_timeout_secs = (unsigned)o->timeout_s;
  if (a->https) {
    ci.options = LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT |
                 LWS_SERVER_OPTION_DISABLE_OS_CA_CERTS;
    ci.client_ssl_ca_filepath = o->tls.ca;
    ci.client_ssl_cert_filepath = o->tls.cert;
    ci.client_ssl_private_key_filepath = o->tls.key;
  }
  r->ctx = lws_create_context(&ci);
  if (!r->ctx) {
    fprintf(stderr, "%s: %s\n", PROG,
            a->https ? "cannot set up TLS with --ca, --cert and --key (are "
                       "they PEM files, the key that of the certificate?)"
                     : "cannot start libwebsockets");
    return -1;
  }
  struct lws_client_connect_info i;
  memset(&i, 0, sizeof(i));
  i.context = r->ctx;
  i.address = a->net.host;
  i.port = a->net.port;
  i.path = path;
  i.host = o->server_name ? o->server_name : a->net.host;
  /* No Origin: that header is a browser's statement of the page that
   * made a request, which the collector checks against its own origin
   * (api.c, origin_ok). A tool is no page, and lws would spell it
   * "http://" over https:// too (refused as another site's). */
  i.origin = NULL;
  i.method = r->method;
  i.protocol = protocols[0].name;
  i.alpn = "http/1.1";
  /* The server's certificate is verified (chain and name): no
   * LCCSCF_ALLOW_* here. A redirect is an answer of its own. */
  i.ssl_connection = LCCSCF_HTTP_NO_FOLLOW_REDIRECT |
                     (a->https ? LCCSCF_USE_SSL : 0);
  i.pwsi = &r->wsi;
  r->timeout_s = o->timeout_s;
  lws_sul_schedule(r->ctx, 0, &r->deadline, on_deadline,
                   (lws_usec_t)o->timeout_s * LWS_USEC_PER_SEC);
  if (!lws_client_connect_via_info(&i)) {
    r->wsi = NULL;
    set_state(r, REQ_FAILED, no_connection_why(a));
  }
  while (!ended(r))
    if (lws_service(r->ctx, 0) < 0) break;
  lws_sul_cancel(&r->deadline);
  /* Closes what is still open (a connection the deadline cut). */
  lws_context_destroy(r->ctx);
  r->ctx = NULL;
  if (!ended(r)) set_state(r, REQ_FAILED, "the event loop failed");
  return 0;
}

/* --- the request's URL -------------------------------------------------------- */

/* Appends |s| percent-encoded (RFC 3986: all but the unreserved bytes). */
void cli_snap_put_encoded(char *out, size_t cap, size_t *len, const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                 (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' ||
                 *p == '_' || *p == '~';
    if (*len + 4 > cap) return; /* the caller sized |out| for the worst */
    if (plain) {
      out[(*len)++] = (char)*p;
    } else {
      out[(*len)++] = '%';
      out[(*len)++] = hex[*p >> 4];
      out[(*len)++] = hex[*p & 15];
    }
  }
  out[*len] = 0;
}

/* --- the command line and what it is told ---------------------------------- */

int cli_snap_check_usage(const char *prog, snap_opts_t *o,
                         collector_addr_t *a) {
  if (!o->collector) {
    fprintf(stderr, "%s: --collector ADDR is required (see --help)\n", prog);
    return -1;
  }
  if (parse_addr(o->collector, a) < 0) {
    char shown[300];
    tg_printable(shown, sizeof(shown), o->collector);
    fprintf(stderr, "%s: --collector: '%s' is not http://host:port, "
            "https://host:port or host:port\n", prog, shown);
    return -1;
  }
  if (o->reason && strlen(o->reason) > REASON_MAX) {
    fprintf(stderr, "%s: --reason: at most %d bytes\n", prog, REASON_MAX);
    return -1;
  }
  if (o->group && (!o->group[0] || strlen(o->group) > GROUP_MAX)) {
    fprintf(stderr, "%s: --group: 1 to %d bytes\n", prog, GROUP_MAX);
    return -1;
  }
  bool tls_flags = o->tls.ca || o->tls.cert || o->tls.key || o->server_name;
  if (!a->https) {
    if (tls_flags) {
      fprintf(stderr, "%s: --ca, --cert, --key and --tls-server-name are for "
              "an https:// collector\n", prog);
      return -1;
    }
    return 0;
  }
  char why[TG_CLIENT_TLS_ERR_MAX];
  if (tg_client_tls_defaults(&o->tls, why, sizeof(why)) < 0) {
    fprintf(stderr, CLI_PROG ": %s\n", why);
    return -1;
  }
  if (!o->tls.ca || !o->tls.cert || !o->tls.key) {
    fprintf(stderr, "%s: an https:// collector needs --ca, --cert and --key "
            "(or $TRACEGATE_CA, $TRACEGATE_CERT, $TRACEGATE_KEY, or the config "
            "file)\n", prog);
    return -1;
  }
  const char *files[] = {o->tls.ca, o->tls.cert, o->tls.key};
  for (size_t k = 0; k < 3; k++) {
    if (access(files[k], R_OK) < 0) {
      fprintf(stderr, "%s: cannot read %s: %s\n", prog, files[k],
              strerror(errno));
      return -1;
    }
  }
  return 0;
}

void cli_snap_say_failed(const char *prog, const snap_opts_t *o,
                         const req_t *r) {
  char shown[300];
  tg_printable(shown, sizeof(shown), o->collector);
  if (r->reached)
    fprintf(stderr, "%s: the request to the collector at %s failed: %s\n",
            prog, shown, r->why);
  else
    fprintf(stderr, "%s: cannot reach the collector at %s: %s\n", prog, shown,
            r->why);
}

bool cli_snap_id_ok(const char *id) {
  if (strlen(id) != CLI_SNAP_ID_LEN) return false;
  for (const char *p = id; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
  return true;
}

/* The reply to a refused GET: its JSON "error", printed. */
void cli_snap_say_refused(const char *prog, const req_t *r) {
  cli_snap_reply_t *s = malloc(sizeof(*s));
  char err[128], why[600] = "no reason given";
  size_t n = tg_buf_size(&r->body);
  const char *text = n ? (const char *)tg_buf_begin(&r->body) : "";
  if (s && cli_snap_parse(text, n, s, err, sizeof(err)) == 0 && s->error[0])
    tg_printable(why, sizeof(why), s->error);
  free(s);
  fprintf(stderr, "%s: the collector refused (HTTP %d): %s\n", prog,
          r->status, why);
}
