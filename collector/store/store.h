/* The snapshot store: a directory of merged traces and the catalog that
 * describes them, kept consistent across a kill -9 at any moment.
 *
 *   <dir>/lock                     flock()ed while a store is open
 *   <dir>/catalog.sqlite (-wal, -shm)  the default catalog
 *   <dir>/tmp/<id>.pftrace.partial     a snapshot being written
 *   <dir>/snapshots/<id>.pftrace       a finished snapshot (live row)
 *   <dir>/snapshots/<id>.index         its host index (snap_index.h), if any
 *   <dir>/tmp/<id>.index.partial       the index being written
 *   <dir>/snapshots/<id>.symbols, .symidx  its symbols, if symbolized
 *   <dir>/tmp/<id>.symbols.partial, .symidx.partial  being written
 *
 * The protocol (docs/collector.md says why each step is where it is):
 *   begin:   PENDING row committed -> id returned -> tmp file created
 *   finish:  fsync(tmp) -> [index written, fsync, renamed into
 *            snapshots/] -> rename into snapshots/ -> fsync(snapshots/)
 *            -> row COMPLETE/PARTIAL committed
 *   delete:  row deleted (committed) -> file unlinked -> index unlinked
 *   open:    PENDING rows nobody writes -> FAILED; files of tmp/ and
 *            snapshots/ whose row is neither live nor PENDING removed;
 *            live rows whose file is missing or of the wrong size ->
 *            FAILED (logged); an index goes with its file
 * So no row points at a missing or partial file, no file outlives a
 * restart without its row, and an id once returned keeps its row (FAILED
 * if the snapshot could not be finished) until deleted.
 *
 * With a shared catalog (catalog.h, ops->shared: PostgreSQL) several
 * collectors, each with its own store and catalog member, share one
 * directory: each writes only the files of ids it allocated, and recovery
 * removes only files no running collector can need (docs/collector.md,
 * "Several collectors").
 *
 * Threads: a store is used by one thread at a time (a libuv loop's). Each
 * call is at most one short catalog transaction plus a few file system
 * calls, except tg_coll_writer_sync() (fsyncs the whole file: run it on a
 * worker, e.g. uv_queue_work, while the loop goes on; it touches only its
 * writer) and tg_coll_store_open() (recovery walks the whole store).
 */
#ifndef TRACEGATE_COLLECTOR_STORE_STORE_H
#define TRACEGATE_COLLECTOR_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/catalog/catalog.h"
#include "collector/catalog/retention.h"
#include "collector/s3/s3_client.h"
#include "collector/store/snap_index.h"

#define TG_COLL_CATALOG_FILE "catalog.sqlite"
#define TG_COLL_LOCK_FILE "lock"
#define TG_COLL_TMP_DIR "tmp"
#define TG_COLL_SNAPSHOT_DIR "snapshots"

typedef struct tg_coll_store tg_coll_store_t;
typedef struct tg_coll_writer tg_coll_writer_t;

/* The protocol's steps, in the order they happen; see on_step. */
typedef enum tg_coll_step {
  TG_COLL_STEP_BEGUN,       /* PENDING row committed, id not yet returned */
  TG_COLL_STEP_CREATED,     /* tmp file created, begin about to return */
  TG_COLL_STEP_WROTE,       /* bytes written into the tmp file */
  TG_COLL_STEP_SYNCED,      /* tmp file fsync()ed */
  TG_COLL_STEP_RENAMED,     /* file renamed into snapshots/ */
  TG_COLL_STEP_DIR_SYNCED,  /* snapshots/ fsync()ed, row still PENDING */
  TG_COLL_STEP_FINISHED,    /* row committed COMPLETE, PARTIAL or FAILED */
  TG_COLL_STEP_ABORTED,     /* row committed FAILED by abort */
  TG_COLL_STEP_REMOVING,    /* delete or retention: |id| about to go */
  TG_COLL_STEP_ROW_REMOVED, /* delete or retention: row gone, file not yet */
  TG_COLL_STEP_UNLINKED,    /* delete or retention: file gone */
  TG_COLL_STEP_COUNT
} tg_coll_step_t;

/* "begun", "created", ... */
const char *tg_coll_step_name(tg_coll_step_t s);

/* Called after each step, on the thread making the call: for metrics and
 * for the crash tests, which stop the process there. */
typedef void (*tg_coll_step_fn)(void *ctx, tg_coll_step_t step, uint64_t id);

/* Snapshots in an S3 bucket rather than in <dir>/snapshots/ (store_s3.h
 * says how; docs/collector.md, "Snapshots in a bucket"). <dir> still holds
 * the lock, the SQLite catalog if that is the catalog, and tmp/. */
typedef struct tg_coll_s3_config {
  tg_s3_client_config_t client; /* strings copied at open */
  const char *prefix;           /* "" (NULL) or "a/b/": no leading '/' */
  size_t part_size;             /* 0: 8 MiB; TG_S3_PART_MIN..256 MiB */
  /* Parts uploaded at once (by as many threads) or waiting; 1..16, 0: 4 */
  unsigned queue_parts;
} tg_coll_s3_config_t;

typedef struct tg_coll_store_config {
  const char *dir; /* created if missing (not its parents); copied */
  /* NULL: the SQLite catalog at <dir>/catalog.sqlite, owned by the store.
   * Else borrowed: the caller closes it after tg_coll_store_close(); one
   * store at a time (-EBUSY). A shared one (PostgreSQL) makes the store
   * take the directory's lock shared, with the other collectors. */
  tg_coll_catalog_t *catalog;
  tg_coll_retention_policy_t retention;
  /* Unix epoch milliseconds; NULL: CLOCK_REALTIME. */
  int64_t (*now_ms)(void *ctx);
  void *clock_ctx;
  tg_coll_step_fn on_step; /* NULL: none */
  void *step_ctx;
  const tg_coll_s3_config_t *s3; /* NULL: snapshots in <dir>; borrowed */
} tg_coll_store_config_t;

/* What open found and repaired. */
typedef struct tg_coll_recovery {
  uint32_t interrupted;     /* PENDING rows made FAILED */
  uint32_t tmp_removed;     /* files removed from tmp/ */
  uint32_t orphans_removed; /* files of snapshots/ without a live row */
  uint32_t lost;            /* live rows whose file was gone or short */
  uint32_t foreign;         /* names in snapshots/ that are not ours, kept */
  uint32_t uploads_aborted; /* a bucket's interrupted multipart uploads */
  uint32_t unrowed_kept;    /* a bucket's objects with no row at all, kept */
} tg_coll_recovery_t;

/* Where a store keeps its snapshots: one interface over two backends, as
 * the catalog's (catalog.h) is over SQLite and PostgreSQL. Every call
 * below works on either, or says it cannot (-EOPNOTSUPP); callers ask
 * what a store can do (tg_coll_store_remote, _can_presign, ...), never
 * which backend it is, to decide what to do. */
typedef enum tg_coll_store_kind {
  TG_COLL_STORE_DIRECTORY = 0, /* <dir>/snapshots/ */
  TG_COLL_STORE_BUCKET,        /* an S3 bucket (tg_coll_store_config_t.s3) */
} tg_coll_store_kind_t;

/* "directory", "bucket": a static string. */
const char *tg_coll_store_kind_name(tg_coll_store_kind_t k);

/* How the store is reached and how it answered of late: for the status
 * page and the metrics. Filled by value: nothing in it points into the
 * store. */
#define TG_COLL_STORE_URL_MAX 600
typedef struct tg_coll_store_desc {
  tg_coll_store_kind_t kind;
  char url[TG_COLL_STORE_URL_MAX]; /* "s3://BUCKET/PREFIX"; "" for a directory */
  /* Whether |stats| says anything: a bucket's requests, counted over this
   * store's clients only (its writers' and fetches' included). */
  bool has_stats;
  tg_s3_stats_t stats;
} tg_coll_store_desc_t;

/* Opens the store at cfg->dir, locking it against a second opener (-EBUSY;
 * shared with collectors of the same shared catalog)
 * and recovering it (above). Returns 0 and *out (free with
 * tg_coll_store_close), filling *rec when not NULL; or -errno /
 * TG_ENOT_SUPPORTED (the catalog's schema is newer). */
int tg_coll_store_open(const tg_coll_store_config_t *cfg, tg_coll_store_t **out,
                       tg_coll_recovery_t *rec);
/* Every writer must have been finished or aborted. NULL-safe. */
void tg_coll_store_close(tg_coll_store_t *s);

tg_coll_store_kind_t tg_coll_store_kind(const tg_coll_store_t *s);
/* Whether a snapshot's bytes are a download away (a bucket): a reader
 * then gets them on a worker (tg_coll_store_files_new, or
 * tg_coll_store_fetch_new), since tg_coll_store_open_file() would hold
 * the store's thread for the whole download; profiles are not made from
 * them here. */
bool tg_coll_store_remote(const tg_coll_store_t *s);
/* Whether tg_coll_store_presign() can answer (else -EOPNOTSUPP). */
bool tg_coll_store_can_presign(const tg_coll_store_t *s);
/* Whether collectors sharing the store (a shared catalog) may store the
 * same snapshot's symbols at once (a bucket's conditional writes make a
 * second attempt harmless; a shared directory's tmp/ names would clash). */
bool tg_coll_store_symbols_shareable(const tg_coll_store_t *s);
/* Fills *out (the caller's); reads counters, makes no request. */
void tg_coll_store_describe(tg_coll_store_t *s, tg_coll_store_desc_t *out);

/* Starts a snapshot: a PENDING row, committed, then its tmp file. Returns
 * 0, *id and *w (the store's until tg_coll_store_finish/abort); or an
 * error, and then no id was handed out (a row may stay, FAILED). */
int tg_coll_store_begin(tg_coll_store_t *s, const tg_coll_begin_t *b,
                        tg_coll_writer_t **w, uint64_t *id);

uint64_t tg_coll_writer_id(const tg_coll_writer_t *w);
uint64_t tg_coll_writer_bytes(const tg_coll_writer_t *w);
/* Appends |n| bytes of |p| (borrowed for the call). 0 or -errno; after an
 * error the writer refuses everything but abort (and finish, which fails). */
int tg_coll_writer_write(tg_coll_writer_t *w, const void *p, size_t n);
/* The host index to write with the snapshot at finish (snap_index.h):
 * borrowed until finish or abort; NULL (the default): none. A builder
 * that gave up, or an index that cannot be written, leaves the snapshot
 * without one (logged); the snapshot itself is stored all the same. */
void tg_coll_writer_set_index(tg_coll_writer_t *w,
                              const tg_coll_index_builder_t *b);
/* Writes the snapshot anew from what was written so far: |fn| reads the
 * old bytes from |in| (a descriptor of its own, at offset 0) and writes
 * the new ones with tg_coll_writer_write(|w|, ...), which then start
 * from byte 0 of a new file. When |fn| returns 0 the new file replaces
 * the old one (its bytes and checksum are the writer's from then on);
 * when it fails, the writer is as it was before the call, the new bytes
 * gone. May run on another thread than the store's, as
 * tg_coll_writer_sync(). The index set with tg_coll_writer_set_index()
 * describes the old bytes: the caller sets the new one. 0, |fn|'s
 * error, -ENOTSUP in a bucket's store (its bytes are uploaded as they
 * come: there is no file to read again), -errno. */
typedef int (*tg_coll_rewrite_fn)(void *ctx, int in, tg_coll_writer_t *w);
int tg_coll_writer_rewrite(tg_coll_writer_t *w, tg_coll_rewrite_fn fn,
                           void *ctx);
/* fsync()s what was written. Optional (finish syncs if this was not
 * called); may run on another thread than the store's, not concurrently
 * with calls on the same writer. 0 or -errno. */
int tg_coll_writer_sync(tg_coll_writer_t *w);

/* What the caller knows at the end: the merged packet count and each
 * host's part. Borrowed for the call. */
typedef struct tg_coll_result {
  uint64_t packets;
  const tg_coll_host_result_t *hosts;
  size_t n_hosts;
} tg_coll_result_t;

/* Ends a snapshot: its file goes into snapshots/ and its row becomes
 * COMPLETE or PARTIAL; if no host delivered, the row becomes FAILED and the
 * file is dropped. Consumes |w| whatever happens. On error the row is made
 * FAILED when possible (else recovery does it at the next open) and no
 * file is left: -EINVAL (bad result), -errno, a catalog error. */
int tg_coll_store_finish(tg_coll_store_t *s, tg_coll_writer_t *w,
                         const tg_coll_result_t *r);
/* Gives a snapshot up: row FAILED with |why| (NULL: "aborted"), tmp file
 * removed. Consumes |w|. Returns the catalog's error, if any. */
int tg_coll_store_abort(tg_coll_store_t *s, tg_coll_writer_t *w,
                        const char *why);

/* Reads: the catalog's (catalog.h), through the store. */
int tg_coll_store_list(tg_coll_store_t *s, const tg_coll_filter_t *f,
                       tg_coll_snapshot_t *out, size_t cap, size_t *n);
int tg_coll_store_get(tg_coll_store_t *s, uint64_t id, tg_coll_snapshot_t *out);
int tg_coll_store_hosts(tg_coll_store_t *s, uint64_t id, tg_coll_host_t *out,
                        size_t cap, size_t *n);
/* The row and its hosts in one read: what an answer about one snapshot
 * uses, so that a delete by another collector sharing the catalog is
 * -ENOENT, never half a snapshot. */
int tg_coll_store_get_with_hosts(tg_coll_store_t *s, uint64_t id,
                                 tg_coll_snapshot_t *out,
                                 tg_coll_host_t *hosts, size_t cap,
                                 size_t *n);
/* Function shares (catalog.h): a stored snapshot's rows replaced, and
 * the rows of a function across snapshots. The catalog's, through the
 * store; a bucket's sidecar does not hold them (a --rebuild-catalog
 * comes back without them). */
int tg_coll_store_set_shares(tg_coll_store_t *s, uint64_t id,
                             const tg_coll_host_shares_t *hosts,
                             size_t n_hosts);
int tg_coll_store_find_shares(tg_coll_store_t *s,
                              const tg_coll_share_query_t *q,
                              tg_coll_share_t *out, size_t cap, size_t *n);
/* Whether snapshot |id| is live (COMPLETE or PARTIAL: its trace can be
 * read): 0, -ENOENT (no such snapshot, or not live), or the catalog's
 * error. One catalog read. */
int tg_coll_store_live(tg_coll_store_t *s, uint64_t id);

/* Opens a live snapshot's file read-only (O_CLOEXEC); the fd is the
 * caller's and stays readable even if the snapshot is deleted meanwhile.
 * -ENOENT: no such snapshot or it is not live. A bucket's is downloaded
 * whole first (blocks): the collector's loop calls these two only where
 * the store is not remote (tg_coll_store_remote), and its jobs use
 * tg_coll_store_files_new. */
int tg_coll_store_open_file(tg_coll_store_t *s, uint64_t id, int *fd);

/* Opens snapshot |id|'s host index read-only, the same way; -ENOENT when
 * it has none. Whether it describes the file is the reader's to check
 * (tg_coll_index_read against the file's size). */
int tg_coll_store_open_index(tg_coll_store_t *s, uint64_t id, int *fd);

/* A bucket's store: a presigned GET URL of live snapshot |id|'s trace,
 * valid |expires_s| seconds from the store's clock, into |url| (|cap|
 * bytes). -EOPNOTSUPP for a directory store; -ENOENT: no such snapshot
 * or it is not live. Makes no request. */
int tg_coll_store_presign(tg_coll_store_t *s, uint64_t id, uint32_t expires_s,
                          char *url, size_t cap);

/* A bucket's store: copies of snapshot |id|'s objects made off the
 * store's thread, so that a long download does not hold it. Made on the
 * store's thread (a client and a tmp/ descriptor of its own, nothing of
 * the store's after), run on any one thread, freed on either; the store
 * may close meanwhile. -EOPNOTSUPP for a directory store. Whether the
 * snapshot is live is the caller's to check first. */
typedef struct tg_coll_fetch tg_coll_fetch_t;
int tg_coll_store_fetch_new(tg_coll_store_t *s, uint64_t id,
                            tg_coll_fetch_t **out);
/* Its trace (run) or its host index (index) into an unnamed file under
 * tmp/: 0 and *fd (the caller's, read-only use, at offset 0), -ENOENT (no
 * such object), or the client's error. Blocks for the whole download. */
int tg_coll_fetch_run(tg_coll_fetch_t *f, int *fd);
int tg_coll_fetch_index(tg_coll_fetch_t *f, int *fd);
/* Whether the snapshot has symbols in the bucket (one HEAD): 0, -ENOENT,
 * or the client's error. Blocks. */
int tg_coll_fetch_has_symbols(tg_coll_fetch_t *f);
/* Its symbols and their host index, each into an unnamed file as above:
 * 0, *sfd and *sifd (-1: no index); -ENOENT (no symbols), the client's
 * error. Blocks. */
int tg_coll_fetch_symbols(tg_coll_fetch_t *f, int *sfd, int *sifd);
void tg_coll_fetch_free(tg_coll_fetch_t *f); /* NULL-safe */

/* A live snapshot's files for a job that reads them off the store's
 * thread (symbolize, the import check, function shares, a host's part of
 * a download), whatever the backend: the caller asks for them without
 * asking which backend holds them. Made on the store's thread: a
 * directory's files are opened there (cheap; they stay readable if the
 * snapshot is deleted meanwhile), a bucket's downloads are prepared
 * (tg_coll_store_fetch_new). Got on any one thread: a bucket's are
 * downloaded there, which blocks for as long as they take, so never on
 * the store's thread (it serves everything else meanwhile). Freed on
 * either; the store may close between new and free.
 *
 * |want| is the trace and any of: */
#define TG_COLL_FILES_INDEX 1u   /* its host index */
#define TG_COLL_FILES_SYMBOLS 2u /* its symbols and their index */
typedef struct tg_coll_files tg_coll_files_t;
/* 0 and *out; -ENOENT: no such snapshot, or it is not live; or the
 * catalog's or the store's error. */
int tg_coll_store_files_new(tg_coll_store_t *s, uint64_t id, unsigned want,
                            tg_coll_files_t **out);
/* Gets what |want| named: 0, or the first error that stopped it (-ENOENT:
 * the trace went meanwhile). A part the snapshot does not have (no host
 * index, no symbols) is no error: its descriptor is -1 below. Once only. */
int tg_coll_files_get(tg_coll_files_t *f);
/* After a successful get: the descriptors (read-only use, at offset 0),
 * taken by the caller (-1: none, or already taken). */
typedef enum tg_coll_file {
  TG_COLL_FILE_TRACE = 0,
  TG_COLL_FILE_INDEX,   /* the trace's host index */
  TG_COLL_FILE_SYMBOLS, /* its symbols */
  TG_COLL_FILE_SYMIDX,  /* the symbols' host index */
  TG_COLL_FILE_COUNT
} tg_coll_file_t;
int tg_coll_files_take(tg_coll_files_t *f, tg_coll_file_t which);
/* Closes what was not taken. NULL-safe. */
void tg_coll_files_free(tg_coll_files_t *f);

/* Symbols beside a live snapshot (the collector's `symbolize`,
 * docs/collector.md "Symbols"): "<id>.symbols" (ModuleSymbols packets, a
 * trace to append to the snapshot's) and "<id>.symidx" (their host index,
 * snap_index.h's format over the symbols file), files in snapshots/ or
 * objects in the bucket. The trace, its index, its sidecar and its row
 * are not changed; delete, retention and recovery remove the symbols
 * with the snapshot.
 *
 * begin: creates both under tmp/ (on the store's thread): 0 and the two
 * fds (read-write, the caller's to write, fsync and close, on any thread);
 * -ENOENT when the snapshot is not live. A bucket's store: then
 * tg_coll_symput_run() (below) puts them in the bucket off the store's
 * thread, before commit. commit (the store's thread, the files synced
 * and closed): a directory store renames them into snapshots/ (the index
 * only when |with_index|; else an older one goes) and syncs the
 * directory; a bucket's checks that the snapshot is still live. -ENOENT
 * when the snapshot went meanwhile (the files, or objects, removed); on
 * any error nothing of them is left. abort: removes them from tmp/. */
int tg_coll_store_symbols_begin(tg_coll_store_t *s, uint64_t id, int *fd,
                                int *ifd);
int tg_coll_store_symbols_commit(tg_coll_store_t *s, uint64_t id,
                                 bool with_index);
void tg_coll_store_symbols_abort(tg_coll_store_t *s, uint64_t id);
/* Opens snapshot |id|'s symbols read-only: 0, *fd and *ifd (-1 when they
 * have no index); -ENOENT when it has none. A bucket's are downloaded
 * (blocks: the API uses tg_coll_fetch_symbols on a worker instead). */
int tg_coll_store_open_symbols(tg_coll_store_t *s, uint64_t id, int *fd,
                               int *ifd);
/* Whether snapshot |id| has symbols: 0 (yes), -ENOENT, or an error (a
 * bucket's: one HEAD, on the store's thread). */
int tg_coll_store_has_symbols(tg_coll_store_t *s, uint64_t id);

/* A bucket's store: the upload of snapshot |id|'s symbols, made on the
 * store's thread (a client of its own: nothing of the store's after),
 * run on any one thread, freed on either. -EOPNOTSUPP for a directory
 * store. run: the index (when |with_index|) then the symbols, each PUT
 * with If-None-Match: *, read from the fds begin gave (synced); 0,
 * -EEXIST (symbols are there already: stored whole before), or the
 * client's error (then no index is left without its symbols). */
typedef struct tg_coll_symput tg_coll_symput_t;
int tg_coll_store_symput_new(tg_coll_store_t *s, uint64_t id,
                             tg_coll_symput_t **out);
int tg_coll_symput_run(tg_coll_symput_t *p, int sfd, int sifd,
                       bool with_index);
void tg_coll_symput_free(tg_coll_symput_t *p); /* NULL-safe */

int tg_coll_store_pin(tg_coll_store_t *s, uint64_t id, bool pinned);
/* Host |host|'s problems in a finished snapshot replaced by |problems|
 * (the catalog's set_problems: "" or a JSON array). */
int tg_coll_store_set_problems(tg_coll_store_t *s, uint64_t id,
                               const char *host, const char *problems);
/* Deletes a snapshot in any state but PENDING (-EBUSY): row, then file. */
int tg_coll_store_delete(tg_coll_store_t *s, uint64_t id);

/* What one retention step did. */
typedef struct tg_coll_retained {
  tg_coll_verdict_t verdict; /* why it went (KEEP: nothing went) */
  uint64_t id, bytes;        /* the snapshot deleted */
  uint64_t total_bytes;      /* live bytes before the step */
} tg_coll_retained_t;

/* One retention step: deletes the snapshot the policy names (retention.h)
 * if it names one (one catalog transaction and one unlink; again, a few times at
 * most, if another collector deleted or pinned it first). Returns 1
 * (deleted one: call again), 0 (nothing to delete) or an error. |out| may
 * be NULL. */
int tg_coll_store_retain(tg_coll_store_t *s, tg_coll_retained_t *out);

/* Rebuilding a lost catalog from a bucket store's sidecars (snap_meta.h;
 * docs/collector.md, "Rebuilding the catalog from the bucket"). What
 * happened to one snapshot of the bucket: */
typedef enum tg_coll_rebuilt {
  TG_COLL_REBUILT_INSERTED,  /* its row inserted from its sidecar */
  TG_COLL_REBUILT_FAILED,    /* its row inserted FAILED (why says) */
  TG_COLL_REBUILT_PRESENT,   /* a row had its id already: left alone */
  TG_COLL_REBUILT_REFUSED,   /* its sidecar refused (why says): no row */
  TG_COLL_REBUILT_NO_SIDECAR /* a trace without a sidecar: no row */
} tg_coll_rebuilt_t;

/* "inserted", "failed", "present", "refused", "no_sidecar". */
const char *tg_coll_rebuilt_name(tg_coll_rebuilt_t r);

/* Called once per snapshot, in id order: the |i|th (from 1) of |total|;
 * |why| is "" unless FAILED or REFUSED. Borrowed for the call. */
typedef void (*tg_coll_rebuild_fn)(void *ctx, uint64_t i, uint64_t total,
                                   uint64_t id, tg_coll_rebuilt_t what,
                                   const char *why);

typedef struct tg_coll_rebuild {
  uint64_t total;      /* snapshots in the bucket (a trace or a sidecar) */
  uint64_t count[TG_COLL_REBUILT_NO_SIDECAR + 1]; /* by tg_coll_rebuilt_t */
  /* The highest id with a row or a verified sidecar (present, inserted,
   * failed): what the catalog's ids were moved past; 0: none. */
  uint64_t max_id;
  /* Ids in the bucket with neither (refused, no_sidecar, or only an
   * index or symbols object): they reserve nothing. */
  uint64_t unreserved;
  uint64_t max_unreserved_id; /* the highest of them; 0: none */
  uint64_t bytes_read; /* of traces, read to check their crc32 */
} tg_coll_rebuild_t;

/* Lists the bucket under the store's prefix and inserts, at its id, the
 * row of every snapshot whose sidecar parses and whose trace object is
 * the sidecar's (size and ETag by HEAD, crc32 by reading it whole); one
 * whose trace is missing or another gets a FAILED row saying why. Then
 * the catalog's allocation goes past the highest id with a row or a
 * verified sidecar: a key's name alone (anyone who may write the bucket
 * can make one) moves nothing, it is counted in |unreserved|. Ids
 * with a row are left alone, so a second run inserts nothing. Returns 0
 * with *out filled (also on error: what was done), -EOPNOTSUPP for a
 * directory store, or the first catalog or bucket error that stopped it
 * (what was inserted stays; run it again). */
int tg_coll_store_rebuild(tg_coll_store_t *s, tg_coll_rebuild_fn fn,
                          void *ctx, tg_coll_rebuild_t *out);

#endif /* TRACEGATE_COLLECTOR_STORE_STORE_H */
