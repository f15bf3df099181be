/* Several collectors sharing one PostgreSQL catalog and one store directory
 * (docs/collector.md, "Several collectors"): ids never collide, each sees
 * the other's snapshots, retention and recovery by one never break the
 * other, a dead member's work is recovered, a member runs once, a lost
 * session is reopened; and the
 * catalog's schema: created once, versioned, foreign or newer refused. */
#include <errno.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_fixture.h"
#include "coll_pg.h"
#include "collector/catalog/catalog_pg.h"
#include "collector/catalog/snapshot_id.h"
#include "common/log.h"
#include "tracegate/error.h"

static const char *const hosts[] = {"h1", NULL};

/* The second collector ("B"); the fixture in *state is "A". */
static coll_fixture_t other;

/* Opens A as member 1 and B as member 2 on A's directory and database. B
 * shares A's clock; it has no step hook. */
static coll_fixture_t *open_both(void **state) {
  coll_fixture_t *a = coll_fx(state);
  a->member = 1;
  assert_int_equal(coll_fixture_open(a), 0);
  other = *a;
  other.store = NULL;
  other.cat = other.cfg.catalog = NULL;
  other.cfg.on_step = NULL;
  other.member = 2;
  assert_int_equal(coll_fixture_open(&other), 0);
  return a;
}

static int shared_teardown(void **state) {
  coll_fixture_close(&other);
  memset(&other, 0, sizeof(other));
  return coll_teardown(state);
}

static bool listed(tg_coll_store_t *s, uint64_t id) {
  tg_coll_snapshot_t snap;
  return tg_coll_store_get(s, id, &snap) == 0;
}

static void shared_ids_never_collide_under_interleaved_begins(void **state) {
  coll_fixture_t *a = open_both(state);
  enum { N = 16 };
  tg_coll_writer_t *w[2 * N];
  uint64_t id[2 * N];
  tg_coll_begin_t b = {.trigger = "t"};
  for (int i = 0; i < 2 * N; i++) {
    tg_coll_store_t *s = i % 2 ? other.store : a->store;
    assert_int_equal(tg_coll_store_begin(s, &b, &w[i], &id[i]), 0);
    assert_int_equal(tg_coll_writer_write(w[i], "x", 1), 0);
    /* Allocation order, whichever collector asked. */
    if (i) assert_true(id[i] > id[i - 1]);
  }
  tg_coll_host_result_t h = {.host = "h1"};
  tg_coll_result_t r = {.hosts = &h, .n_hosts = 1};
  for (int i = 2 * N - 1; i >= 0; i--)
    assert_int_equal(
        tg_coll_store_finish(i % 2 ? other.store : a->store, w[i], &r), 0);
  /* Both see every snapshot, whoever wrote it, with its file. */
  tg_coll_snapshot_t rows[2 * N];
  size_t n;
  tg_coll_filter_t f = TG_COLL_FILTER_INIT;
  assert_int_equal(tg_coll_store_list(a->store, &f, rows, 2 * N, &n), 0);
  assert_int_equal(n, 2 * N);
  assert_int_equal(tg_coll_store_list(other.store, &f, rows, 2 * N, &n), 0);
  assert_int_equal(n, 2 * N);
  for (int i = 0; i < 2 * N; i++) {
    assert_int_equal(rows[i].id, id[2 * N - 1 - i]);
    assert_int_equal(rows[i].state, TG_COLL_COMPLETE);
    int fd;
    assert_int_equal(tg_coll_store_open_file(a->store, id[i], &fd), 0);
    close(fd);
  }
  assert_int_equal(coll_count_entries(a->dir, TG_COLL_SNAPSHOT_DIR), 2 * N);
}

/* What A's step hook does to B while A is in the middle of a step. */
typedef struct race {
  tg_coll_step_t at;
  void (*act)(struct race *r, uint64_t id);
  bool done;
  int rc;
  tg_coll_retained_t retained;
} race_t;

static void race_step(void *ctx, tg_coll_step_t step, uint64_t id) {
  race_t *r = ctx;
  if (step != r->at || r->done) return;
  r->done = true;
  r->act(r, id);
}

static void b_retains(race_t *r, uint64_t id) {
  (void)id;
  r->rc = tg_coll_store_retain(other.store, &r->retained);
}

static void b_pins(race_t *r, uint64_t id) {
  r->rc = tg_coll_store_pin(other.store, id, true);
}

/* Opens A (with |race| on its steps and a cap of 2500 bytes) and B, and
 * writes three snapshots of 1000 bytes, A's, B's, A's, oldest first and
 * apart (no burst): the cap wants the oldest gone. */
static coll_fixture_t *three_snapshots(void **state, race_t *race,
                                       uint64_t id[3]) {
  coll_fixture_t *a = coll_fx(state);
  a->cfg.retention.max_bytes = 2500;
  a->cfg.on_step = race_step;
  a->cfg.step_ctx = race;
  open_both(state);
  for (int i = 0; i < 3; i++) {
    tg_coll_store_t *s = i == 1 ? other.store : a->store;
    assert_int_equal(coll_snapshot(s, "t", hosts, 1000, (uint64_t)i, &id[i]),
                     0);
    a->now_ms += TG_COLL_BURST_MS;
  }
  return a;
}

static void shared_retention_race_never_fails_the_loser(void **state) {
  static race_t race;
  race = (race_t){.at = TG_COLL_STEP_REMOVING, .act = b_retains};
  uint64_t id[3];
  coll_fixture_t *a = three_snapshots(state, &race, id);
  /* A chose the oldest; B deletes it first, from inside A's step. */
  tg_coll_retained_t r;
  assert_int_equal(tg_coll_store_retain(a->store, &r), 0);
  assert_true(race.done);
  assert_int_equal(race.rc, 1);
  assert_int_equal(race.retained.id, id[0]);
  /* A looked again: nothing more to delete, no error. */
  assert_int_equal(r.verdict, TG_COLL_KEEP);
  assert_false(listed(a->store, id[0]));
  assert_true(listed(a->store, id[1]) && listed(other.store, id[2]));
  assert_int_equal(coll_count_entries(a->dir, TG_COLL_SNAPSHOT_DIR), 2);
  int fd;
  assert_int_equal(tg_coll_store_open_file(other.store, id[0], &fd), -ENOENT);
  assert_int_equal(tg_coll_store_open_file(other.store, id[1], &fd), 0);
  close(fd);
}

static void shared_retention_honours_a_pin_made_since_its_view(void **state) {
  static race_t race;
  race = (race_t){.at = TG_COLL_STEP_REMOVING, .act = b_pins};
  uint64_t id[3];
  coll_fixture_t *a = three_snapshots(state, &race, id);
  tg_coll_retained_t r;
  assert_int_equal(tg_coll_store_retain(a->store, &r), 1);
  assert_int_equal(race.rc, 0);
  /* B's pin, committed after A's view, kept the oldest: the next went. */
  assert_int_equal(r.id, id[1]);
  tg_coll_snapshot_t s;
  assert_int_equal(tg_coll_store_get(other.store, id[0], &s), 0);
  assert_true(s.pinned);
  assert_int_equal(tg_coll_store_retain(a->store, &r), 0);
}

/* B restarts (its recovery runs) while A is between rename and commit. */
static void b_restarts(race_t *r, uint64_t id) {
  (void)id;
  coll_fixture_close(&other);
  r->rc = coll_fixture_open(&other);
}

static void shared_recovery_keeps_a_running_collectors_files(void **state) {
  coll_fixture_t *a = coll_fx(state);
  static race_t race;
  race = (race_t){.at = TG_COLL_STEP_DIR_SYNCED, .act = b_restarts};
  a->cfg.on_step = race_step;
  a->cfg.step_ctx = &race;
  open_both(state);
  /* A: one snapshot being written, one about to be committed. */
  tg_coll_begin_t b = {.trigger = "t"};
  tg_coll_writer_t *w;
  uint64_t writing, finishing;
  assert_int_equal(tg_coll_store_begin(a->store, &b, &w, &writing), 0);
  assert_int_equal(tg_coll_writer_write(w, "half", 4), 0);
  assert_int_equal(coll_snapshot(a->store, "t", hosts, 100, 1, &finishing), 0);
  assert_true(race.done);
  assert_int_equal(race.rc, 0);
  /* B's recovery left A's work alone. */
  assert_int_equal(other.rec.interrupted + other.rec.tmp_removed +
                       other.rec.orphans_removed + other.rec.lost,
                   0);
  tg_coll_snapshot_t s;
  assert_int_equal(tg_coll_store_get(other.store, finishing, &s), 0);
  assert_int_equal(s.state, TG_COLL_COMPLETE);
  uint64_t size;
  uint32_t crc;
  assert_int_equal(coll_file_crc(a->dir, finishing, false, &size, &crc), 0);
  assert_int_equal(crc, s.crc32);
  assert_int_equal(tg_coll_store_get(other.store, writing, &s), 0);
  assert_int_equal(s.state, TG_COLL_PENDING);
  tg_coll_host_result_t h = {.host = "h1"};
  tg_coll_result_t r = {.hosts = &h, .n_hosts = 1};
  assert_int_equal(tg_coll_store_finish(a->store, w, &r), 0);
  assert_int_equal(tg_coll_store_get(other.store, writing, &s), 0);
  assert_int_equal(s.state, TG_COLL_COMPLETE);
}

static void shared_recovery_fails_the_rows_of_a_dead_member(void **state) {
  coll_fixture_t *a = open_both(state);
  tg_coll_begin_t b = {.trigger = "t"};
  tg_coll_writer_t *w;
  uint64_t alive;
  assert_int_equal(tg_coll_store_begin(a->store, &b, &w, &alive), 0);
  int p[2];
  assert_int_equal(pipe(p), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* Member 3 begins, writes, and is killed: never closes anything. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(p[0]);
    coll_fixture_t c = *a;
    c.store = NULL;
    c.cat = c.cfg.catalog = NULL;
    c.cfg.on_step = NULL;
    c.member = 3;
    uint64_t id;
    tg_coll_writer_t *cw;
    if (coll_fixture_open(&c) || tg_coll_store_begin(c.store, &b, &cw, &id) ||
        tg_coll_writer_write(cw, "dead", 4) ||
        write(p[1], &id, sizeof(id)) != sizeof(id))
      _exit(1);
    for (;;) pause();
  }
  close(p[1]);
  uint64_t dead = 0;
  assert_int_equal(read(p[0], &dead, sizeof(dead)), sizeof(dead));
  close(p[0]);
  assert_int_equal(kill(pid, SIGKILL), 0);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_int_equal(coll_count_entries(a->dir, TG_COLL_TMP_DIR), 2);

  /* B restarts: member 3's lock is free once the server has noticed, so
   * its row is proven abandoned; A's (member 1, running) is not. */
  coll_fixture_close(&other);
  tg_coll_catalog_t *probe;
  /* The dead member's session is gone when its lock can be had. */
  assert_int_equal(coll_pg_catalog(a->conninfo, 3, &probe), 0);
  tg_coll_catalog_close(probe);
  assert_int_equal(coll_fixture_open(&other), 0);
  assert_int_equal(other.rec.interrupted, 1);
  assert_int_equal(other.rec.tmp_removed, 1);
  tg_coll_snapshot_t s;
  assert_int_equal(tg_coll_store_get(other.store, dead, &s), 0);
  assert_int_equal(s.state, TG_COLL_FAILED);
  assert_string_equal(s.failure, "interrupted: the collector restarted");
  assert_int_equal(tg_coll_store_get(other.store, alive, &s), 0);
  assert_int_equal(s.state, TG_COLL_PENDING);
  assert_int_equal(tg_coll_store_abort(a->store, w, NULL), 0);
  assert_int_equal(coll_count_entries(a->dir, TG_COLL_TMP_DIR), 0);
}

static void shared_member_runs_once_and_a_private_store_keeps_off(
    void **state) {
  coll_fixture_t *a = open_both(state);
  tg_coll_catalog_t *cat = NULL;
  assert_int_equal(tg_coll_catalog_pg_open(a->conninfo, 1, &cat), -EBUSY);
  assert_null(cat);
  assert_int_equal(
      tg_coll_catalog_pg_open(a->conninfo, TG_COLL_PG_MEMBER_MAX + 1, &cat),
      -EINVAL);
  /* A store with a catalog of its own on the shared directory. */
  tg_coll_store_config_t cfg = {.dir = a->dir};
  tg_coll_store_t *s = NULL;
  assert_int_equal(tg_coll_store_open(&cfg, &s, NULL), -EBUSY);
  /* A second store on A's catalog would be member 1 twice. */
  assert_int_equal(tg_coll_store_open(&a->cfg, &s, NULL), -EBUSY);
  assert_null(s);
}

/* Runs |sql| (constant, test-only) on the database at |conninfo|. */
static void psql(const char *conninfo, const char *sql) {
  PGconn *c = PQconnectdb(conninfo);
  assert_int_equal(PQstatus(c), CONNECTION_OK);
  PGresult *r = PQexec(c, sql);
  ExecStatusType st = PQresultStatus(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
    fail_msg("%s: %s", sql, PQerrorMessage(c));
  PQclear(r);
  PQfinish(c);
}

/* A test session holding a transaction open on the test's database. */
static PGconn *tx_open(const char *conninfo, const char *sql) {
  PGconn *c = PQconnectdb(conninfo);
  assert_int_equal(PQstatus(c), CONNECTION_OK);
  PGresult *r = PQexec(c, sql);
  if (PQresultStatus(r) != PGRES_COMMAND_OK &&
      PQresultStatus(r) != PGRES_TUPLES_OK)
    fail_msg("%s: %s", sql, PQerrorMessage(c));
  PQclear(r);
  return c;
}

/* Waits until a session of the database waits for a lock. */
static void wait_for_a_blocked_session(PGconn *c) {
  for (int i = 0; i < 2000; i++) {
    PGresult *r = PQexec(c,
                         "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity"
                         " a USING (pid) WHERE NOT l.granted AND"
                         " a.application_name = 'tracegate-collector'");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    bool blocked = strcmp(PQgetvalue(r, 0, 0), "0") != 0;
    PQclear(r);
    if (blocked) return;
    usleep(5000);
  }
  fail_msg("no collector session blocked");
}

/* Deletes row |id| in |c|'s transaction and commits it. */
static void tx_delete_and_commit(PGconn *c, uint64_t id) {
  char sql[128];
  snprintf(sql, sizeof(sql), "DELETE FROM snapshots WHERE id = %llu; COMMIT",
           (unsigned long long)id);
  PGresult *r = PQexec(c, sql);
  if (PQresultStatus(r) != PGRES_COMMAND_OK) fail_msg("%s", PQerrorMessage(c));
  PQclear(r);
  PQfinish(c);
}

typedef struct reader {
  tg_coll_store_t *store;
  uint64_t id;
  int rc;
  tg_coll_snapshot_t snap;
  tg_coll_host_t hosts[2];
  size_t n;
} reader_t;

static void *read_snapshot_thread(void *arg) {
  reader_t *r = arg;
  r->rc = tg_coll_store_get_with_hosts(r->store, r->id, &r->snap, r->hosts, 2,
                                       &r->n);
  return NULL;
}

/* Issue 59 point 13: B's retention deleted a row between A's read of it
 * and A's read of its hosts, and A's answer was an error. Here the test's
 * session holds the hosts' table until A's read waits on it, then deletes
 * the row: A's read, begun before the delete, is the row with its hosts
 * (an answer about it is whole, never an error). */
static void shared_read_of_a_snapshot_is_one_point_in_time(void **state) {
  coll_fixture_t *a = open_both(state);
  uint64_t id;
  assert_int_equal(coll_snapshot(other.store, "t", hosts, 10, 1, &id), 0);
  PGconn *c = tx_open(a->conninfo,
                      "BEGIN; LOCK TABLE snapshot_hosts IN ACCESS EXCLUSIVE"
                      " MODE");
  reader_t r = {.store = a->store, .id = id};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, read_snapshot_thread, &r), 0);
  wait_for_a_blocked_session(c);
  tx_delete_and_commit(c, id);
  pthread_join(t, NULL);
  assert_int_equal(r.rc, 0);
  assert_int_equal(r.snap.id, id);
  assert_int_equal(r.n, 1);
  assert_string_equal(r.hosts[0].host, "h1");
  /* The next read is of after the delete: no row. */
  assert_int_equal(tg_coll_store_get_with_hosts(a->store, id, &r.snap,
                                                r.hosts, 2, &r.n),
                   -ENOENT);
}

static atomic_int errors_logged;

static void count_errors(void *ctx, tg_log_level_t level, const char *line) {
  (void)ctx;
  (void)line;
  if (level == TG_LOG_ERROR) atomic_fetch_add(&errors_logged, 1);
}

typedef struct opener {
  coll_fixture_t *fx;
  int rc;
} opener_t;

static void *open_thread(void *arg) {
  opener_t *o = arg;
  o->rc = coll_fixture_open(o->fx);
  return NULL;
}

/* Issue 59 point 13: at A's start, B deleted a row (row, then file)
 * between A's list of live rows and A's repair of the one whose file it
 * found missing; A said at ERROR it marked it failed, and marked nothing.
 * Here the test's session holds the row until A's repair waits on it,
 * then deletes it: A opens, loses nothing and logs no error. */
static void shared_recovery_takes_a_row_deleted_meanwhile_for_deleted(
    void **state) {
  coll_fixture_t *a = open_both(state);
  uint64_t id;
  assert_int_equal(coll_snapshot(other.store, "t", hosts, 10, 1, &id), 0);
  coll_fixture_close(a);
  char sql[160];
  snprintf(sql, sizeof(sql),
           "BEGIN; SELECT 1 FROM snapshots WHERE id = %llu FOR UPDATE",
           (unsigned long long)id);
  PGconn *c = tx_open(a->conninfo, sql);
  char path[512], name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_file_name(id, 0, name);
  snprintf(path, sizeof(path), "%s/%s/%s", a->dir, TG_COLL_SNAPSHOT_DIR, name);
  assert_int_equal(unlink(path), 0);
  atomic_store(&errors_logged, 0);
  tg_log_set_sink(count_errors, NULL);
  opener_t o = {.fx = a};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, open_thread, &o), 0);
  wait_for_a_blocked_session(c);
  tx_delete_and_commit(c, id);
  pthread_join(t, NULL);
  tg_log_set_sink(NULL, NULL);
  assert_int_equal(o.rc, 0);
  assert_int_equal(a->rec.lost, 0);
  assert_int_equal(atomic_load(&errors_logged), 0);
}

static void shared_catalog_reconnects_after_its_session_ends(void **state) {
  coll_fixture_t *a = open_both(state);
  uint64_t id;
  assert_int_equal(coll_snapshot(a->store, "t", hosts, 10, 1, &id), 0);
  /* Both collectors' sessions end (waiting until they have): a server
   * restart or a dropped link looks the same to them. */
  psql(a->conninfo,
       "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
       " WHERE application_name = 'tracegate-collector'");
  tg_coll_snapshot_t s;
  /* The call that finds the connection broken fails; the next one
   * reconnects and takes the member's lock again. */
  int rc = tg_coll_store_get(a->store, id, &s);
  assert_true(rc == 0 || rc == -EIO);
  assert_int_equal(tg_coll_store_get(a->store, id, &s), 0);
  assert_int_equal(s.state, TG_COLL_COMPLETE);
  rc = tg_coll_store_pin(other.store, id, true);
  assert_true(rc == 0 || rc == -EIO);
  assert_int_equal(tg_coll_store_pin(other.store, id, true), 0);
  uint64_t next;
  assert_int_equal(coll_snapshot(other.store, "t", hosts, 10, 2, &next), 0);
  assert_true(next > id);
  tg_coll_catalog_t *cat = NULL;
  assert_int_equal(tg_coll_catalog_pg_open(a->conninfo, 1, &cat), -EBUSY);
}

static void pg_schema_is_created_once_and_versioned(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  tg_coll_catalog_t *cat;
  for (int i = 0; i < 2; i++) {
    assert_int_equal(tg_coll_catalog_pg_open(fx->conninfo, 0, &cat), 0);
    assert_string_equal(cat->ops->name, "postgresql");
    assert_true(cat->ops->shared);
    tg_coll_catalog_close(cat);
  }
  psql(fx->conninfo,
       "DO $$ BEGIN IF (SELECT count(*) FROM schema_version) <> 1 OR"
       " (SELECT version FROM schema_version"
       "  WHERE component = 'tracegate-collector') <> 6"
       " THEN RAISE EXCEPTION 'schema_version'; END IF; END $$");
}

/* A catalog left by a collector of schema 1 (a host's outcome 0 or 1
 * only, no name, no problems) moves to the current schema at open: its
 * rows kept, a partial host then taken with its name and problems. */
static void pg_schema_1_moves_to_2_keeping_rows(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  tg_coll_catalog_t *cat;
  assert_int_equal(tg_coll_catalog_pg_open(fx->conninfo, 0, &cat), 0);
  tg_coll_catalog_close(cat);
  psql(fx->conninfo,
       "ALTER TABLE snapshot_hosts"
       " DROP CONSTRAINT snapshot_hosts_outcome_check;"
       "ALTER TABLE snapshot_hosts ADD CONSTRAINT snapshot_hosts_outcome_check"
       " CHECK (outcome IN (0, 1));"
       "ALTER TABLE snapshot_hosts DROP COLUMN name, DROP COLUMN problems,"
       " DROP COLUMN boost, DROP COLUMN links;"
       "DROP TABLE function_shares;"
       "UPDATE schema_version SET version = 1;"
       "INSERT INTO snapshots (member, state, started_ms, trigger, reason,"
       " origin) VALUES (0, 1, 1, 't', '', '');"
       "INSERT INTO snapshot_hosts SELECT id, 'old', 1, '', 0, 0, 0, 0, 0"
       " FROM snapshots;");
  assert_int_equal(tg_coll_catalog_pg_open(fx->conninfo, 0, &cat), 0);
  tg_coll_catalog_close(cat);
  psql(fx->conninfo,
       "DO $$ BEGIN IF (SELECT version FROM schema_version"
       "  WHERE component = 'tracegate-collector') <> 6 OR"
       " (SELECT count(*) FROM snapshot_hosts WHERE host = 'old'"
       "  AND name = '' AND problems = '' AND boost = '' AND links = '')"
       " <> 1 THEN RAISE EXCEPTION 'migration'; END IF; END $$;"
       "INSERT INTO snapshot_hosts SELECT id, 'new', 2, '', 0, 0, 0, 0, 0,"
       " 'a name', '[]', '{}', '{}' FROM snapshots;");
}

static void drop_links_pg(coll_fixture_t *fx) {
  psql(fx->conninfo, "DROP TABLE function_shares;"
                     "ALTER TABLE snapshot_hosts DROP COLUMN links;"
                     "UPDATE schema_version SET version = 4;");
}

/* A catalog of schema 4 (no links) moves to 5 at open: its host rows
 * kept with none, a new snapshot's host then read back with its links. */
static void pg_schema_4_moves_to_5_adding_links(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  coll_fx_check_links_migration(fx, drop_links_pg);
  psql(fx->conninfo,
       "DO $$ BEGIN IF (SELECT version FROM schema_version"
       "  WHERE component = 'tracegate-collector') <> 6"
       " THEN RAISE EXCEPTION 'schema_version'; END IF; END $$");
}

static void pg_schema_newer_or_foreign_is_refused(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  tg_coll_catalog_t *cat;
  assert_int_equal(tg_coll_catalog_pg_open(fx->conninfo, 0, &cat), 0);
  tg_coll_catalog_close(cat);
  psql(fx->conninfo, "UPDATE schema_version SET version = 99");
  assert_int_equal(tg_coll_catalog_pg_open(fx->conninfo, 0, &cat),
                   TG_ENOT_SUPPORTED);
  psql(fx->conninfo, "UPDATE schema_version SET version = 6");
  assert_int_equal(tg_coll_catalog_pg_open(fx->conninfo, 0, &cat), 0);
  tg_coll_catalog_close(cat);

  /* Someone else's tables, never written over. */
  static const char *const foreign[] = {
      "CREATE TABLE snapshots (x integer)",
      "CREATE TABLE schema_version (x integer)",
      "CREATE TABLE schema_version (component text, version integer)",
  };
  for (size_t i = 0; i < sizeof(foreign) / sizeof(foreign[0]); i++) {
    char db[512];
    assert_int_equal(coll_pg_createdb(coll_pg_group_server(), db, sizeof(db)),
                     0);
    psql(db, foreign[i]);
    assert_int_equal(tg_coll_catalog_pg_open(db, 0, &cat), TG_ENOT_SUPPORTED);
  }
}

static void pg_unreachable_server_fails_cleanly(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  char bad[600];
  snprintf(bad, sizeof(bad), "%s&port=1", fx->conninfo);
  tg_coll_catalog_t *cat = NULL;
  assert_int_equal(tg_coll_catalog_pg_open(bad, 0, &cat), -EIO);
  assert_null(cat);
}

static char logged[8192];
static size_t logged_len;

static void keep_lines(void *ctx, tg_log_level_t level, const char *line) {
  (void)ctx;
  (void)level;
  size_t n = strlen(line);
  if (logged_len + n + 1 < sizeof(logged)) {
    memcpy(logged + logged_len, line, n);
    logged_len += n;
    logged[logged_len++] = '\n';
    logged[logged_len] = 0;
  }
}

/* Issue 59 point 11: libpq's message about a URI it cannot parse quotes
 * it, password included, and it went to the log. */
static void pg_malformed_uri_never_logs_its_password(void **state) {
  (void)state;
  static const char *const uris[] = {
      "postgresql://tg:s3cretpw@localhost/db%zz",
      "postgresql://tg:s3cretpw@localhost/db%00",
      "postgresql://tg:s3cretpw%zz@localhost/db",
      "host=localhost password=s3cretpw dbname='unterminated",
  };
  for (size_t i = 0; i < sizeof(uris) / sizeof(uris[0]); i++) {
    logged_len = 0;
    logged[0] = 0;
    tg_log_set_sink(keep_lines, NULL);
    tg_coll_catalog_t *cat = NULL;
    int rc = tg_coll_catalog_pg_open(uris[i], 0, &cat);
    tg_log_set_sink(NULL, NULL);
    assert_int_equal(rc, -EINVAL);
    assert_null(cat);
    assert_true(logged_len > 0); /* it says something */
    if (strstr(logged, "s3cretpw")) fail_msg("%s logged: %s", uris[i], logged);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          shared_ids_never_collide_under_interleaved_begins, coll_pg_setup,
          shared_teardown),
      cmocka_unit_test_setup_teardown(
          shared_retention_race_never_fails_the_loser, coll_pg_setup,
          shared_teardown),
      cmocka_unit_test_setup_teardown(
          shared_retention_honours_a_pin_made_since_its_view, coll_pg_setup,
          shared_teardown),
      cmocka_unit_test_setup_teardown(
          shared_read_of_a_snapshot_is_one_point_in_time, coll_pg_setup,
          shared_teardown),
      cmocka_unit_test_setup_teardown(
          shared_recovery_takes_a_row_deleted_meanwhile_for_deleted,
          coll_pg_setup, shared_teardown),
      cmocka_unit_test_setup_teardown(
          shared_recovery_keeps_a_running_collectors_files, coll_pg_setup,
          shared_teardown),
      cmocka_unit_test_setup_teardown(
          shared_recovery_fails_the_rows_of_a_dead_member, coll_pg_setup,
          shared_teardown),
      cmocka_unit_test_setup_teardown(
          shared_member_runs_once_and_a_private_store_keeps_off, coll_pg_setup,
          shared_teardown),
      cmocka_unit_test_setup_teardown(
          shared_catalog_reconnects_after_its_session_ends, coll_pg_setup,
          shared_teardown),
      cmocka_unit_test_setup_teardown(pg_schema_is_created_once_and_versioned,
                                      coll_pg_setup, coll_teardown),
      cmocka_unit_test_setup_teardown(pg_schema_newer_or_foreign_is_refused,
                                      coll_pg_setup, coll_teardown),
      cmocka_unit_test_setup_teardown(pg_schema_1_moves_to_2_keeping_rows,
                                      coll_pg_setup, coll_teardown),
      cmocka_unit_test_setup_teardown(pg_schema_4_moves_to_5_adding_links,
                                      coll_pg_setup_open, coll_teardown),
      cmocka_unit_test(pg_malformed_uri_never_logs_its_password),
      cmocka_unit_test_setup_teardown(pg_unreachable_server_fails_cleanly,
                                      coll_pg_setup, coll_teardown),
  };
  return cmocka_run_group_tests_name("postgresql", tests, coll_pg_group_setup,
                                     coll_pg_group_teardown);
}
