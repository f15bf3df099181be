/* SMB state machine under contention (abi/smb.h). Also runs under TSan.
 *
 * Producer threads and a service thread race on one SMB exactly as the real
 * sides do: writers own a chunk between acquire and release-as-complete, the
 * reader between acquire-for-reading and release-as-free, and every payload
 * byte crosses threads only through those bitmap transitions. A lost,
 * duplicated or torn chunk, or a TSan report, means the transitions do not
 * order what they claim to.
 *
 * cmocka asserts longjmp and are not thread-safe: worker threads only count
 * failures; the test thread asserts after joining them.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tracegate/pb_wire.h"
#include "abi/smb.h"
#include "tracegate/error.h"

#define PAGE_SIZE 4096u
#define NUM_PAGES 8u
#define NUM_WRITERS 4u
#define CHUNKS_PER_WRITER 20000u
/* Only a hang guard: a healthy run takes a few seconds even under TSan. */
#define DEADLINE_SECONDS 60

/* Even pages split in 4, odd pages in 14: both chunk sizes in play. */
static unsigned page_layout(size_t page_idx) {
  return page_idx % 2 ? TG_PAGE_DIV_14 : TG_PAGE_DIV_4;
}

static uint8_t *smb_alloc(tg_smb_t *smb, size_t num_pages) {
  uint8_t *mem = aligned_alloc(PAGE_SIZE, num_pages * PAGE_SIZE);
  assert_non_null(mem);
  memset(mem, 0, num_pages * PAGE_SIZE);
  assert_int_equal(tg_smb_init(smb, mem, num_pages * PAGE_SIZE, PAGE_SIZE), 0);
  return mem;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* --- payload ------------------------------------------------------------
 * Two fragments: a 16-byte record {writer, chunk_id, body_len, checksum}
 * (u32 LE each) and a body whose bytes derive from (writer, chunk_id). */

#define META_SIZE 16u
#define FIXED_OVERHEAD \
  (TG_SMB_CHUNK_HEADER_SIZE + 2 * TG_PACKET_HEADER_SIZE + META_SIZE)

static uint8_t body_byte(uint32_t writer, uint32_t chunk_id, size_t k) {
  return (uint8_t)(writer * 37u + chunk_id * 13u + k * 7u);
}

static uint32_t fnv1a(uint32_t h, const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

static void write_payload(tg_smb_chunk_t *c, uint32_t writer,
                          uint32_t chunk_id) {
  size_t room = c->size - FIXED_OVERHEAD;
  uint32_t body_len = (uint32_t)((chunk_id * 131u + writer * 7u) % (room + 1));
  uint8_t *p = c->begin + TG_SMB_CHUNK_HEADER_SIZE;
  uint8_t *body = p + TG_PACKET_HEADER_SIZE + META_SIZE + TG_PACKET_HEADER_SIZE;
  for (size_t k = 0; k < body_len; k++)
    body[k] = body_byte(writer, chunk_id, k);

  tg_pb_write_redundant_varint(p, META_SIZE);
  uint8_t *meta = p + TG_PACKET_HEADER_SIZE;
  tg_pb_write_le32(meta, writer);
  tg_pb_write_le32(meta + 4, chunk_id);
  tg_pb_write_le32(meta + 8, body_len);
  uint32_t sum = fnv1a(fnv1a(2166136261u, meta, 12), body, body_len);
  tg_pb_write_le32(meta + 12, sum);
  tg_pb_write_redundant_varint(meta + META_SIZE, body_len);
  tg_smb_chunk_set_packets(c, 2, 0);
}

/* Returns true when |copy| is exactly what write_payload() produced. */
static bool check_payload(const uint8_t *copy, size_t size, uint32_t *writer,
                          uint32_t *chunk_id) {
  tg_chunk_info_t info;
  if (tg_chunk_validate(copy, size, true, &info) != 0) return false;
  if (info.valid_fragments != 2 || info.flags != 0) return false;
  tg_fragment_iter_t it;
  tg_fragment_iter_init(&it, copy, size, &info);
  const uint8_t *meta, *body;
  size_t meta_len, body_len;
  if (!tg_fragment_iter_next(&it, &meta, &meta_len) || meta_len != META_SIZE)
    return false;
  if (!tg_fragment_iter_next(&it, &body, &body_len)) return false;
  uint32_t w = tg_pb_read_le32(meta), id = tg_pb_read_le32(meta + 4);
  if (w != info.writer_id || id != info.chunk_id) return false;
  if (tg_pb_read_le32(meta + 8) != body_len) return false;
  uint32_t sum = fnv1a(fnv1a(2166136261u, meta, 12), body, body_len);
  if (tg_pb_read_le32(meta + 12) != sum) return false;
  for (size_t k = 0; k < body_len; k++)
    if (body[k] != body_byte(w, id, k)) return false;
  *writer = w;
  *chunk_id = id;
  return true;
}

/* --- writers and reader --------------------------------------------------- */

typedef struct race {
  tg_smb_t smb;
  atomic_uint writers_done;
  atomic_uint writer_errors; /* unexpected return codes */
  /* Reader-only until joined. */
  uint8_t seen[NUM_WRITERS + 1][CHUNKS_PER_WRITER];
  unsigned long chunks_read;
  unsigned long corrupt;
  unsigned long bad_ids;
  unsigned long duplicates;
  unsigned long reader_errors;
  bool timed_out;
} race_t;

typedef struct writer_arg {
  race_t *race;
  uint16_t writer_id;
} writer_arg_t;

/* Finds and acquires a Free chunk, partitioning empty pages on the way. */
static bool acquire_any_chunk(race_t *r, size_t *cursor, uint32_t chunk_id,
                              uint16_t writer_id, tg_smb_chunk_t *out) {
  for (size_t k = 0; k < NUM_PAGES; k++) {
    size_t p = (*cursor + k) % NUM_PAGES;
    uint32_t bm = tg_smb_page_bitmap(&r->smb, p);
    if (tg_smb_bitmap_layout(bm) == TG_PAGE_NOT_PARTITIONED) {
      int rv = tg_smb_try_partition_page(&r->smb, p, page_layout(p));
      if (rv != 0 && rv != TG_ECHUNK_STATE)
        atomic_fetch_add_explicit(&r->writer_errors, 1, memory_order_relaxed);
      bm = tg_smb_page_bitmap(&r->smb, p);
    }
    unsigned n = tg_smb_layout_num_chunks(tg_smb_bitmap_layout(bm));
    for (unsigned i = 0; i < n; i++) {
      if (tg_smb_bitmap_chunk_state(bm, i) != TG_CHUNK_FREE) continue;
      int rv = tg_smb_try_acquire_chunk_for_writing(&r->smb, p, i, chunk_id,
                                                    writer_id, out);
      if (rv == 0) {
        *cursor = p;
        return true;
      }
      /* Lost the chunk to another writer, or the reader freed the whole
       * page since our snapshot (layout 0: -EINVAL). */
      if (rv != TG_ECHUNK_STATE && rv != -EINVAL)
        atomic_fetch_add_explicit(&r->writer_errors, 1, memory_order_relaxed);
    }
  }
  return false;
}

static void *writer_main(void *p) {
  writer_arg_t *a = p;
  race_t *r = a->race;
  size_t cursor = (size_t)a->writer_id * 2 % NUM_PAGES;
  for (uint32_t id = 0; id < CHUNKS_PER_WRITER;) {
    tg_smb_chunk_t c;
    if (!acquire_any_chunk(r, &cursor, id, a->writer_id, &c)) {
      sched_yield(); /* SMB full: wait for the reader */
      continue;
    }
    write_payload(&c, a->writer_id, id);
    if (tg_smb_release_chunk_as_complete(&r->smb, &c) != 0)
      atomic_fetch_add_explicit(&r->writer_errors, 1, memory_order_relaxed);
    id++;
  }
  /* Release: pairs with the reader's acquire load (only a progress hint; the
   * join is what orders the final checks). */
  atomic_fetch_add_explicit(&r->writers_done, 1, memory_order_release);
  return NULL;
}

static void reader_consume(race_t *r, const uint8_t *copy, size_t size) {
  uint32_t w, id;
  if (!check_payload(copy, size, &w, &id)) {
    r->corrupt++;
    return;
  }
  if (w < 1 || w > NUM_WRITERS || id >= CHUNKS_PER_WRITER) {
    r->bad_ids++;
    return;
  }
  if (r->seen[w][id]++) r->duplicates++;
}

static void *reader_main(void *p) {
  race_t *r = p;
  uint8_t copy[PAGE_SIZE];
  const unsigned long total = (unsigned long)NUM_WRITERS * CHUNKS_PER_WRITER;
  double deadline = now_seconds() + DEADLINE_SECONDS;
  unsigned idle = 0;
  while (r->chunks_read < total) {
    bool progress = false;
    for (size_t pg = 0; pg < NUM_PAGES; pg++) {
      uint32_t bm = tg_smb_page_bitmap(&r->smb, pg);
      unsigned n = tg_smb_layout_num_chunks(tg_smb_bitmap_layout(bm));
      for (unsigned i = 0; i < n; i++) {
        if (tg_smb_bitmap_chunk_state(bm, i) != TG_CHUNK_COMPLETE) continue;
        tg_smb_chunk_t c;
        int rv = tg_smb_try_acquire_chunk_for_reading(&r->smb, pg, i, &c);
        if (rv == TG_ECHUNK_STATE) continue; /* CAS budget spent: retry */
        if (rv != 0 || c.size > sizeof(copy)) {
          r->reader_errors++;
          continue;
        }
        memcpy(copy, c.begin, c.size); /* never parse in place */
        if (tg_smb_release_chunk_as_free(&r->smb, &c) != 0) r->reader_errors++;
        reader_consume(r, copy, c.size);
        r->chunks_read++;
        progress = true;
      }
    }
    if (progress) {
      idle = 0;
      continue;
    }
    if (++idle % 4096 == 0 && now_seconds() > deadline) {
      r->timed_out = true;
      break;
    }
    sched_yield();
  }
  return NULL;
}

static void writers_and_reader_lose_and_duplicate_no_chunk(void **state) {
  (void)state;
  race_t *r = calloc(1, sizeof(*r));
  assert_non_null(r);
  uint8_t *mem = smb_alloc(&r->smb, NUM_PAGES);

  pthread_t reader, writers[NUM_WRITERS];
  writer_arg_t args[NUM_WRITERS];
  assert_int_equal(pthread_create(&reader, NULL, reader_main, r), 0);
  for (unsigned w = 0; w < NUM_WRITERS; w++) {
    args[w].race = r;
    args[w].writer_id = (uint16_t)(w + 1);
    assert_int_equal(
        pthread_create(&writers[w], NULL, writer_main, &args[w]), 0);
  }
  for (unsigned w = 0; w < NUM_WRITERS; w++)
    assert_int_equal(pthread_join(writers[w], NULL), 0);
  assert_int_equal(pthread_join(reader, NULL), 0);

  assert_false(r->timed_out);
  assert_int_equal(atomic_load(&r->writers_done), NUM_WRITERS);
  assert_int_equal(atomic_load(&r->writer_errors), 0);
  assert_int_equal(r->reader_errors, 0);
  assert_int_equal(r->corrupt, 0);
  assert_int_equal(r->bad_ids, 0);
  assert_int_equal(r->duplicates, 0);
  assert_int_equal(r->chunks_read, NUM_WRITERS * CHUNKS_PER_WRITER);
  for (unsigned w = 1; w <= NUM_WRITERS; w++)
    for (unsigned id = 0; id < CHUNKS_PER_WRITER; id++)
      if (r->seen[w][id] != 1)
        fail_msg("writer %u chunk %u seen %u times", w, id, r->seen[w][id]);
  for (size_t p = 0; p < NUM_PAGES; p++)
    assert_int_equal(tg_smb_page_bitmap(&r->smb, p), 0);
  free(mem);
  free(r);
}

/* --- racing on one page / one chunk --------------------------------------- */

#define PARTITION_ROUNDS 2000u
#define ACQUIRE_THREADS 8u
#define ACQUIRE_ROUNDS 500u

typedef struct round_race {
  tg_smb_t smb;
  pthread_barrier_t start;
  pthread_barrier_t done;
  unsigned rounds;
  int rv[TG_SMB_MAX_CHUNKS_PER_PAGE];
  tg_smb_chunk_t chunk[TG_SMB_MAX_CHUNKS_PER_PAGE];
} round_race_t;

typedef struct round_arg {
  round_race_t *race;
  unsigned idx;
} round_arg_t;

static void round_race_init(round_race_t *rr, unsigned threads,
                            unsigned rounds) {
  memset(rr, 0, sizeof(*rr));
  rr->rounds = rounds;
  /* +1: the test thread checks and resets between rounds. */
  assert_int_equal(pthread_barrier_init(&rr->start, NULL, threads + 1), 0);
  assert_int_equal(pthread_barrier_init(&rr->done, NULL, threads + 1), 0);
}

static void round_race_destroy(round_race_t *rr) {
  pthread_barrier_destroy(&rr->start);
  pthread_barrier_destroy(&rr->done);
}

static void *partition_main(void *p) {
  round_arg_t *a = p;
  round_race_t *rr = a->race;
  for (unsigned round = 0; round < rr->rounds; round++) {
    pthread_barrier_wait(&rr->start);
    rr->rv[a->idx] = tg_smb_try_partition_page(
        &rr->smb, round % NUM_PAGES,
        a->idx == 0 ? TG_PAGE_DIV_4 : TG_PAGE_DIV_14);
    pthread_barrier_wait(&rr->done);
  }
  return NULL;
}

static void two_threads_partitioning_one_page_exactly_one_wins(void **state) {
  (void)state;
  round_race_t rr;
  tg_smb_t smb;
  uint8_t *mem = smb_alloc(&smb, NUM_PAGES);
  round_race_init(&rr, 2, PARTITION_ROUNDS);
  rr.smb = smb;
  pthread_t t[2];
  round_arg_t args[2] = {{&rr, 0}, {&rr, 1}};
  for (unsigned i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&t[i], NULL, partition_main, &args[i]), 0);
  unsigned wins[2] = {0, 0};
  for (unsigned round = 0; round < PARTITION_ROUNDS; round++) {
    size_t page = round % NUM_PAGES;
    pthread_barrier_wait(&rr.start);
    pthread_barrier_wait(&rr.done);
    int a = rr.rv[0], b = rr.rv[1];
    if (!((a == 0 && b == TG_ECHUNK_STATE) ||
          (a == TG_ECHUNK_STATE && b == 0)))
      fail_msg("round %u: partition results %d and %d", round, a, b);
    unsigned winner = a == 0 ? 0 : 1;
    wins[winner]++;
    uint32_t want = (uint32_t)(winner == 0 ? TG_PAGE_DIV_4 : TG_PAGE_DIV_14)
                    << TG_SMB_LAYOUT_SHIFT;
    assert_int_equal(tg_smb_page_bitmap(&rr.smb, page), want);
    /* Reset for the next round; the start barrier publishes it. */
    atomic_store_explicit(&tg_smb_page(&rr.smb, page)->bitmap, 0,
                          memory_order_relaxed);
  }
  for (unsigned i = 0; i < 2; i++) assert_int_equal(pthread_join(t[i], NULL), 0);
  assert_int_equal(wins[0] + wins[1], PARTITION_ROUNDS);
  round_race_destroy(&rr);
  free(mem);
}

static void *acquire_same_main(void *p) {
  round_arg_t *a = p;
  round_race_t *rr = a->race;
  for (unsigned round = 0; round < rr->rounds; round++) {
    pthread_barrier_wait(&rr->start);
    rr->rv[a->idx] = tg_smb_try_acquire_chunk_for_writing(
        &rr->smb, 0, round % TG_SMB_MAX_CHUNKS_PER_PAGE, round,
        (uint16_t)(a->idx + 1), &rr->chunk[a->idx]);
    pthread_barrier_wait(&rr->done);
  }
  return NULL;
}

/* Returns a chunk the test thread holds for writing to Free, the way the
 * service would, so the page goes back to 0. */
static void drain_chunk(tg_smb_t *smb, const tg_smb_chunk_t *c) {
  tg_smb_chunk_t r;
  assert_int_equal(tg_smb_release_chunk_as_complete(smb, c), 0);
  assert_int_equal(
      tg_smb_try_acquire_chunk_for_reading(smb, c->page_idx, c->chunk_idx, &r),
      0);
  assert_int_equal(tg_smb_release_chunk_as_free(smb, &r), 0);
}

static void many_threads_acquiring_one_chunk_exactly_one_wins(void **state) {
  (void)state;
  round_race_t rr;
  tg_smb_t smb;
  uint8_t *mem = smb_alloc(&smb, 1);
  round_race_init(&rr, ACQUIRE_THREADS, ACQUIRE_ROUNDS);
  rr.smb = smb;
  assert_int_equal(tg_smb_try_partition_page(&rr.smb, 0, TG_PAGE_DIV_14), 0);
  pthread_t t[ACQUIRE_THREADS];
  round_arg_t args[ACQUIRE_THREADS];
  for (unsigned i = 0; i < ACQUIRE_THREADS; i++) {
    args[i] = (round_arg_t){&rr, i};
    assert_int_equal(
        pthread_create(&t[i], NULL, acquire_same_main, &args[i]), 0);
  }
  for (unsigned round = 0; round < ACQUIRE_ROUNDS; round++) {
    unsigned chunk_idx = round % TG_SMB_MAX_CHUNKS_PER_PAGE;
    pthread_barrier_wait(&rr.start);
    pthread_barrier_wait(&rr.done);
    unsigned winners = 0, winner = 0;
    for (unsigned i = 0; i < ACQUIRE_THREADS; i++) {
      if (rr.rv[i] == 0) {
        winners++;
        winner = i;
      } else if (rr.rv[i] != TG_ECHUNK_STATE) {
        fail_msg("round %u thread %u: %d", round, i, rr.rv[i]);
      }
    }
    if (winners != 1) fail_msg("round %u: %u winners", round, winners);
    assert_int_equal(tg_smb_page_bitmap(&rr.smb, 0),
                     0x50000000u | (1u << (2 * chunk_idx)));
    /* Only the winner wrote the header. */
    const uint8_t *h = rr.chunk[winner].begin;
    assert_ptr_equal(h, mem + 8 + chunk_idx * 292);
    assert_int_equal(tg_pb_read_le32(h), round);
    assert_int_equal(h[4] | (h[5] << 8), winner + 1);
    drain_chunk(&rr.smb, &rr.chunk[winner]);
    assert_int_equal(tg_smb_page_bitmap(&rr.smb, 0), 0);
    assert_int_equal(tg_smb_try_partition_page(&rr.smb, 0, TG_PAGE_DIV_14),
                     0);
  }
  for (unsigned i = 0; i < ACQUIRE_THREADS; i++)
    assert_int_equal(pthread_join(t[i], NULL), 0);
  round_race_destroy(&rr);
  free(mem);
}

static void *acquire_own_main(void *p) {
  round_arg_t *a = p;
  round_race_t *rr = a->race;
  for (unsigned round = 0; round < rr->rounds; round++) {
    pthread_barrier_wait(&rr->start);
    int rv = tg_smb_try_acquire_chunk_for_writing(
        &rr->smb, 0, a->idx, round, (uint16_t)(a->idx + 1), &rr->chunk[a->idx]);
    if (rv == 0) {
      tg_smb_chunk_set_packets(&rr->chunk[a->idx], 0, 0);
      rv = tg_smb_release_chunk_as_complete(&rr->smb, &rr->chunk[a->idx]);
    }
    rr->rv[a->idx] = rv;
    pthread_barrier_wait(&rr->done);
  }
  return NULL;
}

/* A failed CAS caused by a neighbour chunk must retry, not fail. */
static void threads_acquiring_distinct_chunks_of_one_page_all_win(
    void **state) {
  (void)state;
  enum { kThreads = TG_SMB_MAX_CHUNKS_PER_PAGE, kRounds = 300 };
  round_race_t rr;
  tg_smb_t smb;
  uint8_t *mem = smb_alloc(&smb, 1);
  round_race_init(&rr, kThreads, kRounds);
  rr.smb = smb;
  pthread_t t[kThreads];
  round_arg_t args[kThreads];
  for (unsigned i = 0; i < kThreads; i++) {
    args[i] = (round_arg_t){&rr, i};
    assert_int_equal(pthread_create(&t[i], NULL, acquire_own_main, &args[i]),
                     0);
  }
  for (unsigned round = 0; round < kRounds; round++) {
    assert_int_equal(tg_smb_try_partition_page(&rr.smb, 0, TG_PAGE_DIV_14), 0);
    pthread_barrier_wait(&rr.start);
    pthread_barrier_wait(&rr.done);
    for (unsigned i = 0; i < kThreads; i++)
      if (rr.rv[i] != 0) fail_msg("round %u chunk %u: %d", round, i, rr.rv[i]);
    assert_int_equal(tg_smb_page_bitmap(&rr.smb, 0), 0x5FFFFFFFu);
    for (unsigned i = 0; i < kThreads; i++) {
      tg_smb_chunk_t r;
      assert_int_equal(tg_smb_try_acquire_chunk_for_reading(&rr.smb, 0, i, &r),
                       0);
      assert_int_equal(tg_pb_read_le32(r.begin), round);
      assert_int_equal(r.begin[4], i + 1);
      assert_int_equal(tg_smb_release_chunk_as_free(&rr.smb, &r), 0);
    }
    assert_int_equal(tg_smb_page_bitmap(&rr.smb, 0), 0);
  }
  for (unsigned i = 0; i < kThreads; i++)
    assert_int_equal(pthread_join(t[i], NULL), 0);
  round_race_destroy(&rr);
  free(mem);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(writers_and_reader_lose_and_duplicate_no_chunk),
      cmocka_unit_test(two_threads_partitioning_one_page_exactly_one_wins),
      cmocka_unit_test(many_threads_acquiring_one_chunk_exactly_one_wins),
      cmocka_unit_test(threads_acquiring_distinct_chunks_of_one_page_all_win),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
