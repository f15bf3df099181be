/* Fuzzes linux.ftrace's reading of kernel bytes (agent/probes/): a format
 * file and a trace_pipe_raw page, both hostile.
 *
 * Input: [flags][format length, u16 LE][format text][page bytes]. Flags
 * bit 0 turns compact_sched on; bits 1-3 pick the fuzzed format's group
 * (groups[]), so that a format named like one of Perfetto's events gets a
 * field plan (ftrace_plan.h) with fuzzed offsets, sizes and layouts; bits
 * 4-7 size the small segments of the second encoding. The fuzzed format
 * joins a real sched_switch format in the table, so pages decode through
 * plans, compact_sched and GenericFtraceEvent alike.
 *
 * Nothing may crash or read outside the page; what is written must decode
 * with protobuf-c; and the page is encoded twice, in one segment (plans,
 * compact_sched in one go) and in segments too small for either (every
 * record field by field through the writer), which must give the same
 * message: the same bytes once protobuf-c packs both (an event split
 * across segments keeps its 4-byte sizes). A bundle of the page twice
 * (two pages of one read) must decode too.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/probes/ftrace_encode.h"
#include "agent/probes/ftrace_format.h"
#include "agent/probes/ftrace_page.h"
#include "pb/trace/trace_packet.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OUT_SIZE (1u << 20)

static const char *const groups[8] = {"fuzz", "sched",        "power",
                                      "irq",  "raw_syscalls", "ftrace",
                                      "task", "block"};

/* Hands out the next |segment| bytes of the same buffer: contiguous
 * output, but never room for a plan's or compact_sched's worst case. */
typedef struct split {
  uint8_t *buf;
  size_t segment;
} split_t;

static int refill(void *ctx, tg_pbw_t *w, size_t min_contiguous) {
  split_t *s = ctx;
  size_t n = s->segment > min_contiguous ? s->segment : min_contiguous;
  if ((size_t)(w->cur - s->buf) + n > OUT_SIZE) return -1;
  w->end = w->cur + n;
  return 0;
}

/* Encodes the page |copies| times into one bundle as
 * TracePacket.ftrace_events; returns the bytes written, or 0 after a
 * writer error. */
static size_t encode(tg_ftrace_encoder_t *enc, uint8_t *out, size_t segment,
                     const tg_ftrace_page_layout_t *layout,
                     const uint8_t *page, size_t plen, int copies) {
  split_t split = {out, segment};
  tg_pbw_t w;
  if (segment)
    tg_pbw_init(&w, out, segment, refill, &split);
  else
    tg_pbw_init(&w, out, OUT_SIZE, NULL, NULL);
  tg_pbw_begin_nested(&w, 1);
  tg_ftrace_bundle_result_t res = {0};
  tg_ftrace_bundle_begin(enc, &w, 0);
  for (int i = 0; i < copies && tg_ftrace_bundle_has_room(enc); i++)
    tg_ftrace_bundle_add_page(enc, &w, layout, page, plen, &res);
  tg_ftrace_bundle_end(enc, &w, res.lost_events);
  tg_pbw_end_nested(&w);
  return tg_pbw_error(&w) ? 0 : (size_t)tg_pbw_written(&w);
}

/* The packet in |buf| as protobuf-c packs it again (every size minimal)
 * into |out|; its length, or 0 if it does not decode. */
static size_t repacked(const uint8_t *buf, size_t n, uint8_t *out) {
  Perfetto__Protos__TracePacket *p =
      perfetto__protos__trace_packet__unpack(NULL, n, buf);
  if (!p) return 0;
  size_t len = perfetto__protos__trace_packet__get_packed_size(p);
  if (len <= OUT_SIZE) perfetto__protos__trace_packet__pack(p, out);
  perfetto__protos__trace_packet__free_unpacked(p, NULL);
  return len <= OUT_SIZE ? len : 0;
}

static const char switch_format[] =
    "name: sched_switch\nID: 372\nformat:\n"
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
    "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
    "\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n"
    "\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n"
    "\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n"
    "\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n"
    "\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n"
    "\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  bool compact = data[0] & 1;
  const char *group = groups[(data[0] >> 1) & 7];
  size_t segment = 4 + 2 * (size_t)(data[0] >> 4);
  size_t flen = (size_t)data[1] | (size_t)data[2] << 8;
  if (flen > size - 3) flen = size - 3;
  /* Exact-size copies, so ASan sees any read past either end. */
  char *fmt_text = malloc(flen ? flen : 1);
  size_t plen = size - 3 - flen;
  uint8_t *page = malloc(plen ? plen : 1);
  static uint8_t *out, *out_split, *re, *re_split;
  if (!out) out = malloc(OUT_SIZE);
  if (!out_split) out_split = malloc(OUT_SIZE);
  if (!re) re = malloc(OUT_SIZE);
  if (!re_split) re_split = malloc(OUT_SIZE);
  if (!fmt_text || !page || !out || !out_split || !re || !re_split) goto done;
  memcpy(fmt_text, data + 3, flen);
  memcpy(page, data + 3 + flen, plen);

  tg_ftrace_page_layout_t layout = {.commit_size = 8, .data_offset = 16,
                                    .page_size = 4096};
  tg_ftrace_table_t table;
  if (tg_ftrace_table_init(&table) != 0) goto done;
  tg_ftrace_format_t f;
  if (tg_ftrace_format_parse(switch_format, sizeof(switch_format) - 1, &f) == 0)
    tg_ftrace_table_add(&table, "sched", &f, false);
  if (tg_ftrace_format_parse(fmt_text, flen, &f) == 0)
    tg_ftrace_table_add(&table, group, &f, false);
  tg_ftrace_header_page_parse(fmt_text, flen, &(tg_ftrace_page_layout_t){0});

  tg_ftrace_encoder_t enc;
  if (tg_ftrace_encoder_init(&enc, &table, compact, layout.page_size) == 0) {
    size_t n = encode(&enc, out, 0, &layout, page, plen, 1);
    if (n) {
      size_t r = repacked(out, n, re);
      if (!r) __builtin_trap();
      size_t n_split = encode(&enc, out_split, segment, &layout, page, plen, 1);
      size_t r_split = n_split ? repacked(out_split, n_split, re_split) : 0;
      if (r_split != r || memcmp(re, re_split, r) != 0) __builtin_trap();
      n = encode(&enc, out, 0, &layout, page, plen, 2);
      if (n && !repacked(out, n, re)) __builtin_trap();
    }
    tg_ftrace_encoder_free(&enc);
  }
  tg_ftrace_table_free(&table);
done:
  free(fmt_text);
  free(page);
  return 0;
}
