/* The PostgreSQL catalog's connection: session settings, the member's
 * lock, schema migrations, the prepared statements, values and errors.
 * The operations are in catalog_pg_ops.c.
 *
 * No statement here or there is built from text a caller gave: the SQL is
 * constant (our numbers enter it only through TG_STR at compile time) and
 * every value is a binary parameter of a prepared statement. The
 * conninfo is libpq's to parse and is never logged.
 */
#include "collector/catalog/catalog_pg.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/catalog/catalog_pg_internal.h"
#include "common/log.h"
#include "tracegate/error.h"

#define TG_STR_(x) #x
#define TG_STR(x) TG_STR_(x)
#define LOCK_KEY TG_STR(TG_COLL_PG_LOCK_KEY)

/* PostgreSQL's type oids (pg_type.dat; stable across releases). */
#define OID_BOOL 16
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_INT2 21
#define OID_INT4 23
#define OID_FLOAT8 701

#define COMPONENT "tracegate-collector"

/* Step k takes the schema from version k to k + 1; each runs in the
 * transaction that also stamps schema_version, so a crash mid-migration
 * leaves the old version whole. Append steps; never edit a released one. */
static const char *const migrations[TG_COLL_PG_SCHEMA] = {
    /* 0 -> 1: snapshots and their hosts. state: 0 pending, 1 complete,
     * 2 partial, 3 failed (catalog.h). member: the collector that began
     * it (catalog_pg.h). Text is bytea: stored byte for byte. */
    "CREATE TABLE schema_version ("
    " component text PRIMARY KEY,"
    " version integer NOT NULL);"
    "CREATE TABLE snapshots ("
    " id bigint GENERATED ALWAYS AS IDENTITY (MINVALUE 1 NO CYCLE)"
    "  PRIMARY KEY,"
    " member integer NOT NULL CHECK (member >= 0),"
    " state smallint NOT NULL CHECK (state BETWEEN 0 AND 3),"
    " pinned boolean NOT NULL DEFAULT false,"
    " started_ms bigint NOT NULL,"
    " finished_ms bigint NOT NULL DEFAULT 0,"
    " trigger bytea NOT NULL,"
    " reason bytea NOT NULL,"
    " origin bytea NOT NULL,"
    " failure bytea NOT NULL DEFAULT '',"
    " bytes bigint NOT NULL DEFAULT 0,"
    " crc32 bigint NOT NULL DEFAULT 0,"
    " packets bigint NOT NULL DEFAULT 0,"
    " loss bigint NOT NULL DEFAULT 0,"
    " n_hosts bigint NOT NULL DEFAULT 0,"
    " n_hosts_failed bigint NOT NULL DEFAULT 0);"
    "CREATE INDEX snapshots_age ON snapshots (started_ms, id);"
    "CREATE INDEX snapshots_trigger ON snapshots (trigger);"
    "CREATE INDEX snapshots_pending ON snapshots (member) WHERE state = 0;"
    "CREATE TABLE snapshot_hosts ("
    " snapshot_id bigint NOT NULL"
    "  REFERENCES snapshots (id) ON DELETE CASCADE,"
    " host bytea NOT NULL,"
    " outcome smallint NOT NULL CHECK (outcome IN (0, 1)),"
    " error bytea NOT NULL,"
    " bytes bigint NOT NULL,"
    " packets bigint NOT NULL,"
    " loss bigint NOT NULL,"
    " window_first_ms bigint NOT NULL,"
    " window_last_ms bigint NOT NULL,"
    " PRIMARY KEY (snapshot_id, host));"
    "CREATE INDEX snapshot_hosts_host ON snapshot_hosts (host);",
    /* 1 -> 2: a host's outcome may be 2, partial (catalog.h); the check
     * has PostgreSQL's default name for it. */
    "ALTER TABLE snapshot_hosts DROP CONSTRAINT snapshot_hosts_outcome_check;"
    "ALTER TABLE snapshot_hosts ADD CONSTRAINT snapshot_hosts_outcome_check"
    " CHECK (outcome IN (0, 1, 2));",
    /* 2 -> 3: a host's name as the operator gave it, and its problems
     * (catalog.h); rows from before have neither. */
    "ALTER TABLE snapshot_hosts ADD COLUMN name bytea NOT NULL DEFAULT '';"
    "ALTER TABLE snapshot_hosts ADD COLUMN problems bytea NOT NULL"
    " DEFAULT '';",
    /* 3 -> 4: a host's perf boost (catalog.h); rows from before have
     * none. */
    "ALTER TABLE snapshot_hosts ADD COLUMN boost bytea NOT NULL DEFAULT '';",
    /* 4 -> 5: a host's requests across hosts (catalog.h); rows from
     * before have none. */
    "ALTER TABLE snapshot_hosts ADD COLUMN links bytea NOT NULL DEFAULT '';",
    /* 5 -> 6: each host's function shares (catalog.h, docs/collector.md
     * "Function shares"), as SQLite's 6 (catalog_sqlite.c). */
    "CREATE TABLE function_shares ("
    " snapshot_id bigint NOT NULL"
    "  REFERENCES snapshots (id) ON DELETE CASCADE,"
    " host bytea NOT NULL,"
    " rank integer NOT NULL CHECK (rank >= 0),"
    " kind smallint NOT NULL CHECK (kind IN (0, 1, 2)),"
    " function bytea NOT NULL,"
    " file bytea NOT NULL,"
    " cut boolean NOT NULL,"
    " self_ns bigint NOT NULL,"
    " total_ns bigint NOT NULL,"
    " self_samples bigint NOT NULL,"
    " total_samples bigint NOT NULL,"
    " host_cpu_ns bigint NOT NULL,"
    " host_samples bigint NOT NULL,"
    " by_samples boolean NOT NULL,"
    " self_share double precision NOT NULL,"
    " total_share double precision NOT NULL,"
    " PRIMARY KEY (snapshot_id, host, rank));"
    "CREATE INDEX function_shares_function"
    " ON function_shares (function, snapshot_id);"
    "CREATE INDEX function_shares_host"
    " ON function_shares (host, function, snapshot_id);",
};

#define SNAPSHOT_COLS                                                    \
  "id, state, pinned, started_ms, finished_ms, trigger, reason, origin," \
  " failure, bytes, crc32, packets, loss, n_hosts, n_hosts_failed"
/* Its shape: i an integer, b a boolean, y bytea. */
#define SNAPSHOT_SHAPE "iibiiyyyyiiiiii"

/* A write guarded by the state it starts from, answering in one statement
 * (one snapshot) how many rows it changed and whether the row existed:
 * "not in that state" and "no such row" are told apart without a race. */
#define GUARDED(write)                \
  "WITH w AS (" write                 \
  " RETURNING 1)"                     \
  " SELECT (SELECT count(*) FROM w)," \
  " EXISTS (SELECT 1 FROM snapshots WHERE id = $1)"

/* find_shares' two statements (catalog_pg_ops.c): their columns, the
 * function's rows, and what both filter, order and page by. */
#define SHARES_COLS                                                        \
  "SELECT f.snapshot_id, s.started_ms, f.host, f.rank, f.kind, f.file,"   \
  " f.cut, f.self_ns, f.total_ns, f.self_samples, f.total_samples,"       \
  " f.host_cpu_ns, f.host_samples, f.by_samples, f.self_share,"           \
  " f.total_share FROM function_shares f"                                 \
  " JOIN snapshots s ON s.id = f.snapshot_id WHERE f.function = $1"
#define SHARES_FILTER                                                      \
  " AND ($4 <= 0 OR (CASE WHEN $3 <> 0"                                   \
  "  THEN f.self_share ELSE f.total_share END) > $4)"                     \
  " AND s.started_ms >= $5 AND s.started_ms < $6"                         \
  " AND ($7 = 0 OR f.snapshot_id < $7"                                    \
  "  OR (f.snapshot_id = $7 AND (f.host > $8"                             \
  "  OR (f.host = $8 AND f.rank > $9))))"                                 \
  " ORDER BY f.snapshot_id DESC, f.host, f.rank LIMIT $10"
#define SHARES_SHAPE "iiyiiybiiiiiibdd"

typedef struct stmt_def {
  const char *sql;
  const char *params; /* i int8, y bytea, d float8 */
  const char *shape;  /* the result's columns */
} stmt_def_t;

static const stmt_def_t stmts[P_COUNT] = {
    [P_INSERT] = {"INSERT INTO snapshots (member, state, started_ms, trigger,"
                  " reason, origin) VALUES ($1, 0, $2, $3, $4, $5)"
                  " RETURNING id",
                  "iiyyy", "i"},
    [P_FINISH] = {GUARDED("UPDATE snapshots SET state = $2, finished_ms = $3,"
                          " bytes = $4, crc32 = $5, packets = $6, loss = $7,"
                          " n_hosts = $8, n_hosts_failed = $9"
                          " WHERE id = $1 AND state = 0"),
                  "iiiiiiiii", "ib"},
    [P_INSERT_HOST] = {"INSERT INTO snapshot_hosts (snapshot_id, host,"
                       " outcome, error, bytes, packets, loss,"
                       " window_first_ms, window_last_ms, name, problems,"
                       " boost, links) VALUES ($1, $2, $3, $4, $5, $6, $7,"
                       " $8, $9, $10, $11, $12, $13)",
                       "iyiyiiiiiyyyy", ""},
    [P_FAIL] = {GUARDED("UPDATE snapshots SET state = 3, finished_ms = $2,"
                        " failure = $3 WHERE id = $1 AND state = 0"),
                "iiy", "ib"},
    /* This member's PENDING rows, and those of every member whose lock
     * can be taken (its collector is gone); the lock lasts the statement,
     * so a member starting meanwhile waits for it (TG_COLL_PG_BUSY_MS). */
    [P_INTERRUPT] = {"WITH w AS (UPDATE snapshots SET state = 3,"
                     " finished_ms = $1, failure = $2 WHERE state = 0"
                     " AND pg_try_advisory_xact_lock(" LOCK_KEY ", member)"
                     " RETURNING 1) SELECT count(*) FROM w",
                     "iy", "i"},
    [P_LOSE] = {GUARDED("UPDATE snapshots SET state = 3, failure = $2,"
                        " bytes = 0, crc32 = 0"
                        " WHERE id = $1 AND state IN (1, 2)"),
                "iy", "ib"},
    [P_LIST] = {"SELECT " SNAPSHOT_COLS " FROM snapshots s"
                " WHERE started_ms >= $1 AND started_ms < $2"
                " AND ($3::bytea IS NULL OR trigger = $3)"
                " AND ($4::bytea IS NULL OR EXISTS (SELECT 1"
                "  FROM snapshot_hosts h"
                "  WHERE h.snapshot_id = s.id AND h.host = $4))"
                " AND ($5 = 0 OR ($5 >> state) & 1 = 1)"
                " AND id < $6"
                " ORDER BY id DESC LIMIT $7",
                "iiyyiii", SNAPSHOT_SHAPE},
    [P_GET] = {"SELECT " SNAPSHOT_COLS " FROM snapshots WHERE id = $1", "i",
               SNAPSHOT_SHAPE},
    /* No row: no snapshot; one row of NULLs: a snapshot without hosts. */
    [P_HOSTS] = {"SELECT h.host, h.outcome, h.error, h.bytes, h.packets,"
                 " h.loss, h.window_first_ms, h.window_last_ms, h.name,"
                 " h.problems, h.boost, h.links FROM snapshots s LEFT JOIN"
                 " snapshot_hosts h ON h.snapshot_id = s.id WHERE s.id = $1"
                 " ORDER BY h.host",
                 "i", "yiyiiiiiyyyy"},
    [P_PIN] = {GUARDED("UPDATE snapshots SET pinned = ($2 <> 0)"
                       " WHERE id = $1"),
               "ii", "ib"},
    /* Counts the host row changed; the second column says whether the
     * snapshot is there and finished. */
    [P_SET_PROBLEMS] = {"WITH w AS (UPDATE snapshot_hosts SET problems = $3"
                        " WHERE snapshot_id = $1 AND host = $2"
                        " AND EXISTS (SELECT 1 FROM snapshots WHERE id = $1"
                        " AND state <> 0) RETURNING 1)"
                        " SELECT (SELECT count(*) FROM w),"
                        " EXISTS (SELECT 1 FROM snapshots WHERE id = $1"
                        " AND state = 0)",
                        "iyy", "ib"},
    [P_REMOVE] = {GUARDED("DELETE FROM snapshots WHERE id = $1"
                          " AND state <> 0"),
                  "i", "ib"},
    [P_REMOVE_UNPINNED] = {GUARDED("DELETE FROM snapshots WHERE id = $1"
                                   " AND state <> 0 AND NOT pinned"),
                           "i", "ib"},
    /* Every row, one statement (one snapshot): retention.h decides. */
    [P_RETENTION] = {"SELECT id, started_ms, CASE WHEN state IN (1, 2)"
                     " THEN bytes ELSE 0 END, pinned, state = 0"
                     " FROM snapshots ORDER BY started_ms, id",
                     "", "iiibb"},
    /* A rebuild's row at its id (the identity column takes one given
     * with OVERRIDING SYSTEM VALUE); no row back: the id is taken. */
    [P_INSERT_AT] = {"INSERT INTO snapshots (id, member, state, pinned,"
                     " started_ms, finished_ms, trigger, reason, origin,"
                     " failure, bytes, crc32, packets, loss, n_hosts,"
                     " n_hosts_failed) OVERRIDING SYSTEM VALUE VALUES ($1,"
                     " $2, $3, $4 <> 0, $5, $6, $7, $8, $9, $10, $11, $12,"
                     " $13, $14, $15, $16) ON CONFLICT (id) DO NOTHING"
                     " RETURNING id",
                     "iiiiiiyyyyiiiiii", "i"},
    /* The id allocation past $1. Run with the table locked against
     * begin()'s INSERT (which takes its lock before its nextval), so no
     * nextval runs between these two and setval never moves it back. */
    [P_SHARES_CLEAR] = {"DELETE FROM function_shares WHERE snapshot_id = $1",
                        "i", ""},
    /* Holds the snapshot against another member's delete until the
     * transaction ends; no row: no snapshot. */
    [P_SHARES_LOCK] = {"SELECT state FROM snapshots WHERE id = $1"
                       " FOR KEY SHARE",
                       "i", "i"},
    [P_SHARES_INSERT] = {"INSERT INTO function_shares (snapshot_id, host,"
                         " rank, kind, function, file, cut, self_ns,"
                         " total_ns, self_samples, total_samples,"
                         " host_cpu_ns, host_samples, by_samples,"
                         " self_share, total_share) VALUES ($1, $2, $3, $4,"
                         " $5, $6, $7 <> 0, $8, $9, $10, $11, $12, $13,"
                         " $14 <> 0, $15, $16)",
                         "iyiiyyiiiiiiiidd", ""},
    /* Paging on the answer's order: (snapshot_id DESC, host, rank). Two
     * statements, so that each plans with its index: any host (by
     * function), one host (by host and function). */
    [P_SHARES_FIND] = {SHARES_COLS " AND $2::bytea IS NULL" SHARES_FILTER,
                       "yyidiiiyii", SHARES_SHAPE},
    [P_SHARES_FIND_HOST] = {SHARES_COLS " AND f.host = $2" SHARES_FILTER,
                            "yyidiiiyii", SHARES_SHAPE},
    [P_RESERVE] = {"SELECT setval(pg_get_serial_sequence('snapshots', 'id'),"
                   " GREATEST($1, nextval(pg_get_serial_sequence("
                   "'snapshots', 'id'))))",
                   "i", "i"},
};

static const char *stmt_name(tg__coll_pg_stmt_t s) {
  static const char *const names[P_COUNT] = {
      "tg_insert",    "tg_finish", "tg_insert_host", "tg_fail",
      "tg_interrupt", "tg_lose",   "tg_list",        "tg_get",
      "tg_hosts",     "tg_pin",    "tg_set_problems", "tg_remove",
      "tg_remove_unpinned",
      "tg_retention", "tg_insert_at", "tg_reserve",
      "tg_shares_clear", "tg_shares_lock", "tg_shares_insert",
      "tg_shares_find", "tg_shares_find_host"};
  return names[s];
}

void tg__coll_pg_arg_int(tg__coll_pg_args_t *a, int64_t v) {
  int i = a->n++;
  uint64_t u = (uint64_t)v;
  for (int k = 0; k < 8; k++) a->be[i][k] = (unsigned char)(u >> (56 - 8 * k));
  a->val[i] = (const char *)a->be[i];
  a->len[i] = 8;
  a->fmt[i] = 1;
}

void tg__coll_pg_arg_double(tg__coll_pg_args_t *a, double v) {
  /* float8's binary form is the IEEE 754 double in network order. */
  uint64_t bits;
  memcpy(&bits, &v, sizeof(bits));
  tg__coll_pg_arg_int(a, (int64_t)bits);
}

double tg__coll_pg_double(const PGresult *r, int row, int col) {
  if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != 8) return 0;
  const unsigned char *p = (const unsigned char *)PQgetvalue(r, row, col);
  uint64_t bits = 0;
  for (int k = 0; k < 8; k++) bits = bits << 8 | p[k];
  double v;
  memcpy(&v, &bits, sizeof(v));
  return v;
}

void tg__coll_pg_arg_text(tg__coll_pg_args_t *a, const char *s, size_t max) {
  int i = a->n++;
  a->val[i] = s ? s : "";
  a->len[i] = (int)strnlen(a->val[i], max);
  a->fmt[i] = 1;
}

void tg__coll_pg_arg_opt_text(tg__coll_pg_args_t *a, const char *s) {
  if (s) {
    tg__coll_pg_arg_text(a, s, strlen(s));
    return;
  }
  int i = a->n++;
  a->val[i] = NULL;
  a->len[i] = 0;
  a->fmt[i] = 1;
}

int64_t tg__coll_pg_int(const PGresult *r, int row, int col) {
  if (PQgetisnull(r, row, col)) return 0;
  const unsigned char *p = (const unsigned char *)PQgetvalue(r, row, col);
  int n = PQgetlength(r, row, col);
  if (n != 2 && n != 4 && n != 8) return 0;
  uint64_t v = 0;
  for (int k = 0; k < n; k++) v = v << 8 | p[k];
  if (n < 8 && (p[0] & 0x80)) v |= ~0ull << (8 * n); /* sign */
  return (int64_t)v;
}

bool tg__coll_pg_bool(const PGresult *r, int row, int col) {
  return !PQgetisnull(r, row, col) && PQgetlength(r, row, col) == 1 &&
         PQgetvalue(r, row, col)[0] != 0;
}

void tg__coll_pg_text(const PGresult *r, int row, int col, char *dst,
                      size_t cap) {
  size_t n = PQgetisnull(r, row, col) ? 0 : (size_t)PQgetlength(r, row, col);
  if (n >= cap) n = cap - 1;
  if (n) memcpy(dst, PQgetvalue(r, row, col), n);
  dst[n] = 0;
}

/* SQLSTATE classes and codes (PostgreSQL's errcodes.txt) to ours. */
static int map_sqlstate(const char *st) {
  if (!st || strlen(st) != 5) return -EIO;
  if (!strcmp(st, "40001") || !strcmp(st, "40P01") || !strcmp(st, "55P03") ||
      !strcmp(st, "57014"))
    return -EBUSY; /* serialization, deadlock, lock_timeout, cancel */
  if (!strcmp(st, "53100")) return -ENOSPC;
  if (!strcmp(st, "53200")) return -ENOMEM;
  if (!strcmp(st, "42501") || !strncmp(st, "28", 2)) return -EACCES;
  if (!strncmp(st, "23", 2) || !strncmp(st, "22", 2)) return -EINVAL;
  return -EIO;
}

int tg__coll_pg_err(tg__coll_pg_t *c, PGresult *res, const char *what) {
  const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
  const char *msg = res ? PQresultErrorMessage(res) : "";
  if (!msg || !*msg) msg = c->conn ? PQerrorMessage(c->conn) : "no connection";
  int err = map_sqlstate(st);
  TG_ERROR("catalog: %s: postgresql %s: %.*s", what, st ? st : "(no state)",
           (int)strcspn(msg, "\n"), msg);
  PQclear(res);
  return err;
}

static bool shape_ok(const PGresult *r, const char *shape) {
  int n = (int)strlen(shape);
  if (PQnfields(r) != n) return false;
  for (int i = 0; i < n; i++) {
    Oid t = PQftype(r, i);
    bool ok = shape[i] == 'i' ? t == OID_INT8 || t == OID_INT4 || t == OID_INT2
              : shape[i] == 'b' ? t == OID_BOOL
              : shape[i] == 'd' ? t == OID_FLOAT8
                                : t == OID_BYTEA;
    if (!ok || PQfformat(r, i) != 1) return false;
  }
  return true;
}

int tg__coll_pg_run(tg__coll_pg_t *c, tg__coll_pg_stmt_t s,
                    const tg__coll_pg_args_t *a, PGresult **res,
                    const char *what) {
  const stmt_def_t *d = &stmts[s];
  /* Other parameters than it was prepared with: a bug here, not input. */
  assert(a->n == (int)strlen(d->params));
  PGresult *r =
      PQexecPrepared(c->conn, stmt_name(s), a->n, a->val, a->len, a->fmt, 1);
  ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
    return tg__coll_pg_err(c, r, what);
  if (st == PGRES_TUPLES_OK && !shape_ok(r, d->shape)) {
    TG_ERROR("catalog: %s: unexpected result columns (schema edited?)", what);
    PQclear(r);
    return -EIO;
  }
  *res = r;
  return 0;
}

/* Constant text with no parameters: session settings, transaction
 * control, the migrations' DDL. */
static int exec_text(tg__coll_pg_t *c, const char *sql, const char *what) {
  PGresult *r = PQexec(c->conn, sql);
  ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
    return tg__coll_pg_err(c, r, what);
  PQclear(r);
  return 0;
}

int tg__coll_pg_tx(tg__coll_pg_t *c, const char *verb, const char *what) {
  return exec_text(c, verb, what);
}

/* Runs constant |sql| with text parameters and one expected row; its
 * first column's text into |out|, NULL as "". */
static int query_text(tg__coll_pg_t *c, const char *sql, int n,
                      const char *const *params, char *out, size_t cap,
                      const char *what) {
  PGresult *r = PQexecParams(c->conn, sql, n, NULL, params, NULL, NULL, 0);
  if (!r || PQresultStatus(r) != PGRES_TUPLES_OK)
    return tg__coll_pg_err(c, r, what);
  out[0] = 0;
  if (PQntuples(r) == 1 && PQnfields(r) >= 1 && !PQgetisnull(r, 0, 0))
    snprintf(out, cap, "%s", PQgetvalue(r, 0, 0));
  int rows = PQntuples(r);
  PQclear(r);
  return rows;
}

/* The schema's version in *v: 0 for an empty database. Under the
 * migration lock, in its transaction. */
static int schema_version(tg__coll_pg_t *c, int *v) {
  char tables[8];
  int rc = query_text(c,
                      "SELECT concat("
                      " (to_regclass('schema_version') IS NOT NULL)::int,"
                      " (to_regclass('snapshots') IS NOT NULL)::int)",
                      0, NULL, tables, sizeof(tables), "schema");
  if (rc < 0) return rc;
  *v = 0;
  if (!strcmp(tables, "00")) return 0;
  if (!strcmp(tables, "01")) goto foreign;
  const char *params[1] = {COMPONENT};
  char text[24];
  rc = query_text(c, "SELECT version FROM schema_version WHERE component = $1",
                  1, params, text, sizeof(text), "schema");
  /* A schema_version of other columns is someone else's. */
  if (rc == -EIO) return TG_ENOT_SUPPORTED;
  if (rc < 0) return rc;
  if (rc == 0) goto foreign;
  char *end;
  long n = strtol(text, &end, 10);
  if (*end || n < 0 || n > INT32_MAX) goto foreign;
  *v = (int)n;
  return 0;
foreign:
  TG_ERROR(
      "catalog: the database holds tables that are not a tracegate"
      " catalog's");
  return TG_ENOT_SUPPORTED;
}

/* Brings the schema to TG_COLL_PG_SCHEMA, one transaction per step;
 * collectors opening at once wait for each other on the migration lock. */
static int migrate(tg__coll_pg_t *c) {
  int err;
  for (;;) {
    if ((err = exec_text(c, "BEGIN", "migration"))) return err;
    int version;
    char unused[8];
    if ((err = query_text(c, "SELECT pg_advisory_xact_lock(" LOCK_KEY ", -1)",
                          0, NULL, unused, sizeof(unused), "migration lock")) <
            0 ||
        (err = schema_version(c, &version)))
      goto fail;
    if (version > TG_COLL_PG_SCHEMA) {
      TG_ERROR("catalog: schema version %d is newer than this collector's (%d)",
               version, TG_COLL_PG_SCHEMA);
      err = TG_ENOT_SUPPORTED;
      goto fail;
    }
    if (version == TG_COLL_PG_SCHEMA)
      return exec_text(c, "COMMIT", "migration");
    char next[12];
    snprintf(next, sizeof(next), "%d", version + 1);
    const char *params[2] = {COMPONENT, next};
    if ((err = exec_text(c, migrations[version], "migration")) ||
        (err = query_text(c,
                          "INSERT INTO schema_version (component, version)"
                          " VALUES ($1, $2::integer) ON CONFLICT (component)"
                          " DO UPDATE SET version = EXCLUDED.version"
                          " RETURNING version",
                          2, params, unused, sizeof(unused), "migration")) <
            0 ||
        (err = exec_text(c, "COMMIT", "migration")))
      goto fail;
    TG_INFO("catalog: schema migrated to version %d", version + 1);
  }
fail:
  PQclear(PQexec(c->conn, "ROLLBACK"));
  return err < 0 ? err : -EIO;
}

/* Server notices go to our log, not to libpq's stderr. */
static void on_notice(void *arg, const char *message) {
  (void)arg;
  TG_INFO("catalog: postgresql: %.*s", (int)strcspn(message, "\n"), message);
}

/* What every session needs before its first operation: durable commits,
 * bounded waits, this member's lock, the statements. */
static int session_setup(tg__coll_pg_t *c, bool migrate_schema) {
  int err;
  if ((err = exec_text(
           c,
           "SET synchronous_commit = on;"
           " SET lock_timeout = " TG_STR(
               TG_COLL_PG_BUSY_MS) ";"
                                   " SET client_min_messages = warning",
           "session")))
    return err;
  char member[12], unused[8];
  snprintf(member, sizeof(member), "%u", (unsigned)c->member);
  const char *params[1] = {member};
  /* Waits TG_COLL_PG_BUSY_MS at most: the lock of a collector that just
   * died goes when the server notices its connection closed. */
  if ((err = query_text(c, "SELECT pg_advisory_lock(" LOCK_KEY ", $1::integer)",
                        1, params, unused, sizeof(unused), "member lock")) <
      0) {
    if (err == -EBUSY)
      TG_ERROR("catalog: member %u is in use by another collector",
               (unsigned)c->member);
    return err;
  }
  if (migrate_schema && (err = migrate(c))) return err;
  for (int i = 0; i < P_COUNT; i++) {
    Oid types[TG__COLL_PG_ARGS_MAX];
    const char *p = stmts[i].params;
    int n = (int)strlen(p);
    for (int k = 0; k < n; k++)
      types[k] = p[k] == 'y' ? OID_BYTEA : p[k] == 'd' ? OID_FLOAT8 : OID_INT8;
    PGresult *r = PQprepare(c->conn, stmt_name((tg__coll_pg_stmt_t)i),
                            stmts[i].sql, n, types);
    if (!r || PQresultStatus(r) != PGRES_COMMAND_OK)
      return tg__coll_pg_err(c, r, stmt_name((tg__coll_pg_stmt_t)i));
    PQclear(r);
  }
  return 0;
}

int tg__coll_pg_ready(tg__coll_pg_t *c) {
  if (PQstatus(c->conn) == CONNECTION_OK) {
    if (PQtransactionStatus(c->conn) == PQTRANS_IDLE) return 0;
    /* An operation that failed mid-transaction left it open. */
    return exec_text(c, "ROLLBACK", "rollback");
  }
  TG_WARN("catalog: connection lost; reconnecting");
  PQreset(c->conn);
  if (PQstatus(c->conn) != CONNECTION_OK)
    return tg__coll_pg_err(c, NULL, "reconnect");
  return session_setup(c, false);
}

void tg__coll_pg_close(tg_coll_catalog_t *cat) {
  tg__coll_pg_t *c = (tg__coll_pg_t *)cat;
  /* Closing the connection releases the member's lock. */
  PQfinish(c->conn);
  free(c);
}

int tg_coll_catalog_pg_open(const char *conninfo, uint32_t member,
                            tg_coll_catalog_t **out) {
  if (!conninfo || member > TG_COLL_PG_MEMBER_MAX) return -EINVAL;
  /* libpq's message about a string it cannot parse quotes the string, and
   * with it the password: parse it first and say only that it failed. */
  char *why = NULL;
  PQconninfoOption *opts = PQconninfoParse(conninfo, &why);
  PQfreemem(why);
  if (!opts) {
    TG_ERROR("catalog: the PostgreSQL connection string does not parse"
             " (libpq's reason is not logged: it quotes the string, password"
             " and all); check its %%-escapes and key=value pairs");
    return -EINVAL;
  }
  PQconninfoFree(opts);
  tg__coll_pg_t *c = calloc(1, sizeof(*c));
  if (!c) return -ENOMEM;
  c->base.ops = &tg__coll_pg_ops;
  c->member = member;
  /* Our defaults first: what |conninfo| says (expanded from "dbname")
   * overrides them. */
  const char *const keys[] = {"connect_timeout", "application_name", "dbname",
                              NULL};
  const char *const vals[] = {TG_STR(TG_COLL_PG_CONNECT_S),
                              "tracegate-collector", conninfo, NULL};
  c->conn = PQconnectdbParams(keys, vals, 1);
  int err;
  if (!c->conn) {
    err = -ENOMEM;
    goto fail;
  }
  if (PQstatus(c->conn) != CONNECTION_OK) {
    err = tg__coll_pg_err(c, NULL, "connect");
    goto fail;
  }
  PQsetNoticeProcessor(c->conn, on_notice, NULL);
  if ((err = session_setup(c, true))) goto fail;
  *out = &c->base;
  return 0;
fail:
  tg__coll_pg_close(&c->base);
  return err;
}
