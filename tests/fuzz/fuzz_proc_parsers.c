/* Fuzzes the producers' /proc and /sys parsers and config readers
 * (agent/probes/, and agent/sys/proc_pid.h, which tracegate-perf's memory
 * guardrail reads its own status with too; abi/config_fields.h): the
 * first byte picks the parser, the rest is the file.
 *
 * Parsing must succeed or return TG_EPARSE / TG_EBAD_CONFIG, never crash
 * or read out of bounds; what parses must encode into a TracePacket that
 * protobuf-c decodes again.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "abi/config_fields.h"
#include "agent/probes/cpu_info.h"
#include "agent/probes/kernel_files.h"
#include "agent/probes/meminfo.h"
#include "agent/probes/probes_config.h"
#include "agent/probes/probes_packets.h"
#include "agent/probes/proc_stat.h"
#include "agent/probes/sysfs_files.h"
#include "agent/sys/proc_pid.h"
#include "pb/trace/trace_packet.pb-c.h"
#include "tracegate/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OUT_SIZE (4u << 20)

static void check_decodes(const uint8_t *out, tg_pbw_t *w) {
  if (tg_pbw_error(w) != 0) return; /* out of room: a clean error */
  Perfetto__Protos__TracePacket *p = perfetto__protos__trace_packet__unpack(
      NULL, (size_t)tg_pbw_written(w), out);
  if (!p) __builtin_trap();
  perfetto__protos__trace_packet__free_unpacked(p, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  unsigned which = data[0] % 17;
  /* An exact-size copy, so ASan sees any read past the end. */
  size_t n = size - 1;
  char *text = malloc(n ? n : 1);
  if (!text) return 0;
  memcpy(text, data + 1, n);
  static uint8_t *out;
  if (!out) out = malloc(OUT_SIZE);
  tg_pbw_t w;
  tg_pbw_init(&w, out, OUT_SIZE, NULL, NULL);
  int rv = 0;
  switch (which) {
    case 0: {
      tg_proc_stat_t st = {0};
      rv = tg_proc_stat_parse(text, n, &st);
      if (rv == 0) {
        tg_sys_stats_sample_t s = {.stat = &st, .stat_mask = ~0u,
                                   .ns_per_tick = 10000000};
        tg_probes_write_sys_stats(&w, &s);
        check_decodes(out, &w);
      }
      tg_proc_stat_free(&st);
      break;
    }
    case 1: {
      tg_meminfo_t m;
      rv = tg_meminfo_parse(text, n, &m);
      if (rv == 0) {
        tg_sys_stats_sample_t s = {.meminfo = &m, .meminfo_mask = ~UINT64_C(0)};
        tg_probes_write_sys_stats(&w, &s);
        check_decodes(out, &w);
      }
      break;
    }
    case 2: {
      tg_pid_stat_t ps;
      rv = tg_pid_stat_parse(text, n, &ps);
      if (rv == 0 && strlen(ps.comm) >= TG_PROC_NAME_MAX) __builtin_trap();
      break;
    }
    case 3: {
      tg_pid_status_t st;
      rv = tg_pid_status_parse(text, n, &st);
      if (rv == 0) {
        tg_proc_counters_t c = {.pid = st.pid};
        tg_proc_counters_from_status(&c, &st);
        tg_probes_write_process_stats(&w, 1, &c, 1, 2, 1);
        check_decodes(out, &w);
        /* The rest of the input doubles as a cmdline. */
        tg_proc_entry_t e = {.pid = st.pid, .ppid = st.ppid, .cmdline = text,
                             .cmdline_len = n, .name = st.name};
        tg_pbw_init(&w, out, OUT_SIZE, NULL, NULL);
        tg_thread_entry_t t = {.tid = st.pid + 1, .tgid = st.pid,
                               .name = st.name};
        tg_process_tree_t tree = {.procs = &e, .n_procs = 1, .threads = &t,
                                  .n_threads = 1};
        tg_probes_write_process_tree(&w, 1, &tree, 2);
        check_decodes(out, &w);
      }
      break;
    }
    case 4: {
      int64_t v;
      rv = tg_oom_score_adj_parse(text, n, &v);
      if (rv == 0 && (v < -1000 || v > 1000)) __builtin_trap();
      /* The other one-integer file: the kernel's last pid given out. */
      int64_t last;
      int rv2 = tg_ns_last_pid_parse(text, n, &last);
      if (rv2 == 0 && (last < 0 || last > INT32_MAX)) __builtin_trap();
      if (rv2 != 0 && rv2 != TG_EPARSE) __builtin_trap();
      break;
    }
    case 5: {
      tg_sys_stats_cfg_t c;
      rv = tg_sys_stats_cfg_parse((const uint8_t *)text, n, &c);
      if (rv != 0 && rv != TG_EBAD_CONFIG) __builtin_trap();
      rv = 0;
      break;
    }
    case 6: {
      tg_process_stats_cfg_t c;
      rv = tg_process_stats_cfg_parse((const uint8_t *)text, n, &c);
      if (rv != 0 && rv != TG_EBAD_CONFIG) __builtin_trap();
      rv = 0;
      break;
    }
    case 7: {
      static tg_vmstat_t v;
      rv = tg_vmstat_parse(text, n, &v);
      if (rv == 0) {
        uint64_t all[TG_VMSTAT_IDS / 64];
        memset(all, 0xff, sizeof(all));
        tg_sys_stats_sample_t s = {.vmstat = &v, .vmstat_mask = all};
        tg_probes_write_sys_stats(&w, &s);
        check_decodes(out, &w);
      }
      break;
    }
    case 8: {
      static tg_buddyinfo_t b;
      rv = tg_buddyinfo_parse(text, n, &b);
      if (rv == 0) {
        if (b.n_zones > TG_BUDDY_MAX_ZONES) __builtin_trap();
        tg_sys_stats_sample_t s = {.buddyinfo = &b};
        tg_probes_write_sys_stats(&w, &s);
        check_decodes(out, &w);
      }
      break;
    }
    case 9: {
      static tg_diskstats_t d;
      rv = tg_diskstats_parse(text, n, &d);
      if (rv == 0) {
        if (d.n_disks > TG_DISK_MAX) __builtin_trap();
        tg_sys_stats_sample_t s = {.diskstats = &d};
        tg_probes_write_sys_stats(&w, &s);
        check_decodes(out, &w);
      }
      break;
    }
    case 10: {
      tg_psi_t p;
      rv = tg_psi_parse(text, n, &p);
      if (rv == 0) {
        tg_sys_stats_sample_t s = {.psi = {&p, &p, &p}};
        tg_probes_write_sys_stats(&w, &s);
        check_decodes(out, &w);
      }
      break;
    }
    case 11: {
      tg_smaps_rollup_t r;
      rv = tg_smaps_rollup_parse(text, n, &r);
      /* The same bytes as a config: the unacted-field lister must cope. */
      char names[128];
      size_t k = tg_probes_unacted_fields("linux.process_stats",
                                          (const uint8_t *)text, n, names,
                                          sizeof(names));
      if (k == 0 && names[0] != '\0') __builtin_trap();
      if (strlen(names) >= sizeof(names)) __builtin_trap();
      break;
    }
    case 12: {
      /* /proc/cpuinfo: every described CPU within bounds, and what parses
       * encodes into a cpu_info packet that decodes. */
      tg_cpu_info_t ci;
      rv = tg_cpu_info_parse(text, n, &ci);
      if (rv == 0) {
        if (ci.n == 0 || ci.n > TG_CPU_INFO_MAX_CPUS) __builtin_trap();
        for (uint32_t i = 0; i < ci.n; i++)
          if (strnlen(ci.cpus[i].processor, TG_CPU_INFO_NAME_MAX) ==
              TG_CPU_INFO_NAME_MAX)
            __builtin_trap();
        tg_cpu_info_write(&w, 1, &ci);
        check_decodes(out, &w);
        tg_cpu_info_free(&ci);
      }
      break;
    }
    case 13: {
      tg_cpu_desc_t d = {0};
      rv = tg_cpu_info_parse_freqs(text, n, &d);
      if (d.n_freqs > TG_CPU_INFO_MAX_FREQS) __builtin_trap();
      break;
    }
    case 14: {
      /* A sysfs number (temp, time, cur_freq, gt_act_freq_mhz) as every
       * /sys group writes it. */
      uint64_t v = 0;
      int64_t t = 0;
      int ru = tg_sysfs_u64_parse(text, n, &v);
      rv = tg_sysfs_i64_parse(text, n, &t);
      if (ru != 0 && ru != TG_EPARSE) __builtin_trap();
      if (ru == 0 && rv == 0 && (uint64_t)t != v) __builtin_trap();
      if (ru == 0) {
        tg_thermal_zone_t z = {"thermal_zone0", "zone", v / 1000};
        tg_cpuidle_state_t st = {"C1", v};
        tg_cpuidle_cpu_t c = {.cpu = 0, .states = &st, .n_states = 1};
        tg_devfreq_t d = {"dev", v};
        tg_sys_stats_sample_t s = {.thermal = &z, .n_thermal = 1,
                                   .cpuidle = &c, .n_cpuidle = 1,
                                   .devfreq = &d, .n_devfreq = 1,
                                   .has_gpufreq = true, .gpufreq_mhz = v};
        tg_probes_write_sys_stats(&w, &s);
        check_decodes(out, &w);
      }
      break;
    }
    case 15: {
      /* A thermal zone's type or an idle state's name: bounded, printable,
       * and a packet string that decodes. */
      tg_thermal_zone_t z = {.name = "thermal_zone0"};
      rv = tg_sysfs_name_parse(text, n, z.type, sizeof(z.type));
      size_t len = strnlen(z.type, sizeof(z.type));
      if (len == sizeof(z.type)) __builtin_trap();
      if (rv == 0) {
        if (len == 0) __builtin_trap();
        for (size_t i = 0; i < len; i++)
          if (z.type[i] < 0x20 || z.type[i] > 0x7e) __builtin_trap();
        tg_cpuidle_state_t st = {.time_us = 1};
        memcpy(st.name, z.type, sizeof(st.name));
        tg_cpuidle_cpu_t c = {.cpu = 1, .states = &st, .n_states = 1};
        tg_sys_stats_sample_t s = {.thermal = &z, .n_thermal = 1,
                                   .cpuidle = &c, .n_cpuidle = 1};
        tg_probes_write_sys_stats(&w, &s);
        check_decodes(out, &w);
      } else if (len != 0) {
        __builtin_trap();
      }
      break;
    }
    case 16: {
      uint64_t mhz = 0;
      rv = tg_amdgpu_sclk_parse(text, n, &mhz);
      break;
    }
  }
  if (rv != 0 && rv != TG_EPARSE && rv != -12 /* ENOMEM */) __builtin_trap();
  free(text);
  return 0;
}
