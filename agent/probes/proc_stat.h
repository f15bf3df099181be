/* /proc/stat: per-cpu times, interrupt and softirq counts, forks.
 *
 * A pure parser: it takes the file's content, so tests feed it fixtures.
 * Times stay in clock ticks (USER_HZ); the packet encoder converts them.
 */
#ifndef TRACEGATE_PROBES_PROC_STAT_H
#define TRACEGATE_PROBES_PROC_STAT_H

#include <stddef.h>
#include <stdint.h>

/* Bounds that keep a garbled file from growing the arrays without limit. */
#define TG_PROC_STAT_MAX_CPUS 8192
#define TG_PROC_STAT_MAX_IRQS 65536

/* One "cpuN" line, in ticks. Fields a kernel does not report are 0. */
typedef struct tg_cpu_times {
  uint32_t cpu_id;
  uint64_t user, nice, system, idle, iowait, irq, softirq, steal;
} tg_cpu_times_t;

enum {
  TG_PROC_STAT_HAS_IRQ = 1u << 0,
  TG_PROC_STAT_HAS_SOFTIRQ = 1u << 1,
  TG_PROC_STAT_HAS_FORKS = 1u << 2,
};

/* Owns its arrays; reuse one across parses (capacity is kept) and release
 * it with tg_proc_stat_free(). Zero-initialise before the first parse. */
typedef struct tg_proc_stat {
  tg_cpu_times_t *cpus; /* "cpuN" lines in file order (not the "cpu" sum) */
  size_t n_cpus, cap_cpus;
  uint64_t irq_total;
  uint64_t *irqs; /* count of irq i, i = 0..n_irqs-1 */
  size_t n_irqs, cap_irqs;
  uint64_t softirq_total;
  uint64_t *softirqs;
  size_t n_softirqs, cap_softirqs;
  uint64_t forks; /* "processes" */
  unsigned present; /* TG_PROC_STAT_HAS_* */
} tg_proc_stat_t;

/* Parses |len| bytes of /proc/stat into |out|. Unknown lines are skipped.
 * Returns 0; TG_EPARSE when a known line is malformed (a cpu line with
 * fewer than 4 numbers, a non-numeric field) or no cpu line is present;
 * -ENOMEM. On error |out| holds no meaningful data. */
int tg_proc_stat_parse(const char *text, size_t len, tg_proc_stat_t *out);
void tg_proc_stat_free(tg_proc_stat_t *s);

#endif /* TRACEGATE_PROBES_PROC_STAT_H */
