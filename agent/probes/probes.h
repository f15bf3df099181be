/* tracegate-probes' data sources, wired together by main.c. */
#ifndef TRACEGATE_PROBES_PROBES_H
#define TRACEGATE_PROBES_PROBES_H

#include "agent/probes/sampler.h"

/* "linux.sys_stats" and "linux.process_stats". */
extern const tg_probe_ops_t tg_sys_stats_probe;
extern const tg_probe_ops_t tg_process_stats_probe;
/* "linux.system_info": the CPUs, once (cpu_info.h). */
extern const tg_probe_ops_t tg_system_info_probe;
/* "linux.inode_file_map": the paths of the inodes linux.ftrace sees
 * (inode_file.h); its tg_sampler_add ctx is the inode feed. */
extern const tg_probe_ops_t tg_inode_file_probe;
/* "perfetto.metatrace": the probes' own timings (metatrace.h). */
extern const tg_probe_ops_t tg_metatrace_probe;

#endif /* TRACEGATE_PROBES_PROBES_H */
