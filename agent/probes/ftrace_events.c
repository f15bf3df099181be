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

static const tg_ftrace_known_event_t known[] = {
    {"ftrace", "print", 3, {{"ip", 1, U}, {"buf", 2, S}}},
    {"sched", "sched_switch", 4,
     {{"prev_comm", 1, S}, {"prev_pid", 2, I}, {"prev_prio", 3, I},
      {"prev_state", 4, I}, {"next_comm", 5, S}, {"next_pid", 6, I},
      {"next_prio", 7, I}}},
    {"power", "cpu_frequency", 11, {{"state", 1, U}, {"cpu_id", 2, U}}},
    {"power", "cpu_idle", 13, {{"state", 1, U}, {"cpu_id", 2, U}}},
    {"sched", "sched_wakeup", 17, WAKEUP_FIELDS},
    /* caller: a kernel address (void *), written as its index. */
    {"sched", "sched_blocked_reason", 18,
     {{"pid", 1, I}, {"caller", 2, U}, {"io_wait", 3, U}}},
    {"sched", "sched_waking", 20, WAKEUP_FIELDS},
    {"irq", "softirq_entry", 24, {{"vec", 1, U}}},
    {"irq", "softirq_exit", 25, {{"vec", 1, U}}},
    {"irq", "irq_handler_entry", 36,
     {{"irq", 1, I}, {"name", 2, S}, {"handler", 3, U}}},
    {"irq", "irq_handler_exit", 37, {{"irq", 1, I}, {"ret", 2, I}}},
    {"block", "block_rq_issue", 45,
     {{"dev", 1, U}, {"sector", 2, U}, {"nr_sector", 3, U}, {"bytes", 4, U},
      {"rwbs", 5, S}, {"comm", 6, S}, {"cmd", 7, S}}},
    /* work and function are kernel addresses (void *), written as indices;
     * trace_processor names the work slices after function's symbol. */
    {"workqueue", "workqueue_activate_work", 56,
     {{"work", 1, U}, {"function", 2, U}}},
    {"workqueue", "workqueue_execute_end", 57,
     {{"work", 1, U}, {"function", 2, U}}},
    {"workqueue", "workqueue_execute_start", 58,
     {{"work", 1, U}, {"function", 2, U}}},
    /* Older kernels have a workqueue pointer, not its name: left out. */
    {"workqueue", "workqueue_queue_work", 59,
     {{"work", 1, U}, {"function", 2, U}, {"workqueue", 3, S},
      {"req_cpu", 4, I}, {"cpu", 5, I}}},
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
    {"sched", "sched_process_exit", 238,
     {{"comm", 1, S}, {"pid", 2, I}, {"tgid", 3, I}, {"prio", 4, I}}},
    {"sched", "sched_process_fork", 239,
     {{"parent_comm", 1, S}, {"parent_pid", 2, I}, {"child_comm", 3, S},
      {"child_pid", 4, I}}},
    {"sched", "sched_process_free", 240,
     {{"comm", 1, S}, {"pid", 2, I}, {"prio", 3, I}}},
    /* Process memory counters: trace_processor's mem.rss.* tracks. Newer
     * kernels add mm_id and curr; older ones have only member and size. */
    {"kmem", "rss_stat", 313,
     {{"member", 1, I}, {"size", 2, I}, {"curr", 3, U}, {"mm_id", 4, U}}},
    {"raw_syscalls", "sys_enter", 329,
     {{"id", 1, I}, {"args", 2, TG_FTRACE_PT_REPEATED_UINT}}},
    {"raw_syscalls", "sys_exit", 330, {{"id", 1, I}, {"ret", 2, I}}},
};

const tg_ftrace_known_event_t *tg_ftrace_known_event(const char *group,
                                                     const char *name) {
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
    if (strcmp(known[i].group, group) == 0 && strcmp(known[i].name, name) == 0)
      return &known[i];
  return NULL;
}
