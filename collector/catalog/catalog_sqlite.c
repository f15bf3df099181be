/* The SQLite catalog's database: open, pragmas, schema migrations, the
 * prepared statements, errors. The operations are in catalog_sqlite_ops.c.
 *
 * No statement here or there is built from text a caller gave: the SQL is
 * constant and every value is bound (sqlite3_bind_*). The one formatted
 * statement, "PRAGMA user_version = N", formats an integer of ours.
 */
#include "collector/catalog/catalog_sqlite.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/catalog/catalog_sqlite_internal.h"
#include "common/log.h"
#include "tracegate/error.h"

/* Step k takes the schema from version k to k + 1; each runs in the
 * transaction that also sets user_version, so a crash mid-migration leaves
 * the old version whole. Append steps; never edit a released one. */
static const char *const migrations[TG_COLL_SQLITE_SCHEMA] = {
    /* 0 -> 1: snapshots and their hosts.
     * state: 0 pending, 1 complete, 2 partial, 3 failed (catalog.h). */
    "CREATE TABLE snapshots ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " state INTEGER NOT NULL CHECK (state BETWEEN 0 AND 3),"
    " pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),"
    " started_ms INTEGER NOT NULL,"
    " finished_ms INTEGER NOT NULL DEFAULT 0,"
    " trigger TEXT NOT NULL,"
    " reason TEXT NOT NULL,"
    " origin TEXT NOT NULL,"
    " failure TEXT NOT NULL DEFAULT '',"
    " bytes INTEGER NOT NULL DEFAULT 0,"
    " crc32 INTEGER NOT NULL DEFAULT 0,"
    " packets INTEGER NOT NULL DEFAULT 0,"
    " loss INTEGER NOT NULL DEFAULT 0,"
    " n_hosts INTEGER NOT NULL DEFAULT 0,"
    " n_hosts_failed INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX snapshots_age ON snapshots (started_ms, id);"
    "CREATE INDEX snapshots_trigger ON snapshots (trigger);"
    "CREATE TABLE snapshot_hosts ("
    " snapshot_id INTEGER NOT NULL"
    "  REFERENCES snapshots (id) ON DELETE CASCADE,"
    " host TEXT NOT NULL,"
    " outcome INTEGER NOT NULL CHECK (outcome IN (0, 1)),"
    " error TEXT NOT NULL,"
    " bytes INTEGER NOT NULL,"
    " packets INTEGER NOT NULL,"
    " loss INTEGER NOT NULL,"
    " window_first_ms INTEGER NOT NULL,"
    " window_last_ms INTEGER NOT NULL,"
    " PRIMARY KEY (snapshot_id, host)) WITHOUT ROWID;"
    "CREATE INDEX snapshot_hosts_host ON snapshot_hosts (host);",
    /* 1 -> 2: a host's outcome may be 2, partial (catalog.h). SQLite
     * cannot change a CHECK in place: the table is made again, its rows
     * copied (its own sqlite.org/lang_altertable.html procedure; it is the
     * child of snapshots, so no reference to it needs repair). */
    "CREATE TABLE snapshot_hosts_v2 ("
    " snapshot_id INTEGER NOT NULL"
    "  REFERENCES snapshots (id) ON DELETE CASCADE,"
    " host TEXT NOT NULL,"
    " outcome INTEGER NOT NULL CHECK (outcome IN (0, 1, 2)),"
    " error TEXT NOT NULL,"
    " bytes INTEGER NOT NULL,"
    " packets INTEGER NOT NULL,"
    " loss INTEGER NOT NULL,"
    " window_first_ms INTEGER NOT NULL,"
    " window_last_ms INTEGER NOT NULL,"
    " PRIMARY KEY (snapshot_id, host)) WITHOUT ROWID;"
    "INSERT INTO snapshot_hosts_v2 SELECT snapshot_id, host, outcome, error,"
    " bytes, packets, loss, window_first_ms, window_last_ms"
    " FROM snapshot_hosts;"
    "DROP TABLE snapshot_hosts;"
    "ALTER TABLE snapshot_hosts_v2 RENAME TO snapshot_hosts;"
    "CREATE INDEX snapshot_hosts_host ON snapshot_hosts (host);",
    /* 2 -> 3: a host's name as the operator gave it, and its problems
     * (catalog.h); rows from before have neither. */
    "ALTER TABLE snapshot_hosts ADD COLUMN name TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE snapshot_hosts ADD COLUMN problems TEXT NOT NULL"
    " DEFAULT '';",
    /* 3 -> 4: a host's perf boost (catalog.h); rows from before have
     * none. */
    "ALTER TABLE snapshot_hosts ADD COLUMN boost TEXT NOT NULL DEFAULT '';",
    /* 4 -> 5: a host's requests across hosts (catalog.h); rows from
     * before have none. */
    "ALTER TABLE snapshot_hosts ADD COLUMN links TEXT NOT NULL DEFAULT '';",
    /* 5 -> 6: each host's function shares (catalog.h, docs/collector.md
     * "Function shares"); snapshots from before have none. kind: 0 a
     * function, 1 a pseudo name, 2 the host's rest. The shares are
     * stored, not computed by readers, so that SQL an operator writes
     * compares plain columns. The two indexes answer "F above X%" (by
     * function) and "F on host H over time" (by host, then function). */
    "CREATE TABLE function_shares ("
    " snapshot_id INTEGER NOT NULL"
    "  REFERENCES snapshots (id) ON DELETE CASCADE,"
    " host TEXT NOT NULL,"
    " rank INTEGER NOT NULL CHECK (rank >= 0),"
    " kind INTEGER NOT NULL CHECK (kind IN (0, 1, 2)),"
    " function TEXT NOT NULL,"
    " file TEXT NOT NULL,"
    " cut INTEGER NOT NULL CHECK (cut IN (0, 1)),"
    " self_ns INTEGER NOT NULL,"
    " total_ns INTEGER NOT NULL,"
    " self_samples INTEGER NOT NULL,"
    " total_samples INTEGER NOT NULL,"
    " host_cpu_ns INTEGER NOT NULL,"
    " host_samples INTEGER NOT NULL,"
    " by_samples INTEGER NOT NULL CHECK (by_samples IN (0, 1)),"
    " self_share REAL NOT NULL,"
    " total_share REAL NOT NULL,"
    " PRIMARY KEY (snapshot_id, host, rank)) WITHOUT ROWID;"
    "CREATE INDEX function_shares_function"
    " ON function_shares (function, snapshot_id);"
    "CREATE INDEX function_shares_host"
    " ON function_shares (host, function, snapshot_id);",
};

#define SNAPSHOT_COLS                                                    \
  "id, state, pinned, started_ms, finished_ms, trigger, reason, origin," \
  " failure, bytes, crc32, packets, loss, n_hosts, n_hosts_failed"

static const char *const sql[S_COUNT] = {
    [S_TX_BEGIN] = "BEGIN IMMEDIATE",
    [S_TX_READ] = "BEGIN",
    [S_TX_COMMIT] = "COMMIT",
    [S_TX_ROLLBACK] = "ROLLBACK",
    [S_INSERT] =
        "INSERT INTO snapshots (state, started_ms, trigger, reason,"
        " origin) VALUES (0, ?1, ?2, ?3, ?4)",
    [S_FINISH] =
        "UPDATE snapshots SET state = ?2, finished_ms = ?3,"
        " bytes = ?4, crc32 = ?5, packets = ?6, loss = ?7,"
        " n_hosts = ?8, n_hosts_failed = ?9"
        " WHERE id = ?1 AND state = 0",
    [S_INSERT_HOST] =
        "INSERT INTO snapshot_hosts (snapshot_id, host,"
        " outcome, error, bytes, packets, loss,"
        " window_first_ms, window_last_ms, name, problems, boost, links)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    [S_FAIL] =
        "UPDATE snapshots SET state = 3, finished_ms = ?2,"
        " failure = ?3 WHERE id = ?1 AND state = 0",
    [S_LOSE] =
        "UPDATE snapshots SET state = 3, failure = ?2, bytes = 0,"
        " crc32 = 0 WHERE id = ?1 AND state IN (1, 2)",
    [S_LIST] = "SELECT " SNAPSHOT_COLS
               " FROM snapshots s"
               " WHERE started_ms >= ?1 AND started_ms < ?2"
               " AND (?3 IS NULL OR trigger = ?3)"
               " AND (?4 IS NULL OR EXISTS (SELECT 1 FROM snapshot_hosts h"
               "  WHERE h.snapshot_id = s.id AND h.host = ?4))"
               " AND (?5 = 0 OR (?5 >> state) & 1)"
               " AND id < ?6"
               " ORDER BY id DESC LIMIT ?7",
    [S_GET] = "SELECT " SNAPSHOT_COLS " FROM snapshots WHERE id = ?1",
    [S_HOSTS] =
        "SELECT host, outcome, error, bytes, packets, loss,"
        " window_first_ms, window_last_ms, name, problems, boost, links"
        " FROM snapshot_hosts"
        " WHERE snapshot_id = ?1 ORDER BY host",
    [S_PIN] = "UPDATE snapshots SET pinned = ?2 WHERE id = ?1",
    [S_SET_PROBLEMS] =
        "UPDATE snapshot_hosts SET problems = ?3 WHERE snapshot_id = ?1"
        " AND host = ?2 AND EXISTS (SELECT 1 FROM snapshots"
        " WHERE id = ?1 AND state <> 0)",
    [S_STATE] = "SELECT state FROM snapshots WHERE id = ?1",
    [S_REMOVE] = "DELETE FROM snapshots WHERE id = ?1 AND state <> 0",
    [S_REMOVE_UNPINNED] =
        "DELETE FROM snapshots WHERE id = ?1 AND state <> 0 AND pinned = 0",
    /* One collector per database (the store's lock): every PENDING row is
     * an interrupted one. */
    [S_INTERRUPT] =
        "UPDATE snapshots SET state = 3, finished_ms = ?1, failure = ?2"
        " WHERE state = 0",
    /* Every row: what retention decides from (retention.h). */
    [S_RETENTION] =
        "SELECT id, started_ms, CASE WHEN state IN (1, 2) THEN bytes"
        " ELSE 0 END, pinned, state = 0 FROM snapshots"
        " ORDER BY started_ms, id",
    /* A rebuild's row at its id. AUTOINCREMENT keeps sqlite_sequence at
     * the largest id ever inserted, explicit ones included, so a later
     * begin() gets a higher one. */
    [S_INSERT_AT] =
        "INSERT INTO snapshots (id, state, pinned, started_ms, finished_ms,"
        " trigger, reason, origin, failure, bytes, crc32, packets, loss,"
        " n_hosts, n_hosts_failed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,"
        " ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
    /* The allocation past an id with no row (sqlite.org/autoinc.html:
     * sqlite_sequence is an ordinary table to update). */
    [S_RESERVE_UPDATE] =
        "UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'snapshots'"
        " AND seq < ?1",
    [S_SHARES_CLEAR] = "DELETE FROM function_shares WHERE snapshot_id = ?1",
    [S_SHARES_INSERT] =
        "INSERT INTO function_shares (snapshot_id, host, rank, kind,"
        " function, file, cut, self_ns, total_ns, self_samples,"
        " total_samples, host_cpu_ns, host_samples, by_samples, self_share,"
        " total_share) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,"
        " ?11, ?12, ?13, ?14, ?15, ?16)",
    /* Paging on the answer's order: (snapshot_id DESC, host, rank). Two
     * statements, so that each has its index: any host (by function),
     * one host (by host and function). */
#define SHARES_COLS                                                        \
  "SELECT f.snapshot_id, s.started_ms, f.host, f.rank, f.kind, f.file,"   \
  " f.cut, f.self_ns, f.total_ns, f.self_samples, f.total_samples,"       \
  " f.host_cpu_ns, f.host_samples, f.by_samples, f.self_share,"           \
  " f.total_share FROM function_shares f"                                 \
  " JOIN snapshots s ON s.id = f.snapshot_id WHERE f.function = ?1"
#define SHARES_FILTER                                                      \
  " AND (?4 <= 0"                                                         \
  "  OR (CASE WHEN ?3 THEN f.self_share ELSE f.total_share END) > ?4)"    \
  " AND s.started_ms >= ?5 AND s.started_ms < ?6"                         \
  " AND (?7 = 0 OR f.snapshot_id < ?7 OR (f.snapshot_id = ?7"             \
  "  AND (f.host > ?8 OR (f.host = ?8 AND f.rank > ?9))))"                \
  " ORDER BY f.snapshot_id DESC, f.host, f.rank LIMIT ?10"
    [S_SHARES_FIND] = SHARES_COLS " AND ?2 IS NULL" SHARES_FILTER,
    [S_SHARES_FIND_HOST] = SHARES_COLS " AND f.host = ?2" SHARES_FILTER,
    [S_RESERVE_INSERT] =
        "INSERT INTO sqlite_sequence (name, seq) SELECT 'snapshots', ?1"
        " WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence"
        " WHERE name = 'snapshots')",
};

int tg__coll_sqlite_err(tg__coll_sqlite_t *c, int rc, const char *what) {
  TG_ERROR("catalog: %s: sqlite error %d (%s)", what, rc,
           c && c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return -EBUSY;
    case SQLITE_NOMEM:
      return -ENOMEM;
    case SQLITE_FULL:
      return -ENOSPC;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return -EACCES;
    case SQLITE_CANTOPEN:
      return -ENOENT;
    case SQLITE_CONSTRAINT:
    case SQLITE_TOOBIG:
    case SQLITE_RANGE:
      return -EINVAL;
    default:
      return -EIO;
  }
}

sqlite3_stmt *tg__coll_sqlite_stmt(tg__coll_sqlite_t *c, tg__coll_stmt_t s) {
  sqlite3_stmt *st = c->stmt[s];
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return st;
}

int tg__coll_sqlite_exec(tg__coll_sqlite_t *c, tg__coll_stmt_t s,
                         const char *what) {
  sqlite3_stmt *st = c->stmt[s];
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? 0 : tg__coll_sqlite_err(c, rc, what);
}

/* A pragma whose one-row answer (if any) we read as an integer. */
static int pragma_int(tg__coll_sqlite_t *c, const char *text, int64_t *out) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(c->db, text, -1, &st, NULL);
  if (rc != SQLITE_OK) return tg__coll_sqlite_err(c, rc, text);
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW && out) *out = sqlite3_column_int64(st, 0);
  int err = rc == SQLITE_ROW || rc == SQLITE_DONE
                ? 0
                : tg__coll_sqlite_err(c, rc, text);
  sqlite3_finalize(st);
  return err;
}

static int exec_text(tg__coll_sqlite_t *c, const char *text, const char *what) {
  int rc = sqlite3_exec(c->db, text, NULL, NULL, NULL);
  return rc == SQLITE_OK ? 0 : tg__coll_sqlite_err(c, rc, what);
}

static int set_wal(tg__coll_sqlite_t *c) {
  sqlite3_stmt *st = NULL;
  int rc =
      sqlite3_prepare_v2(c->db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
  if (rc != SQLITE_OK) return tg__coll_sqlite_err(c, rc, "journal_mode");
  rc = sqlite3_step(st);
  const unsigned char *mode =
      rc == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
  int err = 0;
  if (!mode || strcmp((const char *)mode, "wal") != 0) {
    TG_ERROR("catalog: the database refused WAL mode (%s)",
             mode ? (const char *)mode : sqlite3_errmsg(c->db));
    err = -EIO;
  }
  sqlite3_finalize(st);
  return err;
}

/* Brings the schema to TG_COLL_SQLITE_SCHEMA, one transaction per step. */
static int migrate(tg__coll_sqlite_t *c) {
  int err;
  for (;;) {
    err = exec_text(c, "BEGIN IMMEDIATE", "migration");
    if (err) return err;
    int64_t version = 0, app_id = 0;
    if ((err = pragma_int(c, "PRAGMA user_version", &version)) ||
        (err = pragma_int(c, "PRAGMA application_id", &app_id)))
      goto fail;
    if (app_id != 0 && app_id != TG_COLL_SQLITE_APP_ID) {
      TG_ERROR("catalog: not a tracegate catalog (application_id %lld)",
               (long long)app_id);
      err = TG_ENOT_SUPPORTED;
      goto fail;
    }
    if (version > TG_COLL_SQLITE_SCHEMA || version < 0) {
      TG_ERROR(
          "catalog: schema version %lld is newer than this collector's"
          " (%d)",
          (long long)version, TG_COLL_SQLITE_SCHEMA);
      err = TG_ENOT_SUPPORTED;
      goto fail;
    }
    if (version == TG_COLL_SQLITE_SCHEMA)
      return exec_text(c, "COMMIT", "migration");
    char stamp[96];
    snprintf(stamp, sizeof(stamp),
             "PRAGMA user_version = %d; PRAGMA application_id = %d",
             (int)version + 1, TG_COLL_SQLITE_APP_ID);
    if ((err = exec_text(c, migrations[version], "migration")) ||
        (err = exec_text(c, stamp, "migration")) ||
        (err = exec_text(c, "COMMIT", "migration")))
      goto fail;
    TG_INFO("catalog: schema migrated to version %d", (int)version + 1);
  }
fail:
  sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
  return err;
}

void tg__coll_sqlite_close(tg_coll_catalog_t *cat) {
  tg__coll_sqlite_t *c = (tg__coll_sqlite_t *)cat;
  for (int i = 0; i < S_COUNT; i++) sqlite3_finalize(c->stmt[i]);
  /* The last connection's close checkpoints and removes the WAL. */
  if (c->db && sqlite3_close(c->db) != SQLITE_OK)
    TG_ERROR("catalog: close: %s", sqlite3_errmsg(c->db));
  free(c);
}

/* Opens |path| (creating it when |create|) and takes away what the
 * snapshots' mode (0640, store_writer.c) does not give. 0 also when it
 * does not exist and is not to be created. */
static int make_private(const char *path, bool create) {
  int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0),
                0640);
  if (fd < 0 && !create && errno == ENOENT) return 0;
  int err = 0;
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0)
    err = -errno;
  else if ((st.st_mode & 0137) != 0 && fchmod(fd, st.st_mode & 0640) != 0)
    err = -errno;
  if (fd >= 0) close(fd);
  if (err) TG_ERROR("catalog: %s: %s", path, strerror(-err));
  return err;
}

/* The database and its -wal and -shm readable by the owner and group
 * only, as the snapshots. SQLite makes a new database 0644, and its -wal
 * and -shm with the mode of the database file: so the database is made
 * here first, and files an older collector left are brought to it. */
static int private_files(const char *path) {
  static const char *const suffixes[] = {"-wal", "-shm"};
  int err = make_private(path, true);
  for (size_t i = 0; !err && i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
    char p[4096];
    int n = snprintf(p, sizeof(p), "%s%s", path, suffixes[i]);
    if (n < 0 || (size_t)n >= sizeof(p)) return -ENAMETOOLONG;
    err = make_private(p, false);
  }
  return err;
}

int tg_coll_catalog_sqlite_open(const char *path, tg_coll_catalog_t **out) {
  int err = private_files(path);
  if (err) return err;
  tg__coll_sqlite_t *c = calloc(1, sizeof(*c));
  if (!c) return -ENOMEM;
  c->base.ops = &tg__coll_sqlite_ops;
  /* Not SQLITE_OPEN_NOFOLLOW: it refuses a symlink in any component of
   * the path, and a store directory may well be one. */
  int rc = sqlite3_open_v2(path, &c->db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
  if (rc != SQLITE_OK) {
    err = tg__coll_sqlite_err(c, rc, "open");
    goto fail;
  }
  sqlite3_extended_result_codes(c->db, 1);
  if ((rc = sqlite3_busy_timeout(c->db, TG_COLL_SQLITE_BUSY_MS)) != SQLITE_OK) {
    err = tg__coll_sqlite_err(c, rc, "busy_timeout");
    goto fail;
  }
  if ((err = set_wal(c)) ||
      (err = pragma_int(c, "PRAGMA synchronous = FULL", NULL)) ||
      (err = pragma_int(c, "PRAGMA foreign_keys = ON", NULL)) ||
      (err = migrate(c)))
    goto fail;
  for (int i = 0; i < S_COUNT; i++) {
    rc = sqlite3_prepare_v3(c->db, sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                            &c->stmt[i], NULL);
    if (rc != SQLITE_OK) {
      err = tg__coll_sqlite_err(c, rc, sql[i]);
      goto fail;
    }
  }
  *out = &c->base;
  return 0;
fail:
  tg__coll_sqlite_close(&c->base);
  return err;
}
