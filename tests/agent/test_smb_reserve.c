/* The arbiter's reserve (agent/smb_arbiter.h, opts.active_size): writers
 * use an active prefix of a large SMB that grows with them up to the SMB
 * and no further, a fixed SMB keeps every page active, and the pages past
 * the prefix stay untouched (mincore() on a real memfd mapping). Runs
 * under ThreadSanitizer too (label tsan): writers read the prefix while
 * registrations and misses grow it.
 *
 * cmocka asserts are not thread-safe: threads count failures; the test
 * thread asserts after joining them.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/smb_arbiter.h"
#include "tracegate/error.h"

#define PAGE 4096u
#define KIB 1024u
#define MIB (1024u * 1024u)

/* An arbiter over a fresh memfd of |size| bytes, as the agent maps the
 * service's SMB; |active| is opts.active_size (0: fixed), |owed| is
 * opts.owed_max. */
static tg_arbiter_t *memfd_arbiter_owed(size_t size, size_t active,
                                        size_t owed) {
  int fd = memfd_create("test-smb", MFD_CLOEXEC);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, (off_t)size), 0);
  void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  assert_true(base != MAP_FAILED);
  tg_arbiter_opts_t o = {
      .smb_base = base,
      .smb_size = size,
      .page_size = PAGE,
      .active_size = active,
      .owed_max = owed,
  };
  tg_arbiter_t *arb = NULL;
  assert_int_equal(tg_arbiter_new(&o, &arb), 0);
  return arb;
}

static tg_arbiter_t *memfd_arbiter(size_t size, size_t active) {
  return memfd_arbiter_owed(size, active, 0);
}

/* Hands |c| back Complete and frees it as the service would after
 * copying it. Returns 0 or a negative error. */
static int return_and_free(tg_arbiter_t *arb, const tg_smb_chunk_t *c) {
  tg_arbiter_chunk_return(arb, c, 1);
  tg_smb_t *smb = (tg_smb_t *)tg_arbiter_smb(arb);
  tg_smb_chunk_t r;
  int rv = tg_smb_try_acquire_chunk_for_reading(smb, c->page_idx,
                                                c->chunk_idx, &r);
  return rv < 0 ? rv : tg_smb_release_chunk_as_free(smb, &r);
}

/* Asks the kernel about every page of the whole mapping: the resident
 * ones must form a prefix of the SMB, whose size is returned. */
static size_t resident_prefix(tg_arbiter_t *arb) {
  const tg_smb_t *smb = tg_arbiter_smb(arb);
  size_t sys = (size_t)sysconf(_SC_PAGESIZE), pages = smb->size / sys;
  unsigned char *v = malloc(pages);
  assert_non_null(v);
  assert_int_equal(mincore(smb->base, smb->size, v), 0);
  size_t n = 0;
  while (n < pages && (v[n] & 1)) n++;
  for (size_t i = n; i < pages; i++) assert_int_equal(v[i] & 1, 0);
  free(v);
  return n * sys;
}

static void register_n(tg_arbiter_t *arb, unsigned n) {
  for (unsigned i = 0; i < n; i++)
    assert_true(tg_arbiter_writer_register(arb, 1) > 0);
}

static void active_prefix_grows_with_writers_up_to_the_reserve(void **state) {
  (void)state;
  tg_arbiter_t *arb = memfd_arbiter(2 * MIB, 256 * KIB);
  assert_int_equal(tg_arbiter_active_size(arb), 256 * KIB);
  /* TG_ARBITER_WRITER_BUDGET (4 KiB) each: 64 writers fit 256 KiB. */
  register_n(arb, 64);
  assert_int_equal(tg_arbiter_active_size(arb), 256 * KIB);
  register_n(arb, 1);
  assert_int_equal(tg_arbiter_active_size(arb), 512 * KIB);
  register_n(arb, 64);
  assert_int_equal(tg_arbiter_active_size(arb), 1 * MIB);
  register_n(arb, 383); /* 512 writers: 2 MiB, four 1 KiB chunks each */
  assert_int_equal(tg_arbiter_active_size(arb), 2 * MIB);
  assert_int_equal(tg_arbiter_layout(arb), TG_PAGE_DIV_4);
  /* Past the reserve: smaller chunks, no more pages. */
  register_n(arb, 488);
  assert_int_equal(tg_arbiter_active_size(arb), 2 * MIB);
  assert_int_equal(tg_arbiter_layout(arb), TG_PAGE_DIV_14);
  /* It never shrinks; the chunks grow back as writers leave. */
  for (unsigned id = 1; id <= 1000; id++)
    tg_arbiter_writer_unregister(arb, (uint16_t)id);
  assert_int_equal(tg_arbiter_active_size(arb), 2 * MIB);
  assert_int_equal(tg_arbiter_layout(arb), TG_PAGE_DIV_1);
  tg_arbiter_unref(arb);

  /* A fixed SMB (an explicit size hint) is all active from the start,
   * and its layout counts every page (two chunks per writer). */
  arb = memfd_arbiter(2 * MIB, 0);
  assert_int_equal(tg_arbiter_active_size(arb), 2 * MIB);
  register_n(arb, 1000);
  assert_int_equal(tg_arbiter_active_size(arb), 2 * MIB);
  assert_int_equal(tg_arbiter_layout(arb), TG_PAGE_DIV_4);
  tg_arbiter_unref(arb);
}

/* A writer that finds the prefix full doubles it, up to the reserve. */
static void a_full_prefix_doubles_up_to_the_reserve(void **state) {
  (void)state;
  tg_arbiter_t *arb = memfd_arbiter(1 * MIB, 256 * KIB);
  int id = tg_arbiter_writer_register(arb, 1);
  assert_true(id > 0);
  /* One chunk per 4 KiB page: 256 chunks in the whole reserve. */
  tg_smb_chunk_t c;
  for (uint32_t i = 0; i < 64; i++)
    assert_int_equal(tg_arbiter_chunk_get(arb, (uint16_t)id, i, &c), 0);
  assert_int_equal(tg_arbiter_active_size(arb), 256 * KIB);
  assert_int_equal(tg_arbiter_chunk_get(arb, (uint16_t)id, 64, &c), 0);
  assert_int_equal(c.page_idx, 64);
  assert_int_equal(tg_arbiter_active_size(arb), 512 * KIB);
  for (uint32_t i = 65; i < 256; i++)
    assert_int_equal(tg_arbiter_chunk_get(arb, (uint16_t)id, i, &c), 0);
  assert_int_equal(tg_arbiter_active_size(arb), 1 * MIB);
  assert_int_equal(tg_arbiter_chunk_get(arb, (uint16_t)id, 256, &c),
                   TG_ENO_SPACE);
  assert_int_equal(tg_arbiter_active_size(arb), 1 * MIB);
  tg_arbiter_stats_t st;
  tg_arbiter_get_stats(arb, &st);
  assert_int_equal(st.chunk_misses, 1);
  tg_arbiter_unref(arb);
}

/* Issue 62: the writers' budget grows the prefix only up to owed_max (as
 * many pages and the same chunks as a reserve of that size would give
 * them); the rest of the reserve stays untouched until writers find the
 * owed pages full, i.e. while the service takes nothing, and then takes
 * chunks of the same size, up to the whole SMB. */
static void writers_are_owed_up_to_owed_max_and_misses_grow_past_it(
    void **state) {
  (void)state;
  tg_arbiter_t *arb = memfd_arbiter_owed(4 * MIB, 256 * KIB, 1 * MIB);
  tg_arbiter_t *small = memfd_arbiter(1 * MIB, 256 * KIB);
  register_n(arb, 512); /* a budget of 2 MiB */
  register_n(small, 512);
  assert_int_equal(tg_arbiter_active_size(arb), 1 * MIB);
  unsigned layout = tg_arbiter_layout(small);
  assert_int_equal(tg_arbiter_layout(arb), layout);
  assert_true(layout > TG_PAGE_DIV_1);
  size_t per_page = tg_smb_layout_num_chunks(layout);
  size_t csize = tg_smb_chunk_size(PAGE, layout);

  /* Every chunk of the owed pages, none given back (a stopped service). */
  tg_smb_chunk_t c;
  uint32_t id = 0;
  for (size_t i = 0; i < (1 * MIB / PAGE) * per_page; i++) {
    assert_int_equal(tg_arbiter_chunk_get(arb, 1, id++, &c), 0);
    assert_int_equal(c.layout, layout);
  }
  assert_int_equal(tg_arbiter_active_size(arb), 1 * MIB);
  assert_int_equal(tg_arbiter_resident_bytes(arb), 1 * MIB);
  assert_int_equal(resident_prefix(arb), 1 * MIB);
  /* The next one grows it, and so on up to the reserve. */
  size_t got = 0;
  while (tg_arbiter_chunk_get(arb, 1, id++, &c) == 0) {
    assert_int_equal(c.layout, layout);
    assert_int_equal(c.size, csize);
    got++;
  }
  assert_int_equal(got, (3 * MIB / PAGE) * per_page);
  assert_int_equal(tg_arbiter_active_size(arb), 4 * MIB);
  assert_int_equal(tg_arbiter_resident_bytes(arb), 4 * MIB);
  assert_int_equal(resident_prefix(arb), 4 * MIB);
  tg_arbiter_stats_t st;
  tg_arbiter_get_stats(arb, &st);
  assert_int_equal(st.chunk_misses, 1);
  tg_arbiter_unref(arb);
  tg_arbiter_unref(small);
}

/* Many chunk cycles by a few writers go round the SMB's pages: with a
 * reserve only round the active prefix, so the rest of the memfd is never
 * allocated. The fixed SMB alongside shows that the cycles do reach every
 * page they may. */
static void pages_past_the_active_prefix_stay_untouched(void **state) {
  (void)state;
  enum { CYCLES = 20000, WRITERS = 4 };
  tg_arbiter_t *reserve = memfd_arbiter(8 * MIB, 256 * KIB);
  tg_arbiter_t *fixed = memfd_arbiter(8 * MIB, 0);
  tg_arbiter_t *arbs[2] = {reserve, fixed};
  for (int a = 0; a < 2; a++) {
    int ids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
      ids[w] = tg_arbiter_writer_register(arbs[a], 1);
      assert_true(ids[w] > 0);
    }
    for (uint32_t i = 0; i < CYCLES; i++) {
      tg_smb_chunk_t c;
      assert_int_equal(tg_arbiter_chunk_get(arbs[a], (uint16_t)ids[i % WRITERS],
                                            i, &c), 0);
      assert_int_equal(return_and_free(arbs[a], &c), 0);
    }
  }
  assert_int_equal(tg_arbiter_active_size(reserve), 256 * KIB);
  assert_int_equal(tg_arbiter_resident_bytes(reserve), 256 * KIB);
  assert_int_equal(tg_arbiter_resident_bytes(fixed), 8 * MIB);
  /* The same from the kernel directly, page by page. */
  assert_int_equal(resident_prefix(reserve), 256 * KIB);
  tg_arbiter_unref(reserve);
  tg_arbiter_unref(fixed);
}

/* --- concurrent growth ------------------------------------------------------ */

#define GROW_THREADS 4u
#define GROW_WRITERS_EACH 96u
#define GROW_CYCLES_EACH 40u

typedef struct grow_ctx {
  tg_arbiter_t *arb;
  _Atomic unsigned failures;
} grow_ctx_t;

/* Registers writers one by one (growing the prefix) and cycles chunks
 * between registrations, holding some across them; every chunk must lie
 * in the prefix as it was when the chunk was handed out. */
/* Writers that came later want smaller chunks: a page partitioned for
 * fewer of them, with a chunk still in use, is passed over while other
 * pages have room (so that it frees up whole and takes the new layout),
 * and used only when nothing else is left. */
static void larger_pages_are_left_to_free_up_whole(void **state) {
  (void)state;
  tg_arbiter_t *arb = memfd_arbiter(16 * PAGE, 0); /* fixed: 2 per writer */
  register_n(arb, 17);
  assert_int_equal(tg_arbiter_layout(arb), TG_PAGE_DIV_4);
  uint32_t id = 1;
  tg_smb_chunk_t a, c;
  assert_int_equal(tg_arbiter_chunk_try_get(arb, 1, id++, &a), 0);
  assert_int_equal(a.layout, TG_PAGE_DIV_4);
  register_n(arb, 16);
  assert_int_equal(tg_arbiter_layout(arb), TG_PAGE_DIV_7);
  /* Page |a|'s three free 1 KiB chunks are not taken... */
  assert_int_equal(tg_arbiter_chunk_try_get(arb, 1, id++, &c), 0);
  assert_int_not_equal(c.page_idx, a.page_idx);
  assert_int_equal(c.layout, TG_PAGE_DIV_7);
  /* ... until every other page is full. */
  unsigned from_a = 0, taken = 1;
  while (tg_arbiter_chunk_try_get(arb, 1, id++, &c) == 0) {
    taken++;
    if (c.page_idx == a.page_idx) {
      assert_int_equal(c.layout, TG_PAGE_DIV_4);
      assert_int_equal(taken, 15 * 7 + from_a + 1);
      from_a++;
    }
  }
  assert_int_equal(from_a, 3);
  assert_int_equal(taken, 15 * 7 + 3);
  tg_arbiter_unref(arb);
}

static void *grow_thread(void *arg) {
  grow_ctx_t *g = arg;
  tg_smb_chunk_t held[GROW_WRITERS_EACH];
  size_t nheld = 0;
  uint32_t chunk_id = 0;
  for (unsigned w = 0; w < GROW_WRITERS_EACH; w++) {
    int id = tg_arbiter_writer_register(g->arb, 1);
    if (id <= 0) {
      atomic_fetch_add(&g->failures, 1);
      break;
    }
    for (unsigned i = 0; i < GROW_CYCLES_EACH; i++) {
      tg_smb_chunk_t c;
      if (tg_arbiter_chunk_get(g->arb, (uint16_t)id, chunk_id++, &c) != 0) {
        atomic_fetch_add(&g->failures, 1);
        continue;
      }
      size_t active_pages = tg_arbiter_active_size(g->arb) / PAGE;
      if (c.page_idx >= active_pages) atomic_fetch_add(&g->failures, 1);
      if (i == 0) {
        held[nheld++] = c; /* one per writer, like a thread's open chunk */
      } else if (return_and_free(g->arb, &c) != 0) {
        atomic_fetch_add(&g->failures, 1);
      }
    }
  }
  for (size_t i = 0; i < nheld; i++)
    if (return_and_free(g->arb, &held[i]) != 0)
      atomic_fetch_add(&g->failures, 1);
  return NULL;
}

static void writers_use_the_prefix_while_it_grows(void **state) {
  (void)state;
  grow_ctx_t g = {.arb = memfd_arbiter(2 * MIB, 64 * KIB)};
  atomic_init(&g.failures, 0);
  pthread_t th[GROW_THREADS];
  for (unsigned i = 0; i < GROW_THREADS; i++)
    assert_int_equal(pthread_create(&th[i], NULL, grow_thread, &g), 0);
  for (unsigned i = 0; i < GROW_THREADS; i++) pthread_join(th[i], NULL);
  assert_int_equal(atomic_load(&g.failures), 0);
  /* 384 writers of 4 KiB: 1.5 MiB, doubled from 64 KiB to 2 MiB. */
  assert_int_equal(tg_arbiter_active_size(g.arb), 2 * MIB);
  assert_int_equal(tg_arbiter_bytes_in_use(g.arb), 0);
  tg_arbiter_unref(g.arb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(active_prefix_grows_with_writers_up_to_the_reserve),
      cmocka_unit_test(a_full_prefix_doubles_up_to_the_reserve),
      cmocka_unit_test(
          writers_are_owed_up_to_owed_max_and_misses_grow_past_it),
      cmocka_unit_test(pages_past_the_active_prefix_stay_untouched),
      cmocka_unit_test(larger_pages_are_left_to_free_up_whole),
      cmocka_unit_test(writers_use_the_prefix_while_it_grows),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
