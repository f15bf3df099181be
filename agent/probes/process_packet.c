/* ProcessTree and ProcessStats TracePackets; see probes_packets.h. */
#include "agent/probes/probes_packets.h"

#include <string.h>

/* TracePacket (proto/trace/trace_packet.proto). */
enum { PACKET_TIMESTAMP = 8, PACKET_PROCESS_TREE = 2, PACKET_PROCESS_STATS = 9 };
/* ProcessTree (proto/trace/ps/process_tree.proto). */
enum { TREE_PROCESSES = 1, TREE_THREADS = 2, TREE_COLLECTION_END = 3 };
enum {
  TREE_PID = 1,
  TREE_PPID = 2,
  TREE_CMDLINE = 3,
  TREE_UID = 5,
  TREE_START_FROM_BOOT = 7,
};
enum { THREAD_TID = 1, THREAD_NAME = 2, THREAD_TGID = 3 };
/* ProcessStats (proto/trace/ps/process_stats.proto). */
enum { STATS_PROCESSES = 1, STATS_COLLECTION_END = 2 };
enum {
  PS_PID = 1,
  PS_VM_SIZE_KB = 2,
  PS_VM_RSS_KB = 3,
  PS_RSS_ANON_KB = 4,
  PS_RSS_FILE_KB = 5,
  PS_RSS_SHMEM_KB = 6,
  PS_VM_SWAP_KB = 7,
  PS_VM_LOCKED_KB = 8,
  PS_VM_HWM_KB = 9,
  PS_OOM_SCORE_ADJ = 10,
  PS_SMR_RSS_KB = 16,
  PS_SMR_PSS_KB = 17,
  PS_SMR_PSS_ANON_KB = 18,
  PS_SMR_PSS_FILE_KB = 19,
  PS_SMR_PSS_SHMEM_KB = 20,
  PS_SMR_SWAP_PSS_KB = 23,
  PS_RUNTIME_USER_MODE = 21,
  PS_RUNTIME_KERNEL_MODE = 22,
};

/* One repeated string per NUL-terminated argument; a last argument without
 * its NUL (a truncated read) still counts. Trailing empty arguments, which
 * processes that rewrite their argv leave behind, are dropped. */
static size_t write_cmdline(tg_pbw_t *w, const char *s, size_t len) {
  while (len > 0 && s[len - 1] == '\0') len--;
  size_t n = 0;
  const char *p = s, *end = s + len;
  while (p < end) {
    const char *nul = memchr(p, '\0', (size_t)(end - p));
    const char *stop = nul ? nul : end;
    tg_pbw_append_bytes(w, TREE_CMDLINE, p, (size_t)(stop - p));
    n++;
    p = nul ? nul + 1 : end;
  }
  return n;
}

void tg_probes_write_process_tree(tg_pbw_t *w, uint64_t ts_ns,
                                  const tg_process_tree_t *tree,
                                  uint64_t end_ts_ns) {
  tg_pbw_append_varint(w, PACKET_TIMESTAMP, ts_ns);
  tg_pbw_begin_nested(w, PACKET_PROCESS_TREE);
  for (size_t i = 0; i < tree->n_procs; i++) {
    const tg_proc_entry_t *p = &tree->procs[i];
    tg_pbw_begin_nested(w, TREE_PROCESSES);
    tg_pbw_append_int(w, TREE_PID, p->pid);
    tg_pbw_append_int(w, TREE_PPID, p->ppid);
    size_t args = p->cmdline ? write_cmdline(w, p->cmdline, p->cmdline_len) : 0;
    /* Kernel threads have an empty cmdline; traced_probes uses the name. */
    if (args == 0 && p->name && p->name[0])
      tg_pbw_append_string(w, TREE_CMDLINE, p->name);
    if (p->has_uid) tg_pbw_append_int(w, TREE_UID, p->uid);
    if (p->has_start) tg_pbw_append_varint(w, TREE_START_FROM_BOOT, p->start_ns);
    tg_pbw_end_nested(w);
  }
  for (size_t i = 0; i < tree->n_threads; i++) {
    const tg_thread_entry_t *t = &tree->threads[i];
    tg_pbw_begin_nested(w, TREE_THREADS);
    tg_pbw_append_int(w, THREAD_TID, t->tid);
    if (t->name) tg_pbw_append_string(w, THREAD_NAME, t->name);
    tg_pbw_append_int(w, THREAD_TGID, t->tgid);
    tg_pbw_end_nested(w);
  }
  tg_pbw_append_varint(w, TREE_COLLECTION_END, end_ts_ns);
  tg_pbw_end_nested(w);
}

void tg_proc_counters_from_status(tg_proc_counters_t *c,
                                  const tg_pid_status_t *st) {
  c->present = st->present &
               (TG_PID_STATUS_VM_SIZE | TG_PID_STATUS_VM_RSS |
                TG_PID_STATUS_RSS_ANON | TG_PID_STATUS_RSS_FILE |
                TG_PID_STATUS_RSS_SHMEM | TG_PID_STATUS_VM_SWAP |
                TG_PID_STATUS_VM_LOCKED | TG_PID_STATUS_VM_HWM);
  c->vm_size_kb = st->vm_size_kb;
  c->vm_rss_kb = st->vm_rss_kb;
  c->rss_anon_kb = st->rss_anon_kb;
  c->rss_file_kb = st->rss_file_kb;
  c->rss_shmem_kb = st->rss_shmem_kb;
  c->vm_swap_kb = st->vm_swap_kb;
  c->vm_locked_kb = st->vm_locked_kb;
  c->vm_hwm_kb = st->vm_hwm_kb;
}

void tg_probes_write_process_stats(tg_pbw_t *w, uint64_t ts_ns,
                                   const tg_proc_counters_t *procs, size_t n,
                                   uint64_t end_ts_ns, uint64_t ns_per_tick) {
  static const struct {
    unsigned bit;
    uint32_t field;
    size_t off;
  } kb[] = {
      {TG_PID_STATUS_VM_SIZE, PS_VM_SIZE_KB,
       offsetof(tg_proc_counters_t, vm_size_kb)},
      {TG_PID_STATUS_VM_RSS, PS_VM_RSS_KB,
       offsetof(tg_proc_counters_t, vm_rss_kb)},
      {TG_PID_STATUS_RSS_ANON, PS_RSS_ANON_KB,
       offsetof(tg_proc_counters_t, rss_anon_kb)},
      {TG_PID_STATUS_RSS_FILE, PS_RSS_FILE_KB,
       offsetof(tg_proc_counters_t, rss_file_kb)},
      {TG_PID_STATUS_RSS_SHMEM, PS_RSS_SHMEM_KB,
       offsetof(tg_proc_counters_t, rss_shmem_kb)},
      {TG_PID_STATUS_VM_SWAP, PS_VM_SWAP_KB,
       offsetof(tg_proc_counters_t, vm_swap_kb)},
      {TG_PID_STATUS_VM_LOCKED, PS_VM_LOCKED_KB,
       offsetof(tg_proc_counters_t, vm_locked_kb)},
      {TG_PID_STATUS_VM_HWM, PS_VM_HWM_KB,
       offsetof(tg_proc_counters_t, vm_hwm_kb)},
  };
  tg_pbw_append_varint(w, PACKET_TIMESTAMP, ts_ns);
  tg_pbw_begin_nested(w, PACKET_PROCESS_STATS);
  for (size_t i = 0; i < n; i++) {
    const tg_proc_counters_t *c = &procs[i];
    tg_pbw_begin_nested(w, STATS_PROCESSES);
    tg_pbw_append_int(w, PS_PID, c->pid);
    for (size_t k = 0; k < sizeof(kb) / sizeof(kb[0]); k++) {
      if (!(c->present & kb[k].bit)) continue;
      uint64_t v;
      memcpy(&v, (const char *)c + kb[k].off, sizeof(v));
      tg_pbw_append_varint(w, kb[k].field, v);
    }
    if (c->has_oom_score_adj)
      tg_pbw_append_int(w, PS_OOM_SCORE_ADJ, c->oom_score_adj);
    if (c->has_smaps_rollup) {
      tg_pbw_append_varint(w, PS_SMR_RSS_KB, c->smr.rss_kb);
      tg_pbw_append_varint(w, PS_SMR_PSS_KB, c->smr.pss_kb);
      tg_pbw_append_varint(w, PS_SMR_PSS_ANON_KB, c->smr.pss_anon_kb);
      tg_pbw_append_varint(w, PS_SMR_PSS_FILE_KB, c->smr.pss_file_kb);
      tg_pbw_append_varint(w, PS_SMR_PSS_SHMEM_KB, c->smr.pss_shmem_kb);
      tg_pbw_append_varint(w, PS_SMR_SWAP_PSS_KB, c->smr.swap_pss_kb);
    }
    if (c->has_runtime) {
      tg_pbw_append_varint(w, PS_RUNTIME_USER_MODE,
                           c->utime_ticks * ns_per_tick);
      tg_pbw_append_varint(w, PS_RUNTIME_KERNEL_MODE,
                           c->stime_ticks * ns_per_tick);
    }
    tg_pbw_end_nested(w);
  }
  tg_pbw_append_varint(w, STATS_COLLECTION_END, end_ts_ns);
  tg_pbw_end_nested(w);
}
