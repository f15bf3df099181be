/* What store.c, store_recover.c, store_writer.c and store_s3.c all use
 * (store_internal.h): the clock, the step hook, the catalog walks and
 * unlinking a host index. Below all four: it calls none of them, so the
 * store's files call one way (store.c -> store_recover.c -> store_s3.c
 * -> here; store_writer.c -> store_s3.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/catalog/snapshot_id.h"
#include "collector/store/store_internal.h"
#include "common/log.h"

#define PAGE 64

int64_t tg__coll_now(tg_coll_store_t *s) { return s->now_ms(s->clock_ctx); }

void tg__coll_step(tg_coll_store_t *s, tg_coll_step_t step, uint64_t id) {
  if (s->on_step) s->on_step(s->step_ctx, step, id);
}

/* Calls |fn| on every row in |states|, newest first, a page at a time.
 * |fn| may change the row's state: paging goes by id, not by state. */
int tg__coll_each_row(tg_coll_store_t *s, unsigned states,
                      int (*fn)(tg_coll_store_t *s, const tg_coll_snapshot_t *r,
                                tg_coll_recovery_t *rec),
                      tg_coll_recovery_t *rec) {
  tg_coll_snapshot_t *page = calloc(PAGE, sizeof(*page));
  if (!page) return -ENOMEM;
  tg_coll_filter_t f = TG_COLL_FILTER_INIT;
  f.states = states;
  f.limit = PAGE;
  int err;
  for (;;) {
    size_t n = 0;
    if ((err = s->cat->ops->list(s->cat, &f, page, PAGE, &n))) break;
    for (size_t i = 0; i < n && !err; i++) err = fn(s, &page[i], rec);
    if (err || n < PAGE) break;
    f.before_id = page[n - 1].id;
  }
  free(page);
  return err;
}

bool tg__coll_row_keeps(tg_coll_store_t *s, uint64_t id, unsigned states) {
  tg_coll_snapshot_t r;
  int err = s->cat->ops->get(s->cat, id, &r);
  if (err) return err != -ENOENT;
  return (states & TG_COLL_STATE_BIT(r.state)) != 0;
}

void tg__coll_unlink_name(tg_coll_store_t *s, const char *name) {
  if (unlinkat(s->snap_fd, name, 0) != 0 && errno != ENOENT)
    TG_WARN("store: %s: unlink: %s (removed at the next open)", name,
            strerror(errno));
}

void tg__coll_unlink_index(tg_coll_store_t *s, uint64_t id) {
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_index_name(id, 0, name);
  tg__coll_unlink_name(s, name);
  tg__coll_unlink_symbols(s, id);
}

/* A snapshot's symbols and their host index (store_symbols.c writes
 * them): here, below the files that delete a snapshot. */
void tg__coll_unlink_symbols(tg_coll_store_t *s, uint64_t id) {
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_symidx_name(id, 0, name);
  tg__coll_unlink_name(s, name);
  tg_coll_id_symbols_name(id, 0, name);
  tg__coll_unlink_name(s, name);
}

void tg__coll_unlink_tmp_symbols(tg_coll_store_t *s, uint64_t id) {
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_symbols_name(id, 1, name);
  unlinkat(s->tmp_fd, name, 0);
  tg_coll_id_symidx_name(id, 1, name);
  unlinkat(s->tmp_fd, name, 0);
}
