/* The trace catalog: what the collector knows about its snapshots, behind
 * one interface so that SQLite (catalog_sqlite.h, the embedded default) and
 * PostgreSQL (catalog_pg.h, shared by several collectors) implement the
 * same operations.
 *
 * A catalog owns rows, never files: the store (store.h) is its only writer
 * and pairs every state change with the file operation it stands for, in
 * the order docs/collector.md explains. Each operation is one short
 * transaction; none blocks longer than that (a busy database waits at most
 * the implementation's busy timeout, then fails with -EBUSY).
 *
 * A snapshot row's states (every transition is one operation here):
 *
 *   begin -> PENDING --finish--> COMPLETE   every host delivered
 *                    \         > PARTIAL    some hosts failed
 *                     \        > FAILED     no host delivered
 *                      \-fail--> FAILED     aborted, or found PENDING at
 *                                           open (the collector restarted)
 *
 * COMPLETE and PARTIAL rows are "live": their file exists. PENDING and
 * FAILED rows have no file in snapshots/. Rows leave only by remove().
 *
 * A shared catalog (ops->shared) is used by several collectors at once,
 * each a "member" of it (one database connection). Every transition above
 * is guarded by the state it starts from, so that two collectors racing
 * for one row leave it in one of the states either would have made, and
 * the loser is told (-ENOENT, -EINVAL, -EBUSY), never fooled.
 *
 * Text (trigger, reason, host names, errors) is stored and returned
 * verbatim: every statement binds its values, none is built from text.
 * Lengths are capped (TG_COLL_*_MAX); longer text is refused (-EINVAL).
 */
#ifndef TRACEGATE_COLLECTOR_CATALOG_CATALOG_H
#define TRACEGATE_COLLECTOR_CATALOG_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_COLL_TRIGGER_MAX 256
#define TG_COLL_REASON_MAX 1024
/* A host as the fleet names it: a DNS name (253) and a ":port". */
#define TG_COLL_HOST_MAX 320
#define TG_COLL_ERROR_MAX 512
/* A host's problems: a JSON array of objects (the snapshot's writer makes
 * it with jansson; readers parse it back with common/json.h's bound). */
#define TG_COLL_PROBLEMS_MAX 2048
/* A host's sharp window (daemon/boost.h): a JSON object, made and read
 * back as the problems are. */
#define TG_COLL_BOOST_MAX 1024
/* A host's requests across hosts (the merge's flow counts, daemon/snap.c):
 * a JSON object of a mode and a few counts, made and read back as the
 * boost is. */
#define TG_COLL_LINKS_MAX 1024
/* Most rows one list() returns; page on with before_id. */
#define TG_COLL_LIST_MAX 1000

typedef enum tg_coll_state {
  TG_COLL_PENDING = 0,
  TG_COLL_COMPLETE = 1,
  TG_COLL_PARTIAL = 2,
  TG_COLL_FAILED = 3,
} tg_coll_state_t;
#define TG_COLL_STATE_COUNT 4
/* A bit per state, for tg_coll_filter_t.states. */
#define TG_COLL_STATE_BIT(s) (1u << (s))
#define TG_COLL_LIVE_STATES \
  (TG_COLL_STATE_BIT(TG_COLL_COMPLETE) | TG_COLL_STATE_BIT(TG_COLL_PARTIAL))

/* The states' names, indexed by state ("pending", "complete", "partial",
 * "failed"): the catalog's words, which a state machine's table names
 * too. */
extern const char *const tg_coll_state_names[TG_COLL_STATE_COUNT];
/* tg_coll_state_names[s]; "?" out of range. */
const char *tg_coll_state_name(tg_coll_state_t s);

/* What a snapshot is taken for: given at begin, never changed. Borrowed
 * for the call. */
typedef struct tg_coll_begin {
  const char *trigger; /* trigger name, 1..TG_COLL_TRIGGER_MAX bytes */
  const char *reason;  /* free text, 0..TG_COLL_REASON_MAX bytes (NULL: "") */
  const char *origin;  /* host the trigger came from, 0..TG_COLL_HOST_MAX */
} tg_coll_begin_t;

typedef enum tg_coll_host_outcome {
  TG_COLL_HOST_OK = 0,      /* its data is in the file */
  TG_COLL_HOST_FAILED = 1,  /* it contributed nothing (error says why) */
  TG_COLL_HOST_PARTIAL = 2, /* it failed part-way (error says why); what it
                             * sent before is in the file */
} tg_coll_host_outcome_t;

/* "ok", "partial", "failed" (anything else). */
const char *tg_coll_host_outcome_name(tg_coll_host_outcome_t o);

/* One host's part of a snapshot, as the caller reports it to finish.
 * Strings borrowed for the call. Times are Unix epoch milliseconds. */
typedef struct tg_coll_host_result {
  const char *host; /* 1..TG_COLL_HOST_MAX bytes, unique in the snapshot */
  /* NULL or 0..TG_COLL_HOST_MAX bytes: the name the operator gave the
   * host (the inventory's name=), shown beside |host|. */
  const char *name;
  tg_coll_host_outcome_t outcome;
  const char *error; /* NULL or 0..TG_COLL_ERROR_MAX bytes */
  /* NULL, "" (none) or a JSON array of 0..TG_COLL_PROBLEMS_MAX bytes: what
   * the host's part lacks beyond |error| (a data source that did not
   * start, packets left out and why); the catalog stores it as given. */
  const char *problems;
  /* NULL, "" (no boost) or a JSON object of 0..TG_COLL_BOOST_MAX bytes:
   * the host's perf boost (daemon/boost.h), stored as given. */
  const char *boost;
  /* NULL, "" (none: not merged, or an older row) or a JSON object of
   * 0..TG_COLL_LINKS_MAX bytes: what the merge saw of the host's flows
   * (docs/collector.md, "links"), stored as given. */
  const char *links;
  uint64_t bytes, packets;
  uint64_t loss; /* the host's loss counters, summed */
  int64_t window_first_ms, window_last_ms; /* what its data covers */
} tg_coll_host_result_t;

/* A host row as the catalog returns it: owns its text. */
typedef struct tg_coll_host {
  char host[TG_COLL_HOST_MAX + 1];
  char name[TG_COLL_HOST_MAX + 1];
  tg_coll_host_outcome_t outcome;
  char error[TG_COLL_ERROR_MAX + 1];
  char problems[TG_COLL_PROBLEMS_MAX + 1]; /* "" or a JSON array */
  char boost[TG_COLL_BOOST_MAX + 1];       /* "" or a JSON object */
  char links[TG_COLL_LINKS_MAX + 1];       /* "" or a JSON object */
  uint64_t bytes, packets, loss;
  int64_t window_first_ms, window_last_ms;
} tg_coll_host_t;

/* What finish records: the file's size and checksum (from the writer),
 * the merged packet count and the hosts. |hosts| borrowed for the call. */
typedef struct tg_coll_finish {
  uint64_t bytes;
  uint32_t crc32;
  uint64_t packets;
  const tg_coll_host_result_t *hosts;
  size_t n_hosts;
  int64_t finished_ms;
} tg_coll_finish_t;

/* A snapshot row. Owns its text. */
typedef struct tg_coll_snapshot {
  uint64_t id;
  tg_coll_state_t state;
  bool pinned;
  int64_t started_ms;     /* begin's time: what age and time filters use */
  int64_t finished_ms;    /* 0 while PENDING */
  uint64_t bytes;         /* the file's size (0 unless live) */
  uint32_t crc32;         /* zlib crc32 of the file (0 unless live) */
  uint64_t packets, loss; /* merged packets, the hosts' loss summed */
  uint32_t n_hosts, n_hosts_failed;
  char trigger[TG_COLL_TRIGGER_MAX + 1];
  char reason[TG_COLL_REASON_MAX + 1];
  char origin[TG_COLL_HOST_MAX + 1];
  char failure[TG_COLL_ERROR_MAX + 1]; /* why FAILED, else "" */
} tg_coll_snapshot_t;

/* list()'s filters; start from TG_COLL_FILTER_INIT. Rows come newest
 * (highest id) first. Strings borrowed for the call. */
typedef struct tg_coll_filter {
  int64_t from_ms, to_ms; /* started_ms in [from_ms, to_ms) */
  const char *trigger;    /* exact trigger name, or NULL for any */
  const char *host;       /* only snapshots with this host, or NULL */
  unsigned states;        /* TG_COLL_STATE_BIT()s; 0 for any */
  uint64_t before_id;     /* only ids below it (paging); 0 for no bound */
  uint32_t limit;         /* 1..TG_COLL_LIST_MAX; 0 means the max */
} tg_coll_filter_t;
#define TG_COLL_FILTER_INIT \
  { .from_ms = INT64_MIN, .to_ms = INT64_MAX }

/* A row as retention sees it (retention.h decides from these alone). */
typedef struct tg_coll_retention_row {
  uint64_t id;
  int64_t started_ms;
  uint64_t bytes; /* the file's size; 0 unless live */
  bool pinned;
  bool pending; /* being written: never deleted, but it starts a burst */
} tg_coll_retention_row_t;

/* What retention looks at: every row of the catalog (of every member, for
 * a shared one) by started_ms, then id, read at one point in time. The
 * catalog's retention_view() allocates |rows| (NULL when n is 0, and on
 * error); the caller frees it with free(). */
typedef struct tg_coll_retention_view {
  tg_coll_retention_row_t *rows;
  size_t n;
} tg_coll_retention_view_t;

/* A whole row as insert_at() writes it: what a rebuild of a lost catalog
 * read from a snapshot's sidecar in the bucket (snap_meta.h). Borrowed
 * for the call. */
typedef struct tg_coll_insert {
  uint64_t id; /* 1..TG_COLL_ID_MAX */
  const tg_coll_begin_t *begin;
  int64_t started_ms;
  /* bytes, crc32, packets, hosts, finished_ms: the state is the one
   * finish() would give them (all hosts OK: COMPLETE, ...). */
  const tg_coll_finish_t *finish;
  bool pinned;
  /* NULL: that state. Else the row is FAILED with this reason
   * (TG_COLL_ERROR_MAX bytes at most), bytes and crc32 0, its hosts kept:
   * what lose() leaves. */
  const char *failure;
} tg_coll_insert_t;

/* Function shares (docs/collector.md, "Function shares"): per host of a
 * stored snapshot, its top functions by CPU time in its stacks (total),
 * and one "[rest]" row for the samples whose leaf is none of them, so
 * that the host's rows' self times sum to its whole. A function is a
 * name a host sent (or its symbols gave): untrusted bytes, stored as
 * given up to TG_COLL_FUNCTION_MAX bytes (longer: cut there, |cut| set),
 * compared byte for byte. */
#define TG_COLL_FUNCTION_MAX 1024
/* An unnamed frame's mapping path ("[unknown]" is one row per mapping). */
#define TG_COLL_FILE_MAX 1024
/* Rows of one host: its top functions (the collector's
 * function_shares_top, at most this) and its rest. */
#define TG_COLL_SHARES_TOP_MAX 1000
/* Most rows one find_shares() returns; page on with its cursor. */
#define TG_COLL_SHARES_LIST_MAX 1000

typedef enum tg_coll_share_kind {
  TG_COLL_SHARE_FUNCTION = 0, /* a function the host or its symbols named */
  TG_COLL_SHARE_PSEUDO = 1,   /* "[unknown]", "[no callstack]",
                               * "[skipped: ...]", ...: samples that no
                               * function name stands for, kept apart */
  TG_COLL_SHARE_REST = 2,     /* "[rest]": leaves past the top, one a host */
} tg_coll_share_kind_t;

/* "function", "pseudo", "rest" ("?" out of range). */
const char *tg_coll_share_kind_name(tg_coll_share_kind_t k);

/* One row as set_shares() takes it. Strings borrowed for the call. */
typedef struct tg_coll_share_in {
  const char *function; /* 1.. bytes; cut at TG_COLL_FUNCTION_MAX */
  const char *file;     /* NULL or a mapping path (cut at TG_COLL_FILE_MAX) */
  tg_coll_share_kind_t kind;
  uint64_t self_ns, total_ns;           /* CPU time: leaf, anywhere */
  uint64_t self_samples, total_samples; /* the same in samples */
} tg_coll_share_in_t;

/* One host's rows, in rank order (its rest last). */
typedef struct tg_coll_host_shares {
  const char *host; /* the snapshot's host row's name (catalog hosts()) */
  /* The host's whole: every sample of its profile, pseudo-stacks and
   * all; the shares' denominators. */
  uint64_t cpu_ns, samples;
  /* No CPU-clock rate was known for its samples (tg_prof_host_t's
   * ns_per_sample_max 0): its shares are of samples, not CPU time. */
  bool by_samples;
  const tg_coll_share_in_t *rows;
  size_t n_rows; /* 0..TG_COLL_SHARES_TOP_MAX + 1 */
} tg_coll_host_shares_t;

/* A row as find_shares() returns it. Owns its text. The function is the
 * one asked for (byte for byte), so it is not repeated. */
typedef struct tg_coll_share {
  uint64_t snapshot_id;
  int64_t started_ms; /* the snapshot's */
  char host[TG_COLL_HOST_MAX + 1];
  uint32_t rank; /* 0: the host's first by total */
  tg_coll_share_kind_t kind;
  char file[TG_COLL_FILE_MAX + 1];
  bool cut; /* the stored name is the first TG_COLL_FUNCTION_MAX bytes */
  uint64_t self_ns, total_ns, self_samples, total_samples;
  uint64_t host_cpu_ns, host_samples;
  bool by_samples;
  double self_share, total_share; /* 0..1, of the host's whole */
} tg_coll_share_t;

/* find_shares()'s question: rows of |function| whose share is above
 * |min_share|, newest snapshot first, then by host and rank. Paging: the
 * last row's (snapshot_id, host, rank) as |after_*| gives the rows after
 * it. Strings borrowed for the call. */
typedef struct tg_coll_share_query {
  const char *function; /* exact bytes, 1..TG_COLL_FUNCTION_MAX */
  const char *host;     /* only this host, or NULL for any */
  double min_share;     /* 0..1: total (or self) share above it; 0: any */
  bool by_self;         /* min_share is of the self share */
  int64_t from_ms, to_ms; /* the snapshot's started_ms in [from_ms, to_ms) */
  uint64_t after_id;      /* 0: from the newest */
  const char *after_host; /* with after_id */
  uint32_t after_rank;    /* with after_id */
  uint32_t limit;         /* 1..TG_COLL_SHARES_LIST_MAX; 0 means the max */
} tg_coll_share_query_t;
#define TG_COLL_SHARE_QUERY_INIT \
  { .from_ms = INT64_MIN, .to_ms = INT64_MAX }

typedef struct tg_coll_catalog tg_coll_catalog_t;

/* An implementation's operations. Every one returns 0 or a negative code
 * (-ENOENT: no such row; -EINVAL: bad argument or a row not in the state
 * the transition starts from; -EBUSY: the database stayed locked; -EIO,
 * -ENOSPC, -ENOMEM: the database failed, logged once with its own code). */
typedef struct tg_coll_catalog_ops {
  const char *name;
  /* Several collectors may use one database at once (one member each). */
  bool shared;
  /* Frees the catalog; NULL-safe through tg_coll_catalog_close(). */
  void (*close)(tg_coll_catalog_t *cat);
  /* Inserts a PENDING row and returns its new id, durable on return. */
  int (*begin)(tg_coll_catalog_t *cat, const tg_coll_begin_t *b,
               int64_t started_ms, uint64_t *id);
  /* PENDING -> COMPLETE/PARTIAL/FAILED (from the hosts' outcomes: all OK
   * is COMPLETE, none OK is FAILED), with the hosts' rows. FAILED keeps
   * bytes and crc32 at 0. */
  int (*finish)(tg_coll_catalog_t *cat, uint64_t id, const tg_coll_finish_t *f);
  /* PENDING -> FAILED with |why| (truncated to TG_COLL_ERROR_MAX). */
  int (*fail)(tg_coll_catalog_t *cat, uint64_t id, const char *why,
              int64_t finished_ms);
  /* At open: every PENDING row no running collector is writing becomes
   * FAILED with |why|; *n says how many. A catalog of one collector fails
   * them all; a shared one those of this member and of members it can
   * prove are gone (docs/collector.md, "Several collectors"). */
  int (*interrupt)(tg_coll_catalog_t *cat, const char *why, int64_t finished_ms,
                   uint32_t *n);
  /* Live -> FAILED: the file went away behind the store's back. */
  int (*lose)(tg_coll_catalog_t *cat, uint64_t id, const char *why);
  int (*list)(tg_coll_catalog_t *cat, const tg_coll_filter_t *f,
              tg_coll_snapshot_t *out, size_t cap, size_t *n);
  int (*get)(tg_coll_catalog_t *cat, uint64_t id, tg_coll_snapshot_t *out);
  /* The host rows of |id|, sorted by host name, at most |cap|; *n is how
   * many there are (may exceed |cap|: call again with room). */
  int (*hosts)(tg_coll_catalog_t *cat, uint64_t id, tg_coll_host_t *out,
               size_t cap, size_t *n);
  /* get() and hosts() of |id| at one point in time (one read): a row
   * deleted meanwhile is -ENOENT, never a row without its hosts. */
  int (*get_with_hosts)(tg_coll_catalog_t *cat, uint64_t id,
                        tg_coll_snapshot_t *out, tg_coll_host_t *hosts,
                        size_t cap, size_t *n);
  int (*set_pinned)(tg_coll_catalog_t *cat, uint64_t id, bool pinned);
  /* Host |host|'s problems in snapshot |id| (any state but PENDING)
   * become |problems|: "" or a JSON array of 0..TG_COLL_PROBLEMS_MAX
   * bytes, stored as given (what a check after the finish found:
   * collector/daemon/import_check.c). -ENOENT: no such snapshot or host;
   * -EINVAL: |problems| too long, or the snapshot is PENDING. */
  int (*set_problems)(tg_coll_catalog_t *cat, uint64_t id, const char *host,
                      const char *problems);
  /* Deletes the row and its hosts (any state but PENDING: -EBUSY; with
   * |unless_pinned|, a pinned row too: what retention asks, so that a pin
   * committed since its view is honoured). */
  int (*remove)(tg_coll_catalog_t *cat, uint64_t id, bool unless_pinned);
  int (*retention_view)(tg_coll_catalog_t *cat, tg_coll_retention_view_t *v);
  /* Inserts the row (and its hosts) at r->id, in one transaction, and
   * keeps the catalog's id allocation ahead of it: a later begin() gets a
   * higher id. -EEXIST: a row has that id (nothing changed); -EINVAL: an
   * id out of range, text over its cap, a host twice. */
  int (*insert_at)(tg_coll_catalog_t *cat, const tg_coll_insert_t *r);
  /* Makes every later begin() return an id above |id| (which may have no
   * row: a bucket's object whose sidecar could not be read); an
   * allocation already past it stays. */
  int (*reserve)(tg_coll_catalog_t *cat, uint64_t id);
  /* Snapshot |id|'s function shares become |hosts|' rows (those it had
   * go), in one transaction. -ENOENT: no such snapshot; -EINVAL: it is
   * PENDING, a host twice, a row count over TG_COLL_SHARES_TOP_MAX + 1,
   * a count over INT64_MAX, an empty function name. Retention and
   * remove() delete them with the snapshot. */
  int (*set_shares)(tg_coll_catalog_t *cat, uint64_t id,
                    const tg_coll_host_shares_t *hosts, size_t n_hosts);
  /* The rows |q| asks for, at most |cap| and q->limit; *n how many. One
   * statement: its rows are of one point in time. -EINVAL: a bad query. */
  int (*find_shares)(tg_coll_catalog_t *cat, const tg_coll_share_query_t *q,
                     tg_coll_share_t *out, size_t cap, size_t *n);
} tg_coll_catalog_ops_t;

/* The base every implementation embeds first. */
struct tg_coll_catalog {
  const tg_coll_catalog_ops_t *ops;
  bool attached; /* a store uses it (store.c): one store per catalog */
};

static inline void tg_coll_catalog_close(tg_coll_catalog_t *cat) {
  if (cat) cat->ops->close(cat);
}

#endif /* TRACEGATE_COLLECTOR_CATALOG_CATALOG_H */
