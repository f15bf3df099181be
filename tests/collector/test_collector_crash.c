/* Crash safety (collector/store/store.h): a child process writes, finishes,
 * aborts, deletes and retains snapshots at random, and is SIGKILLed at a
 * chosen moment; the store is then reopened and checked. With each
 * catalog: 200 rounds on one store with SQLite, 66 with PostgreSQL (the
 * child's connection dies with it, mid-transaction or not), a
 * deterministic seed each, the kill points spread over every step of the
 * protocol:
 * - even rounds stop the child right after the chosen step (it waits to be
 *   killed): every step is hit, mid-write, between rename and commit,
 *   between a deletion's commit and its unlink;
 * - odd rounds kill the child as soon as the step is reported while it
 *   runs on: the kill lands anywhere after it (inside SQLite, between two
 *   system calls).
 * After each kill: the reopen found no live row without its whole file
 * (it would repair one, as after a hand edit); no PENDING row; every live
 * row's file holds exactly its
 * bytes (size and crc32) and has its host index, which describes it; no
 * file or index without a live row; tmp/ empty; every
 * id the child reported as returned (before using it) still has a row,
 * unless the child reported it was deleting it.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_fixture.h"
#include "collector/store/snap_index.h"
#include "collector/catalog/snapshot_id.h"

#define ROUNDS_SQLITE 200
/* Every step a kill point 3 times: 2 * 3 * TG_COLL_STEP_COUNT. */
#define ROUNDS_PG 66
#define CHILD_OPS 400
#define MAX_ID 65536

enum { MSG_RETURNED, MSG_REMOVING, MSG_TARGET, MSG_DONE };

typedef struct msg {
  uint32_t kind, step;
  uint64_t id;
} msg_t;

typedef struct child {
  int fd;                /* the report pipe */
  tg_coll_step_t target; /* the step to kill at ... */
  unsigned nth;          /* ... its nth occurrence */
  bool wait_for_kill;    /* stop there (even rounds) or run on (odd) */
  unsigned seen;
  uint64_t rng;
  int64_t now_ms;
} child_t;

static void report(child_t *c, uint32_t kind, uint32_t step, uint64_t id) {
  msg_t m = {kind, step, id};
  /* Smaller than PIPE_BUF: one write, whole or not at all. */
  if (write(c->fd, &m, sizeof(m)) != sizeof(m)) _exit(3);
}

static void on_step(void *ctx, tg_coll_step_t step, uint64_t id) {
  child_t *c = ctx;
  if (step == TG_COLL_STEP_REMOVING) report(c, MSG_REMOVING, step, id);
  if (step != c->target || ++c->seen != c->nth) return;
  report(c, MSG_TARGET, step, id);
  if (c->wait_for_kill)
    for (;;) pause();
}

static uint64_t next(child_t *c) {
  uint64_t x = c->rng;
  x ^= x << 13, x ^= x >> 7, x ^= x << 17;
  return c->rng = x;
}

static int64_t child_now(void *ctx) { return ((child_t *)ctx)->now_ms; }

static void child_snapshot(child_t *c, tg_coll_store_t *s, uint64_t *ids,
                           size_t *n_ids) {
  static const char *const triggers[] = {"oom", "latency", "manual"};
  tg_coll_begin_t b = {
      .trigger = triggers[next(c) % 3], .reason = "crash", .origin = "o"};
  tg_coll_writer_t *w;
  uint64_t id;
  if (tg_coll_store_begin(s, &b, &w, &id)) _exit(4);
  report(c, MSG_RETURNED, 0, id); /* before the id is used */
  if (*n_ids < CHILD_OPS) ids[(*n_ids)++] = id;
  unsigned pieces = (unsigned)(next(c) % 6);
  uint8_t buf[4096];
  /* Its host index, as the daemon feeds one: the first piece is the head,
   * the others go to the hosts in turn. */
  tg_coll_index_builder_t *ix = tg_coll_index_builder_new(3);
  if (!ix || tg_coll_index_name(ix, 0, "a") || tg_coll_index_name(ix, 1, "b") ||
      tg_coll_index_name(ix, 2, "c"))
    _exit(8);
  uint64_t off = 0;
  for (unsigned i = 0; i < pieces; i++) {
    size_t n = 1 + next(c) % sizeof(buf);
    coll_fill(buf, n, next(c));
    if (tg_coll_writer_write(w, buf, n)) _exit(5);
    if (i == 0)
      tg_coll_index_head(ix, n);
    else
      tg_coll_index_add(ix, i % 3, off, n);
    off += n;
  }
  tg_coll_writer_set_index(w, ix);
  if (next(c) % 10 == 0) {
    if (tg_coll_store_abort(s, w, "child aborts")) _exit(6);
    tg_coll_index_builder_free(ix);
    return;
  }
  if (next(c) % 2) tg_coll_writer_sync(w);
  tg_coll_host_result_t h[3] = {
      {.host = "a", .bytes = 1}, {.host = "b"}, {.host = "c"}};
  for (int i = 0; i < 3; i++)
    h[i].outcome = next(c) % 4 ? TG_COLL_HOST_OK : TG_COLL_HOST_FAILED;
  tg_coll_result_t r = {.packets = pieces, .hosts = h, .n_hosts = 3};
  if (tg_coll_store_finish(s, w, &r)) _exit(7);
  tg_coll_index_builder_free(ix);
}

/* Never returns. */
static void child_main(const coll_fixture_t *fx, unsigned round, int fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  child_t c = {.fd = fd, .rng = 0x2545f4914f6cdd1dull * (round + 1)};
  c.target = (tg_coll_step_t)(round / 2 % TG_COLL_STEP_COUNT);
  c.nth = 1 + (unsigned)(next(&c) % 3);
  c.wait_for_kill = round % 2 == 0;
  c.now_ms = 1000000 * (int64_t)(round + 1);
  /* Its own connection: the parent's (closed by now) is never shared. */
  tg_coll_catalog_t *cat = NULL;
  if (fx->kind == COLL_PG && coll_pg_catalog(fx->conninfo, fx->member, &cat))
    _exit(2);
  tg_coll_store_config_t cfg = {
      .dir = fx->dir,
      .catalog = cat,
      .retention = {.max_bytes = 48 * 1024, .max_age_ms = 20000},
      .now_ms = child_now,
      .clock_ctx = &c,
      .on_step = on_step,
      .step_ctx = &c,
  };
  tg_coll_store_t *s;
  if (tg_coll_store_open(&cfg, &s, NULL)) _exit(2);
  uint64_t ids[CHILD_OPS];
  size_t n_ids = 0;
  for (unsigned op = 0; op < CHILD_OPS; op++) {
    c.now_ms += 1000;
    unsigned r = (unsigned)(next(&c) % 100);
    if (r < 60) {
      child_snapshot(&c, s, ids, &n_ids);
    } else if (r < 75) {
      while (tg_coll_store_retain(s, NULL) == 1) {
      }
    } else if (r < 85 && n_ids) {
      tg_coll_store_delete(s, ids[next(&c) % n_ids]);
    } else if (n_ids) {
      tg_coll_store_pin(s, ids[next(&c) % n_ids], next(&c) % 2);
    }
  }
  report(&c, MSG_DONE, 0, 0);
  _exit(0);
}

typedef struct tally {
  uint8_t id[MAX_ID]; /* RETURNED and REMOVING bits */
  unsigned stopped_at[TG_COLL_STEP_COUNT];
  unsigned killed, finished;
} tally_t;

#define RETURNED 1
#define REMOVING 2

/* Runs one child to its kill; records what it reported. */
static void run_round(const coll_fixture_t *fx, unsigned round, tally_t *t) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(p[0]);
    child_main(fx, round, p[1]);
  }
  close(p[1]);
  bool killed = false;
  msg_t m;
  ssize_t got;
  while ((got = read(p[0], &m, sizeof(m))) == sizeof(m)) {
    if (m.kind == MSG_RETURNED || m.kind == MSG_REMOVING) {
      assert_true(m.id > 0 && m.id < MAX_ID);
      t->id[m.id] |= m.kind == MSG_RETURNED ? RETURNED : REMOVING;
    } else if (m.kind == MSG_TARGET && !killed) {
      assert_int_equal(kill(pid, SIGKILL), 0);
      killed = true;
      if (round % 2 == 0) t->stopped_at[m.step]++;
    } else if (m.kind == MSG_DONE) {
      t->finished++;
    }
  }
  assert_int_equal(got, 0); /* EOF: the child is gone */
  close(p[0]);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  /* A child running on (odd rounds) may end all its steps before the
   * kill lands, on a busy machine: that is a clean exit, not a failure. */
  if (killed && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
    t->killed++;
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fail_msg("round %u: child failed (status 0x%x)", round, status);
  }
}

static void check_store(coll_fixture_t *fx, unsigned round, const tally_t *t) {
  assert_int_equal(coll_fixture_open(fx), 0);
  /* Repairing a live row means the protocol let one point at a missing or
   * partial file: the safety net for hand edits must never be needed. */
  if (fx->rec.lost)
    fail_msg("round %u: %u live rows had lost their file", round, fx->rec.lost);
  tg_coll_filter_t f = TG_COLL_FILTER_INIT;
  static tg_coll_snapshot_t rows[TG_COLL_LIST_MAX];
  static uint8_t has_row[MAX_ID];
  memset(has_row, 0, sizeof(has_row));
  int live = 0;
  for (;;) {
    size_t n;
    assert_int_equal(
        tg_coll_store_list(fx->store, &f, rows, TG_COLL_LIST_MAX, &n), 0);
    for (size_t i = 0; i < n; i++) {
      const tg_coll_snapshot_t *r = &rows[i];
      assert_true(r->id < MAX_ID);
      has_row[r->id] = 1;
      if (r->state == TG_COLL_PENDING)
        fail_msg("round %u: %llu still pending", round,
                 (unsigned long long)r->id);
      if (r->state != TG_COLL_COMPLETE && r->state != TG_COLL_PARTIAL) continue;
      live++;
      uint64_t size;
      uint32_t crc;
      if (coll_file_crc(fx->dir, r->id, false, &size, &crc) != 0)
        fail_msg("round %u: live %llu has no file", round,
                 (unsigned long long)r->id);
      if (size != r->bytes || crc != r->crc32)
        fail_msg(
            "round %u: %llu holds %llu bytes (crc %08x), row says %llu"
            " (%08x)",
            round, (unsigned long long)r->id, (unsigned long long)size, crc,
            (unsigned long long)r->bytes, r->crc32);
      int ifd;
      tg_coll_index_t ix;
      if (tg_coll_store_open_index(fx->store, r->id, &ifd) != 0)
        fail_msg("round %u: live %llu has no index", round,
                 (unsigned long long)r->id);
      if (tg_coll_index_read(ifd, size, &ix) != 0)
        fail_msg("round %u: the index of %llu does not describe it", round,
                 (unsigned long long)r->id);
      tg_coll_index_free(&ix);
      close(ifd);
    }
    if (n < TG_COLL_LIST_MAX) break;
    f.before_id = rows[n - 1].id;
  }
  /* Every file and index is a live row's (each live row has both, above). */
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_SNAPSHOT_DIR), 2 * live);
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_TMP_DIR), 0);
  for (uint64_t id = 1; id < MAX_ID; id++)
    if ((t->id[id] & (RETURNED | REMOVING)) == RETURNED && !has_row[id])
      fail_msg("round %u: returned id %llu lost", round,
               (unsigned long long)id);
  coll_fixture_close(fx);
}

static void crash_at_any_step_leaves_a_consistent_store(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  static tally_t t;
  memset(&t, 0, sizeof(t));
  unsigned rounds = fx->kind == COLL_PG ? ROUNDS_PG : ROUNDS_SQLITE;
  for (unsigned round = 0; round < rounds; round++) {
    run_round(fx, round, &t);
    check_store(fx, round, &t);
  }
  fprintf(stderr,
          "crash: %u rounds, %u killed, %u ran out; stopped at:", rounds,
          t.killed, t.finished);
  for (int s = 0; s < TG_COLL_STEP_COUNT; s++)
    fprintf(stderr, " %s %u", tg_coll_step_name((tg_coll_step_t)s),
            t.stopped_at[s]);
  fprintf(stderr, "\n");
  /* Each step of the protocol was a kill point in several rounds. */
  for (int s = 0; s < TG_COLL_STEP_COUNT; s++)
    if (t.stopped_at[s] < 3)
      fail_msg("step %s was a kill point only %u times",
               tg_coll_step_name((tg_coll_step_t)s), t.stopped_at[s]);
}

#define CRASH_TESTS(setup, setup_open)                                      \
  {                                                                         \
    cmocka_unit_test_setup_teardown(                                        \
        crash_at_any_step_leaves_a_consistent_store, setup, coll_teardown), \
  }

int main(void) { COLL_RUN_BOTH_CATALOGS(CRASH_TESTS); }
