/* The fixed-capacity key sets: the shared core (key_set.h) through its two
 * typed faces (pid_set.h, inode_set.h) and through a face of this test's
 * own whose keys all hash to the last slot, so that every probe collides
 * and wraps around. Each scenario checks membership and the slot array
 * itself: after a take the slots are what adding the rest afresh gives,
 * after a clear none is left behind.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/probes/inode_set.h"
#include "agent/probes/key_set.h"
#include "agent/probes/pid_set.h"

static bool slots_empty(const tg_key_set_t *s) {
  for (uint32_t k = 0; k <= s->mask; k++)
    if (s->slots[k] != 0) return false;
  return true;
}

/* Pids that all start their probe at slot 0 of a set of up to 2048 slots. */
static int32_t colliding_pid(uint32_t i) { return (int32_t)((i + 1) * 2048); }

/* Inodes on |dev| whose probe starts at the last slot of |s|. */
static size_t colliding_inodes(const tg_inode_set_t *s, uint64_t dev,
                               uint64_t *out, size_t n) {
  size_t got = 0;
  for (uint64_t ino = 1; got < n && ino < (UINT64_C(1) << 24); ino++)
    if (tg__inode_set_hash(s, ino, dev) == s->base.mask) out[got++] = ino;
  return got;
}

/* --- a face of the test's own: 8-byte keys, one bucket ------------------ */

static uint32_t last_slot_hash(const void *member) {
  (void)member;
  return UINT32_MAX;
}

static const tg_key_set_type_t u64_type = {
    .size = sizeof(uint64_t),
    .max_cap = 64,
    .hash = last_slot_hash,
};

typedef struct u64_set {
  tg_key_set_t s;
  uint64_t *keys;
} u64_set_t;

static int u64_init(u64_set_t *x, uint32_t cap) {
  void *keys;
  int rv = tg_key_set_init(&x->s, &u64_type, cap, &keys);
  x->keys = keys;
  return rv;
}

static int32_t u64_find(const u64_set_t *x, uint64_t key) {
  for (uint32_t k = UINT32_MAX & x->s.mask;; k = (k + 1) & x->s.mask) {
    uint32_t v = x->s.slots[k];
    if (v == 0) return -1;
    if (x->keys[v - 1] == key) return (int32_t)(v - 1);
  }
}

/* As key_set.h asks of a face: once, at the first empty slot. */
static void u64_add(u64_set_t *x, uint64_t key) {
  uint32_t k = UINT32_MAX & x->s.mask;
  for (;; k = (k + 1) & x->s.mask) {
    uint32_t v = x->s.slots[k];
    if (v == 0) break;
    if (x->keys[v - 1] == key) return;
  }
  if (x->s.n == x->s.cap) {
    x->s.dropped++;
    return;
  }
  x->keys[x->s.n] = key;
  x->s.slots[k] = ++x->s.n;
}

/* --- init and the zeroed set --------------------------------------------- */

static void init_rejects_capacities_outside_each_sets_limit(void **state) {
  (void)state;
  tg_pid_set_t p;
  assert_int_equal(tg_pid_set_init(&p, 0), -EINVAL);
  assert_null(p.base.slots);
  assert_null(p.pids);
  assert_int_equal(tg_pid_set_init(&p, (UINT32_C(1) << 28) + 1), -EINVAL);
  tg_inode_set_t i;
  assert_int_equal(tg_inode_set_init(&i, 0), -EINVAL);
  assert_int_equal(tg_inode_set_init(&i, (UINT32_C(1) << 26) + 1), -EINVAL);
  assert_null(i.base.slots);
  assert_null(i.keys);
  u64_set_t u;
  assert_int_equal(u64_init(&u, 65), -EINVAL);
  assert_int_equal(u64_init(&u, 64), 0);
  /* At least twice as many slots as members, a power of two. */
  assert_int_equal(u.s.mask + 1, 128);
  tg_key_set_free(&u.s, u.keys);

  /* Freed and zeroed sets: clear, take and free do nothing. */
  tg_pid_set_free(&p);
  tg_pid_set_clear(&p);
  assert_int_equal(tg_pid_set_take(&p, NULL, 0), 0);
  assert_false(tg_pid_set_has(&p, 7));
  tg_pid_set_free(&p);
  memset(&i, 0, sizeof(i));
  tg_inode_set_clear(&i);
  tg_inode_key_t out[1];
  assert_int_equal(tg_inode_set_take(&i, out, 1), 0);
  assert_int_equal(tg_inode_set_find(&i, 7, 1), -1);
  tg_inode_set_free(&i);
}

/* --- capacity ------------------------------------------------------------ */

static void add_past_capacity_counts_dropped(void **state) {
  (void)state;
  tg_pid_set_t p;
  assert_int_equal(tg_pid_set_init(&p, 3), 0);
  for (int32_t pid = 1; pid <= 5; pid++) tg_pid_set_add(&p, pid);
  tg_pid_set_add(&p, 2); /* a member: not dropped */
  tg_pid_set_add(&p, 5); /* still no room: dropped again */
  assert_int_equal(p.base.n, 3);
  assert_int_equal(tg_pid_set_room(&p), 0);
  assert_int_equal(p.base.dropped, 3);
  const int32_t first[] = {1, 2, 3};
  assert_memory_equal(p.pids, first, sizeof(first));
  assert_false(tg_pid_set_has(&p, 4));
  /* A clear empties the drop count too, and makes room again. */
  tg_pid_set_clear(&p);
  assert_int_equal(p.base.dropped, 0);
  tg_pid_set_add(&p, 4);
  assert_true(tg_pid_set_has(&p, 4));
  assert_false(tg_pid_set_has(&p, 1));
  tg_pid_set_free(&p);

  tg_inode_set_t i;
  assert_int_equal(tg_inode_set_init(&i, 2), 0);
  tg_inode_set_add(&i, 10, 1);
  tg_inode_set_add(&i, 10, 2); /* another device: another pair */
  tg_inode_set_add(&i, 11, 1);
  tg_inode_set_add(&i, 0, 1); /* no inode: ignored, not dropped */
  assert_int_equal(i.base.n, 2);
  assert_int_equal(i.base.dropped, 1);
  assert_int_equal(tg_inode_set_find(&i, 10, 2), 1);
  assert_int_equal(tg_inode_set_find(&i, 11, 1), -1);
  tg_inode_set_clear(&i);
  assert_int_equal(i.base.dropped, 0);
  tg_inode_set_add(&i, 11, 1);
  assert_int_equal(tg_inode_set_find(&i, 11, 1), 0);
  tg_inode_set_free(&i);

  u64_set_t u;
  assert_int_equal(u64_init(&u, 4), 0);
  for (uint64_t k = 1; k <= 6; k++) u64_add(&u, k);
  assert_int_equal(u.s.n, 4);
  assert_int_equal(u.s.dropped, 2);
  tg_key_set_free(&u.s, u.keys);
}

/* --- clear --------------------------------------------------------------- */

/* |n| members of a set of |cap| (2 * cap slots, cap a power of two), then
 * a clear: n * 8 > slots takes the memset branch, else the per-member
 * one. */
static void pid_round(tg_pid_set_t *p, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) tg_pid_set_add(p, colliding_pid(i));
  for (uint32_t i = 0; i < n; i++) tg_pid_set_add(p, (int32_t)(3 * i + 1));
  assert_int_equal(p->base.n, 2 * n);
  tg_pid_set_clear(p);
  assert_int_equal(p->base.n, 0);
  assert_int_equal(p->base.dropped, 0);
  assert_true(slots_empty(&p->base));
  for (uint32_t i = 0; i < n; i++) {
    assert_false(tg_pid_set_has(p, colliding_pid(i)));
    assert_false(tg_pid_set_has(p, (int32_t)(3 * i + 1)));
  }
}

static void clear_empties_by_both_branches(void **state) {
  (void)state;
  tg_pid_set_t p;
  assert_int_equal(tg_pid_set_init(&p, 512), 0);
  assert_int_equal(p.base.mask + 1, 1024);
  pid_round(&p, 8);   /* 16 * 8 <= 1024: per member */
  pid_round(&p, 200); /* 400 * 8 > 1024: memset */
  pid_round(&p, 64);  /* 128 * 8 == 1024: per member */
  /* The last pid added is no shortcut after a clear. */
  tg_pid_set_add(&p, 5);
  tg_pid_set_clear(&p);
  tg_pid_set_add(&p, 5);
  assert_int_equal(p.base.n, 1);
  assert_true(tg_pid_set_has(&p, 5));
  tg_pid_set_free(&p);

  tg_inode_set_t i;
  assert_int_equal(tg_inode_set_init(&i, 64), 0);
  uint64_t ino[48];
  assert_int_equal(colliding_inodes(&i, 9, ino, 48), 48);
  for (size_t n = 4; n <= 48; n += 44) { /* 4 * 8 <= 128; 48 * 8 > 128 */
    for (size_t k = 0; k < n; k++) tg_inode_set_add(&i, ino[k], 9);
    for (size_t k = 0; k < n; k++)
      assert_int_equal(tg_inode_set_find(&i, ino[k], 9), (int32_t)k);
    tg_inode_set_add(&i, 99, 9);
    tg_inode_set_clear(&i);
    assert_int_equal(i.base.n, 0);
    assert_true(slots_empty(&i.base));
    for (size_t k = 0; k < n; k++)
      assert_int_equal(tg_inode_set_find(&i, ino[k], 9), -1);
    /* The last pair added is no shortcut after a clear. */
    tg_inode_set_add(&i, 99, 9);
    assert_int_equal(tg_inode_set_find(&i, 99, 9), 0);
    tg_inode_set_clear(&i);
  }
  tg_inode_set_free(&i);

  u64_set_t u;
  assert_int_equal(u64_init(&u, 64), 0);
  for (uint32_t n = 3; n <= 40; n += 37) { /* 3 * 8 <= 128; 40 * 8 > 128 */
    for (uint64_t k = 0; k < n; k++) u64_add(&u, k * 1000 + 1);
    tg_key_set_clear(&u.s, &u64_type, u.keys);
    assert_true(slots_empty(&u.s));
    assert_int_equal(u64_find(&u, 1), -1);
  }
  tg_key_set_free(&u.s, u.keys);
}

/* --- take ---------------------------------------------------------------- */

static void take_of_part_keeps_the_rest_in_order_and_findable(void **state) {
  (void)state;
  tg_pid_set_t p, fresh;
  assert_int_equal(tg_pid_set_init(&p, 64), 0);
  assert_int_equal(tg_pid_set_init(&fresh, 64), 0);
  /* Colliding pids (slot 0) and others between them. */
  const int32_t in[] = {2048, 7, 4096, 9, 6144, 8192, 11, 10240};
  for (size_t k = 0; k < 8; k++) tg_pid_set_add(&p, in[k]);
  p.base.dropped = 5;
  int32_t out[3];
  assert_int_equal(tg_pid_set_take(&p, out, 3), 3);
  assert_memory_equal(out, in, sizeof(out));
  assert_int_equal(p.base.n, 5);
  assert_memory_equal(p.pids, in + 3, 5 * sizeof(int32_t));
  assert_int_equal(p.base.dropped, 5);
  for (size_t k = 0; k < 8; k++)
    assert_int_equal(tg_pid_set_has(&p, in[k]), k >= 3);
  /* The slots are those of adding the rest afresh. */
  for (size_t k = 3; k < 8; k++) tg_pid_set_add(&fresh, in[k]);
  assert_memory_equal(p.base.slots, fresh.base.slots,
                      (p.base.mask + 1) * sizeof(*p.base.slots));
  /* A taken pid comes back at the end, once. */
  tg_pid_set_add(&p, in[0]);
  tg_pid_set_add(&p, in[0]);
  tg_pid_set_add(&p, in[3]);
  assert_int_equal(p.base.n, 6);
  assert_int_equal(p.pids[5], in[0]);
  /* Then a clear of the few (6 * 8 <= 128 slots) leaves no slot behind. */
  tg_pid_set_clear(&p);
  assert_true(slots_empty(&p.base));
  tg_pid_set_free(&fresh);
  tg_pid_set_free(&p);

  tg_inode_set_t i, ifresh;
  assert_int_equal(tg_inode_set_init(&i, 32), 0);
  assert_int_equal(tg_inode_set_init(&ifresh, 32), 0);
  uint64_t ino[10];
  assert_int_equal(colliding_inodes(&i, 4, ino, 10), 10);
  for (size_t k = 0; k < 10; k++) tg_inode_set_add(&i, ino[k], 4);
  tg_inode_key_t kout[4];
  assert_int_equal(tg_inode_set_take(&i, kout, 4), 4);
  for (size_t k = 0; k < 4; k++) {
    assert_int_equal(kout[k].ino, ino[k]);
    assert_int_equal(kout[k].dev, 4);
    assert_int_equal(tg_inode_set_find(&i, ino[k], 4), -1);
  }
  assert_int_equal(i.base.n, 6);
  for (size_t k = 4; k < 10; k++) {
    assert_int_equal(i.keys[k - 4].ino, ino[k]);
    assert_int_equal(tg_inode_set_find(&i, ino[k], 4), (int32_t)(k - 4));
    tg_inode_set_add(&ifresh, ino[k], 4);
  }
  assert_memory_equal(i.base.slots, ifresh.base.slots,
                      (i.base.mask + 1) * sizeof(*i.base.slots));
  /* Taking again from what a take left. */
  assert_int_equal(tg_inode_set_take(&i, kout, 2), 2);
  assert_int_equal(kout[0].ino, ino[4]);
  assert_int_equal(kout[1].ino, ino[5]);
  assert_int_equal(tg_inode_set_find(&i, ino[9], 4), 3);
  tg_inode_set_clear(&i);
  assert_true(slots_empty(&i.base));
  tg_inode_set_free(&ifresh);
  tg_inode_set_free(&i);

  /* Every key in one bucket that wraps around the end of the slots. */
  u64_set_t u, ufresh;
  assert_int_equal(u64_init(&u, 64), 0);
  assert_int_equal(u64_init(&ufresh, 64), 0);
  for (uint64_t k = 1; k <= 12; k++) u64_add(&u, k << 40);
  uint64_t uout[5];
  assert_int_equal(tg_key_set_take(&u.s, &u64_type, u.keys, uout, 5), 5);
  for (uint64_t k = 1; k <= 5; k++) {
    assert_int_equal(uout[k - 1], k << 40);
    assert_int_equal(u64_find(&u, k << 40), -1);
  }
  for (uint64_t k = 6; k <= 12; k++) {
    assert_int_equal(u64_find(&u, k << 40), (int32_t)(k - 6));
    u64_add(&ufresh, k << 40);
  }
  assert_memory_equal(u.s.slots, ufresh.s.slots,
                      (u.s.mask + 1) * sizeof(*u.s.slots));
  tg_key_set_clear(&u.s, &u64_type, u.keys); /* 7 * 8 <= 128: per member */
  assert_true(slots_empty(&u.s));
  tg_key_set_free(&ufresh.s, ufresh.keys);
  tg_key_set_free(&u.s, u.keys);
}

static void take_of_all_empties_the_set_and_keeps_dropped(void **state) {
  (void)state;
  tg_pid_set_t p;
  assert_int_equal(tg_pid_set_init(&p, 4), 0);
  for (uint32_t i = 0; i < 6; i++) tg_pid_set_add(&p, colliding_pid(i));
  assert_int_equal(p.base.dropped, 2);
  int32_t out[8];
  assert_int_equal(tg_pid_set_take(&p, out, 8), 4);
  for (uint32_t i = 0; i < 4; i++) assert_int_equal(out[i], colliding_pid(i));
  assert_int_equal(p.base.n, 0);
  assert_int_equal(p.base.dropped, 2);
  assert_true(slots_empty(&p.base));
  /* Nothing to take is no change either. */
  assert_int_equal(tg_pid_set_take(&p, out, 8), 0);
  assert_int_equal(p.base.dropped, 2);
  /* The last pid added is no shortcut after the take. */
  tg_pid_set_add(&p, colliding_pid(3));
  assert_int_equal(p.base.n, 1);
  assert_int_equal(tg_pid_set_take(&p, out, 1), 1);
  assert_int_equal(out[0], colliding_pid(3));
  tg_pid_set_free(&p);

  tg_inode_set_t i;
  assert_int_equal(tg_inode_set_init(&i, 2), 0);
  for (uint64_t ino = 1; ino <= 3; ino++) tg_inode_set_add(&i, ino, 8);
  tg_inode_key_t kout[2];
  assert_int_equal(tg_inode_set_take(&i, kout, 2), 2);
  assert_int_equal(kout[0].ino, 1);
  assert_int_equal(kout[1].ino, 2);
  assert_int_equal(i.base.n, 0);
  assert_int_equal(i.base.dropped, 1);
  assert_true(slots_empty(&i.base));
  tg_inode_set_add(&i, 2, 8);
  assert_int_equal(tg_inode_set_find(&i, 2, 8), 0);
  tg_inode_set_free(&i);

  u64_set_t u;
  assert_int_equal(u64_init(&u, 3), 0);
  for (uint64_t k = 1; k <= 4; k++) u64_add(&u, k);
  uint64_t uout[3];
  assert_int_equal(tg_key_set_take(&u.s, &u64_type, u.keys, uout, 3), 3);
  assert_int_equal(u.s.dropped, 1);
  assert_true(slots_empty(&u.s));
  tg_key_set_free(&u.s, u.keys);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(init_rejects_capacities_outside_each_sets_limit),
      cmocka_unit_test(add_past_capacity_counts_dropped),
      cmocka_unit_test(clear_empties_by_both_branches),
      cmocka_unit_test(take_of_part_keeps_the_rest_in_order_and_findable),
      cmocka_unit_test(take_of_all_empties_the_set_and_keeps_dropped),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
