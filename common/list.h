/* Intrusive circular doubly-linked list (cf. libuv's queue.h, Linux list.h).
 * The list head is a tg_list_t too; an empty list points to itself. Nodes are
 * embedded in their owners, so insertion and removal never allocate. */
#ifndef TRACEGATE_LIST_H
#define TRACEGATE_LIST_H

#include <stddef.h>

typedef struct tg_list {
  struct tg_list *next;
  struct tg_list *prev;
} tg_list_t;

#define TG_CONTAINER_OF(ptr, type, member) \
  ((type *)((char *)(ptr)-offsetof(type, member)))

static inline void tg_list_init(tg_list_t *h) { h->next = h->prev = h; }
static inline int tg_list_empty(const tg_list_t *h) { return h->next == h; }

static inline void tg_list_insert_tail(tg_list_t *h, tg_list_t *n) {
  n->next = h;
  n->prev = h->prev;
  h->prev->next = n;
  h->prev = n;
}

static inline void tg_list_insert_head(tg_list_t *h, tg_list_t *n) {
  n->next = h->next;
  n->prev = h;
  h->next->prev = n;
  h->next = n;
}

/* Removing an unlinked (self-pointing) node is a no-op, so removal is
 * idempotent when nodes are initialised with tg_list_init(). */
static inline void tg_list_remove(tg_list_t *n) {
  n->prev->next = n->next;
  n->next->prev = n->prev;
  n->next = n->prev = n;
}

/* Safe against removal of |it| inside the loop body. */
#define tg_list_foreach_safe(it, tmp, head)                       \
  for ((it) = (head)->next, (tmp) = (it)->next; (it) != (head); \
       (it) = (tmp), (tmp) = (it)->next)

#endif /* TRACEGATE_LIST_H */
