/* The configuration file of tracegate-collector: its one definition table
 * (config.c) and the parser that fills a tg_coll_config_t from it. Pure:
 * no file system access but tg_coll_config_load() reading the one file, no
 * network, no logging (warnings go through a callback).
 *
 * The format, UTF-8 or ASCII text:
 *
 *     # tracegate-collector.conf
 *     hosts        = fleet.hosts            # relative: the file's directory
 *     trace_config = /etc/tracegate/flight.pbtxt
 *     store        = /var/lib/tracegate/snapshots
 *     catalog      = postgresql://collector:s3cr#t@db/tracegate
 *     shard        = 0/2
 *     group        = db db1.example:7467 db2.example:7467
 *     trigger      = oom db
 *
 * - The lines follow common/config_text.h, the grammar every tracegate
 *   config file shares. One `key = value` a line. Blank lines are skipped;
 *   a line whose first non-blank character is '#' is a comment; a '#'
 *   after a blank (space, tab or CR) starts a trailing comment, any other
 *   '#' is part of the value (a password in a PostgreSQL URI). Keys and
 *   values are trimmed of blanks; no quoting, no escapes.
 * - A line is at most TG_COLL_CONFIG_LINE_MAX bytes without its "\n" or
 *   "\r\n"; a file at most TG_COLL_CONFIG_FILE_MAX bytes (-EFBIG) and
 *   TG_COLL_CONFIG_LINES_MAX lines; a NUL byte is refused. A leading UTF-8
 *   byte order mark is skipped.
 * - Scalar keys, each at most once:
 *     hosts            PATH, required: the inventory (`record --hosts`)
 *     ca, cert, key    PATH: the collector's client identity toward the
 *                      relays; all three or none
 *     tls_server_name  DNS name
 *     trace_config     PATH, required: the flight recorder's TraceConfig
 *     store            PATH, required: the snapshot directory
 *     catalog          "sqlite" (default) or a URI starting postgresql://
 *                      or postgres://, kept verbatim and never echoed
 *     shard            I/N, 0 <= I < N <= 65536, default 0/1
 *     retention_max_bytes  SIZE, default 0 (no limit)
 *     retention_max_age    DURATION, default 0 (none)
 *     snapshot_host_max_bytes  SIZE, default 0 (derived from the flight
 *                      config's buffers: daemon/snap.c, HOST_CAP_FACTOR):
 *                      what one host may put into one snapshot
 *     ring_clear_period  DURATION, 0 (off) or 100ms..1h, default 1s: a
 *                      flight config without incremental_state_config
 *                      gets one with this clear_period_ms (daemon/coll.c)
 *     listen           HOST:PORT or [IPV6]:PORT, port 0 (pick) to 65535,
 *                      default 127.0.0.1:7468
 *     http_cert, http_key, http_ca  PATH: HTTPS with client certificates;
 *                      all three or none, and all three when listen's host
 *                      is not loopback (127.0.0.0/8, ::1, localhost)
 *     http_max_conns   1..65535, default 0 (the HTTP layer's: 64):
 *                      connections open at once
 *     http_max_conns_per_source  1..65535, default 0 (the HTTP layer's:
 *                      a quarter of its connections): connections one
 *                      client address may hold open at once
 *     http_timeout     DURATION, 1s..1d, default 0 (the HTTP layer's:
 *                      30s): a connection idle or that slow is closed
 *     http_min_rate    SIZE per second, default 0 (the HTTP layer's:
 *                      4K): a response slower than that on average, after
 *                      its first http_timeout, is closed
 *     http_crl         PATH: the revocation list of http_ca's client
 *                      certificates (PEM); only with http_*
 *     authz            PATH: who may do what over HTTPS (the relay's authz
 *                      format); only with http_*. authz and http_crl are
 *                      read again on SIGHUP
 *     health_listen    HOST:PORT or [IPV6]:PORT as listen, default none: a
 *                      second listener, plain HTTP on any address, that
 *                      answers GET /healthz and nothing else (probes that
 *                      have no client certificate); not listen's address
 *     session_key      NAME, default "collector": the resume key of the
 *                      collector's ring sessions
 *     snapshot_every   DURATION, 0 (off, the default) or at least 1s (the
 *                      schedule's budget bounds the rate all the same)
 *     coalesce_window  DURATION, default 10s
 *     max_snapshots_per_minute  1..600, default 6: snapshots all hosts'
 *                      triggers together begin in a minute
 *     host_snapshots_per_minute  1..600, default 2: one host's triggers
 *     operator_snapshots_per_minute  1..600, default 6: operators'
 *     schedule_snapshots_per_minute  1..600, default 6: snapshot_every's
 *     clone_timeout    DURATION, 100ms..120s, default 8s: a host silent
 *                      this long during a snapshot fails for it
 *     clone_min_rate   SIZE per second, 0 (off) to 1G, default 8K: a
 *                      host reading its clone slower than that on average
 *                      over clone_timeout fails for the snapshot
 *     perf_boost_window  DURATION, 0 (off, the default) or 1s..60s: on
 *                      a trigger, each host of the snapshot samples
 *                      linux.perf faster for this long, merged into it
 *     perf_boost_frequency  20..4000, default 499: that rate, in Hz
 *     perf_boost_buffer  SIZE in whole KiB, 64K..1G, default 8M: the
 *                      boost session's buffer on each host
 *     perf_boost_budget_window  DURATION, 1m..1d, default 1h: the sliding
 *                      window the boosts' budgets count in
 *     perf_boost_host_percent  1..100, default 10: the share of that
 *                      window a host may spend boosted
 *     perf_boost_fleet_percent  1..100, default 5: the share of the
 *                      shard's hosts' time in it they may spend boosted
 *                      together (each share must hold one window at least)
 *     compress_level   0..19, default 1 (0: relays do not compress)
 *     reconnect        DURATION, default 60s
 *     dead_link        DURATION, at least 1s, default 15s
 *     ui_url           http:// or https:// URL, at most 512 bytes, no
 *                      blanks, quotes or <>; default https://ui.perfetto.dev
 *     merge_allow_fields  NAME[,NAME], at most 512 bytes, default none:
 *                      TracePacket fields (interned_data.NAME: of
 *                      InternedData) snapshots keep beyond the merge's
 *                      allowlist; trusts every host's producers with the
 *                      whole snapshot (docs/merge.md)
 *     merge_app_tracks joined (the default) or machines: where the hosts'
 *                      app track events go in a snapshot: on the
 *                      collector's machine as HOST/process, where flows
 *                      join across hosts, or each on its host's machine
 *                      (docs/merge.md, "Links across hosts")
 *     merge_clock_from_requests  true (the default) or false: a joined
 *                      snapshot with requests across hosts is written
 *                      again with its hosts placed by those requests
 *                      (docs/collector.md, "Clocks from requests"); a
 *                      bucket's store is not (its bytes are uploaded as
 *                      they come)
 *     alertmanager_host_label   NAME, default "instance": the alert label
 *                      naming the host(s) an Alertmanager alert snapshots
 *     alertmanager_group_label  NAME, default "tracegate_group": the alert
 *                      label naming a group to snapshot instead
 *     alertmanager_repeat_window  DURATION, 0 (off) to 30d, default 1h: an
 *                      alert sent again for its group within it does not
 *                      snapshot again
 *     alertmanager_snapshots_per_minute  1..600, default 6: the webhook's
 *     alertmanager_max_bytes  SIZE, 1K..16M, default 256K: a webhook
 *                      payload above it is refused (413)
 *     bucket           s3://BUCKET or s3://BUCKET/PREFIX: snapshots go to
 *                      this S3 bucket under PREFIX/snapshots/ instead of
 *                      into store's snapshots/ (store keeps the lock, the
 *                      SQLite catalog if that is the catalog, and tmp/)
 *     s3_endpoint      http:// or https:// URL without a path, default
 *                      https://s3.REGION.amazonaws.com; http:// only to a
 *                      loopback host (as listen's) unless
 *                      s3_allow_plain_http; only with bucket
 *     s3_allow_plain_http  true or false (the default): s3_endpoint may be
 *                      http:// to any host; only with bucket
 *     s3_region        NAME, default us-east-1; only with bucket
 *     s3_presign       off (the default; also 0), on (15m) or a DURATION
 *                      60s..7d: a whole snapshot's /trace redirects to a
 *                      presigned URL of the object valid that long (no
 *                      revocation reaches an issued URL); only with bucket
 *     s3_credentials_file  PATH: AWS_ACCESS_KEY_ID=... and
 *                      AWS_SECRET_ACCESS_KEY=... lines, readable by its
 *                      owner alone; default: those environment variables;
 *                      only with bucket
 *     check_trace_processor  PATH, default none (off): Perfetto's
 *                      trace_processor_shell, run on each stored snapshot
 *                      and, when it fails, on each host's part
 *     check_timeout    DURATION, 1s..1h, default 10m: one import's deadline
 *     check_memory     SIZE, 64M..1T, default 4G: one import's address
 *                      space (RLIMIT_AS)
 *     symbolize        off (the default), local or debuginfod: each
 *                      stored snapshot's frames named from debug files
 *                      found by build id (`tracegate symbolize`'s lookup;
 *                      debuginfod: then DEBUGINFOD_URLS' servers, which the
 *                      daemon's environment must name)
 *     symbolize_timeout  DURATION, 1s..1h, default 10m: one snapshot's
 *                      symbolization; only with symbolize
 *     function_shares_top  0..1000, default 50: each stored snapshot's
 *                      hosts' top functions by CPU time kept in the
 *                      catalog (daemon/shares.h); 0: none
 * - Repeatable keys:
 *     group   = NAME HOST [HOST ...]   at most TG_COLL_CONFIG_GROUPS_MAX
 *               groups and TG_COLL_CONFIG_GROUP_HOSTS_MAX hosts over all
 *               of them; a HOST is 1..320 bytes of printable non-blank
 *               ASCII, spelt as the inventory spells it; each NAME once;
 *               "all" (every host) is implicit and may not be defined
 *     trigger = NAME [GROUP]   NAME 1..128 bytes of [A-Za-z0-9._:-], each
 *               once, at most TG_COLL_CONFIG_TRIGGERS_MAX; GROUP is "all"
 *               (the default) or a group defined anywhere in the file
 *     alertmanager_host = VALUE HOST [HOST ...]   the inventory hosts an
 *               alert whose host label is VALUE (1..320 printable non-
 *               blank bytes, each VALUE once) snapshots; HOSTs as group's;
 *               at most TG_COLL_CONFIG_AM_HOSTS_MAX lines
 *     symbolize_debug_dir = PATH   a DIR/.build-id/ tree tried before
 *               /usr/lib/debug, in the file's order (`tracegate symbolize
 *               --debug-dir`); at most TG_COLL_CONFIG_DEBUG_DIRS_MAX;
 *               only with symbolize
 * - PATH: no control bytes, at most TG_COLL_CONFIG_PATH_MAX bytes once a
 *   relative one is resolved against the file's directory.
 *   NAME: 1..64 bytes of [A-Za-z0-9._-], not starting with '.'.
 *   SIZE and DURATION: the grammar of common/units.h, as every flag
 *   ("64M", "64KiB", "1.5G", "4096" bytes; "500ms", "1.5s", "1m30s",
 *   "1d"); a number alone is bytes in a SIZE, and only 0 in a DURATION.
 *   Numbers are decimal without sign, blanks or leading zeros; a value
 *   that overflows is refused.
 * - An unknown key is not an error (a newer file on an older collector):
 *   the warning callback gets "FILE:LINE: unknown key 'KEY' (ignored)".
 *
 * Errors: the first one stops the parse, and the text says where:
 * "FILE:LINE: KEY: expected WHAT, not 'VALUE'", or "FILE: missing 'store'
 * (the snapshot directory)" for what the whole file lacks. Echoed text is
 * cut to 64 bytes and its non-printable bytes shown as '?'; the catalog is
 * never echoed (it may hold a password). Checks that need the whole file
 * (required keys, the key triples, listen against http_*, authz against
 * http_*, triggers' groups) run after the last line, in that order.
 */
#ifndef TRACEGATE_COLLECTOR_CONFIG_CONFIG_H
#define TRACEGATE_COLLECTOR_CONFIG_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_COLL_CONFIG_FILE_MAX (1u << 20)
#define TG_COLL_CONFIG_LINE_MAX 4096
#define TG_COLL_CONFIG_LINES_MAX 65536
#define TG_COLL_CONFIG_PATH_MAX 1024
#define TG_COLL_CONFIG_CATALOG_MAX 1024
#define TG_COLL_CONFIG_NAME_MAX 64 /* session_key, group names */
#define TG_COLL_CONFIG_DNS_MAX 253
#define TG_COLL_CONFIG_LISTEN_HOST_MAX 255
#define TG_COLL_CONFIG_URL_MAX 512
#define TG_COLL_CONFIG_BUCKET_MAX 63  /* S3: a bucket name's most */
#define TG_COLL_CONFIG_PREFIX_MAX 512 /* bucket's prefix, its '/' included */
#define TG_COLL_CONFIG_HOST_MAX 320 /* one host of a group */
#define TG_COLL_CONFIG_GROUPS_MAX 256
#define TG_COLL_CONFIG_GROUP_HOSTS_MAX 4096 /* over all groups */
#define TG_COLL_CONFIG_TRIGGER_MAX 128      /* a trigger's name */
#define TG_COLL_CONFIG_TRIGGERS_MAX 64
#define TG_COLL_CONFIG_AM_HOSTS_MAX 1024 /* alertmanager_host lines */
#define TG_COLL_CONFIG_DEBUG_DIRS_MAX 8 /* symbolize_debug_dir lines */

/* merge_app_tracks' values: where the hosts' app track events go in a
 * snapshot (consumer/fleet/merge.h, tg_merge_app_tracks_t; docs/merge.md,
 * "Links across hosts"). Joined is the default. */
typedef enum tg_coll_app_tracks {
  TG_COLL_APP_TRACKS_JOINED = 0,
  TG_COLL_APP_TRACKS_MACHINES,
} tg_coll_app_tracks_t;

/* symbolize's values. */
typedef enum tg_coll_symbolize {
  TG_COLL_SYMBOLIZE_OFF = 0,
  TG_COLL_SYMBOLIZE_LOCAL,      /* debug dirs, /usr/lib/debug, the module */
  TG_COLL_SYMBOLIZE_DEBUGINFOD, /* and then debuginfod */
} tg_coll_symbolize_t;

/* perf_boost_*: the window's most (a boost holds its snapshot that long),
 * the frequency's range and the buffer's (daemon/boost.c). */
#define TG_COLL_BOOST_WINDOW_MAX_MS 60000
#define TG_COLL_BOOST_FREQUENCY_MIN 20
#define TG_COLL_BOOST_FREQUENCY_MAX 4000
#define TG_COLL_BOOST_BUFFER_MIN (64u << 10)
#define TG_COLL_BOOST_BUFFER_MAX (1u << 30)
/* perf_boost_budget_window's range (daemon/boost_budget.h): at least a
 * minute, so that a 10% share holds a boost of several seconds; at most a
 * day, past which a burst could use a day's share in one go. */
#define TG_COLL_BOOST_BUDGET_WINDOW_MIN_MS (60LL * 1000)
#define TG_COLL_BOOST_BUDGET_WINDOW_MAX_MS (86400LL * 1000)

/* s3_presign's range and what "on" means: an issued URL outlives any
 * revocation of its holder's role, so "on" keeps that window short. The
 * least is a minute so that a clock a few seconds off between collector
 * and bucket does not make a URL that expires as it is handed out. */
#define TG_COLL_PRESIGN_DEFAULT_MS (15LL * 60 * 1000)
#define TG_COLL_PRESIGN_MIN_MS (60LL * 1000)
#define TG_COLL_PRESIGN_MAX_MS (7LL * 24 * 3600 * 1000) /* S3's most */

/* The implicit group of every host in the inventory. */
#define TG_COLL_CONFIG_GROUP_ALL "all"

typedef struct tg_coll_group {
  char name[TG_COLL_CONFIG_NAME_MAX + 1];
  unsigned line; /* where it is defined */
  size_t n_hosts; /* >= 1 */
  /* |n_hosts| NUL-terminated hosts, in the file's order; one block that
   * also holds the strings, owned by the config. */
  const char **hosts;
} tg_coll_group_t;

/* alertmanager_host = VALUE HOST...: a host label's value mapped to
 * inventory hosts. */
typedef struct tg_coll_am_host {
  char value[TG_COLL_CONFIG_HOST_MAX + 1];
  unsigned line;
  size_t n_hosts; /* >= 1 */
  const char **hosts; /* as tg_coll_group_t's: one block, the config's */
} tg_coll_am_host_t;

typedef struct tg_coll_trigger {
  char name[TG_COLL_CONFIG_TRIGGER_MAX + 1];
  /* "all" or the name of one of the config's groups. */
  char group[TG_COLL_CONFIG_NAME_MAX + 1];
  unsigned line;
} tg_coll_trigger_t;

/* Every string is NUL-terminated within its array; "" where a key is not
 * set and has no default. Paths are as resolved. Durations are in
 * milliseconds. */
typedef struct tg_coll_config {
  char hosts[TG_COLL_CONFIG_PATH_MAX + 1];
  char ca[TG_COLL_CONFIG_PATH_MAX + 1];
  char cert[TG_COLL_CONFIG_PATH_MAX + 1];
  char key[TG_COLL_CONFIG_PATH_MAX + 1];
  bool tls; /* ca, cert and key are set */
  char tls_server_name[TG_COLL_CONFIG_DNS_MAX + 1];
  char trace_config[TG_COLL_CONFIG_PATH_MAX + 1];
  char store[TG_COLL_CONFIG_PATH_MAX + 1];
  /* A secret: never log or print it (it may hold a password). */
  char catalog[TG_COLL_CONFIG_CATALOG_MAX + 1];
  uint32_t shard_index; /* < shard_count */
  uint32_t shard_count; /* 1..65536 */
  uint64_t retention_max_bytes; /* 0: no limit */
  int64_t retention_max_age_ms; /* 0: none */
  uint64_t snapshot_host_max_bytes; /* 0: from the ring's buffers */
  /* incremental_state_config.clear_period_ms given to a flight config
   * without one; 0: none given (100..3600000 otherwise). */
  int64_t ring_clear_period_ms;
  char listen_host[TG_COLL_CONFIG_LISTEN_HOST_MAX + 1]; /* no brackets */
  uint16_t listen_port; /* 0: any free port */
  bool listen_ipv6;     /* listen_host is an IPv6 literal */
  bool listen_loopback;
  char http_cert[TG_COLL_CONFIG_PATH_MAX + 1];
  char http_key[TG_COLL_CONFIG_PATH_MAX + 1];
  char http_ca[TG_COLL_CONFIG_PATH_MAX + 1];
  bool https; /* http_cert, http_key and http_ca are set */
  /* health_listen: set when health_host[0] is not 0. */
  char health_host[TG_COLL_CONFIG_LISTEN_HOST_MAX + 1]; /* no brackets */
  uint16_t health_port; /* 0: any free port */
  /* 0 (not set): the HTTP layer's default; else 1..65535, passed on as
   * tg_http_server_config_t.max_conns_per_source. */
  uint32_t http_max_conns_per_source;
  /* 0 (not set): the HTTP layer's defaults; else 1..65535, and 1s..1d. */
  uint32_t http_max_conns;
  int64_t http_timeout_ms;
  uint64_t http_min_rate; /* bytes per second; 0: the HTTP layer's */
  char http_crl[TG_COLL_CONFIG_PATH_MAX + 1]; /* only with https; "": none */
  char authz[TG_COLL_CONFIG_PATH_MAX + 1]; /* only with https */
  char session_key[TG_COLL_CONFIG_NAME_MAX + 1];
  int64_t snapshot_every_ms; /* 0 (off) or >= 1000 */
  int64_t coalesce_window_ms;
  uint32_t max_snapshots_per_minute; /* 1..600, all hosts' triggers */
  uint32_t host_snapshots_per_minute;     /* 1..600, each host's */
  uint32_t operator_snapshots_per_minute; /* 1..600 */
  uint32_t schedule_snapshots_per_minute; /* 1..600 */
  int64_t clone_timeout_ms;               /* 100..120000 */
  uint64_t clone_min_rate; /* bytes per second, 0 (off)..1G */
  /* On a trigger, each host of the snapshot samples linux.perf at
   * |perf_boost_frequency| for this long in a session of its own
   * (daemon/boost.c); 0: off. 1000..TG_COLL_BOOST_WINDOW_MAX_MS else. */
  int64_t perf_boost_window_ms;
  uint32_t perf_boost_frequency; /* Hz, 20..4000 */
  uint64_t perf_boost_buffer;    /* bytes, whole KiB, 64K..1G */
  /* The boosts' duty-cycle budget (daemon/boost_budget.h): within this
   * sliding window, a host is boosted at most |perf_boost_host_percent|
   * of it, the shard's hosts together |perf_boost_fleet_percent| of their
   * time. */
  int64_t perf_boost_budget_window_ms; /* 1m..1d */
  uint32_t perf_boost_host_percent;    /* 1..100 */
  uint32_t perf_boost_fleet_percent;   /* 1..100 */
  uint32_t compress_level;           /* 0..19 */
  int64_t reconnect_ms;
  int64_t dead_link_ms; /* >= 1000 */
  char ui_url[TG_COLL_CONFIG_URL_MAX + 1];
  /* Fields the merge keeps beyond its allowlist ("": none). */
  char merge_allow_fields[TG_COLL_CONFIG_URL_MAX + 1];
  uint32_t merge_app_tracks; /* tg_coll_app_tracks_t */
  /* Joined snapshots re-clocked by their hosts' requests (true, the
   * default): merge_clock_from_requests. */
  bool merge_clock_from_requests;
  size_t n_groups;
  tg_coll_group_t *groups; /* |n_groups|, owned; NULL when none */
  size_t n_triggers;
  tg_coll_trigger_t triggers[TG_COLL_CONFIG_TRIGGERS_MAX];
  /* The Alertmanager webhook (daemon/alertmanager.h). */
  char am_host_label[TG_COLL_CONFIG_NAME_MAX + 1];
  char am_group_label[TG_COLL_CONFIG_NAME_MAX + 1];
  int64_t am_repeat_window_ms;       /* 0: every notification snapshots */
  uint32_t am_snapshots_per_minute;  /* 1..600 */
  uint64_t am_max_bytes;             /* 1K..16M */
  size_t n_am_hosts;
  tg_coll_am_host_t *am_hosts; /* |n_am_hosts|, owned; NULL when none */
  /* bucket: snapshots in S3 (collector/store/store_s3.h); "" when not set. */
  char s3_bucket[TG_COLL_CONFIG_BUCKET_MAX + 1];
  char s3_prefix[TG_COLL_CONFIG_PREFIX_MAX + 1]; /* "" or ending in '/' */
  char s3_endpoint[TG_COLL_CONFIG_URL_MAX + 1];  /* "": AWS's, by region */
  char s3_region[TG_COLL_CONFIG_NAME_MAX + 1];   /* default us-east-1 */
  char s3_credentials_file[TG_COLL_CONFIG_PATH_MAX + 1]; /* "": env */
  /* > 0: /trace of a whole snapshot redirects (302) to a presigned URL
   * valid this long (TG_COLL_PRESIGN_MIN_MS..MAX_MS); 0: the collector
   * serves the bytes. */
  int64_t s3_presign_ms;
  /* s3_endpoint may be http:// to a host beyond loopback. */
  bool s3_allow_plain_http;
  /* The import check of each stored snapshot (daemon/import_check.h):
   * off while the path is "". */
  char check_trace_processor[TG_COLL_CONFIG_PATH_MAX + 1];
  int64_t check_timeout_ms; /* 1s..1h */
  uint64_t check_memory;    /* RLIMIT_AS of one import: 64M..1T */
  /* Symbols of each stored snapshot (daemon/symbols.h). */
  uint32_t symbolize; /* tg_coll_symbolize_t */
  char symbolize_debug_dirs[TG_COLL_CONFIG_DEBUG_DIRS_MAX]
                           [TG_COLL_CONFIG_PATH_MAX + 1];
  size_t n_symbolize_debug_dirs;
  int64_t symbolize_timeout_ms; /* 1s..1h */
  /* debuginfod per snapshot (symbolize = debuginfod): lookups, bytes
   * downloaded, time spent in lookups. */
  uint32_t symbolize_debuginfod_lookups; /* 1..65536 */
  uint64_t symbolize_debuginfod_bytes;   /* 1M..1T */
  int64_t symbolize_debuginfod_time_ms;  /* 1s..1h */
  /* Function shares of each stored snapshot (daemon/shares.h): each
   * host's top this many functions and its rest; 0: none. */
  uint32_t function_shares_top; /* 0..TG_COLL_SHARES_TOP_MAX */
} tg_coll_config_t;

/* Sets every field of |c| to its default (required paths ""); allocates
 * nothing, so it never needs a free. */
void tg_coll_config_defaults(tg_coll_config_t *c);

/* Receives each warning: |text| is valid for the call only. */
typedef void (*tg_coll_config_warn_fn)(void *ctx, const char *text);

/* Parses the |len| bytes at |text_untrusted| (no NUL needed after them)
 * into *out, which is overwritten whole: free a previous result first.
 * |file_label| names the file in messages (NULL: "config"). Relative
 * paths are resolved against |base_dir| (NULL or "": kept as written).
 * |warn| (may be NULL) is called during the parse only, with |warn_ctx|.
 * Returns 0, or -EINVAL, -ENOMEM or -EFBIG with the reason in |err| (|errn|
 * bytes, always NUL-terminated when |errn| > 0); on error *out owns
 * nothing (tg_coll_config_free() on it is harmless) and its fields are
 * unspecified. On success the caller frees *out with tg_coll_config_free.
 * Nothing is kept of |text_untrusted|, |file_label| or |base_dir|. */
int tg_coll_config_parse(const char *text_untrusted, size_t len,
                         const char *file_label, const char *base_dir,
                         tg_coll_config_t *out, tg_coll_config_warn_fn warn,
                         void *warn_ctx, char *err, size_t errn);

/* Reads the file at |path| (at most TG_COLL_CONFIG_FILE_MAX bytes) and
 * parses it as above, with |path| as the label and its directory as the
 * base. Returns as tg_coll_config_parse(), or -errno when the file cannot
 * be read (|err| says so). */
int tg_coll_config_load(const char *path, tg_coll_config_t *out,
                        tg_coll_config_warn_fn warn, void *warn_ctx, char *err,
                        size_t errn);

/* Sets the shard from |text| ("I/N", as the shard key takes it): for a
 * command line that overrides the file (a StatefulSet's ordinal). 0, or
 * -EINVAL with |c| unchanged. */
int tg_coll_config_set_shard(tg_coll_config_t *c, const char *text);

/* Frees what a parse allocated and leaves |c| with no groups; NULL-safe,
 * and safe to call twice. */
void tg_coll_config_free(tg_coll_config_t *c);

/* The group called |name| (not "all", which has no entry), or NULL. The
 * result points into |c|. */
const tg_coll_group_t *tg_coll_config_group(const tg_coll_config_t *c,
                                            const char *name);

/* Whether |host|, spelt as the inventory spells it (exact bytes), is in
 * |group|: always for "all", never for a group |c| does not define. */
bool tg_coll_config_group_has(const tg_coll_config_t *c, const char *group,
                              const char *host);

/* The alertmanager_host line whose VALUE is |value| (exact bytes), or
 * NULL. Points into |c|. */
const tg_coll_am_host_t *tg_coll_config_am_host(const tg_coll_config_t *c,
                                                const char *value);

#endif /* TRACEGATE_COLLECTOR_CONFIG_CONFIG_H */
