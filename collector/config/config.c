/* tracegate-collector's configuration file (config.h): the definition
 * table of its scalar keys, the line reader, the value checks and the
 * checks that need the whole file.
 *
 * The text is outside input (a wrong file, a hand edit): every line is
 * copied into a bounded buffer before it is looked at, every value is
 * checked for length before it is stored, and nothing here aborts or
 * reads past |len|. The parse fills the caller's struct directly; on
 * error it frees what it allocated, so a failed parse owns nothing. */
#include "collector/config/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "collector/catalog/catalog.h"
#include "consumer/fleet/trace_schema.h"
#include "collector/config/shard.h"
#include "common/config_text.h"
#include "common/read_file.h"
#include "common/units.h"

#define DEFAULT_LISTEN_HOST "127.0.0.1"
#define DEFAULT_LISTEN_PORT 7468
#define DEFAULT_UI_URL "https://ui.perfetto.dev"
#define MS_PER_S 1000
#define AM_MAX_BYTES_MIN 1024
#define AM_MAX_BYTES_MAX (16u << 20)
/* clone_min_rate's most: a floor of 1G per second already fails a host
 * on a 10 Gbit/s link; a higher one could fail every host. */
#define CLONE_MIN_RATE_MAX (1ull << 30)

typedef enum kind {
  K_PATH,     /* char[]: resolved against the base directory */
  K_DNS,      /* char[]: a DNS name */
  K_NAME,     /* char[]: name_ok() */
  K_CATALOG,  /* char[]: a secret, never echoed */
  K_URL,      /* char[]: url_ok() */
  K_SHARD,    /* shard_index, shard_count */
  K_SIZE,     /* uint64_t: bytes; max > 0: in min..max */
  K_DURATION, /* int64_t: milliseconds */
  K_UINT,     /* uint32_t in min..max */
  K_LISTEN,   /* listen_host, listen_port, listen_ipv6, listen_loopback */
  K_HEALTH,   /* health_host, health_port */
  K_FIELDS,   /* char[]: tg_trace_schema_allow() names */
  K_BUCKET,   /* s3_bucket, s3_prefix: parse_bucket() */
  K_SYMBOLIZE, /* uint32_t: tg_coll_symbolize_t */
  K_APP_TRACKS, /* uint32_t: tg_coll_app_tracks_t */
  K_BOOL,      /* bool: true or false */
  K_PRESIGN,   /* int64_t: off, on (TG_COLL_PRESIGN_DEFAULT_MS) or a
                * DURATION as K_DURATION's */
} kind_t;

/* The scalar keys, in the table's order. */
typedef enum key_id {
  KEY_HOSTS,
  KEY_CA,
  KEY_CERT,
  KEY_KEY,
  KEY_TLS_SERVER_NAME,
  KEY_TRACE_CONFIG,
  KEY_STORE,
  KEY_CATALOG,
  KEY_SHARD,
  KEY_RETENTION_MAX_BYTES,
  KEY_RETENTION_MAX_AGE,
  KEY_LISTEN,
  KEY_HTTP_CERT,
  KEY_HTTP_KEY,
  KEY_HTTP_CA,
  KEY_HTTP_MAX_CONNS,
  KEY_HTTP_MAX_CONNS_PER_SOURCE,
  KEY_HTTP_TIMEOUT,
  KEY_HTTP_MIN_RATE,
  KEY_HTTP_CRL,
  KEY_AUTHZ,
  KEY_SESSION_KEY,
  KEY_SNAPSHOT_EVERY,
  KEY_COALESCE_WINDOW,
  KEY_MAX_SNAPSHOTS_PER_MINUTE,
  KEY_HOST_SNAPSHOTS_PER_MINUTE,
  KEY_OPERATOR_SNAPSHOTS_PER_MINUTE,
  KEY_SCHEDULE_SNAPSHOTS_PER_MINUTE,
  KEY_CLONE_TIMEOUT,
  KEY_COMPRESS_LEVEL,
  KEY_RECONNECT,
  KEY_DEAD_LINK,
  KEY_UI_URL,
  KEY_SNAPSHOT_HOST_MAX_BYTES,
  KEY_RING_CLEAR_PERIOD,
  KEY_AM_HOST_LABEL,
  KEY_AM_GROUP_LABEL,
  KEY_AM_REPEAT_WINDOW,
  KEY_AM_SNAPSHOTS_PER_MINUTE,
  KEY_AM_MAX_BYTES,
  KEY_HEALTH_LISTEN,
  KEY_CLONE_MIN_RATE,
  KEY_MERGE_ALLOW_FIELDS,
  KEY_MERGE_APP_TRACKS,
  KEY_MERGE_CLOCK_FROM_REQUESTS,
  KEY_BUCKET,
  KEY_S3_ENDPOINT,
  KEY_S3_REGION,
  KEY_S3_CREDENTIALS_FILE,
  KEY_S3_PRESIGN,
  KEY_S3_ALLOW_PLAIN_HTTP,
  KEY_CHECK_TRACE_PROCESSOR,
  KEY_CHECK_TIMEOUT,
  KEY_CHECK_MEMORY,
  KEY_SYMBOLIZE,
  KEY_SYMBOLIZE_TIMEOUT,
  KEY_SYMBOLIZE_DEBUGINFOD_LOOKUPS,
  KEY_SYMBOLIZE_DEBUGINFOD_BYTES,
  KEY_SYMBOLIZE_DEBUGINFOD_TIME,
  KEY_FUNCTION_SHARES_TOP,
  KEY_PERF_BOOST_WINDOW,
  KEY_PERF_BOOST_FREQUENCY,
  KEY_PERF_BOOST_BUFFER,
  KEY_PERF_BOOST_BUDGET_WINDOW,
  KEY_PERF_BOOST_HOST_PERCENT,
  KEY_PERF_BOOST_FLEET_PERCENT,
  KEY_COUNT
} key_id_t;

typedef struct key_def {
  const char *name;
  kind_t kind;
  size_t off; /* of the field in tg_coll_config_t */
  size_t cap; /* char[] fields: their size */
  /* K_UINT: the range. K_DURATION: the least non-zero value, the most,
   * and whether 0 (off, none) is allowed. */
  int64_t min, max;
  bool zero_ok;
  const char *expect;   /* the error's "expected ..." */
  const char *required; /* what a missing one is, or NULL if optional */
} key_def_t;

#define STR_FIELD(f) \
  offsetof(tg_coll_config_t, f), sizeof(((tg_coll_config_t *)0)->f)
#define NUM_FIELD(f) offsetof(tg_coll_config_t, f), 0
#define PATH_KEY(n, f, req) \
  {n, K_PATH, STR_FIELD(f), 0, 0, false, "a path", req}
#define DURATION_EXPECT "a duration like 500ms, 1.5s, 1m30s or 1d"
#define DURATION_KEY(n, f, min, zero, expect) \
  {n, K_DURATION, NUM_FIELD(f), min, INT64_MAX, zero, expect, NULL}
#define SIZE_KEY(n, f) \
  {n, K_SIZE, NUM_FIELD(f), 0, 0, false, \
   "a size like 4096, 64K, 64MiB or 1.5G", NULL}
#define NAME_EXPECT "1 to 64 bytes of [A-Za-z0-9._-], not starting with '.'"

/* The one definition table of the scalar keys (STYLE.md: one config table
 * per daemon). */
static const key_def_t KEYS[KEY_COUNT] = {
    [KEY_HOSTS] = PATH_KEY("hosts", hosts, "the inventory"),
    [KEY_CA] = PATH_KEY("ca", ca, NULL),
    [KEY_CERT] = PATH_KEY("cert", cert, NULL),
    [KEY_KEY] = PATH_KEY("key", key, NULL),
    [KEY_TLS_SERVER_NAME] = {"tls_server_name", K_DNS,
                             STR_FIELD(tls_server_name), 0, 0, false,
                             "a DNS name", NULL},
    [KEY_TRACE_CONFIG] = PATH_KEY("trace_config", trace_config,
                                  "the flight recorder's TraceConfig"),
    [KEY_STORE] = PATH_KEY("store", store, "the snapshot directory"),
    [KEY_CATALOG] = {"catalog", K_CATALOG, STR_FIELD(catalog), 0, 0, false,
                     "sqlite or postgresql://...", NULL},
    [KEY_SHARD] = {"shard", K_SHARD, NUM_FIELD(shard_index), 0, 0, false,
                   "I/N with 0 <= I < N <= 65536", NULL},
    [KEY_RETENTION_MAX_BYTES] = SIZE_KEY("retention_max_bytes",
                                         retention_max_bytes),
    [KEY_RETENTION_MAX_AGE] = DURATION_KEY("retention_max_age",
                                           retention_max_age_ms, 0, true,
                                           DURATION_EXPECT),
    [KEY_LISTEN] = {"listen", K_LISTEN, NUM_FIELD(listen_port), 0, 0, false,
                    "HOST:PORT or [IPV6]:PORT with a port 0..65535", NULL},
    [KEY_HTTP_CERT] = PATH_KEY("http_cert", http_cert, NULL),
    [KEY_HTTP_KEY] = PATH_KEY("http_key", http_key, NULL),
    [KEY_HTTP_CA] = PATH_KEY("http_ca", http_ca, NULL),
    [KEY_HTTP_MAX_CONNS] = {"http_max_conns", K_UINT,
                            NUM_FIELD(http_max_conns), 1, 65535, false,
                            "an integer 1..65535", NULL},
    [KEY_HTTP_TIMEOUT] = {"http_timeout", K_DURATION,
                          NUM_FIELD(http_timeout_ms), MS_PER_S,
                          86400LL * MS_PER_S, false,
                          "a duration from 1s to 1d", NULL},
    [KEY_HTTP_MAX_CONNS_PER_SOURCE] = {"http_max_conns_per_source", K_UINT,
                                       NUM_FIELD(http_max_conns_per_source),
                                       1, 65535, false,
                                       "an integer 1..65535", NULL},
    [KEY_HTTP_MIN_RATE] = {"http_min_rate", K_SIZE, NUM_FIELD(http_min_rate),
                           0, 0, false,
                           "a size per second like 4096, 64K or 1.5M", NULL},
    [KEY_HTTP_CRL] = PATH_KEY("http_crl", http_crl, NULL),
    [KEY_AUTHZ] = PATH_KEY("authz", authz, NULL),
    [KEY_SESSION_KEY] = {"session_key", K_NAME, STR_FIELD(session_key), 0, 0,
                         false, NAME_EXPECT, NULL},
    [KEY_SNAPSHOT_EVERY] = DURATION_KEY("snapshot_every", snapshot_every_ms,
                                        MS_PER_S, true,
                                        "0 or a duration of at least 1s"),
    [KEY_COALESCE_WINDOW] = DURATION_KEY("coalesce_window",
                                         coalesce_window_ms, 0, true,
                                         DURATION_EXPECT),
    [KEY_MAX_SNAPSHOTS_PER_MINUTE] = {"max_snapshots_per_minute", K_UINT,
                                      NUM_FIELD(max_snapshots_per_minute), 1,
                                      600, false, "an integer 1..600", NULL},
    [KEY_HOST_SNAPSHOTS_PER_MINUTE] = {"host_snapshots_per_minute", K_UINT,
                                       NUM_FIELD(host_snapshots_per_minute),
                                       1, 600, false, "an integer 1..600",
                                       NULL},
    [KEY_OPERATOR_SNAPSHOTS_PER_MINUTE] = {
        "operator_snapshots_per_minute", K_UINT,
        NUM_FIELD(operator_snapshots_per_minute), 1, 600, false,
        "an integer 1..600", NULL},
    [KEY_SCHEDULE_SNAPSHOTS_PER_MINUTE] = {
        "schedule_snapshots_per_minute", K_UINT,
        NUM_FIELD(schedule_snapshots_per_minute), 1, 600, false,
        "an integer 1..600", NULL},
    [KEY_CLONE_TIMEOUT] = {"clone_timeout", K_DURATION,
                           NUM_FIELD(clone_timeout_ms), 100, 120 * MS_PER_S,
                           false, "a duration from 100ms to 120s", NULL},
    [KEY_COMPRESS_LEVEL] = {"compress_level", K_UINT,
                            NUM_FIELD(compress_level), 0, 19, false,
                            "an integer 0..19", NULL},
    [KEY_RECONNECT] = DURATION_KEY("reconnect", reconnect_ms, 0, true,
                                   DURATION_EXPECT),
    [KEY_DEAD_LINK] = DURATION_KEY("dead_link", dead_link_ms, MS_PER_S, false,
                                   "a duration of at least 1s"),
    [KEY_MERGE_ALLOW_FIELDS] = {"merge_allow_fields", K_FIELDS,
                                STR_FIELD(merge_allow_fields), 0, 0, false,
                                "TracePacket field names of Perfetto's "
                                "schema, separated by commas "
                                "(interned_data.NAME for InternedData's)",
                                NULL},
    [KEY_MERGE_APP_TRACKS] = {"merge_app_tracks", K_APP_TRACKS,
                              NUM_FIELD(merge_app_tracks), 0, 0, false,
                              "joined or machines", NULL},
    [KEY_MERGE_CLOCK_FROM_REQUESTS] = {"merge_clock_from_requests", K_BOOL,
                                       NUM_FIELD(merge_clock_from_requests),
                                       0, 0, false, "true or false", NULL},
    [KEY_UI_URL] = {"ui_url", K_URL, STR_FIELD(ui_url), 0, 0, false,
                    "an http:// or https:// URL of at most 512 bytes without "
                    "blanks, quotes or <>",
                    NULL},
    [KEY_SNAPSHOT_HOST_MAX_BYTES] = SIZE_KEY("snapshot_host_max_bytes",
                                             snapshot_host_max_bytes),
    [KEY_RING_CLEAR_PERIOD] = {"ring_clear_period", K_DURATION,
                               NUM_FIELD(ring_clear_period_ms), 100,
                               3600LL * MS_PER_S, true,
                               "0 (off) or a duration from 100ms to 1h",
                               NULL},
    [KEY_AM_HOST_LABEL] = {"alertmanager_host_label", K_NAME,
                           STR_FIELD(am_host_label), 0, 0, false, NAME_EXPECT,
                           NULL},
    [KEY_AM_GROUP_LABEL] = {"alertmanager_group_label", K_NAME,
                            STR_FIELD(am_group_label), 0, 0, false,
                            NAME_EXPECT, NULL},
    [KEY_AM_REPEAT_WINDOW] = {"alertmanager_repeat_window", K_DURATION,
                              NUM_FIELD(am_repeat_window_ms), 1,
                              30LL * 86400 * MS_PER_S, true,
                              "0 or a duration up to 30d", NULL},
    [KEY_AM_SNAPSHOTS_PER_MINUTE] = {
        "alertmanager_snapshots_per_minute", K_UINT,
        NUM_FIELD(am_snapshots_per_minute), 1, 600, false,
        "an integer 1..600", NULL},
    [KEY_AM_MAX_BYTES] = {"alertmanager_max_bytes", K_SIZE,
                          NUM_FIELD(am_max_bytes), AM_MAX_BYTES_MIN,
                          AM_MAX_BYTES_MAX, false,
                          "a size from 1K to 16M", NULL},
    [KEY_HEALTH_LISTEN] = {"health_listen", K_HEALTH, NUM_FIELD(health_port),
                           0, 0, false,
                           "HOST:PORT or [IPV6]:PORT with a port 0..65535",
                           NULL},
    [KEY_CLONE_MIN_RATE] = {"clone_min_rate", K_SIZE,
                            NUM_FIELD(clone_min_rate), 0, CLONE_MIN_RATE_MAX,
                            false, "a size per second from 0 (off) to 1G, "
                            "like 64K or 1.5M", NULL},
    [KEY_BUCKET] = {"bucket", K_BUCKET, NUM_FIELD(s3_bucket), 0, 0, false,
                    "s3://BUCKET or s3://BUCKET/PREFIX (a bucket name of 3 "
                    "to 63 bytes of [a-z0-9.-]; a prefix of printable bytes "
                    "without blanks, not starting with '/')", NULL},
    [KEY_S3_ENDPOINT] = {"s3_endpoint", K_URL, STR_FIELD(s3_endpoint), 0, 0,
                         false, "an http:// or https:// URL without a path",
                         NULL},
    [KEY_S3_REGION] = {"s3_region", K_NAME, STR_FIELD(s3_region), 0, 0, false,
                       NAME_EXPECT, NULL},
    [KEY_S3_CREDENTIALS_FILE] = PATH_KEY("s3_credentials_file",
                                         s3_credentials_file, NULL),
    [KEY_S3_PRESIGN] = {"s3_presign", K_PRESIGN, NUM_FIELD(s3_presign_ms),
                        TG_COLL_PRESIGN_MIN_MS, TG_COLL_PRESIGN_MAX_MS, true,
                        "off, on (15m) or a duration from 60s to 7d", NULL},
    [KEY_S3_ALLOW_PLAIN_HTTP] = {"s3_allow_plain_http", K_BOOL,
                                 NUM_FIELD(s3_allow_plain_http), 0, 0, false,
                                 "true or false", NULL},
    [KEY_CHECK_TRACE_PROCESSOR] = PATH_KEY("check_trace_processor",
                                           check_trace_processor, NULL),
    [KEY_CHECK_TIMEOUT] = {"check_timeout", K_DURATION,
                           NUM_FIELD(check_timeout_ms), MS_PER_S,
                           3600LL * MS_PER_S, false,
                           "a duration from 1s to 1h", NULL},
    [KEY_CHECK_MEMORY] = {"check_memory", K_SIZE, NUM_FIELD(check_memory),
                          64u << 20, 1ull << 40, false,
                          "a size from 64M to 1T", NULL},
    [KEY_SYMBOLIZE] = {"symbolize", K_SYMBOLIZE, NUM_FIELD(symbolize), 0, 0,
                       false, "off, local or debuginfod", NULL},
    [KEY_SYMBOLIZE_TIMEOUT] = {"symbolize_timeout", K_DURATION,
                               NUM_FIELD(symbolize_timeout_ms), MS_PER_S,
                               3600LL * MS_PER_S, false,
                               "a duration from 1s to 1h", NULL},
    [KEY_SYMBOLIZE_DEBUGINFOD_LOOKUPS] = {
        "symbolize_debuginfod_lookups", K_UINT,
        NUM_FIELD(symbolize_debuginfod_lookups), 1, 65536, false,
        "a number from 1 to 65536", NULL},
    [KEY_SYMBOLIZE_DEBUGINFOD_BYTES] = {
        "symbolize_debuginfod_bytes", K_SIZE,
        NUM_FIELD(symbolize_debuginfod_bytes), 1u << 20, 1ull << 40, false,
        "a size from 1M to 1T", NULL},
    [KEY_SYMBOLIZE_DEBUGINFOD_TIME] = {
        "symbolize_debuginfod_time", K_DURATION,
        NUM_FIELD(symbolize_debuginfod_time_ms), MS_PER_S, 3600LL * MS_PER_S,
        false, "a duration from 1s to 1h", NULL},
    [KEY_FUNCTION_SHARES_TOP] = {"function_shares_top", K_UINT,
                                 NUM_FIELD(function_shares_top), 0,
                                 TG_COLL_SHARES_TOP_MAX, false,
                                 "a number from 0 (off) to 1000", NULL},
    [KEY_PERF_BOOST_WINDOW] = {"perf_boost_window", K_DURATION,
                               NUM_FIELD(perf_boost_window_ms), MS_PER_S,
                               TG_COLL_BOOST_WINDOW_MAX_MS, true,
                               "0 (off) or a duration from 1s to 60s", NULL},
    [KEY_PERF_BOOST_FREQUENCY] = {"perf_boost_frequency", K_UINT,
                                  NUM_FIELD(perf_boost_frequency),
                                  TG_COLL_BOOST_FREQUENCY_MIN,
                                  TG_COLL_BOOST_FREQUENCY_MAX, false,
                                  "an integer 20..4000 (samples a second "
                                  "on each CPU)", NULL},
    [KEY_PERF_BOOST_BUFFER] = {"perf_boost_buffer", K_SIZE,
                               NUM_FIELD(perf_boost_buffer),
                               TG_COLL_BOOST_BUFFER_MIN,
                               TG_COLL_BOOST_BUFFER_MAX, false,
                               "a size from 64K to 1G in whole KiB", NULL},
    [KEY_PERF_BOOST_BUDGET_WINDOW] = {
        "perf_boost_budget_window", K_DURATION,
        NUM_FIELD(perf_boost_budget_window_ms),
        TG_COLL_BOOST_BUDGET_WINDOW_MIN_MS, TG_COLL_BOOST_BUDGET_WINDOW_MAX_MS,
        false, "a duration from 1m to 1d", NULL},
    [KEY_PERF_BOOST_HOST_PERCENT] = {"perf_boost_host_percent", K_UINT,
                                     NUM_FIELD(perf_boost_host_percent), 1,
                                     100, false,
                                     "an integer 1..100 (percent of "
                                     "perf_boost_budget_window)", NULL},
    [KEY_PERF_BOOST_FLEET_PERCENT] = {"perf_boost_fleet_percent", K_UINT,
                                      NUM_FIELD(perf_boost_fleet_percent), 1,
                                      100, false,
                                      "an integer 1..100 (percent of the "
                                      "hosts' time in "
                                      "perf_boost_budget_window)", NULL},
};

/* The file's limits (config.h): a file of every key and of the most
 * groups and triggers stays far below each. */
static const tg_conf_limits_t kLimits = {
    .file_max = TG_COLL_CONFIG_FILE_MAX,
    .line_max = TG_COLL_CONFIG_LINE_MAX,
    .lines_max = TG_COLL_CONFIG_LINES_MAX,
    .what = "a configuration file",
};

/* Keys that go together: all three or none. */
static const key_id_t TLS_KEYS[3] = {KEY_CA, KEY_CERT, KEY_KEY};
static const key_id_t HTTPS_KEYS[3] = {KEY_HTTP_CERT, KEY_HTTP_KEY,
                                       KEY_HTTP_CA};

typedef struct parser {
  tg_coll_config_t *c;
  tg_conf_t r; /* the lines, the label and the error buffer */
  const char *base_dir;
  tg_coll_config_warn_fn warn;
  void *warn_ctx;
  unsigned line;
  unsigned seen[KEY_COUNT]; /* the line that set each key, 0 if none */
  size_t groups_cap;
  size_t n_group_hosts; /* over all groups */
  size_t am_hosts_cap;
  size_t n_am_host_hosts; /* over all alertmanager_host lines */
  unsigned debug_dir_line; /* the first symbolize_debug_dir's, 0 if none */
} parser_t;

static bool digit(char c) { return c >= '0' && c <= '9'; }
static bool alnum(char c) {
  return digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
/* Printable ASCII but the blank: what hosts, URIs and URLs are made of. */
static bool graphic(char c) { return c > ' ' && c < 0x7f; }
static bool name_char(char c) {
  return alnum(c) || c == '.' || c == '_' || c == '-';
}

/* "FILE:LINE: " (or "FILE: " for line 0) and the text into the error
 * buffer. Returns -EINVAL, for the callers' convenience. */
static int fail(parser_t *p, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(parser_t *p, unsigned line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rv = tg_conf_vfail(&p->r, line, -EINVAL, fmt, ap);
  va_end(ap);
  return rv;
}

/* "KEY: expected WHAT, not 'VALUE'" on the current line, then ": WHY"
 * when the value's parser said why. */
static int bad_value_why(parser_t *p, const char *key, const char *expect,
                         const char *v, size_t n, const char *why) {
  char echo[TG_CONF_ECHO_MAX + 1];
  tg_conf_echo(echo, v, n);
  return fail(p, p->line, "%s: expected %s, not '%s'%s%s", key, expect, echo,
              why ? ": " : "", why ? why : "");
}

static int bad_value(parser_t *p, const char *key, const char *expect,
                     const char *v, size_t n) {
  return bad_value_why(p, key, expect, v, n, NULL);
}

/* A decimal number: 1 or more digits, no sign, no leading zero but "0"
 * itself, at most |max|. */
static bool dec(const char *s, size_t n, uint64_t max, uint64_t *out) {
  if (n == 0 || (n > 1 && s[0] == '0')) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (!digit(s[i])) return false;
    uint64_t d = (uint64_t)(s[i] - '0');
    if (d > max || v > (max - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

static bool parse_shard(const char *v, tg_coll_config_t *c) {
  const char *slash = strchr(v, '/');
  uint64_t i, n;
  if (!slash || !dec(v, (size_t)(slash - v), TG_COLL_SHARD_COUNT_MAX, &i) ||
      !dec(slash + 1, strlen(slash + 1), TG_COLL_SHARD_COUNT_MAX, &n) ||
      i >= n)
    return false;
  c->shard_index = (uint32_t)i;
  c->shard_count = (uint32_t)n;
  return true;
}

int tg_coll_config_set_shard(tg_coll_config_t *c, const char *text) {
  return text && parse_shard(text, c) ? 0 : -EINVAL;
}

/* Dot-separated labels of 1..63 [A-Za-z0-9-], none starting or ending
 * with '-'; at most TG_COLL_CONFIG_DNS_MAX bytes, no final dot. */
static bool dns_name_ok(const char *s, size_t n) {
  if (n == 0 || n > TG_COLL_CONFIG_DNS_MAX) return false;
  size_t label = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i == n || s[i] == '.') {
      if (label == 0 || label > 63 || s[i - 1] == '-') return false;
      label = 0;
    } else if (alnum(s[i]) || (s[i] == '-' && label > 0)) {
      label++;
    } else {
      return false;
    }
  }
  return true;
}

/* Session keys and group names; '.' first is refused so that a name is
 * never a hidden or relative file name where it ends up in one. */
static bool name_ok(const char *s, size_t n) {
  if (n == 0 || n > TG_COLL_CONFIG_NAME_MAX || s[0] == '.') return false;
  for (size_t i = 0; i < n; i++)
    if (!name_char(s[i])) return false;
  return true;
}

static bool trigger_name_ok(const char *s, size_t n) {
  if (n == 0 || n > TG_COLL_CONFIG_TRIGGER_MAX) return false;
  for (size_t i = 0; i < n; i++)
    if (!name_char(s[i]) && s[i] != ':') return false;
  return true;
}

static bool all_graphic(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!graphic(s[i])) return false;
  return true;
}

static bool catalog_ok(const char *v) {
  if (!strcmp(v, "sqlite")) return true;
  return (!strncmp(v, "postgresql://", 13) || !strncmp(v, "postgres://", 11)) &&
         all_graphic(v, strlen(v));
}

/* The UI's address is put in links and HTML attributes: no blank, quote
 * or angle bracket can end one early. */
static bool url_ok(const char *v) {
  size_t scheme = !strncmp(v, "https://", 8)  ? 8
                  : !strncmp(v, "http://", 7) ? 7
                                              : 0;
  return scheme && v[scheme] && all_graphic(v, strlen(v)) &&
         !strpbrk(v, "\"'`<>");
}

/* "s3://BUCKET[/PREFIX]": the bucket as S3 names them (lower case,
 * digits, '.', '-'), the prefix kept with a '/' added at its end. */
static bool parse_bucket(const char *v, tg_coll_config_t *c) {
  if (strncmp(v, "s3://", 5) != 0) return false;
  const char *b = v + 5, *slash = strchr(b, '/');
  size_t bn = slash ? (size_t)(slash - b) : strlen(b);
  if (bn < 3 || bn > TG_COLL_CONFIG_BUCKET_MAX) return false;
  for (size_t i = 0; i < bn; i++)
    if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') ||
          b[i] == '.' || b[i] == '-'))
      return false;
  const char *pfx = slash ? slash + 1 : "";
  size_t pn = strlen(pfx);
  if (pn && (pfx[0] == '/' || !all_graphic(pfx, pn) || strstr(pfx, "//")))
    return false;
  bool add_slash = pn && pfx[pn - 1] != '/';
  if (pn + add_slash > TG_COLL_CONFIG_PREFIX_MAX) return false;
  memcpy(c->s3_bucket, b, bn);
  c->s3_bucket[bn] = '\0';
  memcpy(c->s3_prefix, pfx, pn);
  if (add_slash) c->s3_prefix[pn++] = '/';
  c->s3_prefix[pn] = '\0';
  return true;
}

/* |v| into |out| (|cap| bytes) unless it does not fit. */
static bool copy(char *out, size_t cap, const char *v) {
  size_t n = strlen(v);
  if (n >= cap) return false;
  memcpy(out, v, n + 1);
  return true;
}

static bool set_path(const parser_t *p, char *out, size_t cap,
                     const char *v) {
  if (!*v) return false;
  for (const char *s = v; *s; s++)
    if ((unsigned char)*s < ' ' || *s == 0x7f) return false;
  const char *base = p->base_dir;
  if (v[0] == '/' || !base || !base[0]) return copy(out, cap, v);
  size_t bn = strlen(base);
  const char *sep = base[bn - 1] == '/' ? "" : "/";
  int w = snprintf(out, cap, "%s%s%s", base, sep, v);
  return w >= 0 && (size_t)w < cap;
}

/* Whether the |hn| bytes at |h| (no brackets) are an address or a DNS
 * name: false if neither; else *loopback says whether it is 127.0.0.0/8,
 * ::1 (or ::ffff:127.x) or "localhost". |v6|: it was bracketed, so only
 * an IPv6 literal will do. */
static bool host_loopback(const char *h, size_t hn, bool v6, bool *loopback) {
  char a[TG_COLL_CONFIG_LISTEN_HOST_MAX + 1];
  if (hn == 0 || hn > TG_COLL_CONFIG_LISTEN_HOST_MAX) return false;
  memcpy(a, h, hn);
  a[hn] = 0;
  struct in_addr a4;
  struct in6_addr a6;
  if (v6) {
    if (inet_pton(AF_INET6, a, &a6) != 1) return false;
    *loopback = IN6_IS_ADDR_LOOPBACK(&a6) ||
                (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
  } else if (inet_pton(AF_INET, a, &a4) == 1) {
    *loopback = (ntohl(a4.s_addr) >> 24) == 127;
  } else if (dns_name_ok(a, hn)) {
    *loopback = !strcasecmp(a, "localhost");
  } else {
    return false;
  }
  return true;
}

/* HOST:PORT or [IPV6]:PORT into |out| (no brackets; room for
 * TG_COLL_CONFIG_LISTEN_HOST_MAX bytes), *port, *v6 and *loopback. */
static bool parse_host_port(const char *v, char *out, uint16_t *port_out,
                            bool *v6_out, bool *loopback_out) {
  const char *host, *colon;
  bool v6 = v[0] == '[';
  if (v6) {
    const char *close = strchr(v, ']');
    if (!close || close[1] != ':') return false;
    host = v + 1;
    colon = close + 1;
  } else {
    colon = strrchr(v, ':');
    if (!colon || memchr(v, ':', (size_t)(colon - v))) return false;
    host = v;
  }
  size_t hn = (size_t)(colon - host) - (v6 ? 1 : 0);
  uint64_t port;
  if (hn == 0 || hn > TG_COLL_CONFIG_LISTEN_HOST_MAX ||
      !dec(colon + 1, strlen(colon + 1), UINT16_MAX, &port))
    return false;
  bool loopback;
  if (!host_loopback(host, hn, v6, &loopback)) return false;
  memcpy(out, host, hn);
  out[hn] = 0;
  *port_out = (uint16_t)port;
  *v6_out = v6;
  *loopback_out = loopback;
  return true;
}

/* Whether s3_endpoint's |url| (url_ok, no path) is http:// to a loopback
 * host. An authority this cannot take apart (a user part, a port that is
 * not a number) counts as remote: the check fails closed. */
static bool plain_http_to_loopback(const char *url) {
  if (strncmp(url, "http://", 7) != 0) return false;
  const char *a = url + 7, *h = a, *rest;
  bool v6 = a[0] == '[';
  if (v6) {
    const char *close = strchr(a, ']');
    if (!close) return false;
    h = a + 1;
    rest = close + 1;
  } else {
    rest = a + strcspn(a, ":");
  }
  size_t hn = (size_t)(rest - h) - (v6 ? 1 : 0);
  uint64_t port;
  if (*rest && (*rest != ':' || !dec(rest + 1, strlen(rest + 1), UINT16_MAX,
                                     &port)))
    return false;
  bool loopback;
  return host_loopback(h, hn, v6, &loopback) && loopback;
}

static bool parse_listen(const char *v, tg_coll_config_t *c) {
  return parse_host_port(v, c->listen_host, &c->listen_port, &c->listen_ipv6,
                         &c->listen_loopback);
}

/* Any address: the health listener answers nothing but /healthz. */
static bool parse_health(const char *v, tg_coll_config_t *c) {
  bool v6, loopback;
  return parse_host_port(v, c->health_host, &c->health_port, &v6, &loopback);
}

static int set_scalar(parser_t *p, key_id_t id, const char *v) {
  const key_def_t *k = &KEYS[id];
  if (p->seen[id])
    return fail(p, p->line, "%s: expected once, already set on line %u",
                k->name, p->seen[id]);
  p->seen[id] = p->line;
  char *field = (char *)p->c + k->off;
  bool ok = false;
  uint64_t u;
  const char *why = NULL;
  switch (k->kind) {
  case K_PATH:
    ok = set_path(p, field, k->cap, v);
    break;
  case K_DNS:
    ok = dns_name_ok(v, strlen(v)) && copy(field, k->cap, v);
    break;
  case K_NAME:
    ok = name_ok(v, strlen(v)) && copy(field, k->cap, v);
    break;
  case K_CATALOG:
    if (catalog_ok(v) && copy(field, k->cap, v)) return 0;
    /* Never echoed: it may hold a password. */
    return fail(p, p->line, "%s: expected %s", k->name, k->expect);
  case K_URL:
    ok = url_ok(v) && copy(field, k->cap, v);
    break;
  case K_SHARD:
    ok = parse_shard(v, p->c);
    break;
  case K_SIZE:
    /* A number alone is bytes, as it always was here. */
    ok = tg_units_parse_size(v, 1, (uint64_t *)(void *)field, &why) == 0;
    if (ok && k->max && (*(uint64_t *)(void *)field < (uint64_t)k->min ||
                         *(uint64_t *)(void *)field > (uint64_t)k->max)) {
      ok = false;
      why = "out of range";
    }
    break;
  case K_PRESIGN:
  case K_DURATION: {
    if (k->kind == K_PRESIGN && (!strcmp(v, "off") || !strcmp(v, "on"))) {
      *(int64_t *)(void *)field = v[1] == 'n' ? TG_COLL_PRESIGN_DEFAULT_MS : 0;
      ok = true;
      break;
    }
    /* No unit goes without saying: a number alone is 0 or refused. */
    ok = tg_units_parse_duration(v, 0, &u, &why) == 0;
    if (ok && (u == 0 ? !k->zero_ok
                      : u < (uint64_t)k->min || u > (uint64_t)k->max)) {
      ok = false;
      why = u == 0 ? "0 is not allowed here" : "out of range";
    }
    if (ok) *(int64_t *)(void *)field = (int64_t)u;
    break;
  }
  case K_UINT:
    ok = dec(v, strlen(v), (uint64_t)k->max, &u) && u >= (uint64_t)k->min;
    if (ok) *(uint32_t *)(void *)field = (uint32_t)u;
    break;
  case K_LISTEN:
    ok = parse_listen(v, p->c);
    break;
  case K_HEALTH:
    ok = parse_health(v, p->c);
    break;
  case K_FIELDS: {
    tg_ts_allow_t allow;
    char bad[64];
    ok = tg_trace_schema_allow(&allow, v, bad, sizeof(bad)) == 0 &&
         copy(field, k->cap, v);
    break;
  }
  case K_BOOL:
    ok = !strcmp(v, "true") || !strcmp(v, "false");
    if (ok) *(bool *)(void *)field = v[0] == 't';
    break;
  case K_SYMBOLIZE:
    ok = true;
    if (!strcmp(v, "off"))
      p->c->symbolize = TG_COLL_SYMBOLIZE_OFF;
    else if (!strcmp(v, "local"))
      p->c->symbolize = TG_COLL_SYMBOLIZE_LOCAL;
    else if (!strcmp(v, "debuginfod"))
      p->c->symbolize = TG_COLL_SYMBOLIZE_DEBUGINFOD;
    else
      ok = false;
    break;
  case K_BUCKET:
    ok = parse_bucket(v, p->c);
    break;
  case K_APP_TRACKS:
    ok = true;
    if (!strcmp(v, "joined"))
      p->c->merge_app_tracks = TG_COLL_APP_TRACKS_JOINED;
    else if (!strcmp(v, "machines"))
      p->c->merge_app_tracks = TG_COLL_APP_TRACKS_MACHINES;
    else
      ok = false;
    break;
  }
  return ok ? 0 : bad_value_why(p, k->name, k->expect, v, strlen(v), why);
}

/* The next blank-separated word at or after *pp, its length in *n; *pp
 * moves past it. NULL when none is left. */
static const char *next_word(const char **pp, size_t *n) {
  const char *s = *pp;
  while (tg_conf_blank(*s)) s++;
  if (!*s) return NULL;
  const char *e = s;
  while (*e && !tg_conf_blank(*e)) e++;
  *n = (size_t)(e - s);
  *pp = e;
  return s;
}

static const tg_coll_group_t *find_group(const tg_coll_config_t *c,
                                         const char *name, size_t n) {
  for (size_t i = 0; i < c->n_groups; i++)
    if (strlen(c->groups[i].name) == n && !memcmp(c->groups[i].name, name, n))
      return &c->groups[i];
  return NULL;
}

/* "NAME" checked as a group's (its own, or the one a trigger names). */
static int check_group_name(parser_t *p, const char *key, const char *s,
                            size_t n) {
  if (!name_ok(s, n))
    return bad_value(p, key, "a group NAME of " NAME_EXPECT, s, n);
  return 0;
}

/* Room for one more of |n| |size|-byte entries in *|arr| (|*cap|). */
static bool grow(void **arr, size_t *cap, size_t n, size_t size) {
  if (n < *cap) return true;
  size_t want = *cap ? *cap * 2 : 8;
  void *grown = realloc(*arr, want * size);
  if (!grown) return false;
  *arr = grown;
  *cap = want;
  return true;
}

/* The blank-separated HOSTs of |words| (at least one), checked as |key|'s,
 * then stored in one block, the host pointers first and their strings
 * after them, into *|out| (*|n_out| hosts). |*total| counts the key's
 * hosts over all its lines, at most TG_COLL_CONFIG_GROUP_HOSTS_MAX. */
static int host_block(parser_t *p, const char *key, const char *words,
                      size_t *total, const char ***out, size_t *n_out) {
  size_t hosts = 0, bytes = 0, n = 0;
  const char *rest = words;
  for (const char *h; (h = next_word(&rest, &n)) != NULL;) {
    if (n > TG_COLL_CONFIG_HOST_MAX || !all_graphic(h, n))
      return bad_value(p, key, "hosts of 1 to 320 printable bytes", h, n);
    hosts++;
    bytes += n + 1;
  }
  if (hosts > TG_COLL_CONFIG_GROUP_HOSTS_MAX - *total)
    return fail(p, p->line, "%s: expected at most %d hosts in all its lines",
                key, TG_COLL_CONFIG_GROUP_HOSTS_MAX);
  const char **block = malloc(hosts * sizeof(*block) + bytes);
  if (!block) {
    fail(p, p->line, "%s: out of memory", key);
    return -ENOMEM;
  }
  char *text = (char *)(block + hosts);
  rest = words;
  for (size_t i = 0; i < hosts; i++) {
    const char *h = next_word(&rest, &n);
    memcpy(text, h, n);
    text[n] = 0;
    block[i] = text;
    text += n + 1;
  }
  *total += hosts;
  *out = block;
  *n_out = hosts;
  return 0;
}

/* group = NAME HOST [HOST ...]: checked whole, then stored. */
static int add_group(parser_t *p, const char *v) {
  tg_coll_config_t *c = p->c;
  const char *rest = v;
  size_t nn = 0, n = 0;
  const char *name = next_word(&rest, &nn);
  const char *words = rest;
  if (!name || !next_word(&rest, &n))
    return bad_value(p, "group", "NAME HOST [HOST ...]", v, strlen(v));
  int rv = check_group_name(p, "group", name, nn);
  if (rv < 0) return rv;
  if (nn == 3 && !memcmp(name, TG_COLL_CONFIG_GROUP_ALL, 3))
    return fail(p, p->line,
                "group: expected a name other than 'all' (every host)");
  const tg_coll_group_t *dup = find_group(c, name, nn);
  if (dup)
    return fail(p, p->line, "group: expected a new name, '%s' is defined on "
                            "line %u", dup->name, dup->line);
  if (c->n_groups == TG_COLL_CONFIG_GROUPS_MAX)
    return fail(p, p->line, "group: expected at most %d groups",
                TG_COLL_CONFIG_GROUPS_MAX);
  if (!grow((void **)&c->groups, &p->groups_cap, c->n_groups,
            sizeof(*c->groups))) {
    fail(p, p->line, "group: out of memory");
    return -ENOMEM;
  }
  tg_coll_group_t *g = &c->groups[c->n_groups];
  rv = host_block(p, "group", words, &p->n_group_hosts, &g->hosts,
                  &g->n_hosts);
  if (rv < 0) return rv;
  c->n_groups++;
  memcpy(g->name, name, nn);
  g->name[nn] = 0;
  g->line = p->line;
  return 0;
}

static const tg_coll_am_host_t *find_am_host(const tg_coll_config_t *c,
                                             const char *value, size_t n) {
  for (size_t i = 0; i < c->n_am_hosts; i++)
    if (strlen(c->am_hosts[i].value) == n &&
        !memcmp(c->am_hosts[i].value, value, n))
      return &c->am_hosts[i];
  return NULL;
}

/* alertmanager_host = VALUE HOST [HOST ...]. */
static int add_am_host(parser_t *p, const char *v) {
  static const char key[] = "alertmanager_host";
  tg_coll_config_t *c = p->c;
  const char *rest = v;
  size_t vn = 0, n = 0;
  const char *value = next_word(&rest, &vn);
  const char *words = rest;
  if (!value || !next_word(&rest, &n))
    return bad_value(p, key, "VALUE HOST [HOST ...]", v, strlen(v));
  if (vn > TG_COLL_CONFIG_HOST_MAX || !all_graphic(value, vn))
    return bad_value(p, key, "a VALUE of 1 to 320 printable bytes", value, vn);
  const tg_coll_am_host_t *dup = find_am_host(c, value, vn);
  if (dup)
    return fail(p, p->line, "%s: expected a new value, this one is mapped on "
                            "line %u", key, dup->line);
  if (c->n_am_hosts == TG_COLL_CONFIG_AM_HOSTS_MAX)
    return fail(p, p->line, "%s: expected at most %d lines", key,
                TG_COLL_CONFIG_AM_HOSTS_MAX);
  if (!grow((void **)&c->am_hosts, &p->am_hosts_cap, c->n_am_hosts,
            sizeof(*c->am_hosts))) {
    fail(p, p->line, "%s: out of memory", key);
    return -ENOMEM;
  }
  tg_coll_am_host_t *m = &c->am_hosts[c->n_am_hosts];
  int rv = host_block(p, key, words, &p->n_am_host_hosts, &m->hosts,
                      &m->n_hosts);
  if (rv < 0) return rv;
  c->n_am_hosts++;
  memcpy(m->value, value, vn);
  m->value[vn] = 0;
  m->line = p->line;
  return 0;
}

/* trigger = NAME [GROUP]: the group is looked up in finish(), since it
 * may be defined further down. */
static int add_debug_dir(parser_t *p, const char *v) {
  tg_coll_config_t *c = p->c;
  if (c->n_symbolize_debug_dirs == TG_COLL_CONFIG_DEBUG_DIRS_MAX)
    return fail(p, p->line, "symbolize_debug_dir: expected at most %d lines",
                TG_COLL_CONFIG_DEBUG_DIRS_MAX);
  char *out = c->symbolize_debug_dirs[c->n_symbolize_debug_dirs];
  if (!set_path(p, out, sizeof(c->symbolize_debug_dirs[0]), v))
    return bad_value(p, "symbolize_debug_dir", "a path", v, strlen(v));
  if (!p->debug_dir_line) p->debug_dir_line = p->line;
  c->n_symbolize_debug_dirs++;
  return 0;
}

static int add_trigger(parser_t *p, const char *v) {
  tg_coll_config_t *c = p->c;
  const char *rest = v;
  size_t nn = 0, gn = 3, n = 0;
  const char *name = next_word(&rest, &nn);
  const char *group = next_word(&rest, &gn);
  if (!name || next_word(&rest, &n))
    return bad_value(p, "trigger", "NAME [GROUP]", v, strlen(v));
  if (!trigger_name_ok(name, nn))
    return bad_value(p, "trigger",
                     "a NAME of 1 to 128 bytes of [A-Za-z0-9._:-]", name, nn);
  if (!group) {
    group = TG_COLL_CONFIG_GROUP_ALL;
  } else {
    int rv = check_group_name(p, "trigger", group, gn);
    if (rv < 0) return rv;
  }
  for (size_t i = 0; i < c->n_triggers; i++) {
    const tg_coll_trigger_t *t = &c->triggers[i];
    if (strlen(t->name) == nn && !memcmp(t->name, name, nn))
      return fail(p, p->line,
                  "trigger: expected a new name, '%s' is defined on line %u",
                  t->name, t->line);
  }
  if (c->n_triggers == TG_COLL_CONFIG_TRIGGERS_MAX)
    return fail(p, p->line, "trigger: expected at most %d triggers",
                TG_COLL_CONFIG_TRIGGERS_MAX);
  tg_coll_trigger_t *t = &c->triggers[c->n_triggers++];
  memcpy(t->name, name, nn);
  t->name[nn] = 0;
  memcpy(t->group, group, gn);
  t->group[gn] = 0;
  t->line = p->line;
  return 0;
}

static void warn_unknown(parser_t *p, const char *key) {
  if (!p->warn) return;
  char echo[TG_CONF_ECHO_MAX + 1], msg[1024];
  tg_conf_echo(echo, key, strlen(key));
  snprintf(msg, sizeof(msg), "%s:%u: unknown key '%s' (ignored)",
           p->r.label, p->line, echo);
  p->warn(p->warn_ctx, msg);
}

/* One line as the grammar gives it (comment cut, trimmed, no NUL, at
 * most LINE_MAX bytes): the key and the value copied out, NUL-terminated. */
static int parse_line(parser_t *p, tg_conf_span_t text) {
  tg_conf_span_t k, v;
  int rv = tg_conf_key_value(&p->r, text, &k, &v);
  if (rv < 0) return rv;
  char line[TG_COLL_CONFIG_LINE_MAX + 2];
  memcpy(line, k.s, k.n);
  line[k.n] = 0;
  memcpy(line + k.n + 1, v.s, v.n);
  line[k.n + 1 + v.n] = 0;
  const char *key = line, *value = line + k.n + 1;
  for (size_t i = 0; i < KEY_COUNT; i++)
    if (!strcmp(key, KEYS[i].name)) return set_scalar(p, (key_id_t)i, value);
  if (!strcmp(key, "group")) return add_group(p, value);
  if (!strcmp(key, "trigger")) return add_trigger(p, value);
  if (!strcmp(key, "alertmanager_host")) return add_am_host(p, value);
  if (!strcmp(key, "symbolize_debug_dir")) return add_debug_dir(p, value);
  warn_unknown(p, key);
  return 0;
}

/* Whether the three keys at |ids| are all set (true) or none (false); one
 * or two is an error, at the first line that set one of them. */
static int triple(parser_t *p, const key_id_t ids[3], bool *all) {
  int first = -1, set = 0;
  char missing[64] = "";
  for (int i = 0; i < 3; i++) {
    unsigned l = p->seen[ids[i]];
    if (l && (first < 0 || l < p->seen[ids[first]])) first = i;
    set += l != 0;
    if (!l)
      snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing),
               "%s'%s'", missing[0] ? " and " : "", KEYS[ids[i]].name);
  }
  *all = set == 3;
  if (set == 0 || set == 3) return 0;
  return fail(p, p->seen[ids[first]],
              "%s: expected %s, %s and %s together (missing %s)",
              KEYS[ids[first]].name, KEYS[ids[0]].name, KEYS[ids[1]].name,
              KEYS[ids[2]].name, missing);
}

/* The checks that need the whole file, in the order config.h gives. */
/* perf_boost_*_percent of perf_boost_budget_window must hold a whole
 * boost (a fleet of one host the least): else no boost could ever start,
 * which perf_boost_window 0 says plainly. */
static int boost_budget_check(parser_t *p) {
  const tg_coll_config_t *c = p->c;
  static const key_id_t pct[2] = {KEY_PERF_BOOST_HOST_PERCENT,
                                  KEY_PERF_BOOST_FLEET_PERCENT};
  uint32_t v[2] = {c->perf_boost_host_percent, c->perf_boost_fleet_percent};
  for (size_t i = 0; c->perf_boost_window_ms && i < 2; i++) {
    if (c->perf_boost_budget_window_ms * v[i] / 100 >= c->perf_boost_window_ms)
      continue;
    unsigned line = p->seen[pct[i]] ? p->seen[pct[i]]
                                    : p->seen[KEY_PERF_BOOST_BUDGET_WINDOW];
    return fail(p, line ? line : p->seen[KEY_PERF_BOOST_WINDOW],
                "%s: expected %u%% of perf_boost_budget_window to hold one "
                "perf_boost_window at least", KEYS[pct[i]].name, v[i]);
  }
  return 0;
}

static int finish(parser_t *p) {
  tg_coll_config_t *c = p->c;
  for (size_t i = 0; i < KEY_COUNT; i++)
    if (KEYS[i].required && !p->seen[i])
      return fail(p, 0, "missing '%s' (%s)", KEYS[i].name, KEYS[i].required);
  int rv = triple(p, TLS_KEYS, &c->tls);
  if (rv == 0) rv = triple(p, HTTPS_KEYS, &c->https);
  if (rv < 0) return rv;
  if (!c->listen_loopback && !c->https)
    return fail(p, p->seen[KEY_LISTEN],
                "listen: expected a loopback address (127.0.0.0/8, ::1, "
                "localhost) unless http_cert, http_key and http_ca are set");
  if (p->seen[KEY_AUTHZ] && !c->https)
    return fail(p, p->seen[KEY_AUTHZ],
                "authz: expected http_cert, http_key and http_ca too "
                "(authz is enforced over HTTPS)");
  if (c->health_host[0] && c->health_port && c->health_port == c->listen_port &&
      !strcasecmp(c->health_host, c->listen_host))
    return fail(p, p->seen[KEY_HEALTH_LISTEN],
                "health_listen: expected another address than listen's");
  if (p->seen[KEY_HTTP_CRL] && !c->https)
    return fail(p, p->seen[KEY_HTTP_CRL],
                "http_crl: expected http_cert, http_key and http_ca too "
                "(it revokes HTTPS client certificates)");
  if (c->perf_boost_buffer % 1024)
    return fail(p, p->seen[KEY_PERF_BOOST_BUFFER],
                "perf_boost_buffer: expected %s (a buffer is sized in KiB)",
                KEYS[KEY_PERF_BOOST_BUFFER].expect);
  static const key_id_t boost_keys[] = {
      KEY_PERF_BOOST_FREQUENCY, KEY_PERF_BOOST_BUFFER,
      KEY_PERF_BOOST_BUDGET_WINDOW, KEY_PERF_BOOST_HOST_PERCENT,
      KEY_PERF_BOOST_FLEET_PERCENT};
  for (size_t i = 0; i < sizeof boost_keys / sizeof boost_keys[0]; i++)
    if (p->seen[boost_keys[i]] && !p->seen[KEY_PERF_BOOST_WINDOW])
      return fail(p, p->seen[boost_keys[i]],
                  "%s: expected perf_boost_window too (without it there is "
                  "no boost to tune)", KEYS[boost_keys[i]].name);
  int bad = boost_budget_check(p);
  if (bad < 0) return bad;
  static const key_id_t s3_keys[] = {KEY_S3_ENDPOINT, KEY_S3_REGION,
                                     KEY_S3_CREDENTIALS_FILE, KEY_S3_PRESIGN,
                                     KEY_S3_ALLOW_PLAIN_HTTP};
  for (size_t i = 0; i < sizeof s3_keys / sizeof s3_keys[0]; i++)
    if (p->seen[s3_keys[i]] && !p->seen[KEY_BUCKET])
      return fail(p, p->seen[s3_keys[i]], "%s: expected bucket too",
                  KEYS[s3_keys[i]].name);
  if (p->seen[KEY_S3_ENDPOINT] && strchr(strstr(c->s3_endpoint, "//") + 2, '/'))
    return fail(p, p->seen[KEY_S3_ENDPOINT],
                "s3_endpoint: expected %s", KEYS[KEY_S3_ENDPOINT].expect);
  /* Over plain HTTP anyone on the path reads the snapshots, the presigned
   * URLs handed out, and feeds the collector (and a rebuild) objects of
   * their own: loopback only, unless the file says it knows. */
  if (p->seen[KEY_S3_ENDPOINT] && !strncmp(c->s3_endpoint, "http://", 7) &&
      !c->s3_allow_plain_http && !plain_http_to_loopback(c->s3_endpoint))
    return fail(p, p->seen[KEY_S3_ENDPOINT],
                "s3_endpoint: expected https:// or a loopback host "
                "(127.0.0.0/8, ::1, localhost) for http://, unless "
                "s3_allow_plain_http = true (plain HTTP exposes the "
                "snapshots and presigned URLs on the network)");
  if (c->symbolize == TG_COLL_SYMBOLIZE_OFF) {
    unsigned l = p->debug_dir_line ? p->debug_dir_line
                                   : p->seen[KEY_SYMBOLIZE_TIMEOUT];
    if (l)
      return fail(p, l, "%s: expected symbolize = local or debuginfod too",
                  p->debug_dir_line ? "symbolize_debug_dir"
                                    : "symbolize_timeout");
  }
  /* debuginfod's caps bound nothing without it: a line for them alone is
   * a mistake worth saying. */
  static const key_id_t dbgf_keys[] = {KEY_SYMBOLIZE_DEBUGINFOD_LOOKUPS,
                                       KEY_SYMBOLIZE_DEBUGINFOD_BYTES,
                                       KEY_SYMBOLIZE_DEBUGINFOD_TIME};
  for (size_t i = 0; i < sizeof dbgf_keys / sizeof dbgf_keys[0]; i++)
    if (p->seen[dbgf_keys[i]] &&
        c->symbolize != TG_COLL_SYMBOLIZE_DEBUGINFOD)
      return fail(p, p->seen[dbgf_keys[i]],
                  "%s: expected symbolize = debuginfod too",
                  KEYS[dbgf_keys[i]].name);
  for (size_t i = 0; i < c->n_triggers; i++) {
    const tg_coll_trigger_t *t = &c->triggers[i];
    if (strcmp(t->group, TG_COLL_CONFIG_GROUP_ALL) != 0 &&
        !find_group(c, t->group, strlen(t->group)))
      return fail(p, t->line,
                  "trigger: expected 'all' or a group the file defines, not "
                  "'%s'",
                  t->group);
  }
  return 0;
}

void tg_coll_config_defaults(tg_coll_config_t *c) {
  memset(c, 0, sizeof(*c));
  snprintf(c->catalog, sizeof(c->catalog), "sqlite");
  c->shard_count = 1;
  snprintf(c->listen_host, sizeof(c->listen_host), DEFAULT_LISTEN_HOST);
  c->listen_port = DEFAULT_LISTEN_PORT;
  c->listen_loopback = true;
  snprintf(c->session_key, sizeof(c->session_key), "collector");
  snprintf(c->s3_region, sizeof(c->s3_region), "us-east-1");
  c->coalesce_window_ms = 10 * MS_PER_S;
  c->max_snapshots_per_minute = 6;
  c->host_snapshots_per_minute = 2;
  c->operator_snapshots_per_minute = 6;
  c->schedule_snapshots_per_minute = 6;
  c->clone_timeout_ms = 8 * MS_PER_S;
  c->clone_min_rate = 8u << 10;
  c->ring_clear_period_ms = MS_PER_S;
  c->compress_level = 1;
  c->reconnect_ms = 60 * MS_PER_S;
  c->dead_link_ms = 15 * MS_PER_S;
  snprintf(c->ui_url, sizeof(c->ui_url), DEFAULT_UI_URL);
  snprintf(c->am_host_label, sizeof(c->am_host_label), "instance");
  snprintf(c->am_group_label, sizeof(c->am_group_label), "tracegate_group");
  c->am_repeat_window_ms = 3600LL * MS_PER_S;
  c->am_snapshots_per_minute = 6;
  c->am_max_bytes = 256u << 10;
  c->check_timeout_ms = 600LL * MS_PER_S;
  c->check_memory = 4ull << 30;
  c->symbolize_timeout_ms = 600LL * MS_PER_S;
  c->symbolize_debuginfod_lookups = 256;
  c->symbolize_debuginfod_bytes = 1ull << 30;
  c->symbolize_debuginfod_time_ms = 120LL * MS_PER_S;
  c->function_shares_top = 50;
  c->perf_boost_frequency = 499;
  c->perf_boost_buffer = 8u << 20;
  c->perf_boost_budget_window_ms = 3600LL * MS_PER_S;
  c->perf_boost_host_percent = 10;
  c->perf_boost_fleet_percent = 5;
  c->merge_clock_from_requests = true;
}

int tg_coll_config_parse(const char *text_untrusted, size_t len,
                         const char *file_label, const char *base_dir,
                         tg_coll_config_t *out, tg_coll_config_warn_fn warn,
                         void *warn_ctx, char *err, size_t errn) {
  tg_coll_config_defaults(out);
  if (errn) err[0] = 0;
  parser_t p = {.c = out,
                .base_dir = base_dir,
                .warn = warn,
                .warn_ctx = warn_ctx};
  int rv = tg_conf_begin(&p.r, text_untrusted, len,
                         file_label ? file_label : "config", &kLimits, err,
                         errn);
  if (rv < 0) return rv;
  tg_conf_span_t line;
  while ((rv = tg_conf_next(&p.r, &line)) == 1) {
    p.line = p.r.line;
    rv = parse_line(&p, line);
    if (rv < 0) break;
  }
  if (rv == 0) rv = finish(&p);
  if (rv < 0) tg_coll_config_free(out);
  return rv;
}

int tg_coll_config_load(const char *path, tg_coll_config_t *out,
                        tg_coll_config_warn_fn warn, void *warn_ctx, char *err,
                        size_t errn) {
  tg_coll_config_defaults(out); /* a failure owns nothing */
  if (errn) err[0] = 0;
  char *text = NULL;
  size_t n = 0;
  int rv = tg_read_regular_file(path, TG_COLL_CONFIG_FILE_MAX, &text, &n);
  if (rv < 0) {
    char why[96];
    if (errn)
      snprintf(err, errn, "%s: %s", path,
               tg_read_file_why(why, sizeof(why), rv, TG_COLL_CONFIG_FILE_MAX));
    return rv;
  }
  const char *slash = strrchr(path, '/');
  char *dir = NULL;
  if (rv == 0) {
    dir = !slash           ? strdup(".")
          : slash == path ? strdup("/")
                          : strndup(path, (size_t)(slash - path));
    if (!dir) rv = -ENOMEM;
  }
  if (rv == 0)
    rv = tg_coll_config_parse(text, n, path, dir, out, warn, warn_ctx, err,
                              errn);
  else if (errn)
    snprintf(err, errn, "%s: %s", path, strerror(-rv));
  free(dir);
  free(text);
  return rv;
}

void tg_coll_config_free(tg_coll_config_t *c) {
  if (!c) return;
  for (size_t i = 0; i < c->n_groups; i++) free((void *)c->groups[i].hosts);
  free(c->groups);
  c->groups = NULL;
  c->n_groups = 0;
  for (size_t i = 0; i < c->n_am_hosts; i++)
    free((void *)c->am_hosts[i].hosts);
  free(c->am_hosts);
  c->am_hosts = NULL;
  c->n_am_hosts = 0;
}

const tg_coll_group_t *tg_coll_config_group(const tg_coll_config_t *c,
                                            const char *name) {
  return find_group(c, name, strlen(name));
}

bool tg_coll_config_group_has(const tg_coll_config_t *c, const char *group,
                              const char *host) {
  if (!strcmp(group, TG_COLL_CONFIG_GROUP_ALL)) return true;
  const tg_coll_group_t *g = tg_coll_config_group(c, group);
  for (size_t i = 0; g && i < g->n_hosts; i++)
    if (!strcmp(g->hosts[i], host)) return true;
  return false;
}

const tg_coll_am_host_t *tg_coll_config_am_host(const tg_coll_config_t *c,
                                                const char *value) {
  return find_am_host(c, value, strlen(value));
}
