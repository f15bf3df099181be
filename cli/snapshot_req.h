/* What `tracegate snapshot` (snapshot.c) and `tracegate snapshot check`
 * (snapshot_check.c) share: the collector's address, the command line's
 * connection options, and one HTTP request to the collector run to its
 * end on an lws event loop of its own (snapshot_req.c, below both).
 */
#ifndef TRACEGATE_CLI_SNAPSHOT_REQ_H
#define TRACEGATE_CLI_SNAPSHOT_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libwebsockets.h>

#include "common/buf.h"
#include "cli/cli.h"
#include "cli/snapshot_json.h"
#include "ipc/net_addr.h"

#define CLI_SNAP_API_PATH "/api/v1/snapshots"
/* What the collector takes (TG_COLL_REASON_MAX) and a group's longest. */
#define CLI_SNAP_REASON_MAX 1024
#define CLI_SNAP_GROUP_MAX 128

typedef struct collector_addr {
  bool https;
  tg_net_addr_t net;
} collector_addr_t;

/* CONNECTING -> READING -> DONE; FAILED from either live state. */
typedef enum req_state {
  REQ_CONNECTING, /* until lws says the reply's headers are in */
  REQ_READING,    /* the reply's body */
  REQ_DONE,       /* the whole reply is in */
  REQ_FAILED,     /* |why| says what */
} req_state_t;

typedef struct req {
  req_state_t state; /* written only by snapshot_req.c's set_state() */
  uint64_t bad_transitions; /* refused by its table (a bug: logged) */
  struct lws_context *ctx;
  struct lws *wsi; /* NULL once lws closed it */
  lws_sorted_usec_list_t deadline;
  uint64_t timeout_s;
  int status;  /* the HTTP status */
  tg_buf_t body; /* at most CLI_SNAP_REPLY_MAX bytes */
  /* get: a 200's body goes here instead (other answers to |body|). */
  int out_fd;
  uint64_t out_bytes;
  const char *method;
  bool reached; /* connected: a failure after is not "cannot reach" */
  char why[512];
  char cert_why[160]; /* why OpenSSL refused the collector's certificate */
} req_t;

typedef struct snap_opts {
  const char *collector, *reason, *group, *json, *server_name;
  const char *host, *output; /* get */
  uint64_t timeout_s;
  tg_client_tls_files_t tls; /* session_cache unused */
} snap_opts_t;

/* The TLS flags every `tracegate snapshot` command takes, as rows of its
 * tg_flag_t table, filling |opts| (a snap_opts_t). */
#define CLI_SNAP_TLS_FLAGS(opts)                                               \
  {"ca", TG_FLAG_STRING, &(opts).tls.ca, "FILE",                               \
   "https: CA (PEM) that must have signed the collector's certificate "        \
   "(default: $TRACEGATE_CA, or ca in ~/.config/tracegate/config)", 0, 0},    \
  {"cert", TG_FLAG_STRING, &(opts).tls.cert, "FILE",                           \
   "https: client certificate (PEM) presented to the collector (default: "    \
   "$TRACEGATE_CERT, or cert in the config file)", 0, 0},                     \
  {"key", TG_FLAG_STRING, &(opts).tls.key, "FILE",                             \
   "https: its private key (PEM) (default: $TRACEGATE_KEY, or key in the "    \
   "config file)", 0, 0},                                                      \
  {"tls-server-name", TG_FLAG_STRING, &(opts).server_name, "NAME",             \
   "https: the name the collector's certificate must carry (default: the "    \
   "host part of ADDR)", 0, 0}

/* Checks --collector (parsed into *a) and the TLS flags, saying what is
 * wrong as |prog|. 0 or -1. */
int cli_snap_check_usage(const char *prog, snap_opts_t *o, collector_addr_t *a);
/* Runs |r| (method, out_fd, body set up by the caller) for |path| to its
 * end (r->state DONE or FAILED). -1 if lws could not even start (said). */
int cli_snap_request(const snap_opts_t *o, const collector_addr_t *a,
                     const char *path, req_t *r);
/* A request that did not end DONE: why, on stderr as |prog|. */
void cli_snap_say_failed(const char *prog, const snap_opts_t *o, const req_t *r);
/* A reply that is not 200: its status and JSON "error", as |prog|. */
void cli_snap_say_refused(const char *prog, const req_t *r);
/* A snapshot id: 16 lower-case hex digits. */
bool cli_snap_id_ok(const char *id);
/* Appends |s| percent-encoded to |out| (|cap| >= *len + 3 strlen(s) + 1). */
void cli_snap_put_encoded(char *out, size_t cap, size_t *len, const char *s);

/* `tracegate snapshot check` (snapshot_check.c): argv[0] is "check". */
int cli_snapshot_check(int argc, char **argv);

#endif /* TRACEGATE_CLI_SNAPSHOT_REQ_H */
