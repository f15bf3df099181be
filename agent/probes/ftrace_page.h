/* One page of a kernel ring buffer as trace_pipe_raw hands it out.
 *
 *   page:   [ timestamp u64 ][ commit (4 or 8) ][ records .............. ]
 *   record: [ type_len:5 | time_delta:27 ][ array[0] ]...
 *
 *   type_len 1..28  data of type_len * 4 bytes right after the header
 *   type_len 0      data length (+4) in array[0], data after it
 *   type_len 29     padding: to the page end (time_delta 0) or array[0]
 *   type_len 30     time extend: delta += array[0] << 27
 *   type_len 31     absolute time stamp: (array[0] << 27) | time_delta
 *
 * The commit word holds the bytes used after the header and, in bits 31
 * and 30, "events were lost before this page" and "the count of them is
 * stored after the data".
 *
 * The bytes are untrusted: every length is checked against the page, and a
 * corrupt record ends the walk with an error (records before it stand).
 * No allocation, no system call.
 */
#ifndef TRACEGATE_PROBES_FTRACE_PAGE_H
#define TRACEGATE_PROBES_FTRACE_PAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "agent/probes/ftrace_format.h"

typedef struct tg_ftrace_page_iter {
  const uint8_t *cur, *end;
  uint64_t ts;
} tg_ftrace_page_iter_t;

typedef struct tg_ftrace_page_header {
  uint64_t ts;       /* of the page's first record */
  uint32_t data_len; /* bytes of records */
  bool lost_events;  /* the kernel dropped events before this page */
} tg_ftrace_page_header_t;

typedef struct tg_ftrace_record {
  uint64_t ts;
  const uint8_t *data; /* the event: common_type first */
  uint32_t len;
} tg_ftrace_record_t;

/* Starts a walk over |page_untrusted| (|len| bytes, as read). Returns 0, or
 * -EBADMSG when the header does not fit or claims more data than |len|. */
int tg_ftrace_page_begin(const tg_ftrace_page_layout_t *layout,
                         const uint8_t *page_untrusted, size_t len,
                         tg_ftrace_page_iter_t *it,
                         tg_ftrace_page_header_t *hdr);

/* Any record: the out-of-line part of tg_ftrace_page_next(). Takes and
 * returns the walk by value, so a caller's iterator and record never have
 * their address taken and can live in registers. */
typedef struct tg__ftrace_page_step {
  tg_ftrace_page_iter_t it;
  tg_ftrace_record_t rec;
  int rv;
} tg__ftrace_page_step_t;
tg__ftrace_page_step_t tg__ftrace_page_next_slow(tg_ftrace_page_iter_t it);

/* The next data record into |rec|: returns 1, 0 at the end of the page, or
 * -EBADMSG on a corrupt record (the walk is then over). Inline for the
 * records that make up a page (type_len 1..28, data up to 112 bytes); time
 * records, padding and longer data take the call. */
static inline int tg_ftrace_page_next(tg_ftrace_page_iter_t *it,
                                      tg_ftrace_record_t *rec) {
  size_t left = (size_t)(it->end - it->cur);
  if (left >= 4) {
    uint32_t h;
    memcpy(&h, it->cur, 4); /* the kernel's byte order is ours */
    uint32_t dlen = (h & 0x1f) * 4;
    if (dlen - 4 < 28 * 4 && dlen <= left - 4) {
      rec->data = it->cur + 4;
      rec->len = dlen;
      it->cur += 4 + dlen;
      it->ts += h >> 5;
      rec->ts = it->ts;
      return 1;
    }
  }
  tg__ftrace_page_step_t step = tg__ftrace_page_next_slow(*it);
  *it = step.it;
  if (step.rv > 0) *rec = step.rec;
  return step.rv;
}

#endif /* TRACEGATE_PROBES_FTRACE_PAGE_H */
