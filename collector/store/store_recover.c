/* Repair at open (store.h): whatever killed the last process, after this
 * every row that says "live" has its whole file, every file has a live row
 * and tmp/ is empty. Runs under the store's lock, before any caller sees
 * the store. The order matters: PENDING rows fail first, so that a file
 * renamed into snapshots/ whose row never became live is an orphan below.
 *
 * With a shared catalog and directory, other collectors are writing while
 * this runs. The catalog fails only the PENDING rows nobody is writing
 * (catalog.h, interrupt), so a PENDING row left after it is a running
 * collector's: its files (in tmp/, or in snapshots/ between rename and
 * commit) are kept. Every other file is garbage whoever made it: a writer
 * moves or removes its file before its row leaves PENDING, and a row
 * exists before its file does (docs/collector.md, "Several collectors").
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/catalog/snapshot_id.h"
#include "collector/store/store_internal.h"
#include "common/log.h"
#include "tracegate/error.h"

static int check_file(tg_coll_store_t *s, const tg_coll_snapshot_t *r,
                      tg_coll_recovery_t *rec) {
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_file_name(r->id, 0, name);
  struct stat st;
  const char *why = NULL;
  if (fstatat(s->snap_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
    why = "file missing at open";
  else if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != r->bytes)
    why = "file of the wrong size at open";
  if (!why) return 0;
  int err = s->cat->ops->lose(s->cat, r->id, why);
  if (err == -ENOENT || err == -EINVAL) {
    /* No longer a live row: deleted (row first, then file) or changed by
     * a collector sharing the catalog since the list. Nothing was lost. */
    tg_coll_snapshot_t now;
    int gone = s->cat->ops->get(s->cat, r->id, &now);
    if (gone == -ENOENT) {
      TG_INFO("store: snapshot %s: deleted by another collector during the"
              " check at open; nothing to repair", name);
      return 0;
    }
    if (gone == 0 && now.state != TG_COLL_COMPLETE &&
        now.state != TG_COLL_PARTIAL) {
      TG_INFO("store: snapshot %s: %s by another collector during the check"
              " at open; nothing to repair", name,
              tg_coll_state_name(now.state));
      return 0;
    }
  }
  if (err) {
    TG_ERROR("store: snapshot %s: %s (edited by hand?); cannot mark it"
             " failed: %s", name, why, tg_strerror(err));
    return err;
  }
  TG_ERROR("store: snapshot %s: %s (edited by hand?); marked failed", name,
           why);
  /* A file of the wrong size goes too: it has no live row now. */
  unlinkat(s->snap_fd, name, 0);
  tg__coll_unlink_index(s, r->id);
  rec->lost++;
  return 0;
}

/* Removes from directory |dfd| the entries |keep| does not want. */
static int sweep(tg_coll_store_t *s, int dfd,
                 bool (*keep)(tg_coll_store_t *s, const char *name,
                              tg_coll_recovery_t *rec),
                 uint32_t *removed, tg_coll_recovery_t *rec) {
  int fd = dup(dfd);
  if (fd < 0) return -errno;
  DIR *d = fdopendir(fd);
  if (!d) {
    int err = -errno;
    close(fd);
    return err;
  }
  rewinddir(d);
  struct dirent *e;
  int err = 0;
  errno = 0;
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (keep(s, e->d_name, rec)) continue;
    /* What cannot be removed (a directory someone made) is said and
     * left: it blocks nothing, as ids are never reused. */
    if (unlinkat(dfd, e->d_name, 0) == 0) {
      (*removed)++;
      TG_INFO("store: removed %s", e->d_name);
    } else if (errno != ENOENT) {
      TG_WARN("store: cannot remove %s: %s", e->d_name, strerror(errno));
    }
    errno = 0;
  }
  if (!e && errno) err = -errno;
  closedir(d);
  return err;
}

/* Whether the row of |id| is in one of |states|, which keeps its file. A
 * catalog error keeps it too (the next open tries again) rather than risk
 * removing a live one; only a missing row or one in another state makes
 * the file garbage. */
/* A file of tmp/ stays only while a running collector writes it. */
static bool keep_written(tg_coll_store_t *s, const char *name,
                         tg_coll_recovery_t *rec) {
  (void)rec;
  uint64_t id;
  /* Symbols are written for live rows: at open none of this collector's
   * is, but with a shared catalog another collector's may be. */
  if (tg_coll_id_parse_symbols_name(name, 1, &id) == 0 ||
      tg_coll_id_parse_symidx_name(name, 1, &id) == 0)
    return s->cat->ops->shared && tg__coll_row_keeps(s, id, TG_COLL_LIVE_STATES);
  /* A rewrite's file (tg_coll_writer_rewrite): as the file it replaces. */
  char base[TG_COLL_FILE_NAME_MAX];
  size_t n = strlen(name), k = strlen(TG__COLL_REWRITE_SUFFIX);
  if (n > k && n - k < sizeof(base) &&
      !strcmp(name + n - k, TG__COLL_REWRITE_SUFFIX)) {
    memcpy(base, name, n - k);
    base[n - k] = 0;
    name = base;
  }
  return (tg_coll_id_parse_file_name(name, 1, &id) == 0 ||
          tg_coll_id_parse_index_name(name, 1, &id) == 0) &&
         tg__coll_row_keeps(s, id, TG_COLL_STATE_BIT(TG_COLL_PENDING));
}

/* A file of snapshots/ (trace, index or symbols) stays if it is a live row's, or
 * a PENDING one's (renamed, not yet committed, by a running collector);
 * names that are not a snapshot's are not ours to remove. */
static bool keep_live(tg_coll_store_t *s, const char *name,
                      tg_coll_recovery_t *rec) {
  uint64_t id;
  if (tg_coll_id_parse_file_name(name, 0, &id) != 0 &&
      tg_coll_id_parse_index_name(name, 0, &id) != 0 &&
      tg_coll_id_parse_symbols_name(name, 0, &id) != 0 &&
      tg_coll_id_parse_symidx_name(name, 0, &id) != 0) {
    TG_WARN("store: %s/%s is not a snapshot; left alone", TG_COLL_SNAPSHOT_DIR,
            name);
    rec->foreign++;
    return true;
  }
  return tg__coll_row_keeps(
      s, id, TG_COLL_LIVE_STATES | TG_COLL_STATE_BIT(TG_COLL_PENDING));
}

int tg__coll_dir_recover(tg_coll_store_t *s, tg_coll_recovery_t *rec) {
  int err = sweep(s, s->snap_fd, keep_live, &rec->orphans_removed, rec);
  if (!err) err = tg__coll_each_row(s, TG_COLL_LIVE_STATES, check_file, rec);
  return err;
}

int tg__coll_recover(tg_coll_store_t *s, tg_coll_recovery_t *rec) {
  memset(rec, 0, sizeof(*rec));
  int err;
  if ((err = s->cat->ops->interrupt(s->cat,
                                    "interrupted: the collector restarted",
                                    tg__coll_now(s), &rec->interrupted)) ||
      (err = sweep(s, s->tmp_fd, keep_written, &rec->tmp_removed, rec)))
    return err;
  if ((err = s->ops->recover(s, rec))) return err;
  if (rec->interrupted || rec->tmp_removed || rec->orphans_removed ||
      rec->lost || rec->uploads_aborted)
    TG_INFO(
        "store: recovered: %u interrupted, %u tmp files and %u orphans"
        " removed, %u lost, %u uploads aborted",
        rec->interrupted, rec->tmp_removed, rec->orphans_removed, rec->lost,
        rec->uploads_aborted);
  return 0;
}
