/* The PostgreSQL catalog's operations (catalog.h): each one prepared
 * statement, or one transaction of a few. Each starts with
 * tg__coll_pg_ready(), which brings a lost connection back (and with it
 * the member's lock) before anything is sent. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collector/catalog/catalog_check.h"
#include "collector/catalog/catalog_pg_internal.h"
#include "common/log.h"

static tg__coll_pg_t *pg(tg_coll_catalog_t *cat) {
  return (tg__coll_pg_t *)cat;
}

static uint64_t col_u64(const PGresult *r, int row, int col) {
  int64_t v = tg__coll_pg_int(r, row, col);
  return v < 0 ? 0 : (uint64_t)v;
}

/* One row of SNAPSHOT_COLS (catalog_pg.c) from column |c0| on. */
static void read_snapshot(const PGresult *r, int row, int c0,
                          tg_coll_snapshot_t *s) {
  memset(s, 0, sizeof(*s));
  s->id = col_u64(r, row, c0);
  int64_t state = tg__coll_pg_int(r, row, c0 + 1);
  s->state = state >= 0 && state < TG_COLL_STATE_COUNT ? (tg_coll_state_t)state
                                                       : TG_COLL_FAILED;
  s->pinned = tg__coll_pg_bool(r, row, c0 + 2);
  s->started_ms = tg__coll_pg_int(r, row, c0 + 3);
  s->finished_ms = tg__coll_pg_int(r, row, c0 + 4);
  tg__coll_pg_text(r, row, c0 + 5, s->trigger, sizeof(s->trigger));
  tg__coll_pg_text(r, row, c0 + 6, s->reason, sizeof(s->reason));
  tg__coll_pg_text(r, row, c0 + 7, s->origin, sizeof(s->origin));
  tg__coll_pg_text(r, row, c0 + 8, s->failure, sizeof(s->failure));
  s->bytes = col_u64(r, row, c0 + 9);
  s->crc32 = (uint32_t)tg__coll_pg_int(r, row, c0 + 10);
  s->packets = col_u64(r, row, c0 + 11);
  s->loss = col_u64(r, row, c0 + 12);
  s->n_hosts = (uint32_t)tg__coll_pg_int(r, row, c0 + 13);
  s->n_hosts_failed = (uint32_t)tg__coll_pg_int(r, row, c0 + 14);
}

/* Runs a GUARDED statement: 0 when it changed the row, else -ENOENT (no
 * row) or |wrong| (not in a state the transition starts from). */
static int guarded(tg__coll_pg_t *c, tg__coll_pg_stmt_t s,
                   const tg__coll_pg_args_t *a, int wrong, const char *what) {
  PGresult *r;
  int err = tg__coll_pg_run(c, s, a, &r, what);
  if (err) return err;
  if (PQntuples(r) != 1)
    err = -EIO;
  else if (tg__coll_pg_int(r, 0, 0) != 1)
    err = tg__coll_pg_bool(r, 0, 1) ? wrong : -ENOENT;
  PQclear(r);
  return err;
}

static int op_begin(tg_coll_catalog_t *cat, const tg_coll_begin_t *b,
                    int64_t started_ms, uint64_t *id) {
  tg__coll_pg_t *c = pg(cat);
  int err = tg__coll_check_begin(b);
  if (err || (err = tg__coll_pg_ready(c))) return err;
  tg__coll_pg_args_t a = {0};
  tg__coll_pg_arg_int(&a, c->member);
  tg__coll_pg_arg_int(&a, started_ms);
  tg__coll_pg_arg_text(&a, b->trigger, TG_COLL_TRIGGER_MAX);
  tg__coll_pg_arg_text(&a, b->reason, TG_COLL_REASON_MAX);
  tg__coll_pg_arg_text(&a, b->origin, TG_COLL_HOST_MAX);
  PGresult *r;
  /* One statement, committed on return: the row exists before the id. */
  if ((err = tg__coll_pg_run(c, P_INSERT, &a, &r, "begin"))) return err;
  int64_t v = PQntuples(r) == 1 ? tg__coll_pg_int(r, 0, 0) : 0;
  PQclear(r);
  if (v <= 0) return -EIO;
  *id = (uint64_t)v;
  return 0;
}

static int insert_host(tg__coll_pg_t *c, uint64_t id,
                       const tg_coll_host_result_t *h) {
  tg__coll_pg_args_t a = {0};
  tg__coll_pg_arg_int(&a, (int64_t)id);
  tg__coll_pg_arg_text(&a, h->host, TG_COLL_HOST_MAX);
  tg__coll_pg_arg_int(&a, (int64_t)h->outcome);
  tg__coll_pg_arg_text(&a, h->error, TG_COLL_ERROR_MAX);
  tg__coll_pg_arg_int(&a, (int64_t)h->bytes);
  tg__coll_pg_arg_int(&a, (int64_t)h->packets);
  tg__coll_pg_arg_int(&a, (int64_t)h->loss);
  tg__coll_pg_arg_int(&a, h->window_first_ms);
  tg__coll_pg_arg_int(&a, h->window_last_ms);
  tg__coll_pg_arg_text(&a, h->name, TG_COLL_HOST_MAX);
  tg__coll_pg_arg_text(&a, h->problems, TG_COLL_PROBLEMS_MAX);
  tg__coll_pg_arg_text(&a, h->boost, TG_COLL_BOOST_MAX);
  tg__coll_pg_arg_text(&a, h->links, TG_COLL_LINKS_MAX);
  PGresult *r;
  /* A host named twice breaks the primary key (-EINVAL): the caller's
   * mistake. */
  int err = tg__coll_pg_run(c, P_INSERT_HOST, &a, &r, "finish host");
  if (!err) PQclear(r);
  return err;
}

static int op_get(tg_coll_catalog_t *cat, uint64_t id, tg_coll_snapshot_t *out);

/* The connection broke around COMMIT: whether it happened is unknown to
 * the client. The reconnect waits for the member's lock, which the old
 * session holds until the server has ended it (and its transaction, one
 * way or the other); then the row tells. A live row without its file
 * must never follow from a commit we wrongly took for failed. */
static int commit_outcome(tg__coll_pg_t *c, uint64_t id, tg_coll_state_t want,
                          int err) {
  tg_coll_snapshot_t s;
  if (op_get(&c->base, id, &s) == 0 && s.state == want) {
    TG_WARN(
        "catalog: finish: the commit went through before the connection"
        " broke");
    return 0;
  }
  return err;
}

static int op_finish(tg_coll_catalog_t *cat, uint64_t id,
                     const tg_coll_finish_t *f) {
  tg__coll_pg_t *c = pg(cat);
  int err = tg__coll_check_finish(f);
  if (err || (err = tg__coll_pg_ready(c))) return err;
  uint32_t n_failed;
  uint64_t loss;
  tg_coll_state_t state = tg__coll_finish_state(f, &n_failed, &loss);
  bool live = state != TG_COLL_FAILED;
  tg__coll_pg_args_t a = {0};
  tg__coll_pg_arg_int(&a, (int64_t)id);
  tg__coll_pg_arg_int(&a, (int64_t)state);
  tg__coll_pg_arg_int(&a, f->finished_ms);
  tg__coll_pg_arg_int(&a, live ? (int64_t)f->bytes : 0);
  tg__coll_pg_arg_int(&a, live ? (int64_t)f->crc32 : 0);
  tg__coll_pg_arg_int(&a, (int64_t)f->packets);
  tg__coll_pg_arg_int(&a, (int64_t)loss);
  tg__coll_pg_arg_int(&a, (int64_t)f->n_hosts);
  tg__coll_pg_arg_int(&a, (int64_t)n_failed);
  if ((err = tg__coll_pg_tx(c, "BEGIN", "finish"))) return err;
  if ((err = guarded(c, P_FINISH, &a, -EINVAL, "finish"))) goto fail;
  for (size_t i = 0; i < f->n_hosts; i++)
    if ((err = insert_host(c, id, &f->hosts[i]))) goto fail;
  if ((err = tg__coll_pg_tx(c, "COMMIT", "finish"))) {
    if (PQstatus(c->conn) == CONNECTION_BAD)
      return commit_outcome(c, id, state, err);
    goto fail;
  }
  return 0;
fail:
  if (PQstatus(c->conn) == CONNECTION_OK) PQclear(PQexec(c->conn, "ROLLBACK"));
  return err;
}

static int op_fail(tg_coll_catalog_t *cat, uint64_t id, const char *why,
                   int64_t finished_ms) {
  tg__coll_pg_t *c = pg(cat);
  int err = tg__coll_pg_ready(c);
  if (err) return err;
  tg__coll_pg_args_t a = {0};
  tg__coll_pg_arg_int(&a, (int64_t)id);
  tg__coll_pg_arg_int(&a, finished_ms);
  tg__coll_pg_arg_text(&a, why, TG_COLL_ERROR_MAX);
  return guarded(c, P_FAIL, &a, -EINVAL, "fail");
}

static int op_interrupt(tg_coll_catalog_t *cat, const char *why,
                        int64_t finished_ms, uint32_t *n) {
  tg__coll_pg_t *c = pg(cat);
  int err = tg__coll_pg_ready(c);
  if (err) return err;
  tg__coll_pg_args_t a = {0};
  tg__coll_pg_arg_int(&a, finished_ms);
  tg__coll_pg_arg_text(&a, why, TG_COLL_ERROR_MAX);
  PGresult *r;
  if ((err = tg__coll_pg_run(c, P_INTERRUPT, &a, &r, "interrupt"))) return err;
  *n = PQntuples(r) == 1 ? (uint32_t)col_u64(r, 0, 0) : 0;
  PQclear(r);
  return 0;
}

static int op_lose(tg_coll_catalog_t *cat, uint64_t id, const char *why) {
  tg__coll_pg_t *c = pg(cat);
  int err = tg__coll_pg_ready(c);
  if (err) return err;
  tg__coll_pg_args_t a = {0};
  tg__coll_pg_arg_int(&a, (int64_t)id);
  tg__coll_pg_arg_text(&a, why, TG_COLL_ERROR_MAX);
  return guarded(c, P_LOSE, &a, -EINVAL, "lose");
}

static int op_list(tg_coll_catalog_t *cat, const tg_coll_filter_t *f,
                   tg_coll_snapshot_t *out, size_t cap, size_t *n) {
  tg__coll_pg_t *c = pg(cat);
  if (!tg__coll_filter_ok(f)) return -EINVAL;
  int err = tg__coll_pg_ready(c);
  if (err) return err;
  uint32_t limit = f->limit ? f->limit : TG_COLL_LIST_MAX;
  if (limit > cap) limit = (uint32_t)cap;
  tg__coll_pg_args_t a = {0};
  tg__coll_pg_arg_int(&a, f->from_ms);
  tg__coll_pg_arg_int(&a, f->to_ms);
  tg__coll_pg_arg_opt_text(&a, f->trigger);
  tg__coll_pg_arg_opt_text(&a, f->host);
  tg__coll_pg_arg_int(&a, (int64_t)f->states);
  tg__coll_pg_arg_int(&a, f->before_id ? (int64_t)f->before_id : INT64_MAX);
  tg__coll_pg_arg_int(&a, (int64_t)limit);
  PGresult *r;
  if ((err = tg__coll_pg_run(c, P_LIST, &a, &r, "list"))) return err;
  int rows = PQntuples(r);
  for (int i = 0; i < rows && (size_t)i < limit; i++)
    read_snapshot(r, i, 0, &out[i]);
  *n = (size_t)rows < limit ? (size_t)rows : limit;
  PQclear(r);
  return 0;
}

/* A read of one snapshot's rows, as an operation of its own. */
static int read_id(tg__coll_pg_t *c, tg__coll_pg_stmt_t s, uint64_t id,
                   PGresult **r, const char *what) {
  int err = tg__coll_pg_ready(c);
  if (err) return err;
  tg__coll_pg_args_t a = {0};
  tg__coll_pg_arg_int(&a, (int64_t)id);
  return tg__coll_pg_run(c, s, &a, r, what);
}

/* P_GET's answer into |out|; clears |r|. */
static int get_result(PGresult *r, tg_coll_snapshot_t *out) {
  int err = 0;
  if (PQntuples(r) == 1)
    read_snapshot(r, 0, 0, out);
  else
    err = -ENOENT;
  PQclear(r);
  return err;
}

/* P_HOSTS's answer into |out| (at most |cap|, *n how many); clears |r|. */
static int hosts_result(PGresult *r, tg_coll_host_t *out, size_t cap,
                        size_t *n) {
  int rows = PQntuples(r);
  size_t count = 0;
  for (int i = 0; i < rows; i++) {
    if (PQgetisnull(r, i, 0)) continue; /* the snapshot has no hosts */
    if (count < cap) {
      tg_coll_host_t *h = &out[count];
      tg__coll_pg_text(r, i, 0, h->host, sizeof(h->host));
      h->outcome = tg__coll_host_outcome_of(tg__coll_pg_int(r, i, 1));
      tg__coll_pg_text(r, i, 2, h->error, sizeof(h->error));
      h->bytes = col_u64(r, i, 3);
      h->packets = col_u64(r, i, 4);
      h->loss = col_u64(r, i, 5);
      h->window_first_ms = tg__coll_pg_int(r, i, 6);
      h->window_last_ms = tg__coll_pg_int(r, i, 7);
      tg__coll_pg_text(r, i, 8, h->name, sizeof(h->name));
      tg__coll_pg_text(r, i, 9, h->problems, sizeof(h->problems));
      tg__coll_pg_text(r, i, 10, h->boost, sizeof(h->boost));
      tg__coll_pg_text(r, i, 11, h->links, sizeof(h->links));
    }
    count++;
  }
  PQclear(r);
  if (rows == 0) return -ENOENT;
  *n = count;
  return 0;
}

static int op_get(tg_coll_catalog_t *cat, uint64_t id,
                  tg_coll_snapshot_t *out) {
  PGresult *r;
  int err = read_id(pg(cat), P_GET, id, &r, "get");
  return err ? err : get_result(r, out);
}

static int op_hosts(tg_coll_catalog_t *cat, uint64_t id, tg_coll_host_t *out,
                    size_t cap, size_t *n) {
  PGresult *r;
  int err = read_id(pg(cat), P_HOSTS, id, &r, "hosts");
  return err ? err : hosts_result(r, out, cap, n);
}

static int op_get_with_hosts(tg_coll_catalog_t *cat, uint64_t id,
                             tg_coll_snapshot_t *out, tg_coll_host_t *hosts,
                             size_t cap, size_t *n) {
  tg__coll_pg_t *c = pg(cat);
  int err = tg__coll_pg_ready(c);
  if (err) return err;
  /* One snapshot of the database for both statements: another member's
   * delete in between is either all seen or not at all. */
  if ((err = tg__coll_pg_tx(
           c, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", "get")))
    return err;
  tg__coll_pg_args_t a = {0};
  tg__coll_pg_arg_int(&a, (int64_t)id);
  PGresult *r;
  if (!(err = tg__coll_pg_run(c, P_GET, &a, &r, "get")))
    err = get_result(r, out);
  if (!err && !(err = tg__coll_pg_run(c, P_HOSTS, &a, &r, "hosts")))
    err = hosts_result(r, hosts, cap, n);
  int end = tg__coll_pg_tx(c, err ? "ROLLBACK" : "COMMIT", "get");
  return err ? err : end;
}

static int op_set_pinned(tg_coll_catalog_t *cat, uint64_t id, bool pinned) {
  tg__coll_pg_t *c = pg(cat);
  int err = tg__coll_pg_ready(c);
  if (err) return err;
  tg__coll_pg_args_t a = {0};
  tg__coll_pg_arg_int(&a, (int64_t)id);
  tg__coll_pg_arg_int(&a, pinned ? 1 : 0);
  return guarded(c, P_PIN, &a, 0, "pin");
}

static int op_set_problems(tg_coll_catalog_t *cat, uint64_t id,
                           const char *host, const char *problems) {
  tg__coll_pg_t *c = pg(cat);
  if (!host || strnlen(host, TG_COLL_HOST_MAX + 1) > TG_COLL_HOST_MAX ||
      (problems && strnlen(problems, TG_COLL_PROBLEMS_MAX + 1) >
                       TG_COLL_PROBLEMS_MAX))
    return -EINVAL;
  int err = tg__coll_pg_ready(c);
  if (err) return err;
  tg__coll_pg_args_t a = {0};
  tg__coll_pg_arg_int(&a, (int64_t)id);
  tg__coll_pg_arg_text(&a, host, TG_COLL_HOST_MAX);
  tg__coll_pg_arg_text(&a, problems, TG_COLL_PROBLEMS_MAX);
  /* guarded()'s second column here: the snapshot is PENDING. */
  return guarded(c, P_SET_PROBLEMS, &a, -EINVAL, "set problems");
}

static int op_remove(tg_coll_catalog_t *cat, uint64_t id, bool unless_pinned) {
  tg__coll_pg_t *c = pg(cat);
  int err = tg__coll_pg_ready(c);
  if (err) return err;
  tg__coll_pg_args_t a = {0};
  tg__coll_pg_arg_int(&a, (int64_t)id);
  return guarded(c, unless_pinned ? P_REMOVE_UNPINNED : P_REMOVE, &a, -EBUSY,
                 "remove");
}

static int op_retention_view(tg_coll_catalog_t *cat,
                             tg_coll_retention_view_t *v) {
  tg__coll_pg_t *c = pg(cat);
  memset(v, 0, sizeof(*v));
  int err = tg__coll_pg_ready(c);
  if (err) return err;
  tg__coll_pg_args_t a = {0};
  PGresult *r;
  if ((err = tg__coll_pg_run(c, P_RETENTION, &a, &r, "retention"))) return err;
  size_t cap = 0;
  for (int i = 0; i < PQntuples(r) && !err; i++) {
    tg_coll_retention_row_t row = {.id = col_u64(r, i, 0),
                                   .started_ms = tg__coll_pg_int(r, i, 1),
                                   .bytes = col_u64(r, i, 2),
                                   .pinned = tg__coll_pg_bool(r, i, 3),
                                   .pending = tg__coll_pg_bool(r, i, 4)};
    err = tg__coll_retention_add(v, &cap, &row);
  }
  PQclear(r);
  if (err) {
    free(v->rows);
    memset(v, 0, sizeof(*v));
  }
  return err;
}

/* Blocks begin()'s INSERT (ROW EXCLUSIVE) until the transaction ends;
 * readers go on. */
#define LOCK_SNAPSHOTS "LOCK TABLE snapshots IN EXCLUSIVE MODE"

static int reserve_locked(tg__coll_pg_t *c, uint64_t id) {
  tg__coll_pg_args_t a = {0};
  tg__coll_pg_arg_int(&a, (int64_t)id);
  PGresult *r;
  int err = tg__coll_pg_run(c, P_RESERVE, &a, &r, "reserve");
  if (!err) PQclear(r);
  return err;
}

static int op_insert_at(tg_coll_catalog_t *cat, const tg_coll_insert_t *r) {
  tg__coll_pg_t *c = pg(cat);
  tg_coll_state_t state;
  uint32_t n_failed;
  uint64_t loss;
  int err = tg__coll_check_insert(r, &state, &n_failed, &loss);
  if (err || (err = tg__coll_pg_ready(c))) return err;
  bool live = state != TG_COLL_FAILED;
  const tg_coll_finish_t *f = r->finish;
  tg__coll_pg_args_t a = {0};
  tg__coll_pg_arg_int(&a, (int64_t)r->id);
  tg__coll_pg_arg_int(&a, c->member);
  tg__coll_pg_arg_int(&a, (int64_t)state);
  tg__coll_pg_arg_int(&a, r->pinned ? 1 : 0);
  tg__coll_pg_arg_int(&a, r->started_ms);
  tg__coll_pg_arg_int(&a, f->finished_ms);
  tg__coll_pg_arg_text(&a, r->begin->trigger, TG_COLL_TRIGGER_MAX);
  tg__coll_pg_arg_text(&a, r->begin->reason, TG_COLL_REASON_MAX);
  tg__coll_pg_arg_text(&a, r->begin->origin, TG_COLL_HOST_MAX);
  tg__coll_pg_arg_text(&a, r->failure, TG_COLL_ERROR_MAX);
  tg__coll_pg_arg_int(&a, live ? (int64_t)f->bytes : 0);
  tg__coll_pg_arg_int(&a, live ? (int64_t)f->crc32 : 0);
  tg__coll_pg_arg_int(&a, (int64_t)f->packets);
  tg__coll_pg_arg_int(&a, (int64_t)loss);
  tg__coll_pg_arg_int(&a, (int64_t)f->n_hosts);
  tg__coll_pg_arg_int(&a, (int64_t)n_failed);
  if ((err = tg__coll_pg_tx(c, "BEGIN", "insert at"))) return err;
  if ((err = tg__coll_pg_tx(c, LOCK_SNAPSHOTS, "insert at"))) goto fail;
  PGresult *res;
  if ((err = tg__coll_pg_run(c, P_INSERT_AT, &a, &res, "insert at")))
    goto fail;
  int rows = PQntuples(res);
  PQclear(res);
  if (rows != 1) {
    err = -EEXIST;
    goto fail;
  }
  for (size_t i = 0; i < f->n_hosts; i++)
    if ((err = insert_host(c, r->id, &f->hosts[i]))) goto fail;
  if ((err = reserve_locked(c, r->id))) goto fail;
  if ((err = tg__coll_pg_tx(c, "COMMIT", "insert at"))) goto fail;
  return 0;
fail:
  if (PQstatus(c->conn) == CONNECTION_OK) PQclear(PQexec(c->conn, "ROLLBACK"));
  return err;
}

static int op_reserve(tg_coll_catalog_t *cat, uint64_t id) {
  tg__coll_pg_t *c = pg(cat);
  if (id == 0 || id > (uint64_t)INT64_MAX) return -EINVAL;
  int err = tg__coll_pg_ready(c);
  if (err || (err = tg__coll_pg_tx(c, "BEGIN", "reserve"))) return err;
  if (!(err = tg__coll_pg_tx(c, LOCK_SNAPSHOTS, "reserve")) &&
      !(err = reserve_locked(c, id)) &&
      !(err = tg__coll_pg_tx(c, "COMMIT", "reserve")))
    return 0;
  if (PQstatus(c->conn) == CONNECTION_OK) PQclear(PQexec(c->conn, "ROLLBACK"));
  return err;
}

static int insert_share(tg__coll_pg_t *c, uint64_t id,
                        const tg_coll_host_shares_t *h, size_t rank) {
  const tg_coll_share_in_t *r = &h->rows[rank];
  bool cut = false;
  tg__coll_stored_len(r->function, TG_COLL_FUNCTION_MAX, &cut);
  uint64_t whole = h->by_samples ? h->samples : h->cpu_ns;
  tg__coll_pg_args_t a = {0};
  tg__coll_pg_arg_int(&a, (int64_t)id);
  tg__coll_pg_arg_text(&a, h->host, TG_COLL_HOST_MAX);
  tg__coll_pg_arg_int(&a, (int64_t)rank);
  tg__coll_pg_arg_int(&a, (int64_t)r->kind);
  tg__coll_pg_arg_text(&a, r->function, TG_COLL_FUNCTION_MAX);
  tg__coll_pg_arg_text(&a, r->file, TG_COLL_FILE_MAX);
  tg__coll_pg_arg_int(&a, cut ? 1 : 0);
  tg__coll_pg_arg_int(&a, (int64_t)r->self_ns);
  tg__coll_pg_arg_int(&a, (int64_t)r->total_ns);
  tg__coll_pg_arg_int(&a, (int64_t)r->self_samples);
  tg__coll_pg_arg_int(&a, (int64_t)r->total_samples);
  tg__coll_pg_arg_int(&a, (int64_t)h->cpu_ns);
  tg__coll_pg_arg_int(&a, (int64_t)h->samples);
  tg__coll_pg_arg_int(&a, h->by_samples ? 1 : 0);
  tg__coll_pg_arg_double(
      &a, tg__coll_share_of(h->by_samples ? r->self_samples : r->self_ns,
                            whole));
  tg__coll_pg_arg_double(
      &a, tg__coll_share_of(h->by_samples ? r->total_samples : r->total_ns,
                            whole));
  PGresult *res;
  int err = tg__coll_pg_run(c, P_SHARES_INSERT, &a, &res, "shares");
  if (!err) PQclear(res);
  return err;
}

static int op_set_shares(tg_coll_catalog_t *cat, uint64_t id,
                         const tg_coll_host_shares_t *hosts, size_t n_hosts) {
  tg__coll_pg_t *c = pg(cat);
  int err = tg__coll_check_shares(hosts, n_hosts);
  if (err) return err;
  if (id == 0 || id > (uint64_t)INT64_MAX) return -ENOENT;
  if ((err = tg__coll_pg_ready(c)) ||
      (err = tg__coll_pg_tx(c, "BEGIN", "shares")))
    return err;
  tg__coll_pg_args_t a = {0};
  tg__coll_pg_arg_int(&a, (int64_t)id);
  PGresult *r;
  if ((err = tg__coll_pg_run(c, P_SHARES_LOCK, &a, &r, "shares"))) goto fail;
  int64_t state = PQntuples(r) == 1 ? tg__coll_pg_int(r, 0, 0) : -1;
  PQclear(r);
  err = state < 0 ? -ENOENT : state == TG_COLL_PENDING ? -EINVAL : 0;
  if (err) goto fail;
  if ((err = tg__coll_pg_run(c, P_SHARES_CLEAR, &a, &r, "shares"))) goto fail;
  PQclear(r);
  for (size_t i = 0; i < n_hosts; i++)
    for (size_t k = 0; k < hosts[i].n_rows; k++)
      if ((err = insert_share(c, id, &hosts[i], k))) goto fail;
  if ((err = tg__coll_pg_tx(c, "COMMIT", "shares"))) goto fail;
  return 0;
fail:
  if (PQstatus(c->conn) == CONNECTION_OK) PQclear(PQexec(c->conn, "ROLLBACK"));
  return err;
}

static int op_find_shares(tg_coll_catalog_t *cat,
                          const tg_coll_share_query_t *q, tg_coll_share_t *out,
                          size_t cap, size_t *n) {
  tg__coll_pg_t *c = pg(cat);
  int err = tg__coll_check_share_query(q);
  if (err || (err = tg__coll_pg_ready(c))) return err;
  uint32_t limit = q->limit ? q->limit : TG_COLL_SHARES_LIST_MAX;
  if (limit > cap) limit = (uint32_t)cap;
  tg__coll_pg_args_t a = {0};
  tg__coll_pg_arg_text(&a, q->function, TG_COLL_FUNCTION_MAX);
  tg__coll_pg_arg_opt_text(&a, q->host);
  tg__coll_pg_arg_int(&a, q->by_self ? 1 : 0);
  tg__coll_pg_arg_double(&a, q->min_share);
  tg__coll_pg_arg_int(&a, q->from_ms);
  tg__coll_pg_arg_int(&a, q->to_ms);
  tg__coll_pg_arg_int(&a, (int64_t)q->after_id);
  tg__coll_pg_arg_text(&a, q->after_host, TG_COLL_HOST_MAX);
  tg__coll_pg_arg_int(&a, (int64_t)q->after_rank);
  tg__coll_pg_arg_int(&a, (int64_t)limit);
  PGresult *r;
  if ((err = tg__coll_pg_run(c, q->host ? P_SHARES_FIND_HOST : P_SHARES_FIND,
                             &a, &r, "find shares")))
    return err;
  int rows = PQntuples(r);
  size_t got = 0;
  for (int i = 0; i < rows && got < limit; i++) {
    tg_coll_share_t *s = &out[got++];
    memset(s, 0, sizeof(*s));
    s->snapshot_id = col_u64(r, i, 0);
    s->started_ms = tg__coll_pg_int(r, i, 1);
    tg__coll_pg_text(r, i, 2, s->host, sizeof(s->host));
    s->rank = (uint32_t)col_u64(r, i, 3);
    int64_t kind = tg__coll_pg_int(r, i, 4);
    s->kind = kind >= 0 && kind <= TG_COLL_SHARE_REST
                  ? (tg_coll_share_kind_t)kind
                  : TG_COLL_SHARE_PSEUDO;
    tg__coll_pg_text(r, i, 5, s->file, sizeof(s->file));
    s->cut = tg__coll_pg_bool(r, i, 6);
    s->self_ns = col_u64(r, i, 7);
    s->total_ns = col_u64(r, i, 8);
    s->self_samples = col_u64(r, i, 9);
    s->total_samples = col_u64(r, i, 10);
    s->host_cpu_ns = col_u64(r, i, 11);
    s->host_samples = col_u64(r, i, 12);
    s->by_samples = tg__coll_pg_bool(r, i, 13);
    s->self_share = tg__coll_pg_double(r, i, 14);
    s->total_share = tg__coll_pg_double(r, i, 15);
  }
  PQclear(r);
  *n = got;
  return 0;
}

const tg_coll_catalog_ops_t tg__coll_pg_ops = {
    .name = "postgresql",
    .shared = true,
    .close = tg__coll_pg_close,
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
