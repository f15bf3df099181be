/* The SQLite catalog's operations (catalog.h): each one statement, or one
 * transaction of a few, on statements prepared at open. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/catalog/catalog_check.h"
#include "collector/catalog/catalog_sqlite_internal.h"

static tg__coll_sqlite_t *sq(tg_coll_catalog_t *cat) {
  return (tg__coll_sqlite_t *)cat;
}

/* NULL binds as "": every text column is NOT NULL. */
static void bind_text(sqlite3_stmt *st, int i, const char *s) {
  sqlite3_bind_text(st, i, s ? s : "", -1, SQLITE_STATIC);
}

/* Copies a column into a fixed buffer; a database edited by hand may hold
 * longer text than we ever write, which is cut, never overrun. */
static void column_text(sqlite3_stmt *st, int col, char *dst, size_t cap) {
  const unsigned char *s = sqlite3_column_text(st, col);
  size_t n = s ? (size_t)sqlite3_column_bytes(st, col) : 0;
  if (n >= cap) n = cap - 1;
  if (n) memcpy(dst, s, n);
  dst[n] = 0;
}

static uint64_t column_u64(sqlite3_stmt *st, int col) {
  int64_t v = sqlite3_column_int64(st, col);
  return v < 0 ? 0 : (uint64_t)v;
}

/* One row of SNAPSHOT_COLS (catalog_sqlite.c), in that order. */
static void read_snapshot(sqlite3_stmt *st, tg_coll_snapshot_t *s) {
  memset(s, 0, sizeof(*s));
  s->id = column_u64(st, 0);
  int state = sqlite3_column_int(st, 1);
  s->state = state >= 0 && state < TG_COLL_STATE_COUNT ? (tg_coll_state_t)state
                                                       : TG_COLL_FAILED;
  s->pinned = sqlite3_column_int(st, 2) != 0;
  s->started_ms = sqlite3_column_int64(st, 3);
  s->finished_ms = sqlite3_column_int64(st, 4);
  column_text(st, 5, s->trigger, sizeof(s->trigger));
  column_text(st, 6, s->reason, sizeof(s->reason));
  column_text(st, 7, s->origin, sizeof(s->origin));
  column_text(st, 8, s->failure, sizeof(s->failure));
  s->bytes = column_u64(st, 9);
  s->crc32 = (uint32_t)sqlite3_column_int64(st, 10);
  s->packets = column_u64(st, 11);
  s->loss = column_u64(st, 12);
  s->n_hosts = (uint32_t)sqlite3_column_int64(st, 13);
  s->n_hosts_failed = (uint32_t)sqlite3_column_int64(st, 14);
}

/* After a guarded UPDATE or DELETE changed nothing: why. -ENOENT (no row)
 * or |wrong| (the row is not in a state the transition starts from). */
static int why_unchanged(tg__coll_sqlite_t *c, uint64_t id, int wrong) {
  sqlite3_stmt *st = tg__coll_sqlite_stmt(c, S_STATE);
  sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc == SQLITE_ROW) return wrong;
  if (rc == SQLITE_DONE) return -ENOENT;
  return tg__coll_sqlite_err(c, rc, "state");
}

/* Steps a write that must change exactly one row. */
static int write_one(tg__coll_sqlite_t *c, sqlite3_stmt *st, uint64_t id,
                     int wrong, const char *what) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) return tg__coll_sqlite_err(c, rc, what);
  return sqlite3_changes(c->db) == 1 ? 0 : why_unchanged(c, id, wrong);
}

static int op_begin(tg_coll_catalog_t *cat, const tg_coll_begin_t *b,
                    int64_t started_ms, uint64_t *id) {
  tg__coll_sqlite_t *c = sq(cat);
  int err = tg__coll_check_begin(b);
  if (err) return err;
  sqlite3_stmt *st = tg__coll_sqlite_stmt(c, S_INSERT);
  sqlite3_bind_int64(st, 1, started_ms);
  bind_text(st, 2, b->trigger);
  bind_text(st, 3, b->reason);
  bind_text(st, 4, b->origin);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) return tg__coll_sqlite_err(c, rc, "begin");
  *id = (uint64_t)sqlite3_last_insert_rowid(c->db);
  return 0;
}

static int insert_host(tg__coll_sqlite_t *c, uint64_t id,
                       const tg_coll_host_result_t *h) {
  sqlite3_stmt *st = tg__coll_sqlite_stmt(c, S_INSERT_HOST);
  sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
  bind_text(st, 2, h->host);
  sqlite3_bind_int(st, 3, (int)h->outcome);
  bind_text(st, 4, h->error);
  sqlite3_bind_int64(st, 5, (sqlite3_int64)h->bytes);
  sqlite3_bind_int64(st, 6, (sqlite3_int64)h->packets);
  sqlite3_bind_int64(st, 7, (sqlite3_int64)h->loss);
  sqlite3_bind_int64(st, 8, h->window_first_ms);
  sqlite3_bind_int64(st, 9, h->window_last_ms);
  bind_text(st, 10, h->name);
  bind_text(st, 11, h->problems);
  bind_text(st, 12, h->boost);
  bind_text(st, 13, h->links);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  /* A host named twice breaks the primary key: the caller's mistake. */
  if ((rc & 0xff) == SQLITE_CONSTRAINT) return -EINVAL;
  return rc == SQLITE_DONE ? 0 : tg__coll_sqlite_err(c, rc, "finish host");
}

static int op_finish(tg_coll_catalog_t *cat, uint64_t id,
                     const tg_coll_finish_t *f) {
  tg__coll_sqlite_t *c = sq(cat);
  int err = tg__coll_check_finish(f);
  if (err) return err;
  uint32_t n_failed;
  uint64_t loss;
  tg_coll_state_t state = tg__coll_finish_state(f, &n_failed, &loss);
  bool live = state != TG_COLL_FAILED;
  if ((err = tg__coll_sqlite_exec(c, S_TX_BEGIN, "finish"))) return err;
  sqlite3_stmt *st = tg__coll_sqlite_stmt(c, S_FINISH);
  sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
  sqlite3_bind_int(st, 2, (int)state);
  sqlite3_bind_int64(st, 3, f->finished_ms);
  sqlite3_bind_int64(st, 4, live ? (sqlite3_int64)f->bytes : 0);
  sqlite3_bind_int64(st, 5, live ? (sqlite3_int64)f->crc32 : 0);
  sqlite3_bind_int64(st, 6, (sqlite3_int64)f->packets);
  sqlite3_bind_int64(st, 7, (sqlite3_int64)loss);
  sqlite3_bind_int64(st, 8, (sqlite3_int64)f->n_hosts);
  sqlite3_bind_int64(st, 9, (sqlite3_int64)n_failed);
  if ((err = write_one(c, st, id, -EINVAL, "finish"))) goto fail;
  for (size_t i = 0; i < f->n_hosts; i++)
    if ((err = insert_host(c, id, &f->hosts[i]))) goto fail;
  if ((err = tg__coll_sqlite_exec(c, S_TX_COMMIT, "finish"))) goto fail;
  return 0;
fail:
  tg__coll_sqlite_exec(c, S_TX_ROLLBACK, "finish rollback");
  return err;
}

static int op_fail(tg_coll_catalog_t *cat, uint64_t id, const char *why,
                   int64_t finished_ms) {
  tg__coll_sqlite_t *c = sq(cat);
  sqlite3_stmt *st = tg__coll_sqlite_stmt(c, S_FAIL);
  sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
  sqlite3_bind_int64(st, 2, finished_ms);
  size_t n = why ? strnlen(why, TG_COLL_ERROR_MAX) : 0;
  sqlite3_bind_text(st, 3, why ? why : "", (int)n, SQLITE_STATIC);
  return write_one(c, st, id, -EINVAL, "fail");
}

static int op_lose(tg_coll_catalog_t *cat, uint64_t id, const char *why) {
  tg__coll_sqlite_t *c = sq(cat);
  sqlite3_stmt *st = tg__coll_sqlite_stmt(c, S_LOSE);
  sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
  size_t n = why ? strnlen(why, TG_COLL_ERROR_MAX) : 0;
  sqlite3_bind_text(st, 2, why ? why : "", (int)n, SQLITE_STATIC);
  return write_one(c, st, id, -EINVAL, "lose");
}

static int op_list(tg_coll_catalog_t *cat, const tg_coll_filter_t *f,
                   tg_coll_snapshot_t *out, size_t cap, size_t *n) {
  tg__coll_sqlite_t *c = sq(cat);
  if (!tg__coll_filter_ok(f)) return -EINVAL;
  uint32_t limit = f->limit ? f->limit : TG_COLL_LIST_MAX;
  if (limit > cap) limit = (uint32_t)cap;
  sqlite3_stmt *st = tg__coll_sqlite_stmt(c, S_LIST);
  sqlite3_bind_int64(st, 1, f->from_ms);
  sqlite3_bind_int64(st, 2, f->to_ms);
  if (f->trigger) sqlite3_bind_text(st, 3, f->trigger, -1, SQLITE_STATIC);
  if (f->host) sqlite3_bind_text(st, 4, f->host, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 5, (int)f->states);
  sqlite3_bind_int64(st, 6,
                     f->before_id ? (sqlite3_int64)f->before_id : INT64_MAX);
  sqlite3_bind_int(st, 7, (int)limit);
  size_t got = 0;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) read_snapshot(st, &out[got++]);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) return tg__coll_sqlite_err(c, rc, "list");
  *n = got;
  return 0;
}

static int op_get(tg_coll_catalog_t *cat, uint64_t id,
                  tg_coll_snapshot_t *out) {
  tg__coll_sqlite_t *c = sq(cat);
  sqlite3_stmt *st = tg__coll_sqlite_stmt(c, S_GET);
  sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) read_snapshot(st, out);
  sqlite3_reset(st);
  if (rc == SQLITE_ROW) return 0;
  return rc == SQLITE_DONE ? -ENOENT : tg__coll_sqlite_err(c, rc, "get");
}

static int op_hosts(tg_coll_catalog_t *cat, uint64_t id, tg_coll_host_t *out,
                    size_t cap, size_t *n) {
  tg__coll_sqlite_t *c = sq(cat);
  sqlite3_stmt *st = tg__coll_sqlite_stmt(c, S_HOSTS);
  sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
  size_t count = 0;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (count < cap) {
      tg_coll_host_t *h = &out[count];
      column_text(st, 0, h->host, sizeof(h->host));
      h->outcome = tg__coll_host_outcome_of(sqlite3_column_int(st, 1));
      column_text(st, 2, h->error, sizeof(h->error));
      h->bytes = column_u64(st, 3);
      h->packets = column_u64(st, 4);
      h->loss = column_u64(st, 5);
      h->window_first_ms = sqlite3_column_int64(st, 6);
      h->window_last_ms = sqlite3_column_int64(st, 7);
      column_text(st, 8, h->name, sizeof(h->name));
      column_text(st, 9, h->problems, sizeof(h->problems));
      column_text(st, 10, h->boost, sizeof(h->boost));
      column_text(st, 11, h->links, sizeof(h->links));
    }
    count++;
  }
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) return tg__coll_sqlite_err(c, rc, "hosts");
  /* No hosts and no snapshot are told apart, as get() would. */
  if (count == 0) {
    int err = why_unchanged(c, id, 0);
    if (err) return err;
  }
  *n = count;
  return 0;
}

static int op_get_with_hosts(tg_coll_catalog_t *cat, uint64_t id,
                             tg_coll_snapshot_t *out, tg_coll_host_t *hosts,
                             size_t cap, size_t *n) {
  tg__coll_sqlite_t *c = sq(cat);
  /* One read transaction: both statements see the same database. */
  int err = tg__coll_sqlite_exec(c, S_TX_READ, "get");
  if (err) return err;
  if ((err = op_get(cat, id, out)) || (err = op_hosts(cat, id, hosts, cap, n))) {
    tg__coll_sqlite_exec(c, S_TX_ROLLBACK, "get rollback");
    return err;
  }
  return tg__coll_sqlite_exec(c, S_TX_COMMIT, "get");
}

static int op_set_pinned(tg_coll_catalog_t *cat, uint64_t id, bool pinned) {
  tg__coll_sqlite_t *c = sq(cat);
  sqlite3_stmt *st = tg__coll_sqlite_stmt(c, S_PIN);
  sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
  sqlite3_bind_int(st, 2, pinned ? 1 : 0);
  return write_one(c, st, id, 0, "pin");
}

static int op_set_problems(tg_coll_catalog_t *cat, uint64_t id,
                           const char *host, const char *problems) {
  tg__coll_sqlite_t *c = sq(cat);
  if (!host || strnlen(host, TG_COLL_HOST_MAX + 1) > TG_COLL_HOST_MAX ||
      (problems && strnlen(problems, TG_COLL_PROBLEMS_MAX + 1) >
                       TG_COLL_PROBLEMS_MAX))
    return -EINVAL;
  sqlite3_stmt *st = tg__coll_sqlite_stmt(c, S_SET_PROBLEMS);
  sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
  bind_text(st, 2, host);
  bind_text(st, 3, problems);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) return tg__coll_sqlite_err(c, rc, "set problems");
  if (sqlite3_changes(c->db) == 1) return 0;
  /* No such host, or the snapshot is missing or PENDING. */
  st = tg__coll_sqlite_stmt(c, S_STATE);
  sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
  rc = sqlite3_step(st);
  int pending = rc == SQLITE_ROW && sqlite3_column_int(st, 0) == 0;
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    return tg__coll_sqlite_err(c, rc, "state");
  return pending ? -EINVAL : -ENOENT;
}

static int op_remove(tg_coll_catalog_t *cat, uint64_t id, bool unless_pinned) {
  tg__coll_sqlite_t *c = sq(cat);
  sqlite3_stmt *st =
      tg__coll_sqlite_stmt(c, unless_pinned ? S_REMOVE_UNPINNED : S_REMOVE);
  sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
  return write_one(c, st, id, -EBUSY, "remove");
}

static int op_interrupt(tg_coll_catalog_t *cat, const char *why,
                        int64_t finished_ms, uint32_t *n) {
  tg__coll_sqlite_t *c = sq(cat);
  sqlite3_stmt *st = tg__coll_sqlite_stmt(c, S_INTERRUPT);
  sqlite3_bind_int64(st, 1, finished_ms);
  size_t len = why ? strnlen(why, TG_COLL_ERROR_MAX) : 0;
  sqlite3_bind_text(st, 2, why ? why : "", (int)len, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) return tg__coll_sqlite_err(c, rc, "interrupt");
  *n = (uint32_t)sqlite3_changes(c->db);
  return 0;
}

static int op_retention_view(tg_coll_catalog_t *cat,
                             tg_coll_retention_view_t *v) {
  tg__coll_sqlite_t *c = sq(cat);
  memset(v, 0, sizeof(*v));
  /* One statement: its rows are of one point in time. */
  sqlite3_stmt *st = tg__coll_sqlite_stmt(c, S_RETENTION);
  size_t cap = 0;
  int rc, err = 0;
  while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    tg_coll_retention_row_t r = {.id = column_u64(st, 0),
                                 .started_ms = sqlite3_column_int64(st, 1),
                                 .bytes = column_u64(st, 2),
                                 .pinned = sqlite3_column_int64(st, 3) != 0,
                                 .pending = sqlite3_column_int64(st, 4) != 0};
    err = tg__coll_retention_add(v, &cap, &r);
  }
  sqlite3_reset(st);
  if (!err && rc != SQLITE_DONE) err = tg__coll_sqlite_err(c, rc, "retention");
  if (err) {
    free(v->rows);
    memset(v, 0, sizeof(*v));
  }
  return err;
}

static int op_insert_at(tg_coll_catalog_t *cat, const tg_coll_insert_t *r) {
  tg__coll_sqlite_t *c = sq(cat);
  tg_coll_state_t state;
  uint32_t n_failed;
  uint64_t loss;
  int err = tg__coll_check_insert(r, &state, &n_failed, &loss);
  if (err) return err;
  bool live = state != TG_COLL_FAILED;
  const tg_coll_finish_t *f = r->finish;
  if ((err = tg__coll_sqlite_exec(c, S_TX_BEGIN, "insert at"))) return err;
  /* Asked first, in the write transaction: a duplicate is told apart
   * from the other constraints a bad row breaks. */
  if ((err = why_unchanged(c, r->id, -EEXIST)) != -ENOENT) {
    if (!err) err = -EIO;
    goto fail;
  }
  sqlite3_stmt *st = tg__coll_sqlite_stmt(c, S_INSERT_AT);
  sqlite3_bind_int64(st, 1, (sqlite3_int64)r->id);
  sqlite3_bind_int(st, 2, (int)state);
  sqlite3_bind_int(st, 3, r->pinned ? 1 : 0);
  sqlite3_bind_int64(st, 4, r->started_ms);
  sqlite3_bind_int64(st, 5, f->finished_ms);
  bind_text(st, 6, r->begin->trigger);
  bind_text(st, 7, r->begin->reason);
  bind_text(st, 8, r->begin->origin);
  bind_text(st, 9, r->failure);
  sqlite3_bind_int64(st, 10, live ? (sqlite3_int64)f->bytes : 0);
  sqlite3_bind_int64(st, 11, live ? (sqlite3_int64)f->crc32 : 0);
  sqlite3_bind_int64(st, 12, (sqlite3_int64)f->packets);
  sqlite3_bind_int64(st, 13, (sqlite3_int64)loss);
  sqlite3_bind_int64(st, 14, (sqlite3_int64)f->n_hosts);
  sqlite3_bind_int64(st, 15, (sqlite3_int64)n_failed);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) {
    err = tg__coll_sqlite_err(c, rc, "insert at");
    goto fail;
  }
  for (size_t i = 0; i < f->n_hosts; i++)
    if ((err = insert_host(c, r->id, &f->hosts[i]))) goto fail;
  if ((err = tg__coll_sqlite_exec(c, S_TX_COMMIT, "insert at"))) goto fail;
  return 0;
fail:
  tg__coll_sqlite_exec(c, S_TX_ROLLBACK, "insert at rollback");
  return err;
}

static int op_reserve(tg_coll_catalog_t *cat, uint64_t id) {
  tg__coll_sqlite_t *c = sq(cat);
  if (id == 0 || id > (uint64_t)INT64_MAX) return -EINVAL;
  int err = tg__coll_sqlite_exec(c, S_TX_BEGIN, "reserve");
  if (err) return err;
  static const tg__coll_stmt_t steps[] = {S_RESERVE_UPDATE, S_RESERVE_INSERT};
  for (size_t i = 0; !err && i < sizeof(steps) / sizeof(steps[0]); i++) {
    sqlite3_stmt *st = tg__coll_sqlite_stmt(c, steps[i]);
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    err = tg__coll_sqlite_exec(c, steps[i], "reserve");
  }
  if (!err && !(err = tg__coll_sqlite_exec(c, S_TX_COMMIT, "reserve")))
    return 0;
  tg__coll_sqlite_exec(c, S_TX_ROLLBACK, "reserve rollback");
  return err;
}

/* Text of at most |max| bytes (catalog.h: longer is cut, flagged). */
static void bind_cut(sqlite3_stmt *st, int i, const char *s, size_t max,
                     bool *cut) {
  size_t n = tg__coll_stored_len(s, max, cut);
  sqlite3_bind_text(st, i, s ? s : "", (int)n, SQLITE_STATIC);
}

static int insert_share(tg__coll_sqlite_t *c, uint64_t id,
                        const tg_coll_host_shares_t *h, size_t rank) {
  const tg_coll_share_in_t *r = &h->rows[rank];
  sqlite3_stmt *st = tg__coll_sqlite_stmt(c, S_SHARES_INSERT);
  bool cut = false, file_cut = false;
  sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
  bind_text(st, 2, h->host);
  sqlite3_bind_int64(st, 3, (sqlite3_int64)rank);
  sqlite3_bind_int(st, 4, (int)r->kind);
  bind_cut(st, 5, r->function, TG_COLL_FUNCTION_MAX, &cut);
  bind_cut(st, 6, r->file, TG_COLL_FILE_MAX, &file_cut);
  sqlite3_bind_int(st, 7, cut ? 1 : 0);
  sqlite3_bind_int64(st, 8, (sqlite3_int64)r->self_ns);
  sqlite3_bind_int64(st, 9, (sqlite3_int64)r->total_ns);
  sqlite3_bind_int64(st, 10, (sqlite3_int64)r->self_samples);
  sqlite3_bind_int64(st, 11, (sqlite3_int64)r->total_samples);
  sqlite3_bind_int64(st, 12, (sqlite3_int64)h->cpu_ns);
  sqlite3_bind_int64(st, 13, (sqlite3_int64)h->samples);
  sqlite3_bind_int(st, 14, h->by_samples ? 1 : 0);
  uint64_t whole = h->by_samples ? h->samples : h->cpu_ns;
  sqlite3_bind_double(
      st, 15,
      tg__coll_share_of(h->by_samples ? r->self_samples : r->self_ns, whole));
  sqlite3_bind_double(
      st, 16,
      tg__coll_share_of(h->by_samples ? r->total_samples : r->total_ns, whole));
  return tg__coll_sqlite_exec(c, S_SHARES_INSERT, "shares");
}

static int op_set_shares(tg_coll_catalog_t *cat, uint64_t id,
                         const tg_coll_host_shares_t *hosts, size_t n_hosts) {
  tg__coll_sqlite_t *c = sq(cat);
  int err = tg__coll_check_shares(hosts, n_hosts);
  if (err) return err;
  if (id == 0 || id > (uint64_t)INT64_MAX) return -ENOENT;
  if ((err = tg__coll_sqlite_exec(c, S_TX_BEGIN, "shares"))) return err;
  /* In the write transaction: the row cannot go before the commit. */
  sqlite3_stmt *st = tg__coll_sqlite_stmt(c, S_STATE);
  sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
  int rc = sqlite3_step(st);
  int state = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    err = tg__coll_sqlite_err(c, rc, "state");
  else if (state < 0)
    err = -ENOENT;
  else if (state == TG_COLL_PENDING)
    err = -EINVAL;
  if (err) goto fail;
  st = tg__coll_sqlite_stmt(c, S_SHARES_CLEAR);
  sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
  if ((err = tg__coll_sqlite_exec(c, S_SHARES_CLEAR, "shares"))) goto fail;
  for (size_t i = 0; i < n_hosts; i++)
    for (size_t r = 0; r < hosts[i].n_rows; r++)
      if ((err = insert_share(c, id, &hosts[i], r))) goto fail;
  if ((err = tg__coll_sqlite_exec(c, S_TX_COMMIT, "shares"))) goto fail;
  return 0;
fail:
  tg__coll_sqlite_exec(c, S_TX_ROLLBACK, "shares rollback");
  return err;
}

static void read_share(sqlite3_stmt *st, tg_coll_share_t *s) {
  memset(s, 0, sizeof(*s));
  s->snapshot_id = column_u64(st, 0);
  s->started_ms = sqlite3_column_int64(st, 1);
  column_text(st, 2, s->host, sizeof(s->host));
  s->rank = (uint32_t)column_u64(st, 3);
  int kind = sqlite3_column_int(st, 4);
  s->kind = kind >= 0 && kind <= TG_COLL_SHARE_REST ? (tg_coll_share_kind_t)kind
                                                    : TG_COLL_SHARE_PSEUDO;
  column_text(st, 5, s->file, sizeof(s->file));
  s->cut = sqlite3_column_int(st, 6) != 0;
  s->self_ns = column_u64(st, 7);
  s->total_ns = column_u64(st, 8);
  s->self_samples = column_u64(st, 9);
  s->total_samples = column_u64(st, 10);
  s->host_cpu_ns = column_u64(st, 11);
  s->host_samples = column_u64(st, 12);
  s->by_samples = sqlite3_column_int(st, 13) != 0;
  s->self_share = sqlite3_column_double(st, 14);
  s->total_share = sqlite3_column_double(st, 15);
}

static int op_find_shares(tg_coll_catalog_t *cat,
                          const tg_coll_share_query_t *q, tg_coll_share_t *out,
                          size_t cap, size_t *n) {
  tg__coll_sqlite_t *c = sq(cat);
  int err = tg__coll_check_share_query(q);
  if (err) return err;
  uint32_t limit = q->limit ? q->limit : TG_COLL_SHARES_LIST_MAX;
  if (limit > cap) limit = (uint32_t)cap;
  sqlite3_stmt *st =
      tg__coll_sqlite_stmt(c, q->host ? S_SHARES_FIND_HOST : S_SHARES_FIND);
  bind_text(st, 1, q->function);
  if (q->host) bind_text(st, 2, q->host);
  sqlite3_bind_int(st, 3, q->by_self ? 1 : 0);
  sqlite3_bind_double(st, 4, q->min_share);
  sqlite3_bind_int64(st, 5, q->from_ms);
  sqlite3_bind_int64(st, 6, q->to_ms);
  sqlite3_bind_int64(st, 7, (sqlite3_int64)q->after_id);
  bind_text(st, 8, q->after_host);
  sqlite3_bind_int64(st, 9, (sqlite3_int64)q->after_rank);
  sqlite3_bind_int(st, 10, (int)limit);
  size_t got = 0;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW && got < limit)
    read_share(st, &out[got++]);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW)
    return tg__coll_sqlite_err(c, rc, "find shares");
  *n = got;
  return 0;
}

const tg_coll_catalog_ops_t tg__coll_sqlite_ops = {
    .name = "sqlite",
    .close = tg__coll_sqlite_close,
    .begin = op_begin,
    .finish = op_finish,
    .fail = op_fail,
    .interrupt = op_interrupt,
    .lose = op_lose,
    .list = op_list,
    .get = op_get,
    .hosts = op_hosts,
    .get_with_hosts = op_get_with_hosts,
    .set_pinned = op_set_pinned,
    .set_problems = op_set_problems,
    .remove = op_remove,
    .retention_view = op_retention_view,
    .insert_at = op_insert_at,
    .reserve = op_reserve,
    .set_shares = op_set_shares,
    .find_shares = op_find_shares,
};
