/* tracegate-probes' pure parts (agent/probes/): the /proc parsers on
 * realistic, truncated and garbled fixtures, the packet encoders decoded
 * back with protobuf-c, the config readers, and one pass over this
 * machine's real /proc. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tracegate/pb_writer.h"
#include "agent/probes/cpu_info.h"
#include "agent/probes/meminfo.h"
#include "agent/probes/probes_config.h"
#include "agent/probes/probes_packets.h"
#include "agent/sys/proc_pid.h"
#include "agent/sys/proc_read.h"
#include "agent/probes/proc_stat.h"
#include "pb/config/data_source_config.pb-c.h"
#include "pb/trace/trace_packet.pb-c.h"
#include "tracegate/error.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define STAT_BIT(name) \
  TG_STAT_BIT(PERFETTO__PROTOS__SYS_STATS_CONFIG__STAT_COUNTERS__##name)

/* --- fixtures ------------------------------------------------------------ */

static const char proc_stat_fixture[] =
    "cpu  1032466 2119 290711 47393470 12590 0 8406 0 0 0\n"
    "cpu0 258720 519 72956 11843210 3135 0 5210 0 0 0\n"
    "cpu1 257851 530 72290 11849935 3140 0 1390 7 0 0\n"
    "cpu2 258118 548 72781 11849616 3168 0 1010 0 0 0\n"
    "cpu3 257775 520 72682 11850708 3146 0 795 0 0 0\n"
    "intr 59834211 9 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 731\n"
    "ctxt 110370845\n"
    "btime 1700000000\n"
    "processes 418232\n"
    "procs_running 2\n"
    "procs_blocked 0\n"
    "softirq 31538190 4 10532109 13 210339 0 0 7 12017690 0 8778028\n";

static const char meminfo_fixture[] =
    "MemTotal:       16303604 kB\n"
    "MemFree:         9035708 kB\n"
    "MemAvailable:   13582936 kB\n"
    "Buffers:          305532 kB\n"
    "Cached:          4186720 kB\n"
    "SwapCached:            0 kB\n"
    "Active:          2834056 kB\n"
    "Inactive:        3689984 kB\n"
    "Active(anon):      10536 kB\n"
    "Inactive(anon):  2057008 kB\n"
    "Active(file):    2823520 kB\n"
    "Inactive(file):  1632976 kB\n"
    "Unevictable:       11264 kB\n"
    "Mlocked:              32 kB\n"
    "SwapTotal:       2097148 kB\n"
    "SwapFree:        2097148 kB\n"
    "Dirty:               396 kB\n"
    "Writeback:             0 kB\n"
    "AnonPages:       2043072 kB\n"
    "Mapped:           730320 kB\n"
    "Shmem:             27264 kB\n"
    "KReclaimable:     393540 kB\n"
    "Slab:             574912 kB\n"
    "SReclaimable:     393540 kB\n"
    "SUnreclaim:       181372 kB\n"
    "KernelStack:       14976 kB\n"
    "PageTables:        33512 kB\n"
    "NFS_Unstable:          0 kB\n"
    "Bounce:                0 kB\n"
    "WritebackTmp:          0 kB\n"
    "CommitLimit:    10248948 kB\n"
    "Committed_AS:    7925732 kB\n"
    "VmallocTotal:   34359738367 kB\n"
    "VmallocUsed:       58308 kB\n"
    "VmallocChunk:          0 kB\n"
    "Percpu:            10432 kB\n"
    "HardwareCorrupted:     0 kB\n"
    "AnonHugePages:         0 kB\n"
    "CmaTotal:              0 kB\n"
    "CmaFree:               0 kB\n"
    "HugePages_Total:       0\n"
    "HugePages_Free:        0\n"
    "Hugepagesize:       2048 kB\n"
    "DirectMap4k:      456524 kB\n";

/* A command name with blanks and parentheses, which is why the name ends
 * at the last ')'. */
static const char pid_stat_fixture[] =
    "4242 (tricky) name (x)) S 1 4242 4242 0 -1 4194560 15230 0 12 0 "
    "3311 1207 0 0 20 0 7 0 123456 2143289344 6542 18446744073709551615 "
    "94251 94252 140731 0 0 0 0 4096 16384 0 0 0 17 3 0 0 0 0 0 94253 "
    "94254 94255 140732 140733 140734 140735 0\n";

static const char pid_status_fixture[] =
    "Name:\tnginx: worker\n"
    "Umask:\t0022\n"
    "State:\tS (sleeping)\n"
    "Tgid:\t4242\n"
    "Ngid:\t0\n"
    "Pid:\t4242\n"
    "PPid:\t1\n"
    "TracerPid:\t0\n"
    "Uid:\t33\t33\t33\t33\n"
    "Gid:\t33\t33\t33\t33\n"
    "FDSize:\t64\n"
    "Groups:\t33 \n"
    "NStgid:\t4242\n"
    "NSpid:\t4242\n"
    "VmPeak:\t  223456 kB\n"
    "VmSize:\t  209300 kB\n"
    "VmLck:\t       4 kB\n"
    "VmPin:\t       0 kB\n"
    "VmHWM:\t   27812 kB\n"
    "VmRSS:\t   26168 kB\n"
    "RssAnon:\t    8120 kB\n"
    "RssFile:\t   17024 kB\n"
    "RssShmem:\t    1024 kB\n"
    "VmData:\t   12044 kB\n"
    "VmStk:\t     132 kB\n"
    "VmExe:\t    1024 kB\n"
    "VmLib:\t    8744 kB\n"
    "VmPTE:\t     120 kB\n"
    "VmSwap:\t      16 kB\n"
    "HugetlbPages:\t       0 kB\n"
    "CoreDumping:\t0\n"
    "THP_enabled:\t1\n"
    "Threads:\t7\n"
    "SigQ:\t0/63448\n"
    "SigPnd:\t0000000000000000\n"
    "Cpus_allowed:\tff\n"
    "Cpus_allowed_list:\t0-7\n"
    "voluntary_ctxt_switches:\t1532\n"
    "nonvoluntary_ctxt_switches:\t12\n";

static const char kthread_status_fixture[] =
    "Name:\tkworker/0:1H\n"
    "Umask:\t0000\n"
    "State:\tI (idle)\n"
    "Tgid:\t97\n"
    "Pid:\t97\n"
    "PPid:\t2\n"
    "Uid:\t0\t0\t0\t0\n"
    "Threads:\t1\n";

/* Every prefix of |text| must parse or fail cleanly (ASan/UBSan watch);
 * a copy of exactly |len| bytes catches reads past the end. Returns how
 * many prefixes parsed. */
typedef int (*parse_fn)(const char *text, size_t len);

static size_t every_prefix(const char *text, parse_fn fn) {
  size_t n = strlen(text), ok = 0;
  for (size_t len = 0; len <= n; len++) {
    char *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    memcpy(copy, text, len);
    int rv = fn(copy, len);
    if (rv != 0 && rv != TG_EPARSE) fail_msg("prefix %zu: rv %d", len, rv);
    if (rv == 0) ok++;
    free(copy);
  }
  return ok;
}

static int parse_stat_fn(const char *t, size_t n) {
  tg_proc_stat_t s = {0};
  int rv = tg_proc_stat_parse(t, n, &s);
  tg_proc_stat_free(&s);
  return rv;
}
static int parse_meminfo_fn(const char *t, size_t n) {
  tg_meminfo_t m;
  return tg_meminfo_parse(t, n, &m);
}
static int parse_pid_stat_fn(const char *t, size_t n) {
  tg_pid_stat_t s;
  return tg_pid_stat_parse(t, n, &s);
}
static int parse_status_fn(const char *t, size_t n) {
  tg_pid_status_t s;
  return tg_pid_status_parse(t, n, &s);
}

static Perfetto__Protos__TracePacket *decode(const uint8_t *buf, tg_pbw_t *w) {
  assert_int_equal(tg_pbw_error(w), 0);
  Perfetto__Protos__TracePacket *p = perfetto__protos__trace_packet__unpack(
      NULL, (size_t)tg_pbw_written(w), buf);
  assert_non_null(p);
  return p;
}

/* --- /proc/stat ---------------------------------------------------------- */

static void proc_stat_parses_realistic_file(void **state) {
  (void)state;
  tg_proc_stat_t s = {0};
  assert_int_equal(tg_proc_stat_parse(proc_stat_fixture,
                                      strlen(proc_stat_fixture), &s),
                   0);
  assert_int_equal(s.n_cpus, 4); /* the "cpu" sum is not a cpu */
  const tg_cpu_times_t *c1 = &s.cpus[1];
  assert_int_equal(c1->cpu_id, 1);
  assert_int_equal(c1->user, 257851);
  assert_int_equal(c1->nice, 530);
  assert_int_equal(c1->system, 72290);
  assert_int_equal(c1->idle, 11849935);
  assert_int_equal(c1->iowait, 3140);
  assert_int_equal(c1->irq, 0);
  assert_int_equal(c1->softirq, 1390);
  assert_int_equal(c1->steal, 7);
  assert_int_equal(s.cpus[3].cpu_id, 3);
  assert_int_equal(s.cpus[3].softirq, 795);
  assert_int_equal(s.present, TG_PROC_STAT_HAS_IRQ | TG_PROC_STAT_HAS_SOFTIRQ |
                                  TG_PROC_STAT_HAS_FORKS);
  assert_int_equal(s.irq_total, 59834211);
  assert_int_equal(s.n_irqs, 25);
  assert_int_equal(s.irqs[0], 9);
  assert_int_equal(s.irqs[8], 1);
  assert_int_equal(s.irqs[24], 731);
  assert_int_equal(s.softirq_total, 31538190);
  assert_int_equal(s.n_softirqs, 10);
  assert_int_equal(s.softirqs[1], 10532109);
  assert_int_equal(s.softirqs[9], 8778028);
  assert_int_equal(s.forks, 418232);

  /* Reused: the second parse replaces, not appends. */
  assert_int_equal(tg_proc_stat_parse(proc_stat_fixture,
                                      strlen(proc_stat_fixture), &s),
                   0);
  assert_int_equal(s.n_cpus, 4);
  assert_int_equal(s.n_irqs, 25);
  tg_proc_stat_free(&s);
}

static void proc_stat_accepts_old_kernels_and_offline_gaps(void **state) {
  (void)state;
  /* 2.4 kernels: four fields. cpu1 offline: ids are not positions. */
  const char t[] = "cpu  10 20 30 40\ncpu0 1 2 3 4\ncpu2 5 6 7 8";
  tg_proc_stat_t s = {0};
  assert_int_equal(tg_proc_stat_parse(t, strlen(t), &s), 0);
  assert_int_equal(s.n_cpus, 2);
  assert_int_equal(s.cpus[1].cpu_id, 2);
  assert_int_equal(s.cpus[1].idle, 8);
  assert_int_equal(s.cpus[1].iowait, 0);
  assert_int_equal(s.cpus[1].steal, 0);
  assert_int_equal(s.present, 0);
  tg_proc_stat_free(&s);
}

static void proc_stat_rejects_garbled_input(void **state) {
  (void)state;
  static const char *const bad[] = {
      "",
      "\n\n\n",
      "garbage without any cpu\n",
      "cpu  1 2 3 4\n", /* the sum only */
      "cpu0 1 2 3\n",   /* truncated after 3 fields */
      "cpu0 1 2 x 4\n",
      "cpu0 1 2 -3 4\n",
      "cpuX 1 2 3 4\n",
      "cpu0x 1 2 3 4\n",
      "cpu99999999999 1 2 3 4\n",
      "cpu0 99999999999999999999999 2 3 4\n",
      "cpu0 1 2 3 4\nintr\n",
      "cpu0 1 2 3 4\nintr 5 6 seven\n",
      "cpu0 1 2 3 4\nsoftirq x\n",
      "cpu0 1 2 3 4\nprocesses 12 13\n",
      "cpu0 1 2 3 4\nprocesses\n",
  };
  for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
    tg_proc_stat_t s = {0};
    int rv = tg_proc_stat_parse(bad[i], strlen(bad[i]), &s);
    if (rv != TG_EPARSE) fail_msg("fixture %zu parsed (%d): %s", i, rv, bad[i]);
    tg_proc_stat_free(&s);
  }
  /* Bytes that are not text at all. */
  const char bin[] = "cpu0\0\xff\x01 2 3 4\n\0\0cpu";
  tg_proc_stat_t s = {0};
  assert_int_equal(tg_proc_stat_parse(bin, sizeof(bin), &s), TG_EPARSE);
  tg_proc_stat_free(&s);
}

static void proc_stat_survives_every_truncation(void **state) {
  (void)state;
  size_t ok = every_prefix(proc_stat_fixture, parse_stat_fn);
  assert_true(ok > 0);
  /* Cut inside cpu0's fourth number: still 4 fields. Cut after its third:
   * an error. */
  const char *cpu0 = strstr(proc_stat_fixture, "cpu0 ");
  size_t upto_3 = (size_t)(cpu0 - proc_stat_fixture) + strlen("cpu0 258720 519 72956");
  assert_int_equal(parse_stat_fn(proc_stat_fixture, upto_3), TG_EPARSE);
  assert_int_equal(parse_stat_fn(proc_stat_fixture, upto_3 + 3), 0);
}

/* --- /proc/meminfo ------------------------------------------------------- */

static void meminfo_parses_realistic_file(void **state) {
  (void)state;
  tg_meminfo_t m;
  assert_int_equal(tg_meminfo_parse(meminfo_fixture, strlen(meminfo_fixture),
                                    &m),
                   0);
  assert_int_equal(m.value_kb[PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_TOTAL],
                   16303604);
  assert_int_equal(m.value_kb[PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_FREE],
                   9035708);
  assert_int_equal(
      m.value_kb[PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_AVAILABLE],
      13582936);
  assert_int_equal(
      m.value_kb[PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_INACTIVE_ANON],
      2057008);
  assert_int_equal(
      m.value_kb[PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_SLAB_RECLAIMABLE],
      393540);
  assert_int_equal(
      m.value_kb[PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_COMMITED_AS],
      7925732);
  assert_int_equal(
      m.value_kb[PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_VMALLOC_TOTAL],
      UINT64_C(34359738367));
  /* Every counter 1..33 is in this file; unnamed keys are skipped. */
  assert_int_equal(m.present, (~UINT64_C(0) << 1) & ((UINT64_C(1) << 34) - 1));
  assert_int_equal(tg_meminfo_key_id("Active(file)", 12),
                   PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_ACTIVE_FILE);
  assert_int_equal(tg_meminfo_key_id("Active(fil", 10), 0);
  assert_int_equal(tg_meminfo_key_id("HugePages_Total", 15), 0);
  /* A key with NULs past a known name must not read past that name. */
  assert_int_equal(tg_meminfo_key_id("CmaFree\0\0\0", 10), 0);
  const char nul_key[] = "CmaFree\0\0: 5 kB\nMemFree: 7 kB\n";
  tg_meminfo_t m2;
  assert_int_equal(tg_meminfo_parse(nul_key, sizeof(nul_key) - 1, &m2), 0);
  assert_int_equal(m2.present,
                   UINT64_C(1) << PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_FREE);
}

static void meminfo_rejects_garbled_input(void **state) {
  (void)state;
  static const char *const bad[] = {
      "",
      "\n",
      "MemTotal 123 kB\n",
      "MemTotal: abc kB\n",
      "MemTotal: 12 MB\n",
      "MemTotal: 12 kB extra\n",
      "MemTotal:\n",
      ": 12 kB\n",
      "MemTotal: -12 kB\n",
      "MemTotal: 99999999999999999999999 kB\n",
      "HugePages_Total: 0\n", /* well-formed but no counter at all */
  };
  for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
    tg_meminfo_t m;
    int rv = tg_meminfo_parse(bad[i], strlen(bad[i]), &m);
    if (rv != TG_EPARSE) fail_msg("fixture %zu parsed: %s", i, bad[i]);
  }
  assert_true(every_prefix(meminfo_fixture, parse_meminfo_fn) > 0);
  /* A cut inside a key name (no ':' yet) is an error. */
  assert_int_equal(parse_meminfo_fn(meminfo_fixture, strlen("MemTotal:       16303604 kB\nMemF")),
                   TG_EPARSE);
}

/* --- /proc/<pid>/stat and status ---------------------------------------- */

static void pid_stat_parses_names_with_parentheses(void **state) {
  (void)state;
  tg_pid_stat_t s;
  assert_int_equal(tg_pid_stat_parse(pid_stat_fixture,
                                     strlen(pid_stat_fixture), &s),
                   0);
  assert_int_equal(s.pid, 4242);
  assert_string_equal(s.comm, "tricky) name (x)");
  assert_int_equal(s.state, 'S');
  assert_int_equal(s.ppid, 1);
  assert_int_equal(s.utime, 3311);
  assert_int_equal(s.stime, 1207);
  assert_int_equal(s.num_threads, 7);
  assert_int_equal(s.starttime, 123456);

  const char kthread[] = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 12 0 0 "
                         "20 0 1 0 4 0 0 18446744073709551615 0 0 0 0 0 0 0 "
                         "2147483647 0 1 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0";
  assert_int_equal(tg_pid_stat_parse(kthread, strlen(kthread), &s), 0);
  assert_int_equal(s.pid, 2);
  assert_string_equal(s.comm, "kthreadd");
  assert_int_equal(s.ppid, 0);
  assert_int_equal(s.stime, 12);
  assert_int_equal(s.starttime, 4);

  /* Exactly 22 fields, no newline: enough. */
  const char short22[] = "7 (a) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19";
  assert_int_equal(tg_pid_stat_parse(short22, strlen(short22), &s), 0);
  assert_int_equal(s.utime, 11);
  assert_int_equal(s.stime, 12);
  assert_int_equal(s.num_threads, 17);
  assert_int_equal(s.starttime, 19);
}

static void pid_stat_rejects_garbled_input(void **state) {
  (void)state;
  static const char *const bad[] = {
      "",
      "abc",
      "12",
      "12 (x",
      "12 x) S 1",
      "12 (x) S",
      "12 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18", /* 21 fields */
      "12 (x) S 1 2 3 4 5 6 7 8 9 10 x 12 13 14 15 16 17 18 19",
      "12 (x) S 1 2 3 4 5 6 7 8 9 10 -11 12 13 14 15 16 17 18 19",
      "12 (x) SS 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19",
      "12 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19x",
      "-12 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19",
      "0 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19",
  };
  for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
    tg_pid_stat_t s;
    if (tg_pid_stat_parse(bad[i], strlen(bad[i]), &s) != TG_EPARSE)
      fail_msg("fixture %zu parsed: %s", i, bad[i]);
  }
  /* Truncated anywhere before starttime: an error; after it: fine. */
  every_prefix(pid_stat_fixture, parse_pid_stat_fn);
  const char *st = strstr(pid_stat_fixture, " 123456 ");
  size_t before = (size_t)(st - pid_stat_fixture);
  for (size_t len = 0; len <= before; len++)
    assert_int_equal(parse_pid_stat_fn(pid_stat_fixture, len), TG_EPARSE);
  assert_int_equal(parse_pid_stat_fn(pid_stat_fixture, before + 7), 0);
}

static void pid_status_parses_user_process(void **state) {
  (void)state;
  tg_pid_status_t s;
  assert_int_equal(tg_pid_status_parse(pid_status_fixture,
                                       strlen(pid_status_fixture), &s),
                   0);
  assert_string_equal(s.name, "nginx: worker");
  assert_int_equal(s.pid, 4242);
  assert_int_equal(s.tgid, 4242);
  assert_int_equal(s.ppid, 1);
  assert_int_equal(s.uid, 33);
  assert_int_equal(s.vm_size_kb, 209300);
  assert_int_equal(s.vm_rss_kb, 26168);
  assert_int_equal(s.rss_anon_kb, 8120);
  assert_int_equal(s.rss_file_kb, 17024);
  assert_int_equal(s.rss_shmem_kb, 1024);
  assert_int_equal(s.vm_swap_kb, 16);
  assert_int_equal(s.vm_locked_kb, 4);
  assert_int_equal(s.vm_hwm_kb, 27812);
  assert_true(s.present & TG_PID_STATUS_VM_RSS);
  assert_true(s.present & TG_PID_STATUS_UID);
}

static void pid_status_parses_kernel_thread(void **state) {
  (void)state;
  tg_pid_status_t s;
  assert_int_equal(tg_pid_status_parse(kthread_status_fixture,
                                       strlen(kthread_status_fixture), &s),
                   0);
  assert_string_equal(s.name, "kworker/0:1H");
  assert_int_equal(s.pid, 97);
  assert_int_equal(s.ppid, 2);
  assert_int_equal(s.present & (TG_PID_STATUS_VM_RSS | TG_PID_STATUS_VM_SIZE |
                                TG_PID_STATUS_RSS_ANON),
                   0);
  tg_proc_counters_t c = {0};
  tg_proc_counters_from_status(&c, &s);
  assert_int_equal(c.present, 0);
}

static void pid_status_rejects_garbled_input(void **state) {
  (void)state;
  static const char *const bad[] = {
      "",
      "Name:\tx\n", /* no Pid: truncated */
      "Name:\tx\nPid:\tabc\n",
      "Name:\tx\nPid:\t-5\n",
      "Name:\tx\nPid:\t0\n",
      "Name:\tx\nPid:\t5\nVmRSS:\t12\n",    /* no unit */
      "Name:\tx\nPid:\t5\nVmRSS:\t12 MB\n", /* wrong unit */
      "Name:\tx\nPid:\t5\nVmRSS:\tkB\n",
      "Name:\tx\nPid:\t5\nUid:\t99999999999\t0\n",
      "Name:\tx\nPid 5\n",
      "\x01\x02\x03",
  };
  for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
    tg_pid_status_t s;
    if (tg_pid_status_parse(bad[i], strlen(bad[i]), &s) != TG_EPARSE)
      fail_msg("fixture %zu parsed: %s", i, bad[i]);
  }
  every_prefix(pid_status_fixture, parse_status_fn);
  /* Cut before the Pid line: an error. */
  const char *pid = strstr(pid_status_fixture, "\nPid:");
  assert_int_equal(parse_status_fn(pid_status_fixture,
                                   (size_t)(pid - pid_status_fixture)),
                   TG_EPARSE);
  /* Names longer than the buffer are cut, never overflow. */
  char longname[300] = "Name:\t";
  memset(longname + 6, 'n', 200);
  strcpy(longname + 206, "\nPid:\t3\n");
  tg_pid_status_t s;
  assert_int_equal(tg_pid_status_parse(longname, strlen(longname), &s), 0);
  assert_int_equal(strlen(s.name), TG_PROC_NAME_MAX - 1);
}

static void oom_score_adj_parses_range(void **state) {
  (void)state;
  int64_t v;
  assert_int_equal(tg_oom_score_adj_parse("-1000\n", 6, &v), 0);
  assert_int_equal(v, -1000);
  assert_int_equal(tg_oom_score_adj_parse("300", 3, &v), 0);
  assert_int_equal(v, 300);
  assert_int_equal(tg_oom_score_adj_parse("", 0, &v), TG_EPARSE);
  assert_int_equal(tg_oom_score_adj_parse("1001\n", 5, &v), TG_EPARSE);
  assert_int_equal(tg_oom_score_adj_parse("12 13\n", 6, &v), TG_EPARSE);
  assert_int_equal(tg_oom_score_adj_parse("-\n", 2, &v), TG_EPARSE);
}

static void ns_last_pid_parses_a_pid(void **state) {
  (void)state;
  int64_t v;
  assert_int_equal(tg_ns_last_pid_parse("4194304\n", 8, &v), 0);
  assert_int_equal(v, 4194304);
  assert_int_equal(tg_ns_last_pid_parse("0", 1, &v), 0);
  assert_int_equal(v, 0);
  assert_int_equal(tg_ns_last_pid_parse("", 0, &v), TG_EPARSE);
  assert_int_equal(tg_ns_last_pid_parse("-1\n", 3, &v), TG_EPARSE);
  assert_int_equal(tg_ns_last_pid_parse("2147483648\n", 11, &v), TG_EPARSE);
  assert_int_equal(tg_ns_last_pid_parse("12 13\n", 6, &v), TG_EPARSE);
  assert_int_equal(tg_ns_last_pid_parse("12x\n", 4, &v), TG_EPARSE);
}

static void pids_new_finds_additions(void **state) {
  (void)state;
  const int32_t prev[] = {1, 5, 7, 100};
  const int32_t cur[] = {1, 2, 7, 8, 100, 200};
  int32_t out[6];
  size_t n = tg_pids_new(prev, 4, cur, 6, out);
  assert_int_equal(n, 3);
  assert_int_equal(out[0], 2);
  assert_int_equal(out[1], 8);
  assert_int_equal(out[2], 200);
  assert_int_equal(tg_pids_new(NULL, 0, cur, 6, out), 6);
  assert_int_equal(tg_pids_new(cur, 6, cur, 6, out), 0);
  assert_int_equal(tg_pids_new(prev, 4, NULL, 0, out), 0);
}

/* --- packets ------------------------------------------------------------- */

static void sys_stats_packet_decodes(void **state) {
  (void)state;
  tg_meminfo_t m;
  assert_int_equal(tg_meminfo_parse(meminfo_fixture, strlen(meminfo_fixture),
                                    &m),
                   0);
  tg_proc_stat_t st = {0};
  assert_int_equal(tg_proc_stat_parse(proc_stat_fixture,
                                      strlen(proc_stat_fixture), &st),
                   0);
  uint8_t *buf = malloc(1 << 16);
  tg_pbw_t w;
  tg_pbw_init(&w, buf, 1 << 16, NULL, NULL);
  uint64_t mask =
      (UINT64_C(1) << PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_TOTAL) |
      (UINT64_C(1) << PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_AVAILABLE) |
      (UINT64_C(1) << PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_SWAP_FREE);
  tg_sys_stats_sample_t s = {
      .ts_ns = 123456789,
      .end_ts_ns = 123999999,
      .meminfo = &m,
      .meminfo_mask = mask,
      .stat = &st,
      .stat_mask = ~0u,
      .ns_per_tick = 10000000,
  };
  tg_probes_write_sys_stats(&w, &s);
  Perfetto__Protos__TracePacket *p = decode(buf, &w);
  assert_true(p->has_timestamp);
  assert_int_equal(p->timestamp, 123456789);
  assert_int_equal(p->data_case, PERFETTO__PROTOS__TRACE_PACKET__DATA_SYS_STATS);
  const Perfetto__Protos__SysStats *ss = p->sys_stats;
  assert_int_equal(ss->n_meminfo, 3);
  assert_int_equal(ss->meminfo[0]->key,
                   PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_TOTAL);
  assert_int_equal(ss->meminfo[0]->value, 16303604);
  assert_int_equal(ss->meminfo[1]->key,
                   PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_AVAILABLE);
  assert_int_equal(ss->meminfo[1]->value, 13582936);
  assert_int_equal(ss->meminfo[2]->key,
                   PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_SWAP_FREE);
  assert_int_equal(ss->meminfo[2]->value, 2097148);
  assert_int_equal(ss->n_cpu_stat, 4);
  const Perfetto__Protos__SysStats__CpuTimes *c1 = ss->cpu_stat[1];
  assert_int_equal(c1->cpu_id, 1);
  assert_int_equal(c1->user_ns, UINT64_C(257851) * 10000000);
  assert_int_equal(c1->user_nice_ns, UINT64_C(530) * 10000000);
  assert_int_equal(c1->system_mode_ns, UINT64_C(72290) * 10000000);
  assert_int_equal(c1->idle_ns, UINT64_C(11849935) * 10000000);
  assert_int_equal(c1->io_wait_ns, UINT64_C(3140) * 10000000);
  assert_true(c1->has_irq_ns);
  assert_int_equal(c1->irq_ns, 0);
  assert_int_equal(c1->softirq_ns, UINT64_C(1390) * 10000000);
  assert_int_equal(c1->steal_ns, UINT64_C(7) * 10000000);
  assert_int_equal(ss->num_irq_total, 59834211);
  assert_int_equal(ss->n_num_irq, 3); /* zero counts are left out */
  assert_int_equal(ss->num_irq[0]->irq, 0);
  assert_int_equal(ss->num_irq[0]->count, 9);
  assert_int_equal(ss->num_irq[1]->irq, 8);
  assert_int_equal(ss->num_irq[2]->irq, 24);
  assert_int_equal(ss->num_irq[2]->count, 731);
  assert_int_equal(ss->num_softirq_total, 31538190);
  assert_int_equal(ss->n_num_softirq, 10);
  assert_int_equal(ss->num_softirq[9]->irq, 9);
  assert_int_equal(ss->num_softirq[9]->count, 8778028);
  assert_true(ss->has_num_forks);
  assert_int_equal(ss->num_forks, 418232);
  assert_int_equal(ss->collection_end_timestamp, 123999999);
  perfetto__protos__trace_packet__free_unpacked(p, NULL);

  /* Only cpu times, no meminfo this round. */
  tg_pbw_init(&w, buf, 1 << 16, NULL, NULL);
  s.meminfo = NULL;
  s.stat_mask = STAT_BIT(STAT_CPU_TIMES);
  tg_probes_write_sys_stats(&w, &s);
  p = decode(buf, &w);
  ss = p->sys_stats;
  assert_int_equal(ss->n_meminfo, 0);
  assert_int_equal(ss->n_cpu_stat, 4);
  assert_false(ss->has_num_irq_total);
  assert_int_equal(ss->n_num_irq, 0);
  assert_int_equal(ss->n_num_softirq, 0);
  assert_false(ss->has_num_forks);
  perfetto__protos__trace_packet__free_unpacked(p, NULL);

  /* Only forks. */
  tg_pbw_init(&w, buf, 1 << 16, NULL, NULL);
  s.stat_mask = STAT_BIT(STAT_FORK_COUNT);
  tg_probes_write_sys_stats(&w, &s);
  p = decode(buf, &w);
  assert_int_equal(p->sys_stats->n_cpu_stat, 0);
  assert_int_equal(p->sys_stats->num_forks, 418232);
  perfetto__protos__trace_packet__free_unpacked(p, NULL);

  tg_proc_stat_free(&st);
  free(buf);
}

static void sys_stats_packet_overflow_is_an_error(void **state) {
  (void)state;
  tg_proc_stat_t st = {0};
  assert_int_equal(tg_proc_stat_parse(proc_stat_fixture,
                                      strlen(proc_stat_fixture), &st),
                   0);
  uint8_t small[64];
  tg_pbw_t w;
  tg_pbw_init(&w, small, sizeof(small), NULL, NULL);
  tg_sys_stats_sample_t s = {.stat = &st, .stat_mask = ~0u, .ns_per_tick = 1};
  tg_probes_write_sys_stats(&w, &s);
  assert_int_equal(tg_pbw_error(&w), TG_ENO_SPACE);
  tg_proc_stat_free(&st);
}

static void process_tree_packet_decodes(void **state) {
  (void)state;
  static const char cmd1[] = "/usr/sbin/nginx\0-g\0daemon off;\0";
  static const char cmd2[] = "python3\0-c\0print(1)"; /* cut: no last NUL */
  static const char cmd3[] = "nginx: worker process\0\0\0\0";
  const tg_proc_entry_t procs[] = {
      {.pid = 10, .ppid = 1, .has_uid = true, .uid = 33, .cmdline = cmd1,
       .cmdline_len = sizeof(cmd1) - 1, .name = "nginx", .has_start = true,
       .start_ns = 4200000000},
      {.pid = 97, .ppid = 2, .has_uid = true, .uid = 0, .cmdline = "",
       .cmdline_len = 0, .name = "kworker/0:1H"},
      {.pid = 11, .ppid = 10, .cmdline = cmd2, .cmdline_len = sizeof(cmd2) - 1,
       .name = "python3"},
      {.pid = 12, .ppid = 10, .cmdline = cmd3, .cmdline_len = sizeof(cmd3) - 1,
       .name = "nginx"},
  };
  uint8_t buf[4096];
  tg_pbw_t w;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  const tg_thread_entry_t threads[] = {
      {.tid = 13, .tgid = 10, .name = "nginx-io"},
      {.tid = 14, .tgid = 10, .name = NULL}, /* names not recorded */
  };
  tg_process_tree_t tree = {.procs = procs, .n_procs = ARRAY_SIZE(procs),
                            .threads = threads,
                            .n_threads = ARRAY_SIZE(threads)};
  tg_probes_write_process_tree(&w, 1000, &tree, 2000);
  Perfetto__Protos__TracePacket *p = decode(buf, &w);
  assert_int_equal(p->timestamp, 1000);
  assert_int_equal(p->data_case,
                   PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE);
  const Perfetto__Protos__ProcessTree *t = p->process_tree;
  assert_int_equal(t->n_processes, 4);
  assert_int_equal(t->collection_end_timestamp, 2000);
  const Perfetto__Protos__ProcessTree__Process *a = t->processes[0];
  assert_int_equal(a->pid, 10);
  assert_int_equal(a->ppid, 1);
  assert_true(a->has_uid);
  assert_int_equal(a->uid, 33);
  assert_int_equal(a->n_cmdline, 3);
  assert_string_equal(a->cmdline[0], "/usr/sbin/nginx");
  assert_string_equal(a->cmdline[1], "-g");
  assert_string_equal(a->cmdline[2], "daemon off;");
  assert_true(a->has_process_start_from_boot);
  assert_int_equal(a->process_start_from_boot, 4200000000);
  assert_int_equal(t->n_threads, 2);
  assert_int_equal(t->threads[0]->tid, 13);
  assert_int_equal(t->threads[0]->tgid, 10);
  assert_string_equal(t->threads[0]->name, "nginx-io");
  assert_int_equal(t->threads[1]->tid, 14);
  assert_null(t->threads[1]->name);
  const Perfetto__Protos__ProcessTree__Process *k = t->processes[1];
  assert_false(k->has_process_start_from_boot);
  assert_int_equal(k->pid, 97);
  assert_int_equal(k->ppid, 2);
  assert_int_equal(k->n_cmdline, 1);
  assert_string_equal(k->cmdline[0], "kworker/0:1H");
  const Perfetto__Protos__ProcessTree__Process *py = t->processes[2];
  assert_false(py->has_uid);
  assert_int_equal(py->n_cmdline, 3);
  assert_string_equal(py->cmdline[2], "print(1)");
  const Perfetto__Protos__ProcessTree__Process *rw = t->processes[3];
  assert_int_equal(rw->n_cmdline, 1);
  assert_string_equal(rw->cmdline[0], "nginx: worker process");
  perfetto__protos__trace_packet__free_unpacked(p, NULL);
}

static void process_stats_packet_decodes(void **state) {
  (void)state;
  tg_pid_status_t st;
  assert_int_equal(tg_pid_status_parse(pid_status_fixture,
                                       strlen(pid_status_fixture), &st),
                   0);
  tg_pid_stat_t ps;
  assert_int_equal(tg_pid_stat_parse(pid_stat_fixture,
                                     strlen(pid_stat_fixture), &ps),
                   0);
  tg_proc_counters_t c[2] = {{.pid = st.pid}, {.pid = 77}};
  tg_proc_counters_from_status(&c[0], &st);
  c[0].has_oom_score_adj = true;
  c[0].oom_score_adj = -900;
  c[0].has_runtime = true;
  c[0].utime_ticks = ps.utime;
  c[0].stime_ticks = ps.stime;
  c[1].present = TG_PID_STATUS_VM_RSS;
  c[1].vm_rss_kb = 5;
  uint8_t buf[1024];
  tg_pbw_t w;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  tg_probes_write_process_stats(&w, 5000, c, 2, 6000, 10000000);
  Perfetto__Protos__TracePacket *p = decode(buf, &w);
  assert_int_equal(p->timestamp, 5000);
  assert_int_equal(p->data_case,
                   PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_STATS);
  const Perfetto__Protos__ProcessStats *s = p->process_stats;
  assert_int_equal(s->collection_end_timestamp, 6000);
  assert_int_equal(s->n_processes, 2);
  const Perfetto__Protos__ProcessStats__Process *a = s->processes[0];
  assert_int_equal(a->pid, 4242);
  assert_int_equal(a->vm_size_kb, 209300);
  assert_int_equal(a->vm_rss_kb, 26168);
  assert_int_equal(a->rss_anon_kb, 8120);
  assert_int_equal(a->rss_file_kb, 17024);
  assert_int_equal(a->rss_shmem_kb, 1024);
  assert_int_equal(a->vm_swap_kb, 16);
  assert_int_equal(a->vm_locked_kb, 4);
  assert_int_equal(a->vm_hwm_kb, 27812);
  assert_true(a->has_oom_score_adj);
  assert_int_equal(a->oom_score_adj, -900);
  assert_int_equal(a->runtime_user_mode, UINT64_C(3311) * 10000000);
  assert_int_equal(a->runtime_kernel_mode, UINT64_C(1207) * 10000000);
  const Perfetto__Protos__ProcessStats__Process *b = s->processes[1];
  assert_int_equal(b->pid, 77);
  assert_true(b->has_vm_rss_kb);
  assert_int_equal(b->vm_rss_kb, 5);
  assert_false(b->has_vm_size_kb);
  assert_false(b->has_oom_score_adj);
  assert_false(b->has_runtime_user_mode);
  perfetto__protos__trace_packet__free_unpacked(p, NULL);
}


/* --- linux.system_info ---------------------------------------------------- */

static void cpuinfo_of_x86_and_arm_parses_and_encodes(void **state) {
  (void)state;
  static const char x86[] =
      "processor\t: 0\nvendor_id\t: GenuineIntel\n"
      "model name\t: Intel(R) Xeon(R) CPU @ 2.20GHz \nflags\t\t: fpu vme\n\n"
      "processor\t: 1\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n";
  tg_cpu_info_t ci;
  assert_int_equal(tg_cpu_info_parse(x86, sizeof(x86) - 1, &ci), 0);
  assert_int_equal(ci.n, 2);
  assert_string_equal(ci.cpus[0].processor, "Intel(R) Xeon(R) CPU @ 2.20GHz");
  assert_string_equal(ci.cpus[1].processor, "Intel(R) Xeon(R) CPU @ 2.20GHz");
  assert_false(ci.cpus[0].has_arm);
  tg_cpu_info_free(&ci);

  /* ARM: one "Processor" line for all, identifiers per CPU, a gap. */
  static const char arm[] =
      "Processor\t: AArch64 Processor rev 4 (aarch64)\n"
      "processor\t: 0\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
      "CPU variant\t: 0x1\nCPU part\t: 0xd05\nCPU revision\t: 0\n\n"
      "processor\t: 2\nCPU implementer\t: 0x51\nCPU part\t: 0x804\n";
  assert_int_equal(tg_cpu_info_parse(arm, sizeof(arm) - 1, &ci), 0);
  assert_int_equal(ci.n, 3);
  assert_string_equal(ci.cpus[0].processor, "AArch64 Processor rev 4 (aarch64)");
  assert_true(ci.cpus[0].has_arm);
  assert_int_equal(ci.cpus[0].arm_implementer, 0x41);
  assert_int_equal(ci.cpus[0].arm_architecture, 8);
  assert_int_equal(ci.cpus[0].arm_variant, 1);
  assert_int_equal(ci.cpus[0].arm_part, 0xd05);
  assert_false(ci.cpus[1].present); /* offline: an empty entry */
  assert_int_equal(ci.cpus[2].arm_part, 0x804);
  static const char freqs[] = "300000 576000 748800\n";
  assert_int_equal(tg_cpu_info_parse_freqs(freqs, sizeof(freqs) - 1, &ci.cpus[0]), 0);
  assert_int_equal(ci.cpus[0].n_freqs, 3);
  ci.cpus[0].capacity = 1024;

  uint8_t out[4096];
  tg_pbw_t w;
  tg_pbw_init(&w, out, sizeof(out), NULL, NULL);
  tg_cpu_info_write(&w, 42, &ci);
  assert_int_equal(tg_pbw_error(&w), 0);
  Perfetto__Protos__TracePacket *p =
      perfetto__protos__trace_packet__unpack(NULL, (size_t)tg_pbw_written(&w), out);
  assert_non_null(p);
  assert_int_equal(p->timestamp, 42);
  assert_int_equal(p->data_case, PERFETTO__PROTOS__TRACE_PACKET__DATA_CPU_INFO);
  assert_int_equal(p->cpu_info->n_cpus, 3);
  const Perfetto__Protos__CpuInfo__Cpu *c0 = p->cpu_info->cpus[0];
  assert_string_equal(c0->processor, "AArch64 Processor rev 4 (aarch64)");
  assert_int_equal(c0->n_frequencies, 3);
  assert_int_equal(c0->frequencies[2], 748800);
  assert_int_equal(c0->capacity, 1024);
  assert_int_equal(c0->identifier_case,
                   PERFETTO__PROTOS__CPU_INFO__CPU__IDENTIFIER_ARM_IDENTIFIER);
  assert_int_equal(c0->arm_identifier->part, 0xd05);
  perfetto__protos__trace_packet__free_unpacked(p, NULL);
  tg_cpu_info_free(&ci);

  /* Not cpuinfo: refused, nothing owned. */
  static const char *bad[] = {"", "no cpus here\n", "processor\t: x\n",
                              "processor\t: 99999\n"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(tg_cpu_info_parse(bad[i], strlen(bad[i]), &ci), TG_EPARSE);
  static const char many[] = "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 "
      "21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 "
      "45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65";
  tg_cpu_desc_t d = {0};
  assert_int_equal(tg_cpu_info_parse_freqs(many, sizeof(many) - 1, &d), TG_EPARSE);
}

/* --- configs ------------------------------------------------------------- */

static uint8_t *pack_dsc(const Perfetto__Protos__DataSourceConfig *c,
                         size_t *len) {
  *len = perfetto__protos__data_source_config__get_packed_size(c);
  uint8_t *b = malloc(*len ? *len : 1);
  assert_non_null(b);
  perfetto__protos__data_source_config__pack(c, b);
  return b;
}

static void sys_stats_config_reads_periods_and_counters(void **state) {
  (void)state;
  Perfetto__Protos__DataSourceConfig dsc =
      PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
  Perfetto__Protos__SysStatsConfig ss = PERFETTO__PROTOS__SYS_STATS_CONFIG__INIT;
  Perfetto__Protos__MeminfoCounters mc[] = {
      PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_FREE,
      PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_CACHED};
  Perfetto__Protos__SysStatsConfig__StatCounters sc[] = {
      PERFETTO__PROTOS__SYS_STATS_CONFIG__STAT_COUNTERS__STAT_CPU_TIMES};
  dsc.name = "linux.sys_stats";
  dsc.sys_stats_config = &ss;
  ss.has_meminfo_period_ms = true;
  ss.meminfo_period_ms = 250;
  ss.n_meminfo_counters = 2;
  ss.meminfo_counters = mc;
  ss.has_stat_period_ms = true;
  ss.stat_period_ms = 3; /* raised to the minimum */
  ss.n_stat_counters = 1;
  ss.stat_counters = sc;
  ss.has_vmstat_period_ms = true;
  ss.vmstat_period_ms = 1000;
  size_t len;
  uint8_t *b = pack_dsc(&dsc, &len);
  tg_sys_stats_cfg_t c;
  assert_int_equal(tg_sys_stats_cfg_parse(b, len, &c), 0);
  assert_int_equal(c.period_ms[TG_SYS_MEMINFO], 250);
  assert_int_equal(c.meminfo_mask, (UINT64_C(1) << 2) | (UINT64_C(1) << 5));
  assert_int_equal(c.period_ms[TG_SYS_STAT], TG_SYS_STATS_MIN_PERIOD_MS);
  assert_int_equal(c.stat_mask, STAT_BIT(STAT_CPU_TIMES));
  assert_int_equal(c.period_ms[TG_SYS_VMSTAT], 1000);
  assert_int_equal(c.period_ms[TG_SYS_PSI], 0);
  free(b);

  /* No counters listed: all of them. */
  ss.n_meminfo_counters = 0;
  ss.n_stat_counters = 0;
  ss.has_vmstat_period_ms = false;
  ss.vmstat_period_ms = 0;
  b = pack_dsc(&dsc, &len);
  assert_int_equal(tg_sys_stats_cfg_parse(b, len, &c), 0);
  assert_int_equal(c.meminfo_mask, ~UINT64_C(0));
  assert_int_equal(c.stat_mask, ~0u);
  assert_int_equal(c.period_ms[TG_SYS_VMSTAT], 0);
  free(b);

  /* No sys_stats_config: nothing to poll. */
  dsc.sys_stats_config = NULL;
  b = pack_dsc(&dsc, &len);
  assert_int_equal(tg_sys_stats_cfg_parse(b, len, &c), 0);
  for (int g = 0; g < TG_SYS_GROUPS; g++) assert_int_equal(c.period_ms[g], 0);
  free(b);
  assert_int_equal(tg_sys_stats_cfg_parse(NULL, 0, &c), 0);

  const uint8_t garbage[] = {0x0a, 0x7f, 'x'}; /* name, length past the end */
  assert_int_equal(tg_sys_stats_cfg_parse(garbage, sizeof(garbage), &c),
                   TG_EBAD_CONFIG);
}

static void process_stats_config_reads_flags(void **state) {
  (void)state;
  Perfetto__Protos__DataSourceConfig dsc =
      PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
  Perfetto__Protos__ProcessStatsConfig ps =
      PERFETTO__PROTOS__PROCESS_STATS_CONFIG__INIT;
  dsc.name = "linux.process_stats";
  dsc.process_stats_config = &ps;
  ps.has_proc_stats_poll_ms = true;
  ps.proc_stats_poll_ms = 20; /* raised to the minimum */
  ps.has_scan_all_processes_on_start = true;
  ps.scan_all_processes_on_start = true;
  ps.has_record_process_runtime = true;
  ps.record_process_runtime = true;
  size_t len;
  uint8_t *b = pack_dsc(&dsc, &len);
  tg_process_stats_cfg_t c;
  assert_int_equal(tg_process_stats_cfg_parse(b, len, &c), 0);
  assert_int_equal(c.poll_ms, TG_PROC_STATS_MIN_POLL_MS);
  assert_true(c.scan_all_on_start);
  assert_true(c.record_runtime);
  free(b);

  ps.proc_stats_poll_ms = 1000;
  ps.record_process_runtime = false;
  b = pack_dsc(&dsc, &len);
  assert_int_equal(tg_process_stats_cfg_parse(b, len, &c), 0);
  assert_int_equal(c.poll_ms, 1000);
  assert_false(c.record_runtime);
  free(b);

  const uint8_t garbage[] = {0xff, 0xff, 0xff};
  assert_int_equal(tg_process_stats_cfg_parse(garbage, sizeof(garbage), &c),
                   TG_EBAD_CONFIG);
}

/* --- this machine -------------------------------------------------------- */

static void real_proc_reads_and_encodes(void **state) {
  (void)state;
  tg_buf_t file;
  tg_buf_init(&file, 4u << 20);

  assert_int_equal(tg_proc_read_file("/proc/stat", &file), 0);
  tg_proc_stat_t st = {0};
  assert_int_equal(tg_proc_stat_parse((const char *)tg_buf_begin(&file),
                                      tg_buf_size(&file), &st),
                   0);
  assert_true(st.n_cpus > 0);
  assert_true(st.n_cpus <= (size_t)sysconf(_SC_NPROCESSORS_CONF));
  assert_true(st.present & TG_PROC_STAT_HAS_FORKS);
  tg_proc_stat_free(&st);

  assert_int_equal(tg_proc_read_file("/proc/meminfo", &file), 0);
  tg_meminfo_t m;
  assert_int_equal(tg_meminfo_parse((const char *)tg_buf_begin(&file),
                                    tg_buf_size(&file), &m),
                   0);
  assert_true(m.value_kb[PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_TOTAL] >
              0);

  int32_t *pids = NULL;
  size_t n = 0, cap = 0;
  assert_int_equal(tg_proc_list_pids("/proc", &pids, &n, &cap), 0);
  int32_t self = (int32_t)getpid();
  bool found = false;
  for (size_t i = 0; i < n; i++) {
    if (i) assert_true(pids[i - 1] < pids[i]);
    if (pids[i] == self) found = true;
  }
  assert_true(found);
  free(pids);

  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)self);
  assert_int_equal(tg_proc_read_file(path, &file), 0);
  tg_pid_status_t status;
  assert_int_equal(tg_pid_status_parse((const char *)tg_buf_begin(&file),
                                       tg_buf_size(&file), &status),
                   0);
  assert_int_equal(status.pid, self);
  assert_int_equal(status.ppid, (int32_t)getppid());
  assert_true(status.present & TG_PID_STATUS_VM_RSS);
  assert_true(status.vm_rss_kb > 0);

  snprintf(path, sizeof(path), "/proc/%d/stat", (int)self);
  assert_int_equal(tg_proc_read_file(path, &file), 0);
  tg_pid_stat_t ps;
  assert_int_equal(tg_pid_stat_parse((const char *)tg_buf_begin(&file),
                                     tg_buf_size(&file), &ps),
                   0);
  assert_int_equal(ps.pid, self);
  assert_string_equal(ps.comm, status.name);
  assert_true(ps.num_threads >= 1);

  snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)self);
  assert_int_equal(tg_proc_read_file(path, &file), 0);
  tg_proc_entry_t e = {.pid = self, .ppid = status.ppid,
                       .cmdline = (const char *)tg_buf_begin(&file),
                       .cmdline_len = tg_buf_size(&file), .name = status.name};
  uint8_t buf[8192];
  tg_pbw_t w;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  tg_process_tree_t tree = {.procs = &e, .n_procs = 1};
  tg_probes_write_process_tree(&w, 1, &tree, 2);
  Perfetto__Protos__TracePacket *p = decode(buf, &w);
  assert_int_equal(p->process_tree->n_processes, 1);
  assert_true(p->process_tree->processes[0]->n_cmdline >= 1);
  assert_non_null(strstr(p->process_tree->processes[0]->cmdline[0],
                         "test_probes"));
  perfetto__protos__trace_packet__free_unpacked(p, NULL);

  /* A process that is not there: quietly "vanished". */
  int rv = tg_proc_read_file("/proc/2147483647/status", &file);
  assert_true(tg_proc_vanished(rv));
  /* A cap smaller than the file: -ENOBUFS with the beginning kept. */
  tg_buf_t small;
  tg_buf_init(&small, 16);
  assert_int_equal(tg_proc_read_file("/proc/meminfo", &small), -ENOBUFS);
  assert_int_equal(tg_buf_size(&small), 15);
  assert_int_equal(memcmp(tg_buf_begin(&small), "MemTotal:", 9), 0);
  tg_buf_free(&small);
  tg_buf_free(&file);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(proc_stat_parses_realistic_file),
      cmocka_unit_test(proc_stat_accepts_old_kernels_and_offline_gaps),
      cmocka_unit_test(proc_stat_rejects_garbled_input),
      cmocka_unit_test(proc_stat_survives_every_truncation),
      cmocka_unit_test(meminfo_parses_realistic_file),
      cmocka_unit_test(meminfo_rejects_garbled_input),
      cmocka_unit_test(pid_stat_parses_names_with_parentheses),
      cmocka_unit_test(pid_stat_rejects_garbled_input),
      cmocka_unit_test(pid_status_parses_user_process),
      cmocka_unit_test(pid_status_parses_kernel_thread),
      cmocka_unit_test(pid_status_rejects_garbled_input),
      cmocka_unit_test(oom_score_adj_parses_range),
      cmocka_unit_test(ns_last_pid_parses_a_pid),
      cmocka_unit_test(pids_new_finds_additions),
      cmocka_unit_test(sys_stats_packet_decodes),
      cmocka_unit_test(sys_stats_packet_overflow_is_an_error),
      cmocka_unit_test(process_tree_packet_decodes),
      cmocka_unit_test(process_stats_packet_decodes),
      cmocka_unit_test(cpuinfo_of_x86_and_arm_parses_and_encodes),
      cmocka_unit_test(sys_stats_config_reads_periods_and_counters),
      cmocka_unit_test(process_stats_config_reads_flags),
      cmocka_unit_test(real_proc_reads_and_encodes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
