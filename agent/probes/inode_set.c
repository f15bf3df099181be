/* Fixed-capacity (inode, device) sets; see inode_set.h. */
#include "agent/probes/inode_set.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int tg_inode_set_init(tg_inode_set_t *s, uint32_t cap) {
  memset(s, 0, sizeof(*s));
  if (cap == 0 || cap > (UINT32_C(1) << 26)) return -EINVAL;
  uint32_t slots = 1;
  while (slots < 2 * cap) slots <<= 1;
  s->slots = calloc(slots, sizeof(*s->slots));
  s->keys = malloc((size_t)cap * sizeof(*s->keys));
  if (!s->slots || !s->keys) {
    tg_inode_set_free(s);
    return -ENOMEM;
  }
  s->cap = cap;
  s->mask = slots - 1;
  return 0;
}

void tg_inode_set_free(tg_inode_set_t *s) {
  free(s->slots);
  free(s->keys);
  memset(s, 0, sizeof(*s));
}

void tg_inode_set_clear(tg_inode_set_t *s) {
  if (!s->slots) return;
  if ((size_t)s->n * 8 > (size_t)s->mask + 1) {
    memset(s->slots, 0, ((size_t)s->mask + 1) * sizeof(*s->slots));
  } else {
    /* Only the slots of members: each member's slot holds its index. */
    for (uint32_t i = 0; i < s->n; i++) {
      uint32_t k = tg__inode_set_hash(s, s->keys[i].ino, s->keys[i].dev);
      while (s->slots[k] != i + 1) k = (k + 1) & s->mask;
      s->slots[k] = 0;
    }
  }
  s->n = 0;
  s->last = (tg_inode_key_t){0, 0};
  s->dropped = 0;
}

size_t tg_inode_set_take(tg_inode_set_t *s, tg_inode_key_t *out, size_t cap) {
  size_t n = s->n < cap ? s->n : cap;
  memcpy(out, s->keys, n * sizeof(*out));
  if (n == s->n) {
    uint64_t dropped = s->dropped;
    tg_inode_set_clear(s);
    s->dropped = dropped;
    return n;
  }
  /* The rest move to the front and are added again (each add writes at or
   * before where it reads). */
  uint32_t rest = s->n - (uint32_t)n;
  memmove(s->keys, s->keys + n, rest * sizeof(*s->keys));
  memset(s->slots, 0, ((size_t)s->mask + 1) * sizeof(*s->slots));
  s->n = 0;
  s->last = (tg_inode_key_t){0, 0};
  for (uint32_t i = 0; i < rest; i++)
    tg_inode_set_add(s, s->keys[i].ino, s->keys[i].dev);
  return n;
}
