/* Fixed-capacity sets of keys, the type-free part; see key_set.h. */
#include "agent/probes/key_set.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int tg_key_set_init(tg_key_set_t *s, const tg_key_set_type_t *t, uint32_t cap,
                    void **members) {
  assert(t->size > 0 && t->max_cap <= TG_KEY_SET_MAX_CAP);
  memset(s, 0, sizeof(*s));
  *members = NULL;
  if (cap == 0 || cap > t->max_cap || cap > SIZE_MAX / t->size)
    return -EINVAL;
  uint32_t slots = 1;
  while (slots < 2 * cap) slots <<= 1;
  s->slots = calloc(slots, sizeof(*s->slots));
  *members = malloc((size_t)cap * t->size);
  if (!s->slots || !*members) {
    tg_key_set_free(s, *members);
    *members = NULL;
    return -ENOMEM;
  }
  s->cap = cap;
  s->mask = slots - 1;
  return 0;
}

void tg_key_set_free(tg_key_set_t *s, void *members) {
  free(s->slots);
  free(members);
  memset(s, 0, sizeof(*s));
}

void tg_key_set_clear(tg_key_set_t *s, const tg_key_set_type_t *t,
                      const void *members) {
  if (!s->slots) return;
  size_t slots = (size_t)s->mask + 1;
  if ((size_t)s->n * 8 > slots) {
    memset(s->slots, 0, slots * sizeof(*s->slots));
  } else {
    /* Only the slots of members: a member's slot is the one on its probe
     * that holds its index + 1, and no other slot holds that. */
    const unsigned char *m = members;
    for (uint32_t i = 0; i < s->n; i++) {
      uint32_t k = t->hash(m + (size_t)i * t->size) & s->mask;
      while (s->slots[k] != i + 1) k = (k + 1) & s->mask;
      s->slots[k] = 0;
    }
  }
  s->n = 0;
  s->dropped = 0;
}

size_t tg_key_set_take(tg_key_set_t *s, const tg_key_set_type_t *t,
                       void *members, void *out, size_t cap) {
  size_t n = s->n < cap ? s->n : cap;
  if (n == 0) return 0;
  unsigned char *m = members;
  memcpy(out, m, n * t->size);
  if (n == s->n) {
    uint64_t dropped = s->dropped;
    tg_key_set_clear(s, t, members);
    s->dropped = dropped;
    return n;
  }
  /* The rest move to the front and take the first empty slot of their
   * probe again, in order: the slots an add would have given them. */
  uint32_t rest = s->n - (uint32_t)n;
  memmove(m, m + n * t->size, (size_t)rest * t->size);
  memset(s->slots, 0, ((size_t)s->mask + 1) * sizeof(*s->slots));
  for (uint32_t i = 0; i < rest; i++) {
    uint32_t k = t->hash(m + (size_t)i * t->size) & s->mask;
    while (s->slots[k] != 0) k = (k + 1) & s->mask;
    s->slots[k] = i + 1;
  }
  s->n = rest;
  return n;
}
