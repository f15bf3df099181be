/* `record --merge`: the merged file, once written, re-clocked by the
 * requests between its hosts (consumer/fleet/reclock.h; docs/merge.md,
 * "Clocks from requests"). The file is read twice and written to
 * OUT.reclock.tmp, renamed over OUT when whole; on any failure OUT stays
 * as ClockSync placed it, and a notice says why. Never fails the run. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/fleet.h"
#include "consumer/fleet/reclock.h"

typedef struct file_io {
  int in, out;
  uint64_t size;
  bool tty, shown;
} file_io_t;

static ssize_t io_read(void *ctx, uint8_t *buf, size_t cap) {
  return tg_reclock_fd_read(((file_io_t *)ctx)->in, buf, cap);
}

static int io_rewind(void *ctx) {
  return tg_reclock_fd_rewind(((file_io_t *)ctx)->in);
}

static int io_write(void *ctx, const uint8_t *p, size_t n) {
  file_io_t *io = ctx;
  while (n) {
    ssize_t w = write(io->out, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? -errno : -EIO;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* On a terminal, a line that says how far the two reads are. */
static void io_progress(void *ctx, int pass, uint64_t bytes) {
  file_io_t *io = ctx;
  if (!io->tty) return;
  char done[32], all[32];
  cli_format_bytes(done, sizeof(done), bytes);
  cli_format_bytes(all, sizeof(all), io->size);
  fprintf(stderr, "\r" CLI_PROG ": placing hosts by their requests: %s "
          "%s of %s\033[K", pass == 1 ? "reading" : "writing", done, all);
  io->shown = true;
}

static tg_merge_host_t *merge_host_at(void *ctx, size_t i) {
  fleet_t *f = ctx;
  return i < f->n ? &f->hosts[i].merge : NULL;
}

/* The pass over |final| (OUT with its symlinks followed) into |tmp|. */
static int reclock_file(fleet_t *f, const char *final, const char *tmp,
                        tg_reclock_host_t *hosts, tg_reclock_stats_t *st) {
  file_io_t io = {.tty = f->tty};
  struct stat sb;
  int rv = 0;
  io.in = open(final, O_RDONLY | O_CLOEXEC);
  if (io.in < 0) return -errno;
  if (fstat(io.in, &sb) < 0 || !S_ISREG(sb.st_mode)) {
    rv = -EINVAL;
    close(io.in);
    return rv;
  }
  io.size = (uint64_t)sb.st_size;
  io.out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                sb.st_mode & 0777);
  if (io.out < 0) {
    rv = -errno;
    close(io.in);
    return rv;
  }
  tg_reclock_io_t rio = {.read = io_read, .rewind = io_rewind,
                         .write = io_write, .progress = io_progress,
                         .ctx = &io};
  rv = tg_reclock_run(&rio, hosts, f->n, st);
  if (io.shown) fprintf(stderr, "\r\033[K");
  if (rv == 0 && st->rewritten && fsync(io.out) < 0) rv = -errno;
  if (close(io.out) < 0 && rv == 0) rv = -errno;
  close(io.in);
  if (rv == 0 && st->rewritten && rename(tmp, final) < 0) rv = -errno;
  if (rv < 0 || !st->rewritten) unlink(tmp);
  return rv;
}

void fleet_reclock(fleet_t *f) {
  /* tg_merge_links_end() ran: the requests seen on two hosts are known. */
  if (f->o->clock_from_requests_off ||
      f->merge.app_tracks != TG_MERGE_APP_JOINED ||
      !tg_merge_links_across(f->n, merge_host_at, f))
    return;
  char final[PATH_MAX], tmp[PATH_MAX + 16];
  struct stat sb;
  /* Standard output, a device or a FIFO was written in place: there is
   * no file to read again. */
  if (!strcmp(f->out, "-") || !realpath(f->out, final) ||
      stat(final, &sb) < 0 || !S_ISREG(sb.st_mode))
    return;
  snprintf(tmp, sizeof(tmp), "%s.reclock.tmp", final);
  tg_reclock_host_t *hosts = calloc(f->n, sizeof(*hosts));
  if (!hosts) {
    fleet_say(f, TG_N_FLEET_RECLOCK_FAILED, "%s kept as ClockSync placed it: "
              "out of memory", f->out);
    return;
  }
  for (size_t i = 0; i < f->n; i++)
    hosts[i].bound_ns = tg_reclock_bound(&f->hosts[i].core.report.clock);
  tg_reclock_stats_t st;
  int rv = reclock_file(f, final, tmp, hosts, &st);
  if (rv < 0) {
    fleet_say(f, TG_N_FLEET_RECLOCK_FAILED, "%s kept as ClockSync placed it: "
              "%s", f->out, strerror(-rv));
    free(hosts);
    return;
  }
  for (size_t i = 0; i < f->n; i++) {
    f->hosts[i].reclock = hosts[i];
    f->hosts[i].has_reclock = true;
  }
  if (st.hosts_moved)
    fleet_say(f, TG_N_FLEET_CLOCK_FROM_REQUESTS, "%zu host%s moved by %" PRIu64
              " requests seen on two hosts", st.hosts_moved,
              st.hosts_moved == 1 ? "" : "s", st.pairs);
  free(hosts);
}
