/* The inodes linux.inode_file_map resolved lately, least recently used
 * first out: an inode that the kernel events name again and again is
 * found here instead of by another scan (Perfetto's probes keep the same
 * kind of cache).
 *
 * At most |cap| entries, each with its own copy of its path (below
 * PATH_MAX), so the cache holds at most cap * PATH_MAX bytes of paths.
 * Not thread-safe: the sampler thread owns it.
 */
#ifndef TRACEGATE_PROBES_INODE_CACHE_H
#define TRACEGATE_PROBES_INODE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "agent/probes/inode_set.h"

typedef struct tg_inode_cache_entry {
  tg_inode_key_t key;
  char *path; /* NUL-terminated */
  uint32_t path_len;
  uint8_t type;        /* tg_inode_type_t */
  uint64_t written_ms; /* the caller's: when it last wrote the entry */
} tg_inode_cache_entry_t;

typedef struct tg_inode_cache tg_inode_cache_t;

/* Room for |cap| (1 .. 2^20) entries. Returns 0, -EINVAL or -ENOMEM. */
int tg_inode_cache_new(uint32_t cap, tg_inode_cache_t **out);
/* NULL is a no-op. */
void tg_inode_cache_free(tg_inode_cache_t *c);

/* The entry of (ino, dev), now the most recently used, or NULL. Valid
 * until the next put. */
tg_inode_cache_entry_t *tg_inode_cache_get(tg_inode_cache_t *c, uint64_t ino,
                                           uint64_t dev);

/* Sets the entry of (ino, dev) to |path| (|len| bytes, copied) and
 * |type|, evicting the least recently used one when full. Returns the
 * entry (written_ms 0 for a new one), or NULL without memory. */
tg_inode_cache_entry_t *tg_inode_cache_put(tg_inode_cache_t *c, uint64_t ino,
                                           uint64_t dev, const char *path,
                                           size_t len, uint8_t type);

/* Entries held. */
uint32_t tg_inode_cache_size(const tg_inode_cache_t *c);

#endif /* TRACEGATE_PROBES_INODE_CACHE_H */
