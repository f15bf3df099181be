/* What the CLI shows about a trace: the live progress line on a terminal,
 * the loss summary, and TraceStats as a table. */
#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#include "cli/cli.h"

typedef Perfetto__Protos__TraceStats__BufferStats buffer_stats_t;

typedef struct counter {
  const char *name;
  size_t off; /* of a uint64_t in buffer_stats_t */
  bool loss;  /* counted as data loss */
} counter_t;

#define C(field, loss) {#field, offsetof(buffer_stats_t, field), loss}
static const counter_t buffer_counters[] = {
    C(buffer_size, false),
    C(bytes_written, false),
    C(bytes_overwritten, false),
    C(bytes_read, false),
    C(padding_bytes_written, false),
    C(padding_bytes_cleared, false),
    C(chunks_written, false),
    C(chunks_rewritten, false),
    C(chunks_overwritten, true),
    C(chunks_discarded, true),
    C(chunks_read, false),
    C(chunks_committed_out_of_order, false),
    C(write_wrap_count, false),
    C(patches_succeeded, false),
    C(patches_failed, true),
    C(readaheads_succeeded, false),
    C(readaheads_failed, false),
    C(abi_violations, true),
    C(trace_writer_packet_loss, true),
    C(data_loss_read_gap, true),
    C(data_loss_chunk_corrupted, true),
    C(data_loss_orphan_continuation, true),
    C(data_loss_reassembly_gap, true),
    C(data_loss_reassembly_broken_chain, true),
    C(data_loss_overwrite, true),
    C(data_loss_missing_chunks, true),
};
#undef C
#define N_BUFFER_COUNTERS (sizeof(buffer_counters) / sizeof(buffer_counters[0]))

static uint64_t counter_value(const buffer_stats_t *b, const counter_t *c) {
  uint64_t v;
  memcpy(&v, (const char *)b + c->off, sizeof(v));
  return v;
}

static void add_loss(cli_loss_t *out, const char *name, uint64_t v) {
  if (!v) return;
  out->total += v;
  if (out->n == sizeof(out->items) / sizeof(out->items[0])) {
    out->omitted++;
    return;
  }
  snprintf(out->items[out->n].name, sizeof(out->items[0].name), "%s", name);
  out->items[out->n].value = v;
  out->n++;
}

void cli_ftrace_loss_add(const tg_ftrace_loss_t *l, cli_loss_t *out) {
  add_loss(out, "ftrace_cpu_overrun", tg_ftrace_loss_overrun(l));
}

void cli_ds_problems_print(FILE *out, const char *indent, const char *host,
                           const tg_ds_problems_t *ps) {
  const char *pre = indent ? indent : CLI_PROG ": ";
  for (size_t i = 0; i < ps->n; i++) {
    const tg_ds_problem_t *p = &ps->items[i];
    fprintf(out, "%s%s %s%s%s: %s\n", pre,
            tg_notice_tag(tg_ds_reason_code(p->reason)), host ? host : "",
            host ? ": " : "", p->data_source, p->why);
  }
  if (ps->omitted)
    fprintf(out, "%s%s%s%llu more data source problem(s) not shown\n", pre,
            host ? host : "", host ? ": " : "",
            (unsigned long long)ps->omitted);
}

uint64_t cli_ftrace_events_asked(const Perfetto__Protos__TraceConfig *cfg) {
  uint64_t n = 0;
  for (size_t i = 0; cfg && i < cfg->n_data_sources; i++) {
    const Perfetto__Protos__DataSourceConfig *dsc = cfg->data_sources[i]->config;
    if (dsc && dsc->name && !strcmp(dsc->name, "linux.ftrace") &&
        dsc->ftrace_config)
      n += dsc->ftrace_config->n_ftrace_events;
  }
  return n;
}

bool cli_ds_problems_fail(const tg_ds_problems_t *ps, uint64_t asked,
                          bool strict) {
  if (strict && (ps->n || ps->omitted)) return true;
  for (size_t i = 0; i < ps->n; i++) {
    const tg_ds_problem_t *p = &ps->items[i];
    if (p->reason == TG_DS_NOT_STARTED) return true;
    /* Runs, but without anything of what it was asked for. */
    if (p->reason == TG_DS_EVENTS_REFUSED && p->has_events && asked &&
        p->events >= asked)
      return true;
  }
  /* The problems past the kept ones: their reasons are not known. */
  return false;
}

void cli_loss_collect(const Perfetto__Protos__TraceStats *st, cli_loss_t *out) {
  memset(out, 0, sizeof(*out));
  if (!st) return;
  for (size_t b = 0; b < st->n_buffer_stats; b++) {
    for (size_t i = 0; i < N_BUFFER_COUNTERS; i++) {
      if (!buffer_counters[i].loss) continue;
      char name[64];
      snprintf(name, sizeof(name), "buffer %zu %s", b, buffer_counters[i].name);
      add_loss(out, name, counter_value(st->buffer_stats[b], &buffer_counters[i]));
    }
  }
  add_loss(out, "chunks_discarded", st->chunks_discarded);
  add_loss(out, "patches_discarded", st->patches_discarded);
  add_loss(out, "invalid_packets", st->invalid_packets);
  add_loss(out, "flushes_failed", st->flushes_failed);
  if (st->has_final_flush_outcome &&
      st->final_flush_outcome ==
          PERFETTO__PROTOS__TRACE_STATS__FINAL_FLUSH_OUTCOME__FINAL_FLUSH_FAILED)
    add_loss(out, "final_flush_failed", 1);
}

void cli_progress_print(FILE *tty, uint64_t elapsed_ms, uint64_t duration_ms,
                        uint64_t bytes, uint64_t packets, uint64_t loss) {
  char el[32], du[32], by[32];
  cli_format_ms(el, sizeof(el), elapsed_ms);
  if (duration_ms) cli_format_ms(du, sizeof(du), duration_ms);
  else snprintf(du, sizeof(du), "until Ctrl-C");
  cli_format_bytes(by, sizeof(by), bytes);
  fprintf(tty, "\r\033[K" CLI_PROG ": %s recording %s / %s, %s, %" PRIu64
          " packets, loss %" PRIu64,
          TG_NOTE(PROGRESS), el, du, by, packets, loss);
  fflush(tty);
}

void cli_progress_clear(FILE *tty) {
  fputs("\r\033[K", tty);
  fflush(tty);
}

void cli_vsay(tg_notice_t code, const char *fmt, va_list ap) {
  fputs(CLI_PROG ": ", stderr);
  if (code != TG_N_NONE) fprintf(stderr, "%s ", tg_notice_tag(code));
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
}

void cli_loss_print(FILE *out, const cli_loss_t *loss) {
  if (loss->n == 0) {
    fprintf(out, CLI_PROG ": %s no data loss\n", TG_NOTE(NO_LOSS));
    return;
  }
  fprintf(out, CLI_PROG ": %s data loss:\n", TG_NOTE(DATA_LOSS));
  for (size_t i = 0; i < loss->n; i++)
    fprintf(out, "  %-44s %" PRIu64 "\n", loss->items[i].name,
            loss->items[i].value);
  cli_loss_print_omitted(out, "  ", loss);
}

void cli_loss_print_omitted(FILE *out, const char *indent,
                            const cli_loss_t *loss) {
  if (loss->omitted)
    fprintf(out, "%s(%zu more counters not listed; %" PRIu64 " lost in all)\n",
            indent, loss->omitted, loss->total + loss->transit);
}

void cli_stats_print(FILE *out, const Perfetto__Protos__TraceStats *st) {
  if (st->n_buffer_stats) {
    fprintf(out, "%-34s", "BUFFER COUNTER");
    for (size_t b = 0; b < st->n_buffer_stats; b++) {
      char h[32];
      snprintf(h, sizeof(h), "buffer %zu", b);
      fprintf(out, " %18s", h);
    }
    fputc('\n', out);
    for (size_t i = 0; i < N_BUFFER_COUNTERS; i++) {
      fprintf(out, "%-34s", buffer_counters[i].name);
      for (size_t b = 0; b < st->n_buffer_stats; b++)
        fprintf(out, " %18" PRIu64,
                counter_value(st->buffer_stats[b], &buffer_counters[i]));
      fputc('\n', out);
    }
    fputc('\n', out);
  }
  fprintf(out, "%-34s %18s\n", "SERVICE COUNTER", "VALUE");
#define ROW(name, v) fprintf(out, "%-34s %18" PRIu64 "\n", name, (uint64_t)(v))
  ROW("producers_connected", st->producers_connected);
  ROW("producers_seen", st->producers_seen);
  ROW("data_sources_registered", st->data_sources_registered);
  ROW("data_sources_seen", st->data_sources_seen);
  ROW("tracing_sessions", st->tracing_sessions);
  ROW("total_buffers", st->total_buffers);
  ROW("chunks_discarded", st->chunks_discarded);
  ROW("patches_discarded", st->patches_discarded);
  ROW("invalid_packets", st->invalid_packets);
  ROW("flushes_requested", st->flushes_requested);
  ROW("flushes_succeeded", st->flushes_succeeded);
  ROW("flushes_failed", st->flushes_failed);
#undef ROW
  const char *outcome = "unspecified";
  if (st->has_final_flush_outcome) {
    if (st->final_flush_outcome ==
        PERFETTO__PROTOS__TRACE_STATS__FINAL_FLUSH_OUTCOME__FINAL_FLUSH_SUCCEEDED)
      outcome = "succeeded";
    else if (st->final_flush_outcome ==
             PERFETTO__PROTOS__TRACE_STATS__FINAL_FLUSH_OUTCOME__FINAL_FLUSH_FAILED)
      outcome = "failed";
  }
  fprintf(out, "%-34s %18s\n", "final_flush_outcome", outcome);
}
