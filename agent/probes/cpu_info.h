/* "linux.system_info": what Perfetto's traced_probes records once at the
 * start of a session about the machine's CPUs (a TracePacket.cpu_info,
 * proto/trace/system_info/cpu_info.proto), from which trace_processor
 * fills its `cpu` table: each CPU's processor name (/proc/cpuinfo), the
 * frequencies its cpufreq driver offers, its capacity, and on ARM the
 * identifier fields (implementer, architecture, variant, part, revision).
 *
 * The parser is pure and bounded (fuzz_proc_parsers); the reader and the
 * data source are cpu_info.c and system_info_ds.c.
 */
#ifndef TRACEGATE_PROBES_CPU_INFO_H
#define TRACEGATE_PROBES_CPU_INFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tracegate/pb_writer.h"

/* CPUs described at most (the kernel's NR_CPUS on big servers). */
#define TG_CPU_INFO_MAX_CPUS 1024
#define TG_CPU_INFO_NAME_MAX 128
#define TG_CPU_INFO_MAX_FREQS 64

typedef struct tg_cpu_desc {
  bool present; /* a "processor : N" block named it */
  char processor[TG_CPU_INFO_NAME_MAX]; /* "" when /proc/cpuinfo has none */
  uint32_t freqs_khz[TG_CPU_INFO_MAX_FREQS];
  uint32_t n_freqs;
  uint32_t capacity; /* 0: unknown */
  bool has_arm;
  uint32_t arm_implementer, arm_architecture, arm_variant, arm_part,
      arm_revision;
} tg_cpu_desc_t;

typedef struct tg_cpu_info {
  tg_cpu_desc_t *cpus; /* n of them, indexed by CPU number; owned */
  uint32_t n;          /* the highest CPU number seen, plus one */
} tg_cpu_info_t;

/* Parses /proc/cpuinfo's |len| bytes (no NUL needed) into |out| (freed
 * with tg_cpu_info_free): per "processor : N" block, the name from the
 * first of "model name", "Processor", "cpu model" ("" if none; ARM
 * kernels print "Processor" once for all CPUs, before the blocks, and
 * that applies to every CPU without one of its own) and the ARM "CPU
 * implementer/architecture/variant/part/revision" fields. Returns 0,
 * TG_EPARSE (no processor block, a CPU number over the max) or -ENOMEM. */
int tg_cpu_info_parse(const char *text, size_t len, tg_cpu_info_t *out);
/* One scaling_available_frequencies file ("300000 576000 ...", kHz):
 * into |d|, at most TG_CPU_INFO_MAX_FREQS; 0 or TG_EPARSE. */
int tg_cpu_info_parse_freqs(const char *text, size_t len, tg_cpu_desc_t *d);
void tg_cpu_info_free(tg_cpu_info_t *ci);

/* The TracePacket {timestamp, cpu_info {cpus...}} into |w|. */
void tg_cpu_info_write(tg_pbw_t *w, uint64_t ts, const tg_cpu_info_t *ci);

/* Reads /proc/cpuinfo and each CPU's cpufreq and capacity under |sys|
 * ("/sys/devices/system/cpu"): what a missing file does not say stays
 * unknown. 0 or a negative error (cpuinfo unreadable or unparsable). */
int tg_cpu_info_read(const char *proc_cpuinfo, const char *sys,
                     tg_cpu_info_t *out);

#endif /* TRACEGATE_PROBES_CPU_INFO_H */
