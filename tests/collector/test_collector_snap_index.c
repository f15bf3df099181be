/* The snapshot host index (collector/store/snap_index.h) and its place in the
 * store (store.h): built, written, read back and planned; every damaged
 * byte refused; too many runs refused at the writer; the index published
 * with its snapshot, removed with it, and recovered like it (SQLite
 * catalog: the store's side of the index does not depend on the
 * catalog). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "coll_fixture.h"
#include "collector/store/snap_index.h"
#include "collector/catalog/snapshot_id.h"
#include "tracegate/error.h"

#define TRACE 10000u

/* Three hosts after a head of 100 bytes, interleaved as a snapshot's
 * reads are: a, a (touching: one run), b, c, a, c, b.  */
static tg_coll_index_builder_t *sample(void) {
  tg_coll_index_builder_t *b = tg_coll_index_builder_new(3);
  assert_non_null(b);
  assert_int_equal(tg_coll_index_name(b, 0, "a.example:7467"), 0);
  assert_int_equal(tg_coll_index_name(b, 1, "b.example:7467"), 0);
  assert_int_equal(tg_coll_index_name(b, 2, "ssh://u@c"), 0);
  tg_coll_index_head(b, 100);
  tg_coll_index_add(b, 0, 100, 50);
  tg_coll_index_add(b, 0, 150, 50);
  tg_coll_index_add(b, 1, 200, 300);
  tg_coll_index_add(b, 2, 500, 10);
  tg_coll_index_add(b, 0, 510, 90);
  tg_coll_index_add(b, 2, 600, 400);
  tg_coll_index_add(b, 1, 1000, 9000);
  assert_null(tg_coll_index_why(b));
  assert_int_equal(tg_coll_index_extents(b), 6);
  return b;
}

static int write_tmp(const tg_coll_index_builder_t *b, uint64_t trace) {
  char path[] = "/tmp/tg-snap-index-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  assert_int_equal(tg_coll_index_write(b, fd, trace), 0);
  return fd;
}

static void plan_of(const tg_coll_index_t *ix, int fd, const size_t *hosts,
                    size_t n, const tg_coll_extent_t *want, size_t n_want,
                    uint64_t want_bytes) {
  tg_coll_extent_t *e = NULL;
  size_t ne = 0;
  uint64_t bytes = 0;
  assert_int_equal(tg_coll_index_plan(ix, fd, hosts, n, &e, &ne, &bytes), 0);
  assert_int_equal(ne, n_want);
  for (size_t i = 0; i < ne; i++) {
    assert_int_equal(e[i].off, want[i].off);
    assert_int_equal(e[i].len, want[i].len);
  }
  assert_int_equal(bytes, want_bytes);
  free(e);
}

static void index_round_trip_plans_hosts_in_file_order(void **state) {
  (void)state;
  tg_coll_index_builder_t *b = sample();
  int fd = write_tmp(b, TRACE);
  tg_coll_index_builder_free(b);
  tg_coll_index_t ix;
  assert_int_equal(tg_coll_index_read(fd, TRACE, &ix), 0);
  assert_int_equal(ix.n_hosts, 3);
  assert_int_equal(ix.head_bytes, 100);
  size_t h = 9;
  assert_int_equal(tg_coll_index_find(&ix, "ssh://u@c", 9, &h), 0);
  assert_int_equal(h, 2);
  assert_int_equal(tg_coll_index_find(&ix, "ssh://u@", 8, &h), -ENOENT);
  assert_int_equal(tg_coll_index_find(&ix, "x", 1, &h), -ENOENT);

  /* One host: the head (which its first run touches), then its runs. */
  size_t a[] = {0};
  tg_coll_extent_t wa[] = {{0, 200}, {510, 90}};
  plan_of(&ix, fd, a, 1, wa, 2, 290);
  /* Two hosts, asked in any order: merged in file order, touching runs
   * of different hosts joined. */
  size_t ca[] = {2, 0};
  tg_coll_extent_t wca[] = {{0, 200}, {500, 500}};
  plan_of(&ix, fd, ca, 2, wca, 2, 700);
  size_t all[] = {1, 2, 0};
  tg_coll_extent_t wall[] = {{0, TRACE}};
  plan_of(&ix, fd, all, 3, wall, 1, TRACE);
  tg_coll_index_free(&ix);
  tg_coll_index_free(&ix); /* safe twice */

  /* The index of another trace (its size) is refused. */
  assert_int_equal(tg_coll_index_read(fd, TRACE + 1, &ix), TG_EPARSE);
  close(fd);
}

/* A host that delivered nothing has an empty list: its part is the head. */
static void index_host_without_data_is_the_head(void **state) {
  (void)state;
  tg_coll_index_builder_t *b = tg_coll_index_builder_new(2);
  assert_int_equal(tg_coll_index_name(b, 0, "a"), 0);
  assert_int_equal(tg_coll_index_name(b, 1, "b"), 0);
  tg_coll_index_head(b, 64);
  tg_coll_index_add(b, 0, 64, 100);
  int fd = write_tmp(b, 164);
  tg_coll_index_builder_free(b);
  tg_coll_index_t ix;
  assert_int_equal(tg_coll_index_read(fd, 164, &ix), 0);
  size_t one[] = {1};
  tg_coll_extent_t w[] = {{0, 64}};
  plan_of(&ix, fd, one, 1, w, 1, 64);
  tg_coll_index_free(&ix);
  close(fd);
}

/* Every byte of an index flipped: the read or the plan of some host
 * refuses it; none hands out a range it did not hold. */
static void index_refuses_every_damaged_byte(void **state) {
  (void)state;
  tg_coll_index_builder_t *b = sample();
  int fd = write_tmp(b, TRACE);
  tg_coll_index_builder_free(b);
  off_t size = lseek(fd, 0, SEEK_END);
  uint8_t *good = malloc((size_t)size), *bad = malloc((size_t)size);
  assert_int_equal(pread(fd, good, (size_t)size, 0), size);
  close(fd);
  for (off_t i = 0; i < size; i++) {
    memcpy(bad, good, (size_t)size);
    bad[i] ^= 0x40;
    int f = memfd_create("index", MFD_CLOEXEC);
    assert_true(f >= 0);
    assert_int_equal(write(f, bad, (size_t)size), size);
    tg_coll_index_t ix;
    int rv = tg_coll_index_read(f, TRACE, &ix);
    if (rv == 0) {
      size_t all[] = {0, 1, 2};
      tg_coll_extent_t *e = NULL;
      size_t ne;
      uint64_t bytes;
      rv = tg_coll_index_plan(&ix, f, all, 3, &e, &ne, &bytes);
      free(e);
      tg_coll_index_free(&ix);
    }
    if (rv != TG_EPARSE) fail_msg("byte %lld flipped: %d", (long long)i, rv);
    close(f);
  }
  /* Cut short anywhere: refused too. */
  for (off_t n = 0; n < size; n += 7) {
    int f = memfd_create("index", MFD_CLOEXEC);
    assert_int_equal(write(f, good, (size_t)n), n);
    tg_coll_index_t ix;
    assert_int_equal(tg_coll_index_read(f, TRACE, &ix), TG_EPARSE);
    close(f);
  }
  free(good);
  free(bad);
}

/* A host whose every packet is a run of its own, past the bound: the
 * builder gives up, the writer refuses, nothing grows further. */
static void index_gives_up_past_its_bound(void **state) {
  (void)state;
  tg_coll_index_builder_t *b = tg_coll_index_builder_new(2);
  assert_int_equal(tg_coll_index_name(b, 0, "a"), 0);
  assert_int_equal(tg_coll_index_name(b, 1, "b"), 0);
  uint64_t off = 0;
  for (size_t i = 0; i <= TG_COLL_INDEX_MAX_EXTENTS; i++, off += 2)
    tg_coll_index_add(b, i & 1, off, 2);
  assert_non_null(tg_coll_index_why(b));
  assert_int_equal(tg_coll_index_extents(b), TG_COLL_INDEX_MAX_EXTENTS);
  assert_int_equal(tg_coll_index_write(b, -1, off), -ENOSPC);
  tg_coll_index_builder_free(b);

  /* Bytes out of file order are a caller's bug: no index either. */
  b = tg_coll_index_builder_new(1);
  assert_int_equal(tg_coll_index_name(b, 0, "a"), 0);
  tg_coll_index_add(b, 0, 10, 10);
  tg_coll_index_add(b, 0, 5, 1);
  assert_non_null(tg_coll_index_why(b));
  tg_coll_index_builder_free(b);
  /* Names: present, bounded; hosts: in range. */
  assert_null(tg_coll_index_builder_new(0));
  assert_null(tg_coll_index_builder_new(TG_COLL_INDEX_MAX_HOSTS + 1));
  b = tg_coll_index_builder_new(1);
  char long_name[TG_COLL_INDEX_NAME_MAX + 2];
  memset(long_name, 'x', sizeof(long_name) - 1);
  long_name[sizeof(long_name) - 1] = 0;
  assert_int_equal(tg_coll_index_name(b, 0, long_name), -EINVAL);
  assert_int_equal(tg_coll_index_name(b, 0, ""), -EINVAL);
  assert_int_equal(tg_coll_index_name(b, 1, "a"), -EINVAL);
  assert_int_equal(tg_coll_index_write(b, -1, 0), -EINVAL); /* unnamed */
  tg_coll_index_builder_free(b);
}

/* --- after a rewrite ------------------------------------------------------ */

/* sample()'s trace written again as a second pass writes it, one piece a
 * packet: the head's first packet grows by 4, a's first by 2, the piece
 * of b by 6, c's last two by 1 each; the rest as they were. The index
 * follows: each host's runs where its bytes now are, coalesced as
 * before, nobody's bytes nobody's. */
static void remap_follows_packets_to_their_new_places(void **state) {
  (void)state;
  tg_coll_index_builder_t *old = sample();
  tg_coll_index_remap_t *r = tg_coll_index_remap_new(old);
  assert_non_null(r);
  /* in, in_n, growth */
  static const uint64_t pieces[][3] = {
      {0, 60, 4},    {60, 40, 0},  /* the head */
      {100, 50, 2},  {150, 50, 0}, /* a */
      {200, 300, 6},               /* b */
      {500, 10, 0},                /* c */
      {510, 90, 0},                /* a */
      {600, 200, 1}, {800, 200, 1}, /* c */
      {1000, 9000, 0},             /* b */
  };
  uint64_t out = 0;
  for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
    uint64_t n = pieces[i][1] + pieces[i][2];
    tg_coll_index_remap_span(r, pieces[i][0], pieces[i][1], out, n);
    out += n;
  }
  const char *why = "unset";
  tg_coll_index_builder_t *b = tg_coll_index_remap_end(r, &why);
  assert_non_null(b);
  assert_null(why);
  int fd = write_tmp(b, out);
  tg_coll_index_builder_free(b);
  tg_coll_index_builder_free(old);
  tg_coll_index_t ix;
  assert_int_equal(tg_coll_index_read(fd, out, &ix), 0);
  assert_int_equal(ix.head_bytes, 104);
  size_t h;
  assert_int_equal(tg_coll_index_find(&ix, "ssh://u@c", 9, &h), 0);
  assert_int_equal(h, 2);
  size_t a[] = {0}, bb[] = {1}, c[] = {2};
  tg_coll_extent_t wa[] = {{0, 206}, {522, 90}};
  plan_of(&ix, fd, a, 1, wa, 2, 296);
  tg_coll_extent_t wb[] = {{0, 104}, {206, 306}, {1014, 9000}};
  plan_of(&ix, fd, bb, 1, wb, 3, 9410);
  tg_coll_extent_t wc[] = {{0, 104}, {512, 10}, {612, 402}};
  plan_of(&ix, fd, c, 1, wc, 3, 516);
  assert_int_equal(out, 10014);
  size_t all[] = {0, 1, 2};
  tg_coll_extent_t wall[] = {{0, out}};
  plan_of(&ix, fd, all, 3, wall, 1, out);
  tg_coll_index_free(&ix);
  close(fd);
}

/* Pieces that cross two hosts' runs or the head's end, or that skip or
 * repeat bytes, make the remap give up, saying why. */
static void remap_gives_up_on_pieces_it_cannot_place(void **state) {
  (void)state;
  static const uint64_t bad[][2] = {
      {90, 20},  /* across the head's end */
      {180, 40}, /* across a's run and b's */
  };
  for (size_t i = 0; i < 3; i++) {
    tg_coll_index_builder_t *old = sample();
    tg_coll_index_remap_t *r = tg_coll_index_remap_new(old);
    assert_non_null(r);
    if (i < 2) {
      uint64_t at = bad[i][0];
      tg_coll_index_remap_span(r, 0, at, 0, at);
      tg_coll_index_remap_span(r, at, bad[i][1], at, bad[i][1]);
    } else {
      tg_coll_index_remap_span(r, 0, 100, 0, 100);
      tg_coll_index_remap_span(r, 150, 50, 100, 50); /* skips a's first */
    }
    const char *why = NULL;
    assert_null(tg_coll_index_remap_end(r, &why));
    assert_non_null(why);
    tg_coll_index_builder_free(old);
  }
  /* Freed unfinished: nothing leaks (ASan). */
  tg_coll_index_builder_t *old = sample();
  tg_coll_index_remap_free(tg_coll_index_remap_new(old));
  tg_coll_index_remap_free(NULL);
  tg_coll_index_builder_free(old);
}

/* --- in the store --------------------------------------------------------- */

static bool exists(const coll_fixture_t *fx, const char *sub, uint64_t id,
                   bool index, bool partial) {
  char name[TG_COLL_FILE_NAME_MAX], path[512];
  if (index)
    tg_coll_id_index_name(id, partial, name);
  else
    tg_coll_id_file_name(id, partial, name);
  snprintf(path, sizeof(path), "%s/%s/%s", fx->dir, sub, name);
  struct stat st;
  return stat(path, &st) == 0;
}

/* A snapshot of two hosts written with its index, as snap.c does. */
static uint64_t indexed_snapshot(coll_fixture_t *fx) {
  tg_coll_begin_t bg = {.trigger = "t", .reason = "r", .origin = ""};
  tg_coll_writer_t *w;
  uint64_t id;
  assert_int_equal(tg_coll_store_begin(fx->store, &bg, &w, &id), 0);
  tg_coll_index_builder_t *b = tg_coll_index_builder_new(2);
  assert_int_equal(tg_coll_index_name(b, 0, "h0"), 0);
  assert_int_equal(tg_coll_index_name(b, 1, "h1"), 0);
  uint8_t buf[300];
  coll_fill(buf, sizeof(buf), id);
  assert_int_equal(tg_coll_writer_write(w, buf, 100), 0);
  tg_coll_index_head(b, 100);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(tg_coll_writer_write(w, buf + 100 + 50 * i, 50), 0);
    tg_coll_index_add(b, (size_t)(i & 1), 100 + 50 * (uint64_t)i, 50);
  }
  tg_coll_writer_set_index(w, b);
  tg_coll_host_result_t hr[2] = {
      {.host = "h0", .outcome = TG_COLL_HOST_OK, .bytes = 100, .packets = 2},
      {.host = "h1", .outcome = TG_COLL_HOST_OK, .bytes = 100, .packets = 2}};
  tg_coll_result_t r = {.packets = 4, .hosts = hr, .n_hosts = 2};
  assert_int_equal(tg_coll_store_finish(fx->store, w, &r), 0);
  tg_coll_index_builder_free(b);
  return id;
}

static void store_keeps_index_with_its_snapshot(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  uint64_t id = indexed_snapshot(fx);
  assert_true(exists(fx, TG_COLL_SNAPSHOT_DIR, id, true, false));
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_TMP_DIR), 0);
  int fd, tfd;
  assert_int_equal(tg_coll_store_open_index(fx->store, id, &fd), 0);
  assert_int_equal(tg_coll_store_open_file(fx->store, id, &tfd), 0);
  struct stat st;
  assert_int_equal(fstat(tfd, &st), 0);
  tg_coll_index_t ix;
  assert_int_equal(tg_coll_index_read(fd, (uint64_t)st.st_size, &ix), 0);
  size_t one[] = {1};
  tg_coll_extent_t want[] = {{0, 100}, {150, 50}, {250, 50}};
  plan_of(&ix, fd, one, 1, want, 3, 200);
  tg_coll_index_free(&ix);
  close(fd);
  close(tfd);

  /* Survives a restart; a stray index of no live snapshot does not. */
  coll_fixture_close(fx);
  char path[512];
  snprintf(path, sizeof(path), "%s/%s/%s", fx->dir, TG_COLL_SNAPSHOT_DIR,
           "00000000000003e8" TG_COLL_INDEX_SUFFIX);
  int f = open(path, O_WRONLY | O_CREAT, 0640);
  close(f);
  snprintf(path, sizeof(path), "%s/%s/%s", fx->dir, TG_COLL_TMP_DIR,
           "00000000000003e9" TG_COLL_INDEX_PARTIAL_SUFFIX);
  f = open(path, O_WRONLY | O_CREAT, 0640);
  close(f);
  assert_int_equal(coll_fixture_open(fx), 0);
  assert_int_equal(fx->rec.orphans_removed, 1);
  assert_int_equal(fx->rec.tmp_removed, 1);
  assert_int_equal(fx->rec.foreign, 0);
  assert_true(exists(fx, TG_COLL_SNAPSHOT_DIR, id, true, false));

  /* Deleted: the index goes with the file. */
  assert_int_equal(tg_coll_store_delete(fx->store, id), 0);
  assert_false(exists(fx, TG_COLL_SNAPSHOT_DIR, id, true, false));
  assert_false(exists(fx, TG_COLL_SNAPSHOT_DIR, id, false, false));
  assert_int_equal(tg_coll_store_open_index(fx->store, id, &fd), -ENOENT);
}

/* tg_coll_writer_rewrite's pass: the old bytes each followed by one
 * byte, read from |in|; -EIO after |ctx| bytes when it is not SIZE_MAX. */
typedef struct rw_ctx {
  size_t fail_after;
} rw_ctx_t;

static int double_each(void *ctx, int in, tg_coll_writer_t *w) {
  const rw_ctx_t *c = ctx;
  uint8_t b[2];
  size_t done = 0;
  while (read(in, b, 1) == 1) {
    if (done++ == c->fail_after) return -EIO;
    b[1] = (uint8_t)~b[0];
    int rv = tg_coll_writer_write(w, b, 2);
    if (rv) return rv;
  }
  return 0;
}

/* A snapshot written again before it is finished: what the pass wrote
 * is what is stored, with its size and checksum, and nothing is left in
 * tmp/; a pass that fails leaves the writer as it was, its bytes then
 * stored as written. */
static void store_rewrite_replaces_the_file_or_keeps_it(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  for (int fail = 0; fail < 2; fail++) {
    tg_coll_begin_t bg = {.trigger = "t", .reason = "r", .origin = ""};
    tg_coll_writer_t *w;
    uint64_t id;
    assert_int_equal(tg_coll_store_begin(fx->store, &bg, &w, &id), 0);
    uint8_t buf[300];
    coll_fill(buf, sizeof(buf), id);
    assert_int_equal(tg_coll_writer_write(w, buf, sizeof(buf)), 0);
    rw_ctx_t c = {.fail_after = fail ? 120 : SIZE_MAX};
    assert_int_equal(tg_coll_writer_rewrite(w, double_each, &c),
                     fail ? -EIO : 0);
    assert_int_equal(tg_coll_writer_bytes(w), fail ? 300 : 600);
    tg_coll_host_result_t hr = {.host = "h0", .outcome = TG_COLL_HOST_OK,
                                .bytes = 300, .packets = 1};
    tg_coll_result_t r = {.packets = 1, .hosts = &hr, .n_hosts = 1};
    assert_int_equal(tg_coll_store_finish(fx->store, w, &r), 0);
    assert_int_equal(coll_count_entries(fx->dir, TG_COLL_TMP_DIR), 0);
    int fd;
    assert_int_equal(tg_coll_store_open_file(fx->store, id, &fd), 0);
    uint8_t got[700];
    ssize_t n = read(fd, got, sizeof(got));
    close(fd);
    assert_int_equal(n, fail ? 300 : 600);
    for (size_t i = 0; i < 300; i++) {
      if (fail) {
        assert_int_equal(got[i], buf[i]);
        continue;
      }
      assert_int_equal(got[2 * i], buf[i]);
      assert_int_equal(got[2 * i + 1], (uint8_t)~buf[i]);
    }
    tg_coll_snapshot_t row;
    assert_int_equal(tg_coll_store_get(fx->store, id, &row), 0);
    assert_int_equal(row.bytes, fail ? 300 : 600);
    assert_int_equal(row.crc32, (uint32_t)crc32(0L, got, (uInt)n));
  }
}

/* A live snapshot whose file went missing is lost at open: its index goes
 * too. A snapshot written without an index has none to open. */
static void store_drops_index_of_a_lost_snapshot(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  uint64_t id = indexed_snapshot(fx);
  coll_fixture_close(fx);
  char name[TG_COLL_FILE_NAME_MAX], path[512];
  tg_coll_id_file_name(id, 0, name);
  snprintf(path, sizeof(path), "%s/%s/%s", fx->dir, TG_COLL_SNAPSHOT_DIR, name);
  assert_int_equal(truncate(path, 7), 0);
  assert_int_equal(coll_fixture_open(fx), 0);
  assert_int_equal(fx->rec.lost, 1);
  assert_false(exists(fx, TG_COLL_SNAPSHOT_DIR, id, true, false));

  const char *hosts[] = {"x", NULL};
  assert_int_equal(coll_snapshot(fx->store, "t", hosts, 1000, 1, &id), 0);
  int fd;
  assert_int_equal(tg_coll_store_open_index(fx->store, id, &fd), -ENOENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(index_round_trip_plans_hosts_in_file_order),
      cmocka_unit_test(index_host_without_data_is_the_head),
      cmocka_unit_test(index_refuses_every_damaged_byte),
      cmocka_unit_test(index_gives_up_past_its_bound),
      cmocka_unit_test(remap_follows_packets_to_their_new_places),
      cmocka_unit_test(remap_gives_up_on_pieces_it_cannot_place),
      cmocka_unit_test_setup_teardown(store_keeps_index_with_its_snapshot,
                                      coll_setup_open, coll_teardown),
      cmocka_unit_test_setup_teardown(store_drops_index_of_a_lost_snapshot,
                                      coll_setup_open, coll_teardown),
      cmocka_unit_test_setup_teardown(
          store_rewrite_replaces_the_file_or_keeps_it, coll_setup_open,
          coll_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
