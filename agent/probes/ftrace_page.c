/* Ring buffer page walking; see ftrace_page.h. */
#include "agent/probes/ftrace_page.h"

#include <errno.h>
#include <string.h>

#define TYPE_DATA_MAX 28
#define TYPE_PADDING 29
#define TYPE_TIME_EXTEND 30
#define TYPE_TIME_STAMP 31
#define COMMIT_MISSED_EVENTS (1u << 31)
#define COMMIT_FLAGS (3u << 30)
/* An absolute time stamp carries the low 59 bits; the rest comes from the
 * page's own time stamp. */
#define ABS_TS_BITS 59

static uint32_t rd32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, sizeof(v)); /* the kernel's byte order is ours */
  return v;
}

static uint64_t rd64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

int tg_ftrace_page_begin(const tg_ftrace_page_layout_t *layout,
                         const uint8_t *page_untrusted, size_t len,
                         tg_ftrace_page_iter_t *it,
                         tg_ftrace_page_header_t *hdr) {
  size_t off = layout->data_offset;
  if (len < off || off < 8u + layout->commit_size) return -EBADMSG;
  uint64_t commit = layout->commit_size == 8 ? rd64(page_untrusted + 8)
                                             : rd32(page_untrusted + 8);
  uint32_t flags = (uint32_t)commit & COMMIT_FLAGS;
  uint64_t size = commit & ~(uint64_t)COMMIT_FLAGS;
  /* Only the low 32 bits are the commit on 64-bit kernels. */
  size &= 0xffffffffu;
  if (size > len - off) return -EBADMSG;
  hdr->ts = rd64(page_untrusted);
  hdr->data_len = (uint32_t)size;
  hdr->lost_events = (flags & COMMIT_MISSED_EVENTS) != 0;
  it->cur = page_untrusted + off;
  it->end = it->cur + size;
  it->ts = hdr->ts;
  return 0;
}

static int next_record(tg_ftrace_page_iter_t *it, tg_ftrace_record_t *rec) {
  while (it->cur < it->end) {
    size_t left = (size_t)(it->end - it->cur);
    if (left < 4) goto corrupt;
    uint32_t h = rd32(it->cur);
    uint32_t type_len = h & 0x1f;
    uint32_t delta = h >> 5;
    if (type_len == TYPE_PADDING) {
      /* time_delta 0: nothing more on this page. */
      if (delta == 0) {
        it->cur = it->end;
        return 0;
      }
      if (left < 8) goto corrupt;
      uint32_t skip = rd32(it->cur + 4); /* counted from after the header */
      if (skip < 4 || skip > left - 4) goto corrupt;
      it->cur += 4 + skip;
      continue;
    }
    if (type_len == TYPE_TIME_EXTEND) {
      if (left < 8) goto corrupt;
      it->ts += ((uint64_t)rd32(it->cur + 4) << 27) + delta;
      it->cur += 8;
      continue;
    }
    if (type_len == TYPE_TIME_STAMP) {
      if (left < 8) goto corrupt;
      uint64_t abs = ((uint64_t)rd32(it->cur + 4) << 27) | delta;
      it->ts = abs | (it->ts & ~((UINT64_C(1) << ABS_TS_BITS) - 1));
      it->cur += 8;
      continue;
    }
    const uint8_t *data;
    size_t dlen;
    if (type_len == 0) {
      if (left < 8) goto corrupt;
      uint32_t l = rd32(it->cur + 4); /* includes its own 4 bytes */
      if (l < 4 || l > left - 4) goto corrupt;
      data = it->cur + 8;
      dlen = l - 4;
      it->cur += 4 + (size_t)l;
    } else {
      dlen = (size_t)type_len * 4;
      if (dlen > left - 4) goto corrupt;
      data = it->cur + 4;
      it->cur += 4 + dlen;
    }
    it->ts += delta;
    rec->ts = it->ts;
    rec->data = data;
    rec->len = (uint32_t)dlen;
    return 1;
  }
  return 0;
corrupt:
  it->cur = it->end;
  return -EBADMSG;
}

tg__ftrace_page_step_t tg__ftrace_page_next_slow(tg_ftrace_page_iter_t it) {
  tg__ftrace_page_step_t step = {.it = it};
  step.rv = next_record(&step.it, &step.rec);
  return step;
}
