/* Fixed-capacity (inode, device) sets; see inode_set.h. */
#include "agent/probes/inode_set.h"

#include <stddef.h>
#include <string.h>

static uint32_t member_hash(const void *member) {
  tg_inode_key_t k;
  memcpy(&k, member, sizeof(k));
  return tg__inode_hash(k.ino, k.dev);
}

static const tg_key_set_type_t inode_type = {
    .size = sizeof(tg_inode_key_t),
    .max_cap = UINT32_C(1) << 26,
    .hash = member_hash,
};

int tg_inode_set_init(tg_inode_set_t *s, uint32_t cap) {
  memset(s, 0, sizeof(*s));
  void *keys;
  int rv = tg_key_set_init(&s->base, &inode_type, cap, &keys);
  s->keys = keys;
  return rv;
}

void tg_inode_set_free(tg_inode_set_t *s) {
  tg_key_set_free(&s->base, s->keys);
  memset(s, 0, sizeof(*s));
}

void tg_inode_set_clear(tg_inode_set_t *s) {
  tg_key_set_clear(&s->base, &inode_type, s->keys);
  s->last = (tg_inode_key_t){0, 0};
}

size_t tg_inode_set_take(tg_inode_set_t *s, tg_inode_key_t *out, size_t cap) {
  size_t n = tg_key_set_take(&s->base, &inode_type, s->keys, out, cap);
  s->last = (tg_inode_key_t){0, 0};
  return n;
}
