// SPDX-License-Identifier: Apache-2.0
/* The store's bucket half (store_s3.h): the writer's multipart upload and
 * its uploader thread, recovery against the bucket, deletes and reads. */
#include "collector/store/store_s3.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "collector/s3/s3_client.h"
#include "collector/store/snap_index.h"
#include "collector/store/snap_meta.h"
#include "collector/catalog/snapshot_id.h"
#include "collector/store/store_internal.h"
#include "common/fd_write.h"
#include "common/log.h"
#include "common/notice.h"
#include "tracegate/error.h"

#define DEFAULT_PART (8u << 20)
#define MAX_PART (256u << 20)
#define DEFAULT_QUEUE 4u
#define MAX_QUEUE 16u
#define SNAP_DIR "snapshots/"
/* An index larger than this is not one the store wrote. */
#define INDEX_MAX (64u << 20)

struct tg__coll_s3 {
  tg_s3_client_t *c;
  /* Copies of the configuration, for the writers' own clients. */
  char *endpoint, *region, *bucket, *access_key, *secret_key, *ca_file;
  tg_s3_client_config_t ccfg;
  char *prefix; /* "" or ending in '/' */
  size_t part_size;
  unsigned queue_parts;
};

static char *dup_or_null(const char *s, bool *fail) {
  if (!s) return NULL;
  char *d = strdup(s);
  if (!d) *fail = true;
  return d;
}

int tg__coll_s3_open(tg_coll_store_t *s, const tg_coll_s3_config_t *cfg) {
  size_t part = cfg->part_size ? cfg->part_size : DEFAULT_PART;
  unsigned queue = cfg->queue_parts ? cfg->queue_parts : DEFAULT_QUEUE;
  const char *prefix = cfg->prefix ? cfg->prefix : "";
  size_t pl = strlen(prefix);
  if (part < TG_S3_PART_MIN || part > MAX_PART || queue > MAX_QUEUE ||
      pl > 512 || (pl && (prefix[0] == '/' || prefix[pl - 1] != '/')))
    return -EINVAL;
  struct tg__coll_s3 *b = calloc(1, sizeof *b);
  if (!b) return -ENOMEM;
  bool fail = false;
  b->endpoint = dup_or_null(cfg->client.endpoint, &fail);
  b->region = dup_or_null(cfg->client.region, &fail);
  b->bucket = dup_or_null(cfg->client.bucket, &fail);
  b->access_key = dup_or_null(cfg->client.access_key, &fail);
  b->secret_key = dup_or_null(cfg->client.secret_key, &fail);
  b->ca_file = dup_or_null(cfg->client.ca_file, &fail);
  b->prefix = strdup(prefix);
  s->s3 = b;
  if (fail || !b->prefix) return -ENOMEM;
  b->ccfg = cfg->client;
  b->ccfg.endpoint = b->endpoint;
  b->ccfg.region = b->region;
  b->ccfg.bucket = b->bucket;
  b->ccfg.access_key = b->access_key;
  b->ccfg.secret_key = b->secret_key;
  b->ccfg.ca_file = b->ca_file;
  b->part_size = part;
  b->queue_parts = queue;
  int err = tg_s3_client_new(&b->ccfg, &b->c);
  /* The store's clients (writers', fetches', symbols') count into its
   * own client's monitor: the bucket's health is the store's. */
  if (!err && !b->ccfg.monitor) b->ccfg.monitor = tg_s3_client_monitor(b->c);
  return err;
}

void tg__coll_s3_close(tg_coll_store_t *s) {
  struct tg__coll_s3 *b = s->s3;
  if (!b) return;
  tg_s3_client_free(b->c);
  if (b->secret_key) OPENSSL_cleanse(b->secret_key, strlen(b->secret_key));
  free(b->endpoint);
  free(b->region);
  free(b->bucket);
  free(b->access_key);
  free(b->secret_key);
  free(b->ca_file);
  free(b->prefix);
  free(b);
  s->s3 = NULL;
}

/* "<prefix>snapshots/<id>.pftrace" (or .index, .meta, .symbols, .symidx)
 * into |out|. */
static void object_key(const struct tg__coll_s3 *b, uint64_t id,
                       tg__coll_obj_t kind, char out[TG_S3_KEY_MAX + 1]) {
  char name[TG_COLL_FILE_NAME_MAX];
  if (kind == TG__COLL_OBJ_INDEX) {
    tg_coll_id_index_name(id, 0, name);
  } else if (kind == TG__COLL_OBJ_SYMBOLS) {
    tg_coll_id_symbols_name(id, 0, name);
  } else if (kind == TG__COLL_OBJ_SYMIDX) {
    tg_coll_id_symidx_name(id, 0, name);
  } else {
    char idtext[TG_COLL_ID_STRLEN];
    tg_coll_id_format(id, idtext);
    snprintf(name, sizeof name, "%s%s", idtext,
             kind == TG__COLL_OBJ_META ? TG_COLL_META_SUFFIX
                                       : TG_COLL_FILE_SUFFIX);
  }
  snprintf(out, TG_S3_KEY_MAX + 1, "%s" SNAP_DIR "%s", b->prefix, name);
}

void tg__coll_s3_key(tg_coll_store_t *s, uint64_t id, tg__coll_obj_t kind,
                     char out[TG_S3_KEY_MAX + 1]) {
  object_key(s->s3, id, kind, out);
}

tg_s3_client_t *tg__coll_s3_client(tg_coll_store_t *s) { return s->s3->c; }

const char *tg__coll_s3_prefix(tg_coll_store_t *s) { return s->s3->prefix; }

void tg__coll_s3_url(tg_coll_store_t *s, char *out, size_t cap) {
  snprintf(out, cap, "s3://%s/%s", s->s3->bucket, s->s3->prefix);
}

/* --- the writer ------------------------------------------------------- */

typedef struct part_buf {
  uint8_t *p;
  size_t n;
  unsigned part_no;
} part_buf_t;

/* The parts' ETags, in blocks that never move once made (uploaders write
 * into them while the writer makes new ones). */
#define BLOCK_PARTS 256u
#define BLOCKS ((TG_S3_PARTS_MAX + BLOCK_PARTS - 1) / BLOCK_PARTS)

struct tg__coll_s3_writer {
  tg_coll_store_t *store;
  tg_s3_client_t *c; /* the writer's: begin, seal, discard */
  uint64_t id;
  /* What begin recorded, for the sidecar. */
  int64_t started_ms;
  char *trigger, *reason, *origin;
  char key[TG_S3_KEY_MAX + 1];
  char upload_id[TG_S3_UPLOAD_ID_MAX];
  char etag[TG_S3_ETAG_MAX]; /* the sealed object's, from its HEAD */
  size_t part_size;
  part_buf_t fill; /* being filled by write */
  /* Parts waiting or being uploaded; guarded by mu. Up to qmax of them at
   * once, uploaded in parallel by qmax threads, each with its client. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  part_buf_t queue[MAX_QUEUE];
  unsigned qhead, qn, busy, qmax;
  bool stop;
  bool initiated; /* uploader 0 tried to initiate the upload */
  int err; /* the first upload failure; sticky */
  pthread_t th[MAX_QUEUE];
  tg_s3_client_t *tc[MAX_QUEUE];
  unsigned n_threads;
  unsigned n_parts; /* part numbers handed out (the writer's) */
  tg_s3_part_t *blocks[BLOCKS];
  bool sealed;    /* the object exists (completed or PUT) */
  bool indexed;   /* its index object exists */
  bool meta;      /* its sidecar exists */
  bool uploading; /* the multipart upload is open */
};

typedef struct uploader_arg {
  tg__coll_s3_writer_t *w;
  unsigned i;
} uploader_arg_t;

static tg_s3_part_t *part_slot(tg__coll_s3_writer_t *w, unsigned part_no) {
  return &w->blocks[(part_no - 1) / BLOCK_PARTS][(part_no - 1) % BLOCK_PARTS];
}

static void *uploader(void *arg) {
  tg__coll_s3_writer_t *w = ((uploader_arg_t *)arg)->w;
  unsigned i = ((uploader_arg_t *)arg)->i;
  tg_s3_client_t *c = w->tc[i];
  free(arg);
  /* The upload is initiated here, off the store's thread: a bucket that
   * is slow or gone fails the snapshot at its sync, never holds begin. */
  if (i == 0) {
    char id[TG_S3_UPLOAD_ID_MAX];
    /* An object already at the key is another snapshot's (a catalog
     * whose ids fell behind the bucket's: lost, and not rebuilt): a
     * completed upload would replace it, so the snapshot fails instead. */
    int err = tg_s3_head(c, w->key, NULL, NULL);
    if (err == 0) {
      TG_ERROR("store: %s is already in the bucket: the catalog's ids are"
               " behind the bucket's (tracegate-collector --rebuild-catalog"
               " makes it again from the bucket); this snapshot fails",
               w->key);
      err = -EEXIST;
    } else if (err == -ENOENT) {
      err = tg_s3_mpu_create(c, w->key, id);
    }
    pthread_mutex_lock(&w->mu);
    if (err && !w->err) w->err = err;
    if (!err) {
      memcpy(w->upload_id, id, sizeof id);
      w->uploading = true;
    }
    w->initiated = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
  }
  pthread_mutex_lock(&w->mu);
  for (;;) {
    while (!w->initiated || (!w->qn && !w->stop))
      pthread_cond_wait(&w->cv, &w->mu);
    if (!w->qn) break; /* stopped and drained */
    part_buf_t pb = w->queue[w->qhead];
    w->qhead = (w->qhead + 1) % w->qmax;
    w->qn--;
    w->busy++;
    int err = w->err;
    pthread_mutex_unlock(&w->mu);
    tg_s3_part_t *pt = part_slot(w, pb.part_no);
    if (!err)
      err = tg_s3_mpu_part(c, w->key, w->upload_id, pb.part_no, pb.p, pb.n,
                           pt->etag);
    free(pb.p);
    pthread_mutex_lock(&w->mu);
    if (err && !w->err) w->err = err;
    w->busy--;
    pthread_cond_broadcast(&w->cv);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

int tg__coll_s3_begin(tg_coll_store_t *s, uint64_t id,
                      const tg_coll_begin_t *bg, int64_t started_ms,
                      tg__coll_s3_writer_t **out) {
  struct tg__coll_s3 *b = s->s3;
  tg__coll_s3_writer_t *w = calloc(1, sizeof *w);
  if (!w) return -ENOMEM;
  w->store = s;
  w->id = id;
  w->part_size = b->part_size;
  w->qmax = b->queue_parts;
  object_key(b, id, TG__COLL_OBJ_TRACE, w->key);
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  w->started_ms = started_ms;
  w->trigger = strdup(bg->trigger);
  w->reason = strdup(bg->reason ? bg->reason : "");
  w->origin = strdup(bg->origin ? bg->origin : "");
  int err = !w->trigger || !w->reason || !w->origin
                ? -ENOMEM
                : tg_s3_client_new(&b->ccfg, &w->c);
  for (unsigned i = 0; !err && i < w->qmax; i++)
    err = tg_s3_client_new(&b->ccfg, &w->tc[i]);
  for (unsigned i = 0; !err && i < w->qmax; i++) {
    uploader_arg_t *a = malloc(sizeof *a);
    if (!a) {
      err = -ENOMEM;
      break;
    }
    *a = (uploader_arg_t){w, i};
    err = -pthread_create(&w->th[i], NULL, uploader, a);
    if (err) free(a);
    else w->n_threads++;
  }
  if (err) {
    tg__coll_s3_discard(w);
    tg__coll_s3_free(w);
    return err;
  }
  *out = w;
  return 0;
}

/* Hands the filled buffer to the uploaders, waiting for room. */
static int enqueue(tg__coll_s3_writer_t *w) {
  if (w->n_parts >= TG_S3_PARTS_MAX) return -EFBIG;
  unsigned no = w->n_parts + 1;
  tg_s3_part_t **blk = &w->blocks[(no - 1) / BLOCK_PARTS];
  if (!*blk && !(*blk = calloc(BLOCK_PARTS, sizeof **blk))) return -ENOMEM;
  pthread_mutex_lock(&w->mu);
  while (w->qn + w->busy >= w->qmax && !w->err)
    pthread_cond_wait(&w->cv, &w->mu);
  int err = w->err;
  if (!err) {
    w->fill.part_no = no;
    (*blk)[(no - 1) % BLOCK_PARTS].part_no = no;
    w->queue[(w->qhead + w->qn) % w->qmax] = w->fill;
    w->qn++;
    w->n_parts = no;
    w->fill = (part_buf_t){0};
    pthread_cond_broadcast(&w->cv);
  }
  pthread_mutex_unlock(&w->mu);
  return err;
}

int tg__coll_s3_write(tg__coll_s3_writer_t *w, const void *p, size_t n) {
  if (w->sealed || !w->n_threads) return -EINVAL;
  pthread_mutex_lock(&w->mu);
  int err = w->err;
  pthread_mutex_unlock(&w->mu);
  if (err) return err;
  const uint8_t *src = p;
  while (n) {
    if (!w->fill.p && !(w->fill.p = malloc(w->part_size))) return -ENOMEM;
    size_t k = w->part_size - w->fill.n;
    if (k > n) k = n;
    memcpy(w->fill.p + w->fill.n, src, k);
    w->fill.n += k;
    src += k;
    n -= k;
    if (w->fill.n == w->part_size && (err = enqueue(w))) return err;
  }
  return 0;
}

static int stop_uploader(tg__coll_s3_writer_t *w) {
  if (!w->n_threads) return w->err;
  pthread_mutex_lock(&w->mu);
  w->stop = true;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  for (unsigned i = 0; i < w->n_threads; i++) pthread_join(w->th[i], NULL);
  w->n_threads = 0;
  return w->err;
}

/* The index, written by its builder into memory, then PUT. */
static int put_index(tg__coll_s3_writer_t *w,
                     const tg_coll_index_builder_t *index, uint64_t bytes) {
  const char *why = tg_coll_index_why(index);
  if (why) {
    TG_WARN("store: snapshot %016llx: stored without its host index (%s):"
            " its hosts' parts cannot be served alone, the whole trace can",
            (unsigned long long)w->id, why);
    return 0;
  }
  int fd = memfd_create("tg-index", MFD_CLOEXEC);
  if (fd < 0) return -errno;
  int err = tg_coll_index_write(index, fd, bytes);
  struct stat st;
  uint8_t *buf = NULL;
  if (!err && fstat(fd, &st) != 0) err = -errno;
  if (!err && (st.st_size <= 0 || (uint64_t)st.st_size > INDEX_MAX)) err = -EFBIG;
  if (!err && !(buf = malloc((size_t)st.st_size))) err = -ENOMEM;
  if (!err && pread(fd, buf, (size_t)st.st_size, 0) != st.st_size) err = -EIO;
  close(fd);
  char key[TG_S3_KEY_MAX + 1];
  object_key(w->store->s3, w->id, TG__COLL_OBJ_INDEX, key);
  if (!err) err = tg_s3_put(w->c, key, buf, (size_t)st.st_size, true, NULL);
  free(buf);
  if (!err) w->indexed = true;
  else
    TG_WARN("store: snapshot %016llx: stored without its host index (%s):"
            " its hosts' parts cannot be served alone, the whole trace can",
            (unsigned long long)w->id, tg_strerror(err));
  return 0; /* as in the directory store: the snapshot stands without it */
}

int tg__coll_s3_seal(tg__coll_s3_writer_t *w,
                     const tg_coll_index_builder_t *index, uint64_t bytes) {
  if (w->sealed) return 0;
  int err = 0;
  /* The tail is the last part; a snapshot of no bytes is an empty object
   * (a multipart upload needs a part, and S3 may refuse an empty one). */
  if (w->fill.n) err = enqueue(w);
  int uerr = stop_uploader(w);
  if (!err) err = uerr;
  if (err) return err;
  if (w->n_parts == 0) {
    if ((err = tg_s3_mpu_abort(w->c, w->key, w->upload_id)) && err != -ENOENT)
      return err;
    w->uploading = false;
    if ((err = tg_s3_put(w->c, w->key, NULL, 0, true, NULL))) return err;
  } else {
    tg_s3_part_t *parts = malloc(w->n_parts * sizeof *parts);
    if (!parts) return -ENOMEM;
    for (unsigned i = 0; i < w->n_parts; i++) parts[i] = *part_slot(w, i + 1);
    err = tg_s3_mpu_complete(w->c, w->key, w->upload_id, parts, w->n_parts,
                             NULL);
    free(parts);
    if (err) return err;
    w->uploading = false;
  }
  w->sealed = true;
  uint64_t size = 0;
  if ((err = tg_s3_head(w->c, w->key, &size, w->etag))) return err;
  if (size != bytes) {
    TG_ERROR("store: snapshot %016llx: the bucket holds %llu bytes of the %llu"
             " written", (unsigned long long)w->id, (unsigned long long)size,
             (unsigned long long)bytes);
    return -EIO;
  }
  if (index) put_index(w, index, bytes);
  return 0;
}

int tg__coll_s3_put_meta(tg__coll_s3_writer_t *w, const tg_coll_finish_t *f) {
  if (!w->sealed) return -EINVAL;
  tg_coll_begin_t b = {w->trigger, w->reason, w->origin};
  tg_coll_meta_in_t in = {.id = w->id, .started_ms = w->started_ms,
                          .begin = &b, .finish = f, .etag = w->etag,
                          .index = w->indexed};
  char *text = NULL;
  size_t n = 0;
  int err = tg_coll_meta_format(&in, &text, &n);
  char key[TG_S3_KEY_MAX + 1];
  object_key(w->store->s3, w->id, TG__COLL_OBJ_META, key);
  /* If-None-Match: a sidecar already there is another writer's (ids are
   * never reused by one catalog): refused, never overwritten. */
  if (!err) err = tg_s3_put(w->c, key, text, n, true, NULL);
  free(text);
  if (!err) w->meta = true;
  return err;
}

/* The row and its hosts, read whole (the host count first). */
static int read_row(tg_coll_store_t *s, uint64_t id, tg_coll_snapshot_t *row,
                    tg_coll_host_t **hosts, size_t *n) {
  size_t cap = 0;
  *hosts = NULL;
  for (int tries = 0; tries < 4; tries++) {
    int err = s->cat->ops->get_with_hosts(s->cat, id, row, *hosts, cap, n);
    if (err || *n <= cap) return err;
    free(*hosts);
    cap = *n;
    if (!(*hosts = calloc(cap, sizeof(**hosts)))) return -ENOMEM;
  }
  return -EBUSY; /* its hosts kept changing */
}

void tg__coll_s3_refresh_meta(tg_coll_store_t *s, uint64_t id) {
  tg_coll_snapshot_t row;
  tg_coll_host_t *hosts = NULL;
  tg_coll_host_result_t *res = NULL;
  char *text = NULL;
  size_t n = 0, len = 0;
  char key[TG_S3_KEY_MAX + 1], etag[TG_S3_ETAG_MAX] = "";
  object_key(s->s3, id, TG__COLL_OBJ_META, key);
  int err = read_row(s, id, &row, &hosts, &n);
  if (err == -ENOENT ||
      (!err && !(TG_COLL_STATE_BIT(row.state) & TG_COLL_LIVE_STATES)))
    goto out; /* no sidecar to keep */
  if (!err && n && !(res = calloc(n, sizeof(*res)))) err = -ENOMEM;
  for (size_t i = 0; !err && i < n; i++)
    res[i] = (tg_coll_host_result_t){
        .host = hosts[i].host, .name = hosts[i].name,
        .outcome = hosts[i].outcome, .error = hosts[i].error,
        .problems = hosts[i].problems, .boost = hosts[i].boost,
        .links = hosts[i].links, .bytes = hosts[i].bytes,
        .packets = hosts[i].packets, .loss = hosts[i].loss,
        .window_first_ms = hosts[i].window_first_ms,
        .window_last_ms = hosts[i].window_last_ms};
  /* What the sidecar said of its objects stays: the trace's ETag and
   * whether an index was stored are not in the row. */
  char trace[TG_S3_KEY_MAX + 1], index[TG_S3_KEY_MAX + 1];
  object_key(s->s3, id, TG__COLL_OBJ_TRACE, trace);
  object_key(s->s3, id, TG__COLL_OBJ_INDEX, index);
  if (!err) err = tg_s3_head(s->s3->c, trace, NULL, etag);
  int ierr = err ? 0 : tg_s3_head(s->s3->c, index, NULL, NULL);
  if (ierr && ierr != -ENOENT) err = ierr;
  if (!err) {
    tg_coll_begin_t b = {row.trigger, row.reason, row.origin};
    tg_coll_finish_t f = {.bytes = row.bytes, .crc32 = row.crc32,
                          .packets = row.packets, .hosts = res,
                          .n_hosts = n, .finished_ms = row.finished_ms};
    tg_coll_meta_in_t in = {.id = id, .pinned = row.pinned,
                            .started_ms = row.started_ms, .begin = &b,
                            .finish = &f, .etag = etag, .index = ierr == 0};
    err = tg_coll_meta_format(&in, &text, &len);
  }
  if (!err) err = tg_s3_put(s->s3->c, key, text, len, false, NULL);
  if (err)
    TG_WARN("store: %s: not written again (%s): a catalog rebuilt from the"
            " bucket would miss this row's last pin or problems",
            key, tg_strerror(err));
out:
  free(text);
  free(res);
  free(hosts);
}

void tg__coll_s3_discard(tg__coll_s3_writer_t *w) {
  stop_uploader(w);
  int err = 0;
  if (w->uploading) {
    err = tg_s3_mpu_abort(w->c, w->key, w->upload_id);
    if (!err || err == -ENOENT) w->uploading = false;
  }
  if (w->sealed && (err = tg_s3_delete(w->c, w->key)) == 0) w->sealed = false;
  if (w->indexed) {
    char key[TG_S3_KEY_MAX + 1];
    object_key(w->store->s3, w->id, TG__COLL_OBJ_INDEX, key);
    if ((err = tg_s3_delete(w->c, key)) == 0) w->indexed = false;
  }
  if (w->meta) {
    char key[TG_S3_KEY_MAX + 1];
    object_key(w->store->s3, w->id, TG__COLL_OBJ_META, key);
    if ((err = tg_s3_delete(w->c, key)) == 0) w->meta = false;
  }
  if (w->uploading || w->sealed || w->indexed || w->meta)
    TG_WARN("store: snapshot %016llx: its upload or objects stay in the bucket"
            " until the next start removes them: %s",
            (unsigned long long)w->id, tg_strerror(err));
}

void tg__coll_s3_free(tg__coll_s3_writer_t *w) {
  if (!w) return;
  stop_uploader(w);
  free(w->fill.p);
  for (unsigned i = 0; i < w->qn; i++) free(w->queue[(w->qhead + i) % w->qmax].p);
  for (unsigned i = 0; i < BLOCKS; i++) free(w->blocks[i]);
  for (unsigned i = 0; i < MAX_QUEUE; i++) tg_s3_client_free(w->tc[i]);
  tg_s3_client_free(w->c);
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  free(w->trigger);
  free(w->reason);
  free(w->origin);
  free(w);
}

/* --- recovery, delete, reads ----------------------------------------- */

/* The id of a key under <prefix>snapshots/: 0 and *id, *kind; -1 for a
 * key that is not a snapshot's. */
static int parse_key(const struct tg__coll_s3 *b, const char *key,
                     uint64_t *id, tg__coll_obj_t *kind) {
  size_t pl = strlen(b->prefix);
  if (strncmp(key, b->prefix, pl) != 0 ||
      strncmp(key + pl, SNAP_DIR, strlen(SNAP_DIR)) != 0)
    return -1;
  const char *name = key + pl + strlen(SNAP_DIR);
  if (tg_coll_id_parse_file_name(name, 0, id) == 0) {
    *kind = TG__COLL_OBJ_TRACE;
    return 0;
  }
  if (tg_coll_id_parse_index_name(name, 0, id) == 0) {
    *kind = TG__COLL_OBJ_INDEX;
    return 0;
  }
  if (tg_coll_id_parse_symbols_name(name, 0, id) == 0) {
    *kind = TG__COLL_OBJ_SYMBOLS;
    return 0;
  }
  if (tg_coll_id_parse_symidx_name(name, 0, id) == 0) {
    *kind = TG__COLL_OBJ_SYMIDX;
    return 0;
  }
  size_t n = strlen(name);
  if (n == TG_COLL_ID_DIGITS + strlen(TG_COLL_META_SUFFIX) &&
      !strcmp(name + TG_COLL_ID_DIGITS, TG_COLL_META_SUFFIX) &&
      tg_coll_id_parse(name, TG_COLL_ID_DIGITS, id) == 0) {
    *kind = TG__COLL_OBJ_META;
    return 0;
  }
  return -1;
}

int tg__coll_s3_parse_key(tg_coll_store_t *s, const char *key, uint64_t *id,
                          tg__coll_obj_t *kind) {
  return parse_key(s->s3, key, id, kind);
}

typedef struct sweep {
  tg_coll_store_t *s;
  tg_coll_recovery_t *rec;
  /* Collected first, acted on after the listing (a listing's pages must
   * not shift under it). */
  char (*keys)[TG_S3_KEY_MAX + 1];
  char (*ids)[TG_S3_UPLOAD_ID_MAX];
  size_t n, cap;
  int err;
} sweep_t;

static int collect(sweep_t *sw, const char *key, const char *upload_id) {
  if (sw->n == sw->cap) {
    size_t cap = sw->cap ? sw->cap * 2 : 16;
    void *k = realloc(sw->keys, cap * sizeof *sw->keys);
    if (!k) return -ENOMEM;
    sw->keys = k;
    if (upload_id) {
      void *i = realloc(sw->ids, cap * sizeof *sw->ids);
      if (!i) return -ENOMEM;
      sw->ids = i;
    }
    sw->cap = cap;
  }
  snprintf(sw->keys[sw->n], sizeof sw->keys[0], "%s", key);
  if (upload_id) snprintf(sw->ids[sw->n], sizeof sw->ids[0], "%s", upload_id);
  sw->n++;
  return 0;
}

/* An upload whose row is not PENDING (written by a running collector) is
 * an interrupted one: aborted. */
static int on_upload(void *ctx, const tg_s3_upload_t *u) {
  sweep_t *sw = ctx;
  uint64_t id;
  tg__coll_obj_t kind;
  if (parse_key(sw->s->s3, u->key, &id, &kind) != 0 ||
      kind != TG__COLL_OBJ_TRACE)
    return 0; /* not a snapshot's: not ours to abort */
  if (tg__coll_row_keeps(sw->s, id, TG_COLL_STATE_BIT(TG_COLL_PENDING)))
    return 0;
  return collect(sw, u->key, u->upload_id);
}

/* Objects without any row named one by one in the log; past that, only
 * counted. */
#define UNROWED_NAMED 8

/* An object stays if its row is live, or PENDING (completed by a running
 * collector, not yet committed); one whose row is FAILED is garbage. One
 * with no row at all stays too: a catalog that was lost, or replaced by an
 * empty one, must not cost the bucket its snapshots (the bucket is the
 * durable part), so what no row names is the operator's to judge, never
 * this sweep's. */
static int on_object(void *ctx, const tg_s3_object_t *o) {
  sweep_t *sw = ctx;
  uint64_t id;
  tg__coll_obj_t kind;
  if (parse_key(sw->s->s3, o->key, &id, &kind) != 0) {
    TG_WARN("store: %s in the bucket is not a snapshot; left alone", o->key);
    sw->rec->foreign++;
    return 0;
  }
  tg_coll_snapshot_t r;
  int err = sw->s->cat->ops->get(sw->s->cat, id, &r);
  if (err == -ENOENT) {
    if (sw->rec->unrowed_kept++ < UNROWED_NAMED)
      TG_WARN("%s store: %s in the bucket has no row in the catalog; kept",
              TG_NOTE(COLLECTOR_BUCKET_UNROWED), o->key);
    return 0;
  }
  /* A catalog error keeps it too: the next open tries again. */
  if (err) return 0;
  if (TG_COLL_STATE_BIT(r.state) &
      (TG_COLL_LIVE_STATES | TG_COLL_STATE_BIT(TG_COLL_PENDING)))
    return 0;
  return collect(sw, o->key, NULL);
}

static int check_object(tg_coll_store_t *s, const tg_coll_snapshot_t *r,
                        tg_coll_recovery_t *rec) {
  char key[TG_S3_KEY_MAX + 1];
  object_key(s->s3, r->id, TG__COLL_OBJ_TRACE, key);
  uint64_t size = 0;
  int err = tg_s3_head(s->s3->c, key, &size, NULL);
  const char *why = NULL;
  if (err == -ENOENT) why = "object missing at open";
  else if (err) return err;
  else if (size != r->bytes) why = "object of the wrong size at open";
  if (!why) return 0;
  err = s->cat->ops->lose(s->cat, r->id, why);
  if (err == -ENOENT || err == -EINVAL) return 0; /* changed meanwhile */
  if (err) return err;
  TG_ERROR("store: snapshot %016llx: %s; marked failed",
           (unsigned long long)r->id, why);
  tg__coll_s3_remove(s, r->id);
  rec->lost++;
  return 0;
}

int tg__coll_s3_recover(tg_coll_store_t *s, tg_coll_recovery_t *rec) {
  struct tg__coll_s3 *b = s->s3;
  char prefix[TG_S3_KEY_MAX + 1];
  snprintf(prefix, sizeof prefix, "%s" SNAP_DIR, b->prefix);
  sweep_t sw = {.s = s, .rec = rec};
  int err = tg_s3_mpu_list(b->c, prefix, on_upload, &sw);
  for (size_t i = 0; !err && i < sw.n; i++) {
    int e = tg_s3_mpu_abort(b->c, sw.keys[i], sw.ids[i]);
    if (e && e != -ENOENT) err = e;
    else {
      rec->uploads_aborted++;
      TG_INFO("store: aborted the interrupted upload of %s", sw.keys[i]);
    }
  }
  free(sw.ids);
  sw.ids = NULL;
  sw.n = 0;
  if (!err) err = tg_s3_list(b->c, prefix, on_object, &sw);
  for (size_t i = 0; !err && i < sw.n; i++) {
    if ((err = tg_s3_delete(b->c, sw.keys[i]))) break;
    rec->orphans_removed++;
    TG_INFO("store: removed %s from the bucket", sw.keys[i]);
  }
  free(sw.keys);
  if (err) return err;
  return tg__coll_each_row(s, TG_COLL_LIVE_STATES, check_object, rec);
}

void tg__coll_s3_remove(tg_coll_store_t *s, uint64_t id) {
  char key[TG_S3_KEY_MAX + 1];
  /* The symbols first: a reader takes the trace's object as the sign the
   * snapshot is there, never the symbols'. */
  static const tg__coll_obj_t kinds[] = {
      TG__COLL_OBJ_SYMBOLS, TG__COLL_OBJ_SYMIDX, TG__COLL_OBJ_TRACE,
      TG__COLL_OBJ_INDEX, TG__COLL_OBJ_META};
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
    object_key(s->s3, id, kinds[i], key);
    int err = tg_s3_delete(s->s3->c, key);
    if (err)
      TG_WARN("store: %s: delete: %s (removed at the next open)", key,
              tg_strerror(err));
  }
}

int tg__coll_s3_presign(tg_coll_store_t *s, uint64_t id, int64_t now_s,
                        uint32_t expires_s, char *url, size_t cap) {
  char key[TG_S3_KEY_MAX + 1];
  object_key(s->s3, id, TG__COLL_OBJ_TRACE, key);
  return tg_s3_presign_get(s->s3->c, key, now_s, expires_s, url, cap);
}

static int to_fd(void *ctx, const void *p, size_t n) {
  return tg_write_all(*(int *)ctx, p, n);
}

struct tg_coll_fetch {
  tg_s3_client_t *c;
  int dir_fd; /* tmp/, dup()ed */
  char key[TG_S3_KEY_MAX + 1], index_key[TG_S3_KEY_MAX + 1];
  char sym_key[TG_S3_KEY_MAX + 1], symidx_key[TG_S3_KEY_MAX + 1];
};

int tg__coll_s3_fetch_new(tg_coll_store_t *s, uint64_t id,
                          tg_coll_fetch_t **out) {
  tg_coll_fetch_t *f = calloc(1, sizeof *f);
  if (!f) return -ENOMEM;
  f->dir_fd = fcntl(s->tmp_fd, F_DUPFD_CLOEXEC, 0);
  int err = f->dir_fd < 0 ? -errno : tg_s3_client_new(&s->s3->ccfg, &f->c);
  if (err) {
    tg_coll_fetch_free(f);
    return err;
  }
  object_key(s->s3, id, TG__COLL_OBJ_TRACE, f->key);
  object_key(s->s3, id, TG__COLL_OBJ_INDEX, f->index_key);
  object_key(s->s3, id, TG__COLL_OBJ_SYMBOLS, f->sym_key);
  object_key(s->s3, id, TG__COLL_OBJ_SYMIDX, f->symidx_key);
  *out = f;
  return 0;
}

/* Object |key| into an unnamed file under |dir_fd|, at offset 0. */
static int get_to_tmpfile(tg_s3_client_t *c, int dir_fd, const char *key,
                          int *fd) {
  int t = openat(dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (t < 0) return -errno;
  int err = tg_s3_get(c, key, 0, 0, to_fd, &t);
  if (!err && lseek(t, 0, SEEK_SET) != 0) err = -errno;
  if (err) {
    close(t);
    return err;
  }
  *fd = t;
  return 0;
}

int tg_coll_fetch_run(tg_coll_fetch_t *f, int *fd) {
  return get_to_tmpfile(f->c, f->dir_fd, f->key, fd);
}

int tg_coll_fetch_index(tg_coll_fetch_t *f, int *fd) {
  return get_to_tmpfile(f->c, f->dir_fd, f->index_key, fd);
}

int tg_coll_fetch_has_symbols(tg_coll_fetch_t *f) {
  return tg_s3_head(f->c, f->sym_key, NULL, NULL);
}

/* The index after the symbols: the symbols object is written last
 * (store_symbols.c), so an index read after it is the one stored with
 * it, or none. */
int tg_coll_fetch_symbols(tg_coll_fetch_t *f, int *sfd, int *sifd) {
  int err = get_to_tmpfile(f->c, f->dir_fd, f->sym_key, sfd);
  if (err) return err;
  err = get_to_tmpfile(f->c, f->dir_fd, f->symidx_key, sifd);
  if (err == -ENOENT) {
    *sifd = -1;
    err = 0;
  }
  if (err) {
    close(*sfd);
    *sfd = -1;
  }
  return err;
}

void tg_coll_fetch_free(tg_coll_fetch_t *f) {
  if (!f) return;
  tg_s3_client_free(f->c);
  if (f->dir_fd >= 0) close(f->dir_fd);
  free(f);
}

int tg__coll_s3_client_new(tg_coll_store_t *s, tg_s3_client_t **out) {
  return tg_s3_client_new(&s->s3->ccfg, out);
}

int tg__coll_s3_open_object(tg_coll_store_t *s, uint64_t id, bool index,
                            int *fd) {
  char key[TG_S3_KEY_MAX + 1];
  object_key(s->s3, id, index ? TG__COLL_OBJ_INDEX : TG__COLL_OBJ_TRACE, key);
  return get_to_tmpfile(s->s3->c, s->tmp_fd, key, fd);
}
