/* What a fleet recording shows: on a terminal, a progress summary line and
 * one line per host redrawn in place (with many hosts, only the hosts that
 * fail, are not up or fall behind: fleet_ui_pick.c); at the end, a summary
 * per host (outcome, bytes, packets, whether its relay compressed and why
 * not, every non-zero loss counter, reconnections, clock offset; with many
 * hosts, only the hosts with something to report, the rest counted). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/fleet.h"

/* Terminal lines for hosts; more are summed up in one line. */
#define MAX_HOST_LINES 20

static int spec_width(const fleet_t *f, const size_t *idx, size_t n) {
  size_t w = 4;
  for (size_t i = 0; i < n; i++) {
    size_t l = strlen(f->hosts[idx[i]].t->spec);
    if (l > w) w = l;
  }
  return (int)(w > 40 ? 40 : w);
}

void fleet_ui_clear(fleet_t *f) {
  if (!f->lines_shown) return;
  fprintf(stderr, "\033[%zuA\r\033[J", f->lines_shown);
  fflush(stderr);
  f->lines_shown = 0;
}

void fleet_say(fleet_t *f, tg_notice_t code, const char *fmt, ...) {
  fleet_ui_clear(f);
  va_list ap;
  va_start(ap, fmt);
  cli_vsay(code, fmt, ap);
  va_end(ap);
}

static void host_line(const fleet_host_t *h, int w) {
  char by[32], state[96];
  cli_format_bytes(by, sizeof(by), h->core.report.bytes);
  if (tg_fleet_host_reconnecting(&h->core))
    snprintf(state, sizeof(state), "reconnecting (attempt %u)",
             h->core.report.attempts);
  else
    snprintf(state, sizeof(state), "%s", tg_fleet_host_state(&h->core));
  fprintf(stderr,
          "\r\033[K  %-*.*s  %-26s %10s %9" PRIu64 " packets  loss %" PRIu64
          "%s\n",
          w, w, h->t->spec, state, by, h->core.report.packets, h->loss.total,
          h->core.report.reconnects ? "  (reconnected)" : "");
}

void fleet_ui_draw(fleet_t *f) {
  if (!f->tty) return;
  fleet_ui_clear(f);
  uint64_t el_ms = uv_now(f->loop) - f->t0;
  char el[32], du[32], by[32];
  cli_format_ms(el, sizeof(el), el_ms);
  if (f->duration_ms) cli_format_ms(du, sizeof(du), f->duration_ms);
  else snprintf(du, sizeof(du), "until Ctrl-C");
  size_t tracing = 0, failed = 0;
  uint64_t bytes = 0;
  for (size_t i = 0; i < f->n; i++) {
    tracing += tg_fleet_host_tracing(&f->hosts[i].core);
    failed += f->hosts[i].core.report.link_state == TG_LINK_FAILED;
    bytes += f->hosts[i].core.report.bytes;
  }
  cli_format_bytes(by, sizeof(by), bytes);
  fprintf(stderr, "\r\033[K" CLI_PROG ": recording %s / %s, %zu host%s, %zu "
          "tracing, %zu finished", el, du, f->n, f->n == 1 ? "" : "s",
          tracing, f->finished);
  if (f->n > MAX_HOST_LINES)
    fprintf(stderr, " (%zu failed), %s in all", failed, by);
  fputc('\n', stderr);
  /* A few hosts: a line each. Many: only those worth a look (failing,
   * not up, behind), so that the display stays MAX_HOST_LINES + 2 high. */
  size_t idx[MAX_HOST_LINES], total;
  size_t shown = fleet_ui_pick(f, idx, MAX_HOST_LINES, &total);
  size_t lines = 1;
  int w = spec_width(f, idx, shown);
  for (size_t k = 0; k < shown; k++, lines++)
    host_line(&f->hosts[idx[k]], w);
  if (total > shown) {
    fprintf(stderr, "\r\033[K  ... and %zu more hosts failing, not up or "
            "behind\n", total - shown);
    lines++;
  }
  fflush(stderr);
  f->lines_shown = lines;
}

/* "+1.234 ms (+/- 0.050 ms)": the host's BOOTTIME minus ours at the
 * midpoint of the round trip, give or take half of it. */
static void offset_note(const tg_clock_sample_t *s, char *out, size_t n) {
  uint64_t half;
  int64_t off = tg_clock_offset(s, &half);
  snprintf(out, n, "%+.3f ms (+/- %.3f ms)", (double)off / 1e6,
           (double)half / 1e6);
}

static void clock_note(const fleet_host_t *h, char *out, size_t n) {
  if (!h->core.report.clock.estimates) {
    snprintf(out, n, "no clock sync");
    return;
  }
  char last[64], first[64];
  offset_note(&h->core.report.clock.best, last, sizeof(last));
  if (h->core.report.clock.estimates <= 1) {
    snprintf(out, n, "BOOTTIME offset %s", last);
    return;
  }
  offset_note(&h->core.report.clock.first, first, sizeof(first));
  snprintf(out, n, "BOOTTIME offset %s at the last of %u clock syncs (first "
           "%s)", last, h->core.report.clock.estimates, first);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* With many hosts, the clock lines are not printed per host: how well the
 * start of each host's trace is aligned (its first estimate's bound, half
 * its round trip), the median and the worst. */
static void clock_summary(const fleet_t *f) {
  uint64_t *b = malloc(f->n * sizeof(*b));
  if (!b) return;
  size_t n = 0;
  uint64_t worst_ns = 0;
  const char *worst = "";
  for (size_t i = 0; i < f->n; i++) {
    const fleet_host_t *h = &f->hosts[i];
    if (!h->core.report.clock.estimates) continue;
    uint64_t bound = tg_clock_rtt(&h->core.report.clock.first) / 2;
    if (n == 0 || bound > worst_ns) {
      worst_ns = bound;
      worst = h->t->spec;
    }
    b[n++] = bound;
  }
  if (n) {
    qsort(b, n, sizeof(*b), cmp_u64);
    fprintf(stderr,
            "  %s clocks at the start: aligned within +/- %.3f ms "
            "(median), %.3f ms at worst (%s)", TG_NOTE(FLEET_CLOCKS),
            (double)b[n / 2] / 1e6, (double)worst_ns / 1e6, worst);
    if (n < f->n) fprintf(stderr, "; %zu without", f->n - n);
    fputc('\n', stderr);
  }
  free(b);
}

/* How the host's relay sent, with the code of a plain stream (TG_N_NONE:
 * compressed, the usual case, said on the host's line); NULL when no link
 * was prepared. A refusal is told apart from not asking: it is the relay
 * operator's choice. */
static const char *compression_note(const fleet_host_t *h, tg_notice_t *code) {
  *code = TG_N_NONE;
  switch (h->core.report.compression) {
    case TG_FLEET_COMP_ZSTD:
      return "sent with zstd";
    case TG_FLEET_COMP_NOT_ASKED:
      *code = TG_N_FLEET_PLAIN_NOT_ASKED;
      return "sent plain (--compress none)";
    case TG_FLEET_COMP_REFUSED:
      *code = TG_N_FLEET_PLAIN_REFUSED;
      return "sent plain (relay refused compression)";
    case TG_FLEET_COMP_UNSUPPORTED:
      *code = TG_N_FLEET_PLAIN_UNSUPPORTED;
      return "sent plain (relay cannot compress)";
    case TG_FLEET_COMP_UNKNOWN: break;
  }
  return NULL;
}

size_t fleet_ui_summary(fleet_t *f) {
  fleet_ui_clear(f);
  size_t failed = 0;
  char el[32];
  cli_format_ms(el, sizeof(el), uv_now(f->loop) - f->t0);
  fprintf(stderr, CLI_PROG ": %s %zu host%s, %s:\n", TG_NOTE(FLEET_SUMMARY),
          f->n, f->n == 1 ? "" : "s", el);
  size_t quiet = 0, quiet_refused = 0, quiet_unsupported = 0;
  uint64_t quiet_bytes = 0, quiet_packets = 0;
  for (size_t i = 0; i < f->n; i++) {
    const fleet_host_t *h = &f->hosts[i];
    bool ok = h->core.report.link_state == TG_LINK_DONE;
    failed += !ok;
    /* Many hosts: the ones that went as planned are counted, not listed. */
    if (f->n > MAX_HOST_LINES && ok && !h->core.report.reconnects &&
        !h->core.report.reads_lost && !h->merge.malformed &&
        !h->merge.state_lost &&
        !h->problems.n && !h->problems.omitted &&
        (!h->has_loss || h->loss.n == 0)) {
      quiet++;
      quiet_bytes += h->core.report.bytes;
      quiet_packets += h->core.report.packets;
      quiet_refused += h->core.report.compression == TG_FLEET_COMP_REFUSED;
      quiet_unsupported +=
          h->core.report.compression == TG_FLEET_COMP_UNSUPPORTED;
      continue;
    }
    char by[32];
    cli_format_bytes(by, sizeof(by), h->core.report.bytes);
    tg_notice_t how_code = TG_N_NONE;
    const char *how = compression_note(h, &how_code);
    if (ok)
      fprintf(stderr, "  %s: %s ok, %s, %" PRIu64 " packets%s%s", h->t->spec,
              TG_NOTE(FLEET_HOST_OK), by, h->core.report.packets,
              how && !how_code ? ", " : "", how && !how_code ? how : "");
    else
      fprintf(stderr, "  %s: %s FAILED: %s (%s, %" PRIu64 " packets received)",
              h->t->spec, TG_NOTE(FLEET_HOST_FAILED), h->core.report.why, by,
              h->core.report.packets);
    if (f->mode == FLEET_OUT_MERGE)
      fprintf(stderr, "; machine %" PRIu32, h->merge.machine_id);
    else if (h->path && (ok || h->kept_partial))
      fprintf(stderr, "; %s%s", h->kept_partial ? "partial trace in " : "",
              h->path);
    fputc('\n', stderr);
    if (ok && how && how_code)
      fprintf(stderr, "      %s %s\n", tg_notice_tag(how_code), how);
    cli_ds_problems_print(stderr, "      ", NULL, &h->problems);
    if (h->core.report.has_info || h->core.report.clock.estimates) {
      char clk[200];
      clock_note(h, clk, sizeof(clk));
      fprintf(stderr, "      %s host %s%s%s, %s\n", TG_NOTE(FLEET_HOST_INFO),
              h->core.report.hostname[0] ? h->core.report.hostname : "?",
              h->core.report.kernel[0] ? ", " : "", h->core.report.kernel, clk);
    }
    if (h->core.report.reconnects) {
      char down[32];
      cli_format_ms(down, sizeof(down), h->core.report.down_ms);
      fprintf(stderr, "      %s reconnected %u time%s (link down %s in all, "
              "from its last answer; last lost: %s); loss counters while "
              "disconnected: +%" PRIu64 "\n", TG_NOTE(FLEET_HOST_RECONNECTS),
              h->core.report.reconnects,
              h->core.report.reconnects == 1 ? "" : "s", down, h->core.report.lost_why,
              h->loss_while_down);
    }
    /* The service cannot count this one: its buffers gave the data away.
     * Only a read that did take data is named (see reads_lost). */
    if (h->core.report.reads_lost)
      fprintf(stderr, "      %s %u read%s cut by a link loss had taken data "
              "out of the host's buffers that the relay could not send again: "
              "what did not arrive before the cut is lost\n",
              TG_NOTE(FLEET_READS_LOST), h->core.report.reads_lost,
              h->core.report.reads_lost == 1 ? "" : "s");
    if (h->merge.malformed)
      fprintf(stderr, "      %s %" PRIu64 " packets that do not decode, or "
              "that Perfetto's trace processor cannot take, were left out of "
              "the merged trace\n", TG_NOTE(FLEET_MALFORMED),
              h->merge.malformed);
    if (h->merge.not_allowed) {
      char field[96];
      fprintf(stderr, "      %s %" PRIu64 " of them hold a field no Linux "
              "producer writes (the last: %s; --merge-allow-fields keeps one "
              "by name)\n",
              TG_NOTE(FLEET_NOT_ALLOWED), h->merge.not_allowed,
              tg_merge_refused_field(&h->merge, field, sizeof(field)));
    }
    if (h->merge.clock_unplaced)
      fprintf(stderr, "      %s %" PRIu64 " of them have times trace "
              "processor could not place on the host's clocks\n",
              TG_NOTE(FLEET_CLOCK_UNPLACED), h->merge.clock_unplaced);
    if (h->merge.state_edge)
      fprintf(stderr, "      %s %" PRIu64 " packets before their sequence's "
              "first clear of incremental state were left out of the merged "
              "trace (the oldest edge of the host's buffers, not a loss)\n",
              TG_NOTE(FLEET_STATE_EDGE), h->merge.state_edge);
    if (h->merge.state_lost)
      fprintf(stderr, "      %s %" PRIu64 " packets on %" PRIu32 " sequences "
              "need incremental state the host's buffers no longer hold: left "
              "out of the merged trace, counted as loss\n",
              TG_NOTE(FLEET_STATE_LOST), h->merge.state_lost,
              h->merge.state_lost_seqs);
    if (!h->has_loss) continue;
    if (h->loss.n == 0) {
      fprintf(stderr, "      %s no data loss%s\n", TG_NOTE(NO_LOSS),
              h->core.report.reads_lost ? " counted by the service" : "");
      continue;
    }
    fprintf(stderr, "      %s data loss:\n", TG_NOTE(DATA_LOSS));
    for (size_t k = 0; k < h->loss.n; k++)
      fprintf(stderr, "        %-44s %" PRIu64 "\n", h->loss.items[k].name,
              h->loss.items[k].value);
    cli_loss_print_omitted(stderr, "        ", &h->loss);
  }
  if (quiet) {
    char by[32];
    cli_format_bytes(by, sizeof(by), quiet_bytes);
    fprintf(stderr, "  %s %zu %shost%s: ok, no loss, no reconnection; %s, "
            "%" PRIu64 " packets in all", TG_NOTE(FLEET_QUIET_HOSTS), quiet, quiet == f->n ? "" : "other ",
            quiet == 1 ? "" : "s", by, quiet_packets);
    if (quiet_refused)
      fprintf(stderr, "; %zu sent plain (relay refused compression)",
              quiet_refused);
    if (quiet_unsupported)
      fprintf(stderr, "; %zu sent plain (relay cannot compress)",
              quiet_unsupported);
    fputc('\n', stderr);
  }
  if (f->n > MAX_HOST_LINES) clock_summary(f);
  if (f->tls_counts.full + f->tls_counts.resumed)
    fprintf(stderr, "  %s TLS handshakes: %" PRIu64 " full, %" PRIu64
            " resumed from a saved session\n", TG_NOTE(FLEET_TLS_HANDSHAKES),
            f->tls_counts.full,
            f->tls_counts.resumed);
  if (failed) {
    fprintf(stderr, CLI_PROG ": %s %zu of %zu host%s failed:",
            TG_NOTE(FLEET_FAILED_HOSTS), failed, f->n, f->n == 1 ? "" : "s");
    for (size_t i = 0; i < f->n; i++)
      if (f->hosts[i].core.report.link_state != TG_LINK_DONE)
        fprintf(stderr, " %s", f->hosts[i].t->spec);
    fputc('\n', stderr);
  }
  return failed;
}
