/* What the collector's tests share: a store in a fresh directory on a
 * clock the test moves, snapshots written from a seed, and a look at the
 * files on disk. */
#ifndef TRACEGATE_TESTS_COLL_FIXTURE_H
#define TRACEGATE_TESTS_COLL_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/store.h"

typedef struct coll_fixture {
  char dir[256];
  int64_t now_ms; /* the store's clock: tests move it */
  tg_coll_store_config_t cfg;
  tg_coll_store_t *store;
  tg_coll_recovery_t rec; /* what the last open repaired */
} coll_fixture_t;

/* A fresh directory; the store is not open yet. Returns 0 or -errno. */
int coll_fixture_init(coll_fixture_t *fx, const char *tag);
/* Opens fx->store with fx->cfg, filling fx->rec. Returns its result. */
int coll_fixture_open(coll_fixture_t *fx);
void coll_fixture_close(coll_fixture_t *fx);
/* Closes and removes the directory. */
void coll_fixture_fini(coll_fixture_t *fx);

/* cmocka setups and teardown on one static fixture in *state: a fresh
 * directory, with the store open or not. */
int coll_setup(void **state);
int coll_setup_open(void **state);
int coll_teardown(void **state);

/* Fills |buf| with |n| bytes made from |seed|. */
void coll_fill(uint8_t *buf, size_t n, uint64_t seed);

/* Begins a snapshot with |trigger| (reason "r", origin "o"), writes |bytes|
 * bytes from |seed| in pieces, and finishes it with the hosts named in
 * |hosts| (NULL-terminated), each OK unless its name starts with '!'
 * (then FAILED). Returns 0 and *id, or the first error. */
int coll_snapshot(tg_coll_store_t *s, const char *trigger,
                  const char *const *hosts, size_t bytes, uint64_t seed,
                  uint64_t *id);

/* The file of snapshot |id| under |dir| (snapshots/, or tmp/ if
 * |partial|): its size and crc32. Returns 0, or -errno (no file). */
int coll_file_crc(const char *dir, uint64_t id, bool partial, uint64_t *size,
                  uint32_t *crc);
/* Entries in |dir|/|sub|, "." and ".." aside; -errno if unreadable. */
int coll_count_entries(const char *dir, const char *sub);

#endif /* TRACEGATE_TESTS_COLL_FIXTURE_H */
