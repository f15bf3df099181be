/* A producer's shared memory buffer: creating it, moving committed chunks
 * into the trace buffers, applying patches, and scraping chunks the
 * producer did not commit (flush timeouts, stop, disconnect).
 *
 * The SMB is the producer's to scribble on: state words are read as
 * snapshots, chunks are copied once and validated only as copies, and a
 * producer may only write into buffers of sessions it takes part in.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "service/producer_port.h"
#include "service/producer_smb.h"
#include "service/session.h"
#include "tracegate/error.h"

/* --- SMB ------------------------------------------------------------------ */

static bool valid_page_size(size_t ps) {
  return ps >= TG_SMB_MIN_PAGE_SIZE && ps <= TG_SMB_MAX_PAGE_SIZE &&
         (ps & (ps - 1)) == 0;
}

/* Size and page size from the session's producers[] entry, else the
 * producer's hints, each validated and clamped (invalid -> defaults). */
static void smb_geometry(const tg_producer_t *p, const tg_session_t *s,
                         size_t *size, size_t *page) {
  size_t sz = p->smb_size_hint, ps = p->page_size_hint;
  const Perfetto__Protos__TraceConfig *cfg = s->config;
  for (size_t i = 0; cfg && i < cfg->n_producers; i++) {
    const Perfetto__Protos__TraceConfig__ProducerConfig *pc = cfg->producers[i];
    if (!pc->producer_name || !p->name || strcmp(pc->producer_name, p->name))
      continue;
    if (pc->has_shm_size_kb && pc->shm_size_kb) sz = (size_t)pc->shm_size_kb * 1024;
    if (pc->has_page_size_kb && pc->page_size_kb) ps = (size_t)pc->page_size_kb * 1024;
  }
  if (!valid_page_size(ps)) ps = TG_SMB_DEFAULT_PAGE_SIZE;
  if (sz == 0) sz = TG_SMB_DEFAULT_SIZE;
  if (sz > TG_SMB_MAX_SIZE) sz = TG_SMB_MAX_SIZE;
  sz -= sz % ps;
  if (sz < ps) sz = ps;
  *size = sz;
  *page = ps;
}

int tg__producer_smb_create(tg_producer_t *p, tg_session_t *s) {
  size_t size, page;
  smb_geometry(p, s, &size, &page);
  int fd = memfd_create("tracegate-smb", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -errno;
  int err;
  if (ftruncate(fd, (off_t)size) < 0) goto fail_errno;
  /* Sealed so the producer cannot shrink it under our mapping (SIGBUS). */
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
    goto fail_errno;
  void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) goto fail_errno;
  tg_smb_init(&p->smb, map, size, page);
  p->smb_map = map;
  p->smb_fd = fd;
  TG_INFO("producer %u (%s, pid %d): SMB %zu KiB, pages of %zu KiB",
          p->ident.producer_id, p->name ? p->name : "?", (int)p->ident.pid,
          size / 1024, page / 1024);
  return 0;
fail_errno:
  err = -errno;
  close(fd);
  return err;
}

/* The producer may write into |buffer_id| only once one of its own
 * instances targeted it (Perfetto's allowed_target_buffers_): the right is
 * granted when the instance is set up and kept after it stops (its last
 * commits and flushes come after), until the session is freed or the
 * producer goes (then it is revoked: its id will come back). Another
 * buffer of the same session is not enough: it belongs to other data
 * sources. */
tg_session_t *tg__producer_allowed_session(tg_producer_t *p, uint32_t buffer_id) {
  if (buffer_id == 0) return NULL;
  tg_session_t *s = tg__session_by_buffer(p->svc, buffer_id);
  if (!s || s->freeing ||
      !tg__session_writer_may(s, p->ident.producer_id, buffer_id))
    return NULL;
  return s;
}

void tg__producer_refused(tg_producer_t *p, const char *what, uint32_t buffer_id,
                          uint32_t writer_id) {
  p->abi_violations++;
  /* Once per producer: a hostile one must not flood the log. */
  if (p->logged_refusal) return;
  p->logged_refusal = true;
  char where[48] = "";
  if (buffer_id || writer_id)
    snprintf(where, sizeof(where), " (buffer %u, writer %u)",
             (unsigned)buffer_id, (unsigned)writer_id);
  TG_WARN("producer %u ('%s', pid %d, uid %u): %s%s; "
          "further refusals are only counted",
          p->ident.producer_id, p->name ? p->name : "", (int)p->ident.pid,
          (unsigned)p->ident.uid, what, where);
}

static bool valid_writer_id(uint32_t writer_id) {
  return writer_id >= 1 && writer_id <= TG_TRACE_BUFFER_MAX_WRITER_ID;
}

/* --- commits and scraping ------------------------------------------------- */

/* A commit or patch for |buffer_id| was refused: the service's total, and
 * the loss of the session that owns the buffer, if any (a buffer of a
 * session that already ended is nobody's loss now). */
static void count_discard(tg_producer_t *p, bool has_buffer, uint32_t buffer_id,
                          bool patch) {
  tg_session_t *owner = has_buffer ? tg__session_by_buffer(p->svc, buffer_id) : NULL;
  if (patch) {
    p->svc->patches_discarded++;
    if (owner) owner->patches_discarded++;
  } else {
    p->svc->chunks_discarded++;
    if (owner) owner->chunks_discarded++;
  }
}

void tg__producer_commit_move(tg_producer_t *p, const tg_commit_move_t *m) {
  tg_service_t *svc = p->svc;
  uint32_t target = m->has_target_buffer ? m->target_buffer : 0;
  tg_session_t *s = tg__producer_allowed_session(p, target);
  tg_trace_buffer_t *tb = s ? tg__session_buffer(s, target) : NULL;
  if (!tb && target && tg__session_by_buffer(svc, target))
    tg__producer_refused(p, "commit into a buffer none of its data sources "
                         "targets", target, 0);

  if (m->has_data) { /* chunk bytes inline (producers without an SMB) */
    if (!tb) {
      count_discard(p, m->has_target_buffer, m->target_buffer, false);
      return;
    }
    if (m->data_len < TG_SMB_CHUNK_HEADER_SIZE ||
        m->data_len > TG_SMB_MAX_PAGE_SIZE) {
      p->abi_violations++;
      tg_trace_buffer_note_abi_violation(tb);
      return;
    }
    tg_trace_buffer_copy_chunk(
        tb, &p->ident, m->data, m->data_len,
        !(m->has_chunk_incomplete && m->chunk_incomplete));
    return;
  }
  if (!p->smb_map || !m->has_page || !m->has_chunk) {
    p->abi_violations++;
    if (tb) tg_trace_buffer_note_abi_violation(tb);
    return;
  }
  tg_smb_chunk_t c;
  int rv = tg_smb_try_acquire_chunk_for_reading(&p->smb, m->page, m->chunk, &c);
  if (rv < 0) {
    /* Not Complete, or out of range: counted where the data was headed. */
    p->abi_violations++;
    if (tb) tg_trace_buffer_note_abi_violation(tb);
    TG_DEBUG("producer %u: commit of page %u chunk %u refused: %s",
             p->ident.producer_id, m->page, m->chunk, tg_strerror(rv));
    return;
  }
  /* The trace buffer copies the bytes once, then validates its copy. */
  if (tb)
    tg_trace_buffer_copy_chunk(tb, &p->ident, c.begin, c.size, true);
  else
    count_discard(p, m->has_target_buffer, m->target_buffer, false);
  tg_smb_release_chunk_as_free(&p->smb, &c);
}

void tg__producer_commit_patch(tg_producer_t *p, const tg_commit_patch_t *cp) {
  uint32_t target = cp->has_target_buffer ? cp->target_buffer : 0;
  tg_session_t *s = tg__producer_allowed_session(p, target);
  tg_trace_buffer_t *tb = s ? tg__session_buffer(s, target) : NULL;
  if (!tb && target && tg__session_by_buffer(p->svc, target))
    tg__producer_refused(p, "patch for a buffer none of its data sources "
                         "targets", target, cp->writer_id);
  else if (tb && !valid_writer_id(cp->writer_id))
    tg__producer_refused(p, "patch with a writer id outside 1..32767", target,
                         cp->writer_id);
  if (!tb || !valid_writer_id(cp->writer_id) || cp->n_patches > 1024) {
    count_discard(p, cp->has_target_buffer, cp->target_buffer, true);
    return;
  }
  uint32_t offsets[64];
  uint8_t data[64][4];
  size_t done = 0;
  tg_commit_iter_t it;
  tg_commit_patch_entries(&it, cp);
  /* Batches of 64; a has_more_patches=false only with the last batch. */
  while (done < cp->n_patches || (done == 0 && cp->n_patches == 0)) {
    size_t n = 0;
    bool bad = false;
    for (; n < 64 && done + n < cp->n_patches; n++) {
      tg_commit_patch_entry_t pt;
      if (tg_commit_next_entry(&it, &pt) != 1 || !pt.has_offset ||
          !pt.has_data || pt.data_len != 4) {
        bad = true;
        break;
      }
      offsets[n] = pt.offset;
      memcpy(data[n], pt.data, 4);
    }
    if (bad) {
      count_discard(p, cp->has_target_buffer, cp->target_buffer, true);
      return;
    }
    done += n;
    bool last = done >= cp->n_patches;
    bool more = last ? (cp->has_has_more_patches && cp->has_more_patches) : true;
    tg_trace_buffer_patch(tb, p->ident.producer_id, (uint16_t)cp->writer_id,
                          cp->chunk_id, offsets, (const uint8_t(*)[4])data, n,
                          more);
    if (n == 0) break;
  }
}

static uint32_t writer_target(const tg_producer_t *p, uint16_t writer_id) {
  for (size_t i = 0; i < p->n_writers; i++)
    if (p->writers[i].writer_id == writer_id) return p->writers[i].target_buffer;
  return 0;
}

/* Scrapes the pages [first, end) (see tg__producer_scrape). */
static void scrape_pages(tg_producer_t *p, tg_session_t *session,
                         size_t first, size_t end) {
  uint8_t copy[TG_SMB_MAX_PAGE_SIZE];
  for (size_t pg = first; pg < end; pg++) {
    uint32_t bm = tg_smb_page_bitmap(&p->smb, pg);
    unsigned layout = tg_smb_bitmap_layout(bm);
    unsigned nchunks = tg_smb_layout_num_chunks(layout);
    for (unsigned ci = 0; ci < nchunks; ci++) {
      unsigned st = tg_smb_bitmap_chunk_state(bm, ci);
      if (st != TG_CHUNK_BEING_WRITTEN && st != TG_CHUNK_COMPLETE) continue;
      tg_smb_chunk_t c;
      if (tg_smb_chunk_locate(&p->smb, pg, ci, bm, &c) < 0) continue;
      memcpy(copy, c.begin, c.size); /* one read of hostile memory */
      uint16_t writer_id = (uint16_t)(copy[4] | (copy[5] << 8));
      uint32_t target = writer_target(p, writer_id);
      if (!target) continue;
      tg_session_t *s = tg__producer_allowed_session(p, target);
      if (!s || (session && s != session)) continue;
      tg_trace_buffer_t *tb = tg__session_buffer(s, target);
      if (tb)
        tg_trace_buffer_scrape_chunk(tb, &p->ident, copy, c.size,
                                     st == TG_CHUNK_COMPLETE);
    }
  }
}

/* Only the pages whose header the producer ever wrote: reading a hole of
 * the memfd through the mapping would allocate it (a read fault on shmem
 * allocates a zeroed page), and a producer that asked for a large SMB but
 * uses a small part of it (the agent's reserve, see agent/smb_arbiter.h)
 * would pay for all of it after the first flush. SEEK_DATA/SEEK_HOLE walk
 * the file's allocated ranges (swapped-out pages count as data, unlike
 * mincore()'s view); a page whose header is in a hole has a zero bitmap,
 * nothing to scrape. Two lseeks per range: the agent's pages form one
 * prefix. The file offset moved is shared with the producer's fd (its
 * own, when it provided the SMB), which Perfetto's and our producers never
 * read or write through. */
void tg__producer_scrape(tg_producer_t *p, tg_session_t *session) {
  if (!p->smb_map) return;
  size_t ps = p->smb.page_size, size = p->smb.num_pages * ps;
  size_t pos = 0;
  while (pos < size) {
    off_t data = lseek(p->smb_fd, (off_t)pos, SEEK_DATA);
    if (data < 0 && errno == ENXIO) return; /* holes to the end */
    off_t hole = data < 0 ? -1 : lseek(p->smb_fd, data, SEEK_HOLE);
    if (hole < 0) { /* cannot tell: read it all */
      scrape_pages(p, session, pos / ps, p->smb.num_pages);
      return;
    }
    size_t first = ((size_t)data + ps - 1) / ps;
    size_t end = ((size_t)hole + ps - 1) / ps;
    if (end > p->smb.num_pages) end = p->smb.num_pages;
    scrape_pages(p, session, first, end);
    pos = end * ps;
  }
}
