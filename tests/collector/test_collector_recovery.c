/* Repair at open (collector/store/store_recover.c): what a dead collector or a
 * hand-edited directory leaves is found and put right; catalogs this code
 * cannot read are refused, not overwritten. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "coll_fixture.h"
#include "collector/catalog/catalog_sqlite.h"
#include "collector/catalog/snapshot_id.h"
#include "tracegate/error.h"

static const char *const hosts[] = {"h1", NULL};

static void put_file(const char *dir, const char *sub, const char *name,
                     const char *text) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s/%s", dir, sub, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
}

static void snapshot_path(coll_fixture_t *fx, uint64_t id, char *out,
                          size_t cap) {
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_file_name(id, 0, name);
  snprintf(out, cap, "%s/%s/%s", fx->dir, TG_COLL_SNAPSHOT_DIR, name);
}

static void recovery_fails_interrupted_snapshots_and_keeps_their_ids(
    void **state) {
  coll_fixture_t *fx = *state;
  int pipefd[2];
  assert_int_equal(pipe(pipefd), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* A collector that dies mid-write, without closing anything. */
    close(pipefd[0]);
    if (coll_fixture_open(fx)) _exit(1);
    tg_coll_begin_t b = {.trigger = "t"};
    tg_coll_writer_t *w;
    uint64_t id;
    if (tg_coll_store_begin(fx->store, &b, &w, &id)) _exit(1);
    if (write(pipefd[1], &id, sizeof(id)) != sizeof(id)) _exit(1);
    tg_coll_writer_write(w, "half", 4);
    _exit(0);
  }
  close(pipefd[1]);
  uint64_t id = 0;
  assert_int_equal(read(pipefd[0], &id, sizeof(id)), sizeof(id));
  close(pipefd[0]);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  assert_int_equal(coll_fixture_open(fx), 0);
  assert_int_equal(fx->rec.interrupted, 1);
  assert_int_equal(fx->rec.tmp_removed, 1);
  tg_coll_snapshot_t s;
  assert_int_equal(tg_coll_store_get(fx->store, id, &s), 0);
  assert_int_equal(s.state, TG_COLL_FAILED);
  assert_string_equal(s.failure, "interrupted: the collector restarted");
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_TMP_DIR), 0);
  /* Ids are never reused, even after a crash. */
  uint64_t next;
  assert_int_equal(coll_snapshot(fx->store, "t", hosts, 10, 1, &next), 0);
  assert_true(next > id);
}

static void recovery_repairs_a_hand_edited_directory(void **state) {
  coll_fixture_t *fx = *state;
  assert_int_equal(coll_fixture_open(fx), 0);
  uint64_t kept, missing, truncated;
  assert_int_equal(coll_snapshot(fx->store, "t", hosts, 100, 1, &kept), 0);
  assert_int_equal(coll_snapshot(fx->store, "t", hosts, 100, 2, &missing), 0);
  assert_int_equal(coll_snapshot(fx->store, "t", hosts, 100, 3, &truncated), 0);
  coll_fixture_close(fx);

  char path[512];
  snapshot_path(fx, missing, path, sizeof(path));
  assert_int_equal(unlink(path), 0);
  snapshot_path(fx, truncated, path, sizeof(path));
  assert_int_equal(truncate(path, 50), 0);
  put_file(fx->dir, TG_COLL_SNAPSHOT_DIR, "00000000000000ff.pftrace", "orphan");
  put_file(fx->dir, TG_COLL_SNAPSHOT_DIR, "README", "not ours");
  put_file(fx->dir, TG_COLL_TMP_DIR, "0000000000000fff.pftrace.partial", "x");
  put_file(fx->dir, TG_COLL_TMP_DIR, "junk", "x");

  assert_int_equal(coll_fixture_open(fx), 0);
  assert_int_equal(fx->rec.lost, 2);
  assert_int_equal(fx->rec.orphans_removed, 1);
  assert_int_equal(fx->rec.tmp_removed, 2);
  assert_int_equal(fx->rec.foreign, 1);
  tg_coll_snapshot_t s;
  assert_int_equal(tg_coll_store_get(fx->store, kept, &s), 0);
  assert_int_equal(s.state, TG_COLL_COMPLETE);
  assert_int_equal(tg_coll_store_get(fx->store, missing, &s), 0);
  assert_int_equal(s.state, TG_COLL_FAILED);
  assert_string_equal(s.failure, "file missing at open");
  assert_int_equal(tg_coll_store_get(fx->store, truncated, &s), 0);
  assert_int_equal(s.state, TG_COLL_FAILED);
  /* kept's file and the foreign README remain. */
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_SNAPSHOT_DIR), 2);
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_TMP_DIR), 0);

  /* A second open finds nothing more to do. */
  coll_fixture_close(fx);
  assert_int_equal(coll_fixture_open(fx), 0);
  assert_int_equal(fx->rec.lost + fx->rec.orphans_removed +
                       fx->rec.tmp_removed + fx->rec.interrupted,
                   0);
}

/* A snapshot's symbols (store.h, tg_coll_store_symbols_*): stored beside
 * it, opened, refused for a snapshot that is not live, removed with it by
 * delete, and at open when written (tmp/) or left without a live row. */
static void symbols_live_and_die_with_their_snapshot(void **state) {
  coll_fixture_t *fx = *state;
  assert_int_equal(coll_fixture_open(fx), 0);
  uint64_t a, b;
  assert_int_equal(coll_snapshot(fx->store, "t", hosts, 100, 1, &a), 0);
  assert_int_equal(coll_snapshot(fx->store, "t", hosts, 100, 2, &b), 0);
  int fd, ifd;
  assert_int_equal(tg_coll_store_open_symbols(fx->store, a, &fd, &ifd),
                   -ENOENT);
  assert_int_equal(tg_coll_store_symbols_begin(fx->store, 999, &fd, &ifd),
                   -ENOENT);
  /* a: symbols and their index stored. */
  assert_int_equal(tg_coll_store_symbols_begin(fx->store, a, &fd, &ifd), 0);
  assert_int_equal(write(fd, "syms", 4), 4);
  assert_int_equal(write(ifd, "idx", 3), 3);
  close(fd);
  close(ifd);
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_TMP_DIR), 2);
  assert_int_equal(tg_coll_store_symbols_commit(fx->store, a, true), 0);
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_TMP_DIR), 0);
  assert_int_equal(tg_coll_store_open_symbols(fx->store, a, &fd, &ifd), 0);
  char buf[8];
  assert_int_equal(read(fd, buf, sizeof(buf)), 4);
  assert_memory_equal(buf, "syms", 4);
  assert_true(ifd >= 0);
  close(fd);
  close(ifd);
  /* b: begun, then b deleted before the commit: nothing of it stays. */
  assert_int_equal(tg_coll_store_symbols_begin(fx->store, b, &fd, &ifd), 0);
  close(fd);
  close(ifd);
  assert_int_equal(tg_coll_store_delete(fx->store, b), 0);
  assert_int_equal(tg_coll_store_symbols_commit(fx->store, b, false), -ENOENT);
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_TMP_DIR), 0);
  /* a's trace, index and symbols (the fixture's snapshots have no
   * index): then delete takes all. */
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_SNAPSHOT_DIR), 3);
  coll_fixture_close(fx);

  /* At open: a partial of a live row (this collector's, interrupted) and
   * symbols of a row that is gone are removed; a's are kept. */
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_symbols_name(a, 1, name);
  put_file(fx->dir, TG_COLL_TMP_DIR, name, "x");
  tg_coll_id_symidx_name(a, 1, name);
  put_file(fx->dir, TG_COLL_TMP_DIR, name, "x");
  tg_coll_id_symbols_name(b, 0, name);
  put_file(fx->dir, TG_COLL_SNAPSHOT_DIR, name, "x");
  tg_coll_id_symidx_name(b, 0, name);
  put_file(fx->dir, TG_COLL_SNAPSHOT_DIR, name, "x");
  assert_int_equal(coll_fixture_open(fx), 0);
  assert_int_equal(fx->rec.tmp_removed, 2);
  assert_int_equal(fx->rec.orphans_removed, 2);
  assert_int_equal(fx->rec.foreign, 0);
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_SNAPSHOT_DIR), 3);
  assert_int_equal(tg_coll_store_delete(fx->store, a), 0);
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_SNAPSHOT_DIR), 0);
}

static void set_pragma(coll_fixture_t *fx, const char *pragma) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", fx->dir, TG_COLL_CATALOG_FILE);
  sqlite3 *db;
  assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
  assert_int_equal(sqlite3_exec(db, pragma, NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(db);
}

static void recovery_refuses_a_newer_schema_or_a_foreign_database(
    void **state) {
  coll_fixture_t *fx = *state;
  assert_int_equal(coll_fixture_open(fx), 0);
  coll_fixture_close(fx);
  set_pragma(fx, "PRAGMA user_version = 99");
  assert_int_equal(coll_fixture_open(fx), TG_ENOT_SUPPORTED);
  /* A catalog of schema 1 had no function_shares. */
  set_pragma(fx, "DROP TABLE function_shares;"
                 "PRAGMA user_version = 1; PRAGMA application_id = 7");
  assert_int_equal(coll_fixture_open(fx), TG_ENOT_SUPPORTED);
  set_pragma(fx, "PRAGMA application_id = 0");
  /* application_id 0 is SQLite's default, not another program's mark. */
  assert_int_equal(coll_fixture_open(fx), 0);
}

/* A catalog left by a collector of schema 1 (a host's outcome 0 or 1
 * only, no name, no problems) moves to the current schema at open: its
 * rows kept, a host cut short then recorded as partial, with its name and
 * problems. */
static void recovery_moves_schema_1_to_2_keeping_rows(void **state) {
  coll_fixture_t *fx = *state;
  assert_int_equal(coll_fixture_open(fx), 0);
  static const char *const before[] = {"alpha", "!beta", NULL};
  uint64_t old_id;
  assert_int_equal(coll_snapshot(fx->store, "t", before, 100, 1, &old_id), 0);
  coll_fixture_close(fx);
  set_pragma(fx,
             "BEGIN;"
             "DROP TABLE function_shares;"
             "CREATE TABLE h1 (snapshot_id INTEGER NOT NULL"
             " REFERENCES snapshots (id) ON DELETE CASCADE,"
             " host TEXT NOT NULL,"
             " outcome INTEGER NOT NULL CHECK (outcome IN (0, 1)),"
             " error TEXT NOT NULL, bytes INTEGER NOT NULL,"
             " packets INTEGER NOT NULL, loss INTEGER NOT NULL,"
             " window_first_ms INTEGER NOT NULL,"
             " window_last_ms INTEGER NOT NULL,"
             " PRIMARY KEY (snapshot_id, host)) WITHOUT ROWID;"
             "INSERT INTO h1 SELECT snapshot_id, host, outcome, error,"
             " bytes, packets, loss, window_first_ms, window_last_ms"
             " FROM snapshot_hosts;"
             "DROP TABLE snapshot_hosts;"
             "ALTER TABLE h1 RENAME TO snapshot_hosts;"
             "CREATE INDEX snapshot_hosts_host ON snapshot_hosts (host);"
             "PRAGMA user_version = 1;"
             "COMMIT;");
  assert_int_equal(coll_fixture_open(fx), 0);
  tg_coll_host_t h[2];
  size_t n;
  assert_int_equal(tg_coll_store_hosts(fx->store, old_id, h, 2, &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(h[0].outcome, TG_COLL_HOST_OK);
  assert_int_equal(h[1].outcome, TG_COLL_HOST_FAILED);
  assert_string_equal(h[0].name, "");
  assert_string_equal(h[0].problems, "");
  static const char *const after[] = {"~gamma", NULL};
  uint64_t id;
  assert_int_equal(coll_snapshot(fx->store, "t", after, 100, 2, &id), 0);
  assert_int_equal(tg_coll_store_hosts(fx->store, id, h, 2, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(h[0].outcome, TG_COLL_HOST_PARTIAL);
  assert_string_equal(h[0].name, COLL_FX_PARTIAL_NAME);
  assert_string_equal(h[0].problems, COLL_FX_PARTIAL_PROBLEMS);
  assert_string_equal(h[0].boost, COLL_FX_PARTIAL_BOOST);
  assert_string_equal(h[0].links, COLL_FX_PARTIAL_LINKS);
}

static void drop_links_sqlite(coll_fixture_t *fx) {
  set_pragma(fx, "BEGIN;"
                 "DROP TABLE function_shares;"
                 "ALTER TABLE snapshot_hosts DROP COLUMN links;"
                 "PRAGMA user_version = 4;"
                 "COMMIT;");
}

/* A catalog of schema 4 (no links column) moves to 5 at open: its host
 * rows kept with no links, a new one taken with them. */
static void recovery_moves_schema_4_to_5_adding_links(void **state) {
  coll_fixture_t *fx = *state;
  assert_int_equal(coll_fixture_open(fx), 0);
  coll_fx_check_links_migration(fx, drop_links_sqlite);
}

static void recovery_migrates_an_empty_catalog_once(void **state) {
  coll_fixture_t *fx = *state;
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", fx->dir, TG_COLL_CATALOG_FILE);
  for (int i = 0; i < 2; i++) {
    tg_coll_catalog_t *cat;
    assert_int_equal(tg_coll_catalog_sqlite_open(path, &cat), 0);
    assert_string_equal(cat->ops->name, "sqlite");
    tg_coll_catalog_close(cat);
  }
  sqlite3 *db;
  assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int(st, 0), TG_COLL_SQLITE_SCHEMA);
  sqlite3_finalize(st);
  assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
  sqlite3_finalize(st);
  sqlite3_close(db);
}

static unsigned file_mode(coll_fixture_t *fx, const char *name) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", fx->dir, name);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  return (unsigned)(st.st_mode & 0777);
}

/* Issue 59 point 11: catalog.sqlite and its -wal and -shm were 0644
 * while the snapshots are 0640. New ones are made 0640, and ones an
 * older collector left are brought to it at open. */
static void catalog_files_have_the_snapshots_mode(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  mode_t old = umask(022);
  assert_int_equal(coll_fixture_open(fx), 0);
  uint64_t id;
  assert_int_equal(coll_snapshot(fx->store, "t", hosts, 10, 1, &id), 0);
  static const char *const files[] = {TG_COLL_CATALOG_FILE,
                                      TG_COLL_CATALOG_FILE "-wal",
                                      TG_COLL_CATALOG_FILE "-shm"};
  for (size_t i = 0; i < 3; i++) {
    print_message("%s\n", files[i]);
    assert_int_equal(file_mode(fx, files[i]), 0640);
  }
  char path[512];
  snapshot_path(fx, id, path, sizeof(path));
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0640);
  coll_fixture_close(fx);
  snprintf(path, sizeof(path), "%s/%s", fx->dir, TG_COLL_CATALOG_FILE);
  assert_int_equal(chmod(path, 0644), 0);
  assert_int_equal(coll_fixture_open(fx), 0);
  assert_int_equal(file_mode(fx, TG_COLL_CATALOG_FILE), 0640);
  umask(old);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          recovery_fails_interrupted_snapshots_and_keeps_their_ids, coll_setup,
          coll_teardown),
      cmocka_unit_test_setup_teardown(recovery_repairs_a_hand_edited_directory,
                                      coll_setup, coll_teardown),
      cmocka_unit_test_setup_teardown(
          recovery_refuses_a_newer_schema_or_a_foreign_database, coll_setup,
          coll_teardown),
      cmocka_unit_test_setup_teardown(recovery_migrates_an_empty_catalog_once,
                                      coll_setup, coll_teardown),
      cmocka_unit_test_setup_teardown(recovery_moves_schema_4_to_5_adding_links,
                                      coll_setup, coll_teardown),
      cmocka_unit_test_setup_teardown(recovery_moves_schema_1_to_2_keeping_rows,
                                      coll_setup, coll_teardown),
      cmocka_unit_test_setup_teardown(catalog_files_have_the_snapshots_mode,
                                      coll_setup, coll_teardown),
      cmocka_unit_test_setup_teardown(symbols_live_and_die_with_their_snapshot,
                                      coll_setup, coll_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
