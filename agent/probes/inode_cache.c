/* The LRU cache of resolved inodes; see inode_cache.h.
 *
 * Entries live in one array; a hash of buckets chains them by index, and a
 * doubly linked list by index orders them from most to least recently
 * used. NONE ends a chain or the list.
 */
#include "agent/probes/inode_cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

typedef struct node {
  tg_inode_cache_entry_t e;
  uint32_t hnext;      /* bucket chain */
  uint32_t prev, next; /* recency list */
} node_t;

struct tg_inode_cache {
  node_t *nodes;
  uint32_t *buckets;
  uint32_t cap, n, mask;
  uint32_t head, tail; /* most and least recently used */
};

static uint32_t bucket_of(const tg_inode_cache_t *c, uint64_t ino,
                          uint64_t dev) {
  uint64_t h = (ino ^ (dev * UINT64_C(0x9e3779b97f4a7c15))) *
               UINT64_C(0xc4ceb9fe1a85ec53);
  return (uint32_t)(h >> 32) & c->mask;
}

int tg_inode_cache_new(uint32_t cap, tg_inode_cache_t **out) {
  if (cap == 0 || cap > (UINT32_C(1) << 20)) return -EINVAL;
  tg_inode_cache_t *c = calloc(1, sizeof(*c));
  if (!c) return -ENOMEM;
  uint32_t nb = 1;
  while (nb < cap) nb <<= 1;
  c->nodes = calloc(cap, sizeof(*c->nodes));
  c->buckets = malloc((size_t)nb * sizeof(*c->buckets));
  if (!c->nodes || !c->buckets) {
    tg_inode_cache_free(c);
    return -ENOMEM;
  }
  for (uint32_t i = 0; i < nb; i++) c->buckets[i] = NONE;
  c->cap = cap;
  c->mask = nb - 1;
  c->head = c->tail = NONE;
  *out = c;
  return 0;
}

void tg_inode_cache_free(tg_inode_cache_t *c) {
  if (!c) return;
  for (uint32_t i = 0; c->nodes && i < c->n; i++) free(c->nodes[i].e.path);
  free(c->nodes);
  free(c->buckets);
  free(c);
}

uint32_t tg_inode_cache_size(const tg_inode_cache_t *c) { return c->n; }

static void list_unlink(tg_inode_cache_t *c, uint32_t i) {
  node_t *x = &c->nodes[i];
  if (x->prev != NONE)
    c->nodes[x->prev].next = x->next;
  else
    c->head = x->next;
  if (x->next != NONE)
    c->nodes[x->next].prev = x->prev;
  else
    c->tail = x->prev;
}

static void list_push_front(tg_inode_cache_t *c, uint32_t i) {
  node_t *x = &c->nodes[i];
  x->prev = NONE;
  x->next = c->head;
  if (c->head != NONE) c->nodes[c->head].prev = i;
  c->head = i;
  if (c->tail == NONE) c->tail = i;
}

static uint32_t find(const tg_inode_cache_t *c, uint64_t ino, uint64_t dev) {
  for (uint32_t i = c->buckets[bucket_of(c, ino, dev)]; i != NONE;
       i = c->nodes[i].hnext)
    if (c->nodes[i].e.key.ino == ino && c->nodes[i].e.key.dev == dev) return i;
  return NONE;
}

static void hash_unlink(tg_inode_cache_t *c, uint32_t i) {
  const tg_inode_key_t *k = &c->nodes[i].e.key;
  uint32_t *p = &c->buckets[bucket_of(c, k->ino, k->dev)];
  while (*p != i) p = &c->nodes[*p].hnext;
  *p = c->nodes[i].hnext;
}

tg_inode_cache_entry_t *tg_inode_cache_get(tg_inode_cache_t *c, uint64_t ino,
                                           uint64_t dev) {
  uint32_t i = find(c, ino, dev);
  if (i == NONE) return NULL;
  list_unlink(c, i);
  list_push_front(c, i);
  return &c->nodes[i].e;
}

tg_inode_cache_entry_t *tg_inode_cache_put(tg_inode_cache_t *c, uint64_t ino,
                                           uint64_t dev, const char *path,
                                           size_t len, uint8_t type) {
  char *copy = malloc(len + 1);
  if (!copy) return NULL;
  memcpy(copy, path, len);
  copy[len] = '\0';
  uint32_t i = find(c, ino, dev);
  node_t *x;
  if (i != NONE) {
    x = &c->nodes[i];
    list_unlink(c, i);
    free(x->e.path);
  } else {
    if (c->n < c->cap) {
      i = c->n++;
    } else {
      i = c->tail; /* the least recently used makes room */
      list_unlink(c, i);
      hash_unlink(c, i);
      free(c->nodes[i].e.path);
    }
    x = &c->nodes[i];
    x->e.key = (tg_inode_key_t){ino, dev};
    x->e.written_ms = 0;
    uint32_t b = bucket_of(c, ino, dev);
    x->hnext = c->buckets[b];
    c->buckets[b] = i;
  }
  x->e.path = copy;
  x->e.path_len = (uint32_t)len;
  x->e.type = type;
  list_push_front(c, i);
  return &x->e;
}
