/* See direct_write.h.
 *
 * The blocks form a ring: [head, head + n_queued) are queued for the
 * thread in file order (the one at head is being written), the caller
 * fills the next one. The caller waits only when all of them are queued.
 *
 * The caller fills a block with streaming stores (x86's non-temporal
 * moves) where it can: the device read the block's lines the last time
 * round, and an ordinary store must first take each line back from it
 * (a read of the line for ownership); a streaming store of a whole line
 * skips that, and the lines, never read again here, do not evict the
 * caller's data from the cache (docs/operations.md has the figures). A
 * line must not mix ordinary
 * and streaming stores (that is slower than either), so the end of each
 * append that does not fill its line waits in |line| until the next
 * append fills it; only a block's last partial line is copied the
 * ordinary way, when the block is handed over. Streaming stores are not
 * ordered by the mutex: submit() fences them first.
 * The thread owns |direct| and the stats it counts; the mutex guards
 * head, n_queued, the queued lengths and quit; err is atomic so that an
 * append can see it without the lock.
 */
#include "common/direct_write.h"
#include "common/direct_write_test.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/log.h"

/* Every logical block size in use divides it; blocks and the file's
 * offset stay multiples of it. */
#define ALIGN 4096u

_Static_assert(TG_DIRECT_WRITE_BLOCK % ALIGN == 0, "blocks must stay aligned");
_Static_assert(TG_DIRECT_WRITE_BUFS >= 2, "the caller fills one block while "
                                          "the thread writes another");

struct tg_direct_writer {
  int fd;
  int flags; /* the fd's status flags before start, O_DIRECT cleared */
  uint8_t *blk[TG_DIRECT_WRITE_BUFS];
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t to_writer, to_caller;
  /* Under mu. */
  unsigned head, n_queued;
  size_t queued_len[TG_DIRECT_WRITE_BUFS];
  bool quit;
  /* First error; nothing is written after it. */
  atomic_int err;
  atomic_bool refuse_next; /* test hook */
  /* The thread's. */
  bool direct;
  /* The caller's. */
  unsigned fill;
  size_t fill_len; /* bytes of the block filled, |line|'s included */
  /* The block's last partial line, not yet stored: its bytes belong at
   * fill_len - line_len, a multiple of 64. */
  _Alignas(64) uint8_t line[64];
  size_t line_len;
  bool finished;
  tg_direct_write_stats_t st;
};

static atomic_int n_writers;

static int set_flags(int fd, int flags) {
  return fcntl(fd, F_SETFL, flags) < 0 ? -errno : 0;
}

/* Writes |len| bytes at the file's offset: with O_DIRECT while the file
 * system takes it, through the page cache from the first refusal on (and
 * for a last block that is not a multiple of ALIGN). */
static int write_block(tg_direct_writer_t *w, const uint8_t *p, size_t len) {
  if (w->direct && len % ALIGN) {
    int rv = set_flags(w->fd, w->flags);
    if (rv < 0) return rv;
    w->direct = false;
  }
  bool was_direct = w->direct;
  size_t done = 0;
  while (done < len) {
    ssize_t r;
    if (w->direct && atomic_exchange(&w->refuse_next, false)) {
      r = -1;
      errno = EINVAL;
    } else {
      r = write(w->fd, p + done, len - done);
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EINVAL && w->direct) {
      /* The file system will not (or no longer) write this directly: a
       * short write left an unaligned rest, or it refuses for this file.
       * The same bytes go through the page cache instead. */
      int rv = set_flags(w->fd, w->flags);
      if (rv < 0) return rv;
      w->direct = false;
      TG_INFO("fd %d: direct writes refused (EINVAL) at block %llu; the rest "
              "of the file goes through the page cache", w->fd,
              (unsigned long long)(w->st.blocks_direct +
                                   w->st.blocks_buffered));
      continue;
    }
    if (r < 0) return -errno;
    if (r == 0) return -EIO; /* a regular file never takes nothing */
    done += (size_t)r;
  }
  if (was_direct && w->direct) w->st.blocks_direct++;
  else w->st.blocks_buffered++;
  return 0;
}

static void *writer_main(void *arg) {
  tg_direct_writer_t *w = arg;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    while (!w->n_queued && !w->quit) pthread_cond_wait(&w->to_writer, &w->mu);
    if (!w->n_queued) break; /* quit, and everything written */
    unsigned i = w->head;
    size_t len = w->queued_len[i];
    pthread_mutex_unlock(&w->mu);
    /* After an error the rest is dropped: the file is failed already, and
     * the caller must never wait for a block nobody frees. */
    if (!atomic_load(&w->err)) {
      int rv = write_block(w, w->blk[i], len);
      if (rv < 0) {
        int none = 0;
        atomic_compare_exchange_strong(&w->err, &none, rv);
      }
    }
    pthread_mutex_lock(&w->mu);
    w->head = (w->head + 1) % TG_DIRECT_WRITE_BUFS;
    w->n_queued--;
    pthread_cond_signal(&w->to_caller);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

/* A block on a 2 MiB boundary, asked for in transparent huge pages: each
 * direct write pins the block's pages for the device, one by one when
 * they are 4 KiB, and the caller's stores walk it a TLB entry per page.
 * A fresh huge page costs more to fault in on some VMs (the trace
 * buffer's comment in service/trace_buffer.c), once here: the blocks are
 * reused for the writer's life. Where the kernel gives none, 4 KiB pages
 * serve the same. */
#define HUGE_PAGE (2u << 20)

static void *block_alloc(void) {
  size_t len = TG_DIRECT_WRITE_BLOCK + HUGE_PAGE;
  uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return NULL;
  uintptr_t at = ((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
  size_t head = at - (uintptr_t)m, tail = len - head - TG_DIRECT_WRITE_BLOCK;
  if (head) munmap(m, head);
  if (tail) munmap((uint8_t *)at + TG_DIRECT_WRITE_BLOCK, tail);
  (void)madvise((void *)at, TG_DIRECT_WRITE_BLOCK, MADV_HUGEPAGE);
  return (void *)at;
}

static void free_blocks(tg_direct_writer_t *w) {
  for (unsigned i = 0; i < TG_DIRECT_WRITE_BUFS; i++)
    if (w->blk[i]) munmap(w->blk[i], TG_DIRECT_WRITE_BLOCK);
}

int tg_direct_writer_start(int fd, tg_direct_writer_t **out) {
  *out = NULL;
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) return -EINVAL;
  off_t at = lseek(fd, 0, SEEK_CUR);
  if (at < 0 || at % ALIGN) return -EINVAL;
  int cur = atomic_load(&n_writers);
  do {
    if (cur >= TG_DIRECT_WRITE_MAX) return -EBUSY;
  } while (!atomic_compare_exchange_weak(&n_writers, &cur, cur + 1));

  int rv = -ENOMEM;
  tg_direct_writer_t *w = calloc(1, sizeof(*w));
  if (!w) goto fail;
  for (unsigned i = 0; i < TG_DIRECT_WRITE_BUFS; i++) {
    if (!(w->blk[i] = block_alloc())) goto fail;
  }
  w->fd = fd;
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0) {
    rv = -errno;
    goto fail;
  }
  w->flags = flags & ~O_DIRECT;
  /* A file system without direct I/O refuses the flag here (EINVAL). */
  if (set_flags(fd, w->flags | O_DIRECT) < 0) {
    rv = -EINVAL;
    goto fail;
  }
  w->direct = true;
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->to_writer, NULL);
  pthread_cond_init(&w->to_caller, NULL);
  if ((rv = -pthread_create(&w->thread, NULL, writer_main, w)) < 0) {
    pthread_cond_destroy(&w->to_caller);
    pthread_cond_destroy(&w->to_writer);
    pthread_mutex_destroy(&w->mu);
    set_flags(fd, w->flags);
    goto fail;
  }
  *out = w;
  return 0;

fail:
  if (w) {
    free_blocks(w);
    free(w);
  }
  atomic_fetch_sub(&n_writers, 1);
  return rv;
}

#if defined(__SSE2__)
/* One 64-byte line from |s| (any alignment) to |d| (line-aligned). */
static inline void stream_line(uint8_t *d, const uint8_t *s) {
  __m128i a = _mm_loadu_si128((const __m128i *)s);
  __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
  __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
  __m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
  _mm_stream_si128((__m128i *)d, a);
  _mm_stream_si128((__m128i *)(d + 16), b);
  _mm_stream_si128((__m128i *)(d + 32), c);
  _mm_stream_si128((__m128i *)(d + 48), e);
}

/* Appends |n| bytes that fit the block: whole lines streamed, a partial
 * one staged in |line|. */
static void fill_block(tg_direct_writer_t *w, const uint8_t *src, size_t n) {
  uint8_t *blk = w->blk[w->fill];
  size_t at = w->fill_len - w->line_len;
  w->fill_len += n;
  while (n) {
    if (w->line_len || n < 64) {
      size_t t = 64 - w->line_len;
      if (t > n) t = n;
      memcpy(w->line + w->line_len, src, t);
      w->line_len += t;
      src += t;
      n -= t;
      if (w->line_len == 64) {
        stream_line(blk + at, w->line);
        at += 64;
        w->line_len = 0;
      }
      continue;
    }
    for (; n >= 64; n -= 64, src += 64, at += 64) stream_line(blk + at, src);
  }
}

/* The staged line into the block, and every streamed store visible
 * before the block changes hands. */
static void seal_block(tg_direct_writer_t *w) {
  memcpy(w->blk[w->fill] + w->fill_len - w->line_len, w->line, w->line_len);
  w->line_len = 0;
  _mm_sfence();
}
#else
static void fill_block(tg_direct_writer_t *w, const uint8_t *src, size_t n) {
  memcpy(w->blk[w->fill] + w->fill_len, src, n);
  w->fill_len += n;
}

static void seal_block(tg_direct_writer_t *w) { (void)w; }
#endif

/* Queues the block being filled (|len| bytes) and moves to the next one,
 * waiting while every block is queued. */
static int submit(tg_direct_writer_t *w, size_t len) {
  seal_block(w);
  pthread_mutex_lock(&w->mu);
  w->queued_len[w->fill] = len;
  w->n_queued++;
  pthread_cond_signal(&w->to_writer);
  if (w->n_queued == TG_DIRECT_WRITE_BUFS) w->st.waits++;
  while (w->n_queued == TG_DIRECT_WRITE_BUFS)
    pthread_cond_wait(&w->to_caller, &w->mu);
  w->fill = (w->head + w->n_queued) % TG_DIRECT_WRITE_BUFS;
  pthread_mutex_unlock(&w->mu);
  w->fill_len = 0;
  return atomic_load(&w->err);
}

int tg_direct_writer_append(tg_direct_writer_t *w, const void *p, size_t n) {
  if (w->finished) return -EINVAL;
  int rv = atomic_load(&w->err);
  const uint8_t *src = p;
  while (n && rv == 0) {
    size_t k = TG_DIRECT_WRITE_BLOCK - w->fill_len;
    if (k > n) k = n;
    fill_block(w, src, k);
    src += k;
    n -= k;
    if (w->fill_len == TG_DIRECT_WRITE_BLOCK)
      rv = submit(w, TG_DIRECT_WRITE_BLOCK);
  }
  return rv;
}

int tg_direct_writer_finish(tg_direct_writer_t *w) {
  if (w->finished) return atomic_load(&w->err);
  if (w->fill_len) submit(w, w->fill_len);
  pthread_mutex_lock(&w->mu);
  w->quit = true;
  pthread_cond_signal(&w->to_writer);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  w->finished = true;
  /* The thread may have left O_DIRECT set; the fd goes back as it was. */
  int rv = set_flags(w->fd, w->flags);
  int none = 0;
  if (rv < 0) atomic_compare_exchange_strong(&w->err, &none, rv);
  return atomic_load(&w->err);
}

const tg_direct_write_stats_t *tg_direct_writer_stats(
    const tg_direct_writer_t *w) {
  return &w->st;
}

void tg_direct_writer_free(tg_direct_writer_t *w) {
  if (!w) return;
  tg_direct_writer_finish(w);
  pthread_cond_destroy(&w->to_caller);
  pthread_cond_destroy(&w->to_writer);
  pthread_mutex_destroy(&w->mu);
  free_blocks(w);
  free(w);
  atomic_fetch_sub(&n_writers, 1);
}

void tg_direct_writer_refuse_next_for_test(tg_direct_writer_t *w) {
  atomic_store(&w->refuse_next, true);
}

const void *tg_direct_writer_block_for_test(const tg_direct_writer_t *w,
                                            unsigned i) {
  return i < TG_DIRECT_WRITE_BUFS ? w->blk[i] : NULL;
}
