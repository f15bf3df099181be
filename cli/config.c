/* The trace config: from a file (binary or text format, Perfetto's -c and
 * --txt), or built from data source names (the quick form). Configs are
 * handled decoded; protobuf-c keeps unknown fields, so re-encoding loses
 * nothing the user wrote. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "consumer/pbtxt.h"
#include "tracegate/error.h"

/* A config file's most, in MiB (the refusal states it). */
#define MAX_CONFIG_MIB 16
#define MAX_CONFIG_BYTES ((size_t)MAX_CONFIG_MIB << 20)

/* Reads the whole of |path| ("-": stdin) into |out|. */
static int read_all(const char *path, tg_buf_t *out) {
  int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : STDIN_FILENO;
  if (fd < 0) return -errno;
  int rv = tg_buf_read_fd(out, fd);
  if (fd != STDIN_FILENO) close(fd);
  return rv;
}

Perfetto__Protos__TraceConfig *cli_config_load(const char *path, bool txt) {
  const char *name = strcmp(path, "-") ? path : "<stdin>";
  tg_buf_t raw, bin;
  tg_buf_init(&raw, MAX_CONFIG_BYTES);
  tg_buf_init(&bin, MAX_CONFIG_BYTES);
  Perfetto__Protos__TraceConfig *cfg = NULL;
  int rv = read_all(path, &raw);
  if (rv < 0) {
    fprintf(stderr, CLI_PROG ": cannot read the config %s: %s\n", name,
            rv == -EFBIG ? "larger than " CLI_STR(MAX_CONFIG_MIB) " MiB"
                         : tg_strerror(rv));
    goto out;
  }
  size_t len = tg_buf_size(&raw);
  /* Perfetto's CLI refuses a config of no bytes at all ("The TraceConfig
   * is empty"), binary or text, and so does tracegate: an empty file or
   * stdin is far likelier a mistake than a wish for a session without
   * buffers or data sources. A text config that is only comments or
   * spaces is not empty: it decodes as an empty TraceConfig and goes to
   * the service, which takes it, as Perfetto's CLI and service do. */
  if (len == 0) {
    fprintf(stderr, CLI_PROG ": %s %s: the TraceConfig is empty\n",
            TG_NOTE(CONFIG_INVALID), name);
    goto out;
  }
  const uint8_t *bytes = tg_buf_begin(&raw);
  if (txt) {
    tg_pbtxt_error_t err;
    memset(&err, 0, sizeof(err));
    rv = tg_pbtxt_parse(&perfetto__protos__trace_config__descriptor,
                        (const char *)bytes, len, &bin, &err);
    if (rv < 0) {
      /* The parser's message names the place; say it if it did not. */
      if (strncmp(err.msg, "line ", 5) == 0)
        fprintf(stderr, CLI_PROG ": %s %s: %s\n", TG_NOTE(CONFIG_INVALID),
                name, err.msg);
      else
        fprintf(stderr, CLI_PROG ": %s %s: line %u, column %u: %s\n",
                TG_NOTE(CONFIG_INVALID), name, err.line, err.column,
                err.msg[0] ? err.msg : tg_strerror(rv));
      goto out;
    }
    /* Comments only: no bytes, which decode as an empty TraceConfig. */
    static const uint8_t none[1];
    len = tg_buf_size(&bin);
    bytes = len ? tg_buf_begin(&bin) : none;
  }
  cfg = perfetto__protos__trace_config__unpack(NULL, len, bytes);
  if (!cfg)
    fprintf(stderr,
            CLI_PROG ": %s %s: does not decode as a TraceConfig%s\n",
            TG_NOTE(CONFIG_INVALID), name,
            txt ? "" : " (for a text config, add --txt)");
out:
  tg_buf_free(&raw);
  tg_buf_free(&bin);
  return cfg;
}

Perfetto__Protos__TraceConfig *cli_config_quick(char **names, size_t n,
                                                uint64_t buffer_bytes,
                                                uint64_t duration_ms) {
  /* Built on the stack, then packed and unpacked: the result is owned
   * like any decoded message. */
  Perfetto__Protos__TraceConfig cfg = PERFETTO__PROTOS__TRACE_CONFIG__INIT;
  Perfetto__Protos__TraceConfig__BufferConfig buf =
      PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__INIT;
  Perfetto__Protos__TraceConfig__BufferConfig *bufp = &buf;
  Perfetto__Protos__TraceConfig__DataSource *ds = calloc(n + 1, sizeof(*ds));
  Perfetto__Protos__TraceConfig__DataSource **dsp = calloc(n + 1, sizeof(*dsp));
  Perfetto__Protos__DataSourceConfig *dsc = calloc(n + 1, sizeof(*dsc));
  Perfetto__Protos__TraceConfig *out = NULL;
  uint8_t *bytes = NULL;
  /* The probes sample nothing unless told how often: the quick form asks
   * for what people expect from a name alone (CPU times and memory every
   * second; every process, polled every second). */
  Perfetto__Protos__SysStatsConfig sys = PERFETTO__PROTOS__SYS_STATS_CONFIG__INIT;
  Perfetto__Protos__SysStatsConfig__StatCounters stat_cpu =
      PERFETTO__PROTOS__SYS_STATS_CONFIG__STAT_COUNTERS__STAT_CPU_TIMES;
  sys.has_meminfo_period_ms = sys.has_stat_period_ms = 1;
  sys.meminfo_period_ms = sys.stat_period_ms = 1000;
  sys.n_stat_counters = 1;
  sys.stat_counters = &stat_cpu;
  Perfetto__Protos__ProcessStatsConfig ps =
      PERFETTO__PROTOS__PROCESS_STATS_CONFIG__INIT;
  ps.has_scan_all_processes_on_start = ps.has_proc_stats_poll_ms = 1;
  ps.scan_all_processes_on_start = 1;
  ps.proc_stats_poll_ms = 1000;
  if (!ds || !dsp || !dsc) goto done;
  uint64_t kb = buffer_bytes / 1024;
  buf.has_size_kb = 1;
  buf.size_kb = kb > UINT32_MAX ? UINT32_MAX : (uint32_t)kb;
  buf.has_fill_policy = 1;
  buf.fill_policy =
      PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__RING_BUFFER;
  cfg.n_buffers = 1;
  cfg.buffers = &bufp;
  for (size_t i = 0; i < n; i++) {
    perfetto__protos__trace_config__data_source__init(&ds[i]);
    perfetto__protos__data_source_config__init(&dsc[i]);
    dsc[i].name = names[i];
    if (strcmp(names[i], "linux.sys_stats") == 0) dsc[i].sys_stats_config = &sys;
    if (strcmp(names[i], "linux.process_stats") == 0)
      dsc[i].process_stats_config = &ps;
    ds[i].config = &dsc[i];
    dsp[i] = &ds[i];
  }
  cfg.n_data_sources = n;
  cfg.data_sources = dsp;
  if (duration_ms) {
    cfg.has_duration_ms = 1;
    cfg.duration_ms = (uint32_t)duration_ms;
  }
  size_t len = perfetto__protos__trace_config__get_packed_size(&cfg);
  bytes = malloc(len ? len : 1);
  if (!bytes) goto done;
  perfetto__protos__trace_config__pack(&cfg, bytes);
  out = perfetto__protos__trace_config__unpack(NULL, len, bytes);
done:
  if (!out) fprintf(stderr, CLI_PROG ": out of memory\n");
  free(bytes);
  free(ds);
  free(dsp);
  free(dsc);
  return out;
}

int cli_config_set_buffer(Perfetto__Protos__TraceConfig *cfg, uint64_t bytes) {
  if (cfg->n_buffers == 0) {
    /* Owned like the rest of the decoded message: free_unpacked frees it. */
    Perfetto__Protos__TraceConfig__BufferConfig **arr =
        realloc(cfg->buffers, sizeof(*arr));
    if (!arr) return -ENOMEM;
    cfg->buffers = arr;
    arr[0] = malloc(sizeof(*arr[0]));
    if (!arr[0]) return -ENOMEM;
    perfetto__protos__trace_config__buffer_config__init(arr[0]);
    cfg->n_buffers = 1;
  }
  uint64_t kb = bytes / 1024;
  cfg->buffers[0]->has_size_kb = 1;
  cfg->buffers[0]->size_kb = kb > UINT32_MAX ? UINT32_MAX : (uint32_t)kb;
  return 0;
}

int cli_config_pack(const Perfetto__Protos__TraceConfig *cfg, tg_buf_t *out) {
  size_t len = perfetto__protos__trace_config__get_packed_size(cfg);
  uint8_t *p = tg_buf_reserve(out, len ? len : 1);
  if (!p) return -ENOMEM;
  perfetto__protos__trace_config__pack(cfg, p);
  tg_buf_commit(out, len);
  return 0;
}
