/* The known-event table; see ftrace_events.h. */
#include "agent/probes/ftrace_events.h"

#include <stddef.h>
#include <string.h>

#define S TG_FTRACE_PT_STRING
#define I TG_FTRACE_PT_INT
#define U TG_FTRACE_PT_UINT

/* sched_wakeup, sched_waking and sched_wakeup_new share one layout. */
#define WAKEUP_FIELDS                                                    \
  {{"comm", 1, S}, {"pid", 2, I}, {"prio", 3, I}, {"success", 4, I},     \
   {"target_cpu", 5, I}}

/* The compaction events of one zone share one layout. */
#define COMPACT_DEFER_FIELDS                                             \
  {{"nid", 1, I}, {"idx", 2, U}, {"order", 3, I}, {"considered", 4, U},  \
   {"defer_shift", 5, U}, {"order_failed", 6, I}}
#define COMPACT_ZONE_FIELDS                                              \
  {{"nid", 1, I}, {"idx", 2, U}, {"order", 3, I}, {"ret", 4, I}}
#define COMPACT_ISOLATE_FIELDS                                           \
  {{"start_pfn", 1, U}, {"end_pfn", 2, U}, {"nr_scanned", 3, U},         \
   {"nr_taken", 4, U}}
#define COMPACT_KCOMPACTD_FIELDS                                         \
  {{"nid", 1, I}, {"order", 2, I}, {"classzone_idx", 3, U},              \
   {"highest_zoneidx", 4, U}}

/* A page entering or leaving the page cache. Older kernels also have
 * "struct page *page" (field 5): a kernel address, left out. */
#define FILEMAP_FIELDS                                                   \
  {{"pfn", 1, U}, {"i_ino", 2, U}, {"index", 3, U}, {"s_dev", 4, U}}

/* Newer kernels give a cgroup's level and path, older ones its name. */
#define CGROUP_FIELDS                                                    \
  {{"root", 1, I}, {"id", 2, I}, {"cname", 3, S}, {"level", 4, I},       \
   {"path", 5, S}}
#define CGROUP_ROOT_FIELDS                                               \
  {{"root", 1, I}, {"ss_mask", 2, U}, {"name", 3, S}}
#define CGROUP_TASK_FIELDS                                               \
  {{"dst_root", 1, I}, {"dst_id", 2, I}, {"pid", 3, I}, {"comm", 4, S},  \
   {"cname", 5, S}, {"dst_level", 6, I}, {"dst_path", 7, S}}

/* In FtraceEvent field order. dev_t fields are U: the encoder writes them
 * as st_dev. */
static const tg_ftrace_known_event_t known[] = {
    {"ftrace", "print", 3, {{"ip", 1, U}, {"buf", 2, S}}},
    {"sched", "sched_switch", 4,
     {{"prev_comm", 1, S}, {"prev_pid", 2, I}, {"prev_prio", 3, I},
      {"prev_state", 4, I}, {"next_comm", 5, S}, {"next_pid", 6, I},
      {"next_prio", 7, I}}},
    {"power", "cpu_frequency", 11, {{"state", 1, U}, {"cpu_id", 2, U}}},
    {"power", "cpu_frequency_limits", 12,
     {{"min_freq", 1, U}, {"max_freq", 2, U}, {"cpu_id", 3, U}}},
    {"power", "cpu_idle", 13, {{"state", 1, U}, {"cpu_id", 2, U}}},
    {"sched", "sched_wakeup", 17, WAKEUP_FIELDS},
    /* caller: a kernel address (void *), written as its index. */
    {"sched", "sched_blocked_reason", 18,
     {{"pid", 1, I}, {"caller", 2, U}, {"io_wait", 3, U}}},
    {"sched", "sched_waking", 20, WAKEUP_FIELDS},
    {"irq", "softirq_entry", 24, {{"vec", 1, U}}},
    {"irq", "softirq_exit", 25, {{"vec", 1, U}}},
    {"irq", "softirq_raise", 26, {{"vec", 1, U}}},
    {"irq", "irq_handler_entry", 36,
     {{"irq", 1, I}, {"name", 2, S}, {"handler", 3, U}}},
    {"irq", "irq_handler_exit", 37, {{"irq", 1, I}, {"ret", 2, I}}},
    {"ext4", "ext4_da_write_begin", 41,
     {{"dev", 1, U}, {"ino", 2, U}, {"pos", 3, I}, {"len", 4, U},
      {"flags", 5, U}}},
    {"ext4", "ext4_da_write_end", 42,
     {{"dev", 1, U}, {"ino", 2, U}, {"pos", 3, I}, {"len", 4, U},
      {"copied", 5, U}}},
    {"ext4", "ext4_sync_file_enter", 43,
     {{"dev", 1, U}, {"ino", 2, U}, {"parent", 3, U}, {"datasync", 4, I}}},
    {"ext4", "ext4_sync_file_exit", 44,
     {{"dev", 1, U}, {"ino", 2, U}, {"ret", 3, I}}},
    {"block", "block_rq_issue", 45,
     {{"dev", 1, U}, {"sector", 2, U}, {"nr_sector", 3, U}, {"bytes", 4, U},
      {"rwbs", 5, S}, {"comm", 6, S}, {"cmd", 7, S}}},
    /* Direct reclaim begin/end: trace_processor's reclaim slices. Newer
     * kernels have no may_writepage. */
    {"vmscan", "mm_vmscan_direct_reclaim_begin", 46,
     {{"order", 1, I}, {"may_writepage", 2, I}, {"gfp_flags", 3, U}}},
    {"vmscan", "mm_vmscan_direct_reclaim_end", 47, {{"nr_reclaimed", 1, U}}},
    {"vmscan", "mm_vmscan_kswapd_wake", 48,
     {{"nid", 1, I}, {"order", 2, I}, {"zid", 3, I}}},
    {"vmscan", "mm_vmscan_kswapd_sleep", 49, {{"nid", 1, I}}},
    /* work and function are kernel addresses (void *), written as indices;
     * trace_processor names the work slices after function's symbol. */
    {"workqueue", "workqueue_activate_work", 56,
     {{"work", 1, U}, {"function", 2, U}}},
    {"workqueue", "workqueue_execute_end", 57,
     {{"work", 1, U}, {"function", 2, U}}},
    {"workqueue", "workqueue_execute_start", 58,
     {{"work", 1, U}, {"function", 2, U}}},
    /* workqueue (3) is the workqueue's address in Perfetto's schema
     * (uint64); recent kernels give its name (a __data_loc string), which
     * traced_probes leaves out as it cannot be that field: so do we. */
    {"workqueue", "workqueue_queue_work", 59,
     {{"work", 1, U}, {"function", 2, U}, {"req_cpu", 4, I}, {"cpu", 5, I}}},
    {"cgroup", "cgroup_attach_task", 67, CGROUP_TASK_FIELDS},
    {"cgroup", "cgroup_mkdir", 68, CGROUP_FIELDS},
    {"cgroup", "cgroup_remount", 69, CGROUP_ROOT_FIELDS},
    {"cgroup", "cgroup_rmdir", 70, CGROUP_FIELDS},
    {"cgroup", "cgroup_transfer_tasks", 71, CGROUP_TASK_FIELDS},
    {"cgroup", "cgroup_destroy_root", 72, CGROUP_ROOT_FIELDS},
    {"cgroup", "cgroup_release", 73, CGROUP_FIELDS},
    {"cgroup", "cgroup_rename", 74, CGROUP_FIELDS},
    {"cgroup", "cgroup_setup_root", 75, CGROUP_ROOT_FIELDS},
    {"filemap", "mm_filemap_add_to_page_cache", 97, FILEMAP_FIELDS},
    {"filemap", "mm_filemap_delete_from_page_cache", 98, FILEMAP_FIELDS},
    {"compaction", "mm_compaction_begin", 99,
     {{"zone_start", 1, U}, {"migrate_pfn", 2, U}, {"free_pfn", 3, U},
      {"zone_end", 4, U}, {"sync", 5, U}}},
    {"compaction", "mm_compaction_defer_compaction", 100,
     COMPACT_DEFER_FIELDS},
    {"compaction", "mm_compaction_deferred", 101, COMPACT_DEFER_FIELDS},
    {"compaction", "mm_compaction_defer_reset", 102, COMPACT_DEFER_FIELDS},
    {"compaction", "mm_compaction_end", 103,
     {{"zone_start", 1, U}, {"migrate_pfn", 2, U}, {"free_pfn", 3, U},
      {"zone_end", 4, U}, {"sync", 5, U}, {"status", 6, I}}},
    {"compaction", "mm_compaction_finished", 104, COMPACT_ZONE_FIELDS},
    {"compaction", "mm_compaction_isolate_freepages", 105,
     COMPACT_ISOLATE_FIELDS},
    {"compaction", "mm_compaction_isolate_migratepages", 106,
     COMPACT_ISOLATE_FIELDS},
    {"compaction", "mm_compaction_kcompactd_sleep", 107, {{"nid", 1, I}}},
    {"compaction", "mm_compaction_kcompactd_wake", 108,
     COMPACT_KCOMPACTD_FIELDS},
    {"compaction", "mm_compaction_migratepages", 109,
     {{"nr_migrated", 1, U}, {"nr_failed", 2, U}}},
    {"compaction", "mm_compaction_suitable", 110, COMPACT_ZONE_FIELDS},
    {"compaction", "mm_compaction_try_to_compact_pages", 111,
     {{"order", 1, I}, {"gfp_mask", 2, U}, {"mode", 3, U}, {"prio", 4, I}}},
    {"compaction", "mm_compaction_wakeup_kcompactd", 112,
     COMPACT_KCOMPACTD_FIELDS},
    /* action is a "const char *" into the kernel's rodata: written as the
     * string printk_formats lists at that address (ftrace_printk.h). */
    {"power", "suspend_resume", 113,
     {{"action", 1, S}, {"val", 2, I}, {"start", 3, U}}},
    {"sched", "sched_wakeup_new", 114, WAKEUP_FIELDS},
    /* The kernel renamed "errors" to "error"; both map to field 4. */
    {"block", "block_rq_complete", 125,
     {{"dev", 1, U}, {"sector", 2, U}, {"nr_sector", 3, U}, {"errors", 4, I},
      {"error", 4, I}, {"rwbs", 5, S}, {"cmd", 6, S}}},
    {"task", "task_newtask", 235,
     {{"pid", 1, I}, {"comm", 2, S}, {"clone_flags", 3, U},
      {"oom_score_adj", 4, I}}},
    {"task", "task_rename", 236,
     {{"pid", 1, I}, {"oldcomm", 2, S}, {"newcomm", 3, S},
      {"oom_score_adj", 4, I}}},
    {"sched", "sched_process_exec", 237,
     {{"filename", 1, S}, {"pid", 2, I}, {"old_pid", 3, I}}},
    {"sched", "sched_process_exit", 238,
     {{"comm", 1, S}, {"pid", 2, I}, {"tgid", 3, I}, {"prio", 4, I}}},
    {"sched", "sched_process_fork", 239,
     {{"parent_comm", 1, S}, {"parent_pid", 2, I}, {"child_comm", 3, S},
      {"child_pid", 4, I}}},
    {"sched", "sched_process_free", 240,
     {{"comm", 1, S}, {"pid", 2, I}, {"prio", 3, I}}},
    {"sched", "sched_process_hang", 241, {{"comm", 1, S}, {"pid", 2, I}}},
    {"sched", "sched_process_wait", 242,
     {{"comm", 1, S}, {"pid", 2, I}, {"prio", 3, I}}},
    /* Process memory counters: trace_processor's mem.rss.* tracks. Newer
     * kernels add mm_id and curr; older ones have only member and size. */
    {"kmem", "rss_stat", 313,
     {{"member", 1, I}, {"size", 2, I}, {"curr", 3, U}, {"mm_id", 4, U}}},
    /* throttle_rss_stat's synthetic event (ftrace_session.c). */
    {"synthetic", "rss_stat_throttled", 359,
     {{"curr", 1, U}, {"member", 2, I}, {"mm_id", 3, U}, {"size", 4, I}}},
    {"raw_syscalls", "sys_enter", 329,
     {{"id", 1, I}, {"args", 2, TG_FTRACE_PT_REPEATED_UINT}}},
    {"raw_syscalls", "sys_exit", 330, {{"id", 1, I}, {"ret", 2, I}}},
    /* Temperatures and cooling states: trace_processor's thermal counters. */
    {"thermal", "thermal_temperature", 341,
     {{"id", 1, I}, {"temp", 2, I}, {"temp_prev", 3, I},
      {"thermal_zone", 4, S}}},
    {"thermal", "cdev_update", 342, {{"target", 1, U}, {"type", 2, S}}},
};

const tg_ftrace_known_event_t *tg_ftrace_known_event(const char *group,
                                                     const char *name) {
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
    if (strcmp(known[i].group, group) == 0 && strcmp(known[i].name, name) == 0)
      return &known[i];
  return NULL;
}

const tg_ftrace_known_event_t *tg_ftrace_known_events(size_t *n) {
  *n = sizeof(known) / sizeof(known[0]);
  return known;
}
