/* Fixtures of linux.ftrace's unit tests: format files of the events they
 * share, the table they join, and ring buffer pages built byte by byte as
 * trace_pipe_raw hands them out (ftrace_page.h has the layout). Pages use
 * header_page_fixture's layout: 16-byte header, 8-byte commit. Include
 * after <cmocka.h>.
 */
#ifndef TRACEGATE_TESTS_AGENT_FTRACE_FIXTURES_H
#define TRACEGATE_TESTS_AGENT_FTRACE_FIXTURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "agent/probes/ftrace_encode.h"
#include "agent/probes/ftrace_format.h"

static const char header_page_fixture[] =
    "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
    "\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n"
    "\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
    "\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";

/* The common_* fields every format file starts with. */
#define COMMON_FIELDS                                                        \
  "format:\n"                                                                \
  "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"     \
  "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"     \
  "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n" \
  "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"

/* --- formats ------------------------------------------------------------- */

static const char switch_format[] =
    "name: sched_switch\nID: 372\n" COMMON_FIELDS
    "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
    "\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n"
    "\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n"
    "\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n"
    "\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n"
    "\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n"
    "\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n\n"
    "print fmt: \"prev_comm=%s prev_pid=%d\", REC->prev_comm, REC->prev_pid\n";

static const char waking_format[] =
    "name: sched_waking\nID: 373\n" COMMON_FIELDS
    "\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
    "\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n"
    "\tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;\n"
    "\tfield:int target_cpu;\toffset:32;\tsize:4;\tsigned:1;\n";

static const char sys_enter_format[] =
    "name: sys_enter\nID: 443\n" COMMON_FIELDS
    "\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n"
    "\tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;\n";

static const char print_format[] =
    "name: print\nID: 5\n" COMMON_FIELDS
    "\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n"
    "\tfield:char buf[];\toffset:16;\tsize:0;\tsigned:0;\n";

static inline void add_format(tg_ftrace_table_t *t, const char *group,
                              const char *text) {
  tg_ftrace_format_t f;
  assert_int_equal(tg_ftrace_format_parse(text, strlen(text), &f), 0);
  assert_int_equal(tg_ftrace_table_add(t, group, &f, false), 0);
}

/* --- page builder -------------------------------------------------------- */

typedef struct page {
  uint8_t b[4096];
  size_t off;
} page_t;

static inline void put32(page_t *p, uint32_t v) {
  memcpy(p->b + p->off, &v, 4);
  p->off += 4;
}

static inline void page_init(page_t *p, uint64_t ts) {
  memset(p, 0, sizeof(*p));
  memcpy(p->b, &ts, 8);
  p->off = 16;
}

static inline void page_finish(page_t *p, bool lost) {
  uint64_t commit = (p->off - 16) | (lost ? UINT64_C(1) << 31 : 0);
  memcpy(p->b + 8, &commit, 8);
}

/* A record of |n| bytes (padded to 4) after a |delta| ns gap. */
static inline void rec_data(page_t *p, uint32_t delta, const void *data, size_t n) {
  size_t padded = (n + 3) & ~(size_t)3;
  if (padded <= 28 * 4) {
    put32(p, (uint32_t)(padded / 4) | delta << 5);
  } else {
    put32(p, delta << 5);
    put32(p, (uint32_t)padded + 4);
  }
  memcpy(p->b + p->off, data, n);
  p->off += padded;
}

static inline void rec_extend(page_t *p, uint64_t delta) {
  put32(p, 30u | (uint32_t)(delta & ((1u << 27) - 1)) << 5);
  put32(p, (uint32_t)(delta >> 27));
}

static inline void rec_abs(page_t *p, uint64_t ts) {
  put32(p, 31u | (uint32_t)(ts & ((1u << 27) - 1)) << 5);
  put32(p, (uint32_t)(ts >> 27));
}

static inline void rec_pad(page_t *p, uint32_t len) {
  put32(p, 29u | 1u << 5);
  put32(p, len);
  p->off += len - 4;
}

/* A record with common_type |type|, common_pid |pid| and |n| more bytes. */
static inline size_t event(uint8_t *out, uint16_t type, int32_t pid,
                           const void *body, size_t n) {
  memset(out, 0, 8);
  memcpy(out, &type, 2);
  out[2] = 0x5; /* common_flags */
  memcpy(out + 4, &pid, 4);
  memcpy(out + 8, body, n);
  return 8 + n;
}

#endif /* TRACEGATE_TESTS_AGENT_FTRACE_FIXTURES_H */
