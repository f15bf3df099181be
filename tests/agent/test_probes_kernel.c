/* tracegate-probes' sys_stats groups beyond meminfo and stat (vmstat,
 * buddyinfo, diskstats, pressure), smaps_rollup, the encoder of all of
 * them decoded back with protobuf-c, and the warning that names every
 * config field the probes do not act on. */
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

#include "agent/probes/kernel_files.h"
#include "agent/probes/probes_config.h"
#include "agent/probes/probes_packets.h"
#include "agent/sys/proc_pid.h"
#include "agent/sys/proc_read.h"
#include "pb/config/data_source_config.pb-c.h"
#include "pb/trace/trace_packet.pb-c.h"
#include "tracegate/error.h"
#include "tracegate/pb_writer.h"

#define ID(name) PERFETTO__PROTOS__VMSTAT_COUNTERS__VMSTAT_##name

static int parse_str(int (*fn)(const char *, size_t, void *), const char *s,
                     void *out) {
  return fn(s, strlen(s), out);
}
static int vmstat(const char *t, size_t n, void *o) { return tg_vmstat_parse(t, n, o); }
static int buddy(const char *t, size_t n, void *o) { return tg_buddyinfo_parse(t, n, o); }
static int disks(const char *t, size_t n, void *o) { return tg_diskstats_parse(t, n, o); }
static int psi(const char *t, size_t n, void *o) { return tg_psi_parse(t, n, o); }
static int smaps(const char *t, size_t n, void *o) { return tg_smaps_rollup_parse(t, n, o); }

/* --- /proc/vmstat -------------------------------------------------------- */

static void vmstat_keys_map_to_the_enum_by_name(void **state) {
  (void)state;
  assert_int_equal(tg_vmstat_key_id("nr_free_pages", 13), ID(NR_FREE_PAGES));
  assert_int_equal(tg_vmstat_key_id("pgfault", 7), ID(PGFAULT));
  assert_int_equal(tg_vmstat_key_id("nr_free_pages_blocks", 20), 0);
  assert_int_equal(tg_vmstat_key_id("NR_FREE_PAGES", 13), ID(NR_FREE_PAGES));
  assert_int_equal(tg_vmstat_key_id("nr-free", 7), 0);
  assert_int_equal(tg_vmstat_key_id("", 0), 0);
  char longkey[200];
  memset(longkey, 'a', sizeof(longkey));
  assert_int_equal(tg_vmstat_key_id(longkey, sizeof(longkey)), 0);
}

static void vmstat_parses_known_counters_and_skips_others(void **state) {
  (void)state;
  static tg_vmstat_t v;
  assert_int_equal(parse_str(vmstat,
                             "nr_free_pages 1031073\n"
                             "nr_free_pages_blocks 923136\n"
                             "pgfault 99\n"
                             "\n"
                             "pswpin 0",
                             &v),
                   0);
  assert_true(tg_vmstat_has(v.present, ID(NR_FREE_PAGES)));
  assert_int_equal(v.value[ID(NR_FREE_PAGES)], 1031073);
  assert_true(tg_vmstat_has(v.present, ID(PGFAULT)));
  assert_int_equal(v.value[ID(PGFAULT)], 99);
  assert_true(tg_vmstat_has(v.present, ID(PSWPIN)));
  assert_false(tg_vmstat_has(v.present, ID(PGMAJFAULT)));
}

static void vmstat_rejects_garbled_input(void **state) {
  (void)state;
  static tg_vmstat_t v;
  assert_int_equal(parse_str(vmstat, "nr_free_pages x\n", &v), TG_EPARSE);
  assert_int_equal(parse_str(vmstat, "nr_free_pages 1 2\n", &v), TG_EPARSE);
  assert_int_equal(parse_str(vmstat, "nr_free_pages\n", &v), TG_EPARSE);
  assert_int_equal(parse_str(vmstat, "only_unknown 5\n", &v), TG_EPARSE);
  assert_int_equal(parse_str(vmstat, "", &v), TG_EPARSE);
}

/* --- /proc/buddyinfo ----------------------------------------------------- */

static const char buddy_fixture[] =
    "Node 0, zone      DMA      0      0      0      1      3 \n"
    "Node 0, zone    DMA32      2      3      0      2    752 \n"
    "Node 1, zone   Normal     25      4     56     52    413 \n";

static void buddyinfo_parses_nodes_and_zones(void **state) {
  (void)state;
  static tg_buddyinfo_t b;
  assert_int_equal(parse_str(buddy, buddy_fixture, &b), 0);
  assert_int_equal(b.n_zones, 3);
  assert_string_equal(b.zones[0].node, "0");
  assert_string_equal(b.zones[0].zone, "DMA");
  assert_int_equal(b.zones[0].n_orders, 5);
  assert_int_equal(b.zones[0].order_pages[4], 3);
  assert_string_equal(b.zones[2].node, "1");
  assert_string_equal(b.zones[2].zone, "Normal");
  assert_int_equal(b.zones[2].order_pages[0], 25);
}

static void buddyinfo_rejects_garbled_input(void **state) {
  (void)state;
  static tg_buddyinfo_t b;
  assert_int_equal(parse_str(buddy, "Node 0 zone DMA 1\n", &b), TG_EPARSE);
  assert_int_equal(parse_str(buddy, "Node 0, area DMA 1\n", &b), TG_EPARSE);
  assert_int_equal(parse_str(buddy, "Node 0, zone DMA x\n", &b), TG_EPARSE);
  assert_int_equal(parse_str(buddy, "Node 0, zone DMA 99999999999\n", &b),
                   TG_EPARSE);
  assert_int_equal(parse_str(buddy, "Zone 0, zone DMA 1\n", &b), TG_EPARSE);
  assert_int_equal(parse_str(buddy, "Node ,\n", &b), TG_EPARSE);
  assert_int_equal(parse_str(buddy, "", &b), TG_EPARSE);
  /* More orders than the bound: kept up to it, no overrun. */
  char many[512] = "Node 0, zone DMA";
  for (int i = 0; i < 40; i++) strcat(many, " 7");
  assert_int_equal(parse_str(buddy, many, &b), 0);
  assert_int_equal(b.zones[0].n_orders, TG_BUDDY_MAX_ORDERS);
}

/* --- /proc/diskstats ----------------------------------------------------- */

static void diskstats_reads_every_kernel_generation(void **state) {
  (void)state;
  static tg_diskstats_t d;
  assert_int_equal(
      parse_str(disks,
                /* 5.5+: 17 counters (and one newer we skip) */
                " 253 0 vda 100 0 2000 30 5 0 80 9 0 40 39 1 0 64 7 11 12 13\n"
                /* 4.18+: 15 counters */
                "   8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n"
                /* older: 11 counters */
                "   8 16 sdb 1 2 3 4 5 6 7 8 9 10 11\n",
                &d),
      0);
  assert_int_equal(d.n_disks, 3);
  assert_string_equal(d.disks[0].name, "vda");
  assert_int_equal(d.disks[0].read_sectors, 2000);
  assert_int_equal(d.disks[0].read_time_ms, 30);
  assert_int_equal(d.disks[0].write_sectors, 80);
  assert_int_equal(d.disks[0].write_time_ms, 9);
  assert_int_equal(d.disks[0].discard_sectors, 64);
  assert_int_equal(d.disks[0].discard_time_ms, 7);
  assert_int_equal(d.disks[0].flush_count, 11);
  assert_int_equal(d.disks[0].flush_time_ms, 12);
  assert_int_equal(d.disks[1].discard_sectors, 14);
  assert_int_equal(d.disks[1].flush_count, 0);
  assert_string_equal(d.disks[2].name, "sdb");
  assert_int_equal(d.disks[2].write_time_ms, 8);
  assert_int_equal(d.disks[2].discard_sectors, 0);
}

static void diskstats_rejects_garbled_input(void **state) {
  (void)state;
  static tg_diskstats_t d;
  assert_int_equal(parse_str(disks, "8 0 sda 1 2 3\n", &d), TG_EPARSE);
  assert_int_equal(parse_str(disks, "8 0 sda 1 2 3 4 5 6 7 x 9 10 11\n", &d),
                   TG_EPARSE);
  assert_int_equal(parse_str(disks, "sda 1 2 3 4 5 6 7 8 9 10 11\n", &d),
                   TG_EPARSE);
  assert_int_equal(parse_str(disks, "8 0\n", &d), TG_EPARSE);
  /* An empty file is a machine without block devices, not an error. */
  assert_int_equal(parse_str(disks, "", &d), 0);
  assert_int_equal(d.n_disks, 0);
}

/* --- /proc/pressure ------------------------------------------------------ */

static void psi_reads_some_and_full_totals(void **state) {
  (void)state;
  tg_psi_t p;
  assert_int_equal(parse_str(psi,
                             "some avg10=98.92 avg60=63.97 avg300=21.10 "
                             "total=79800328\n"
                             "full avg10=0.00 avg60=0.00 avg300=0.00 total=42\n",
                             &p),
                   0);
  assert_true(p.has_some && p.has_full);
  assert_int_equal(p.some_total_us, 79800328);
  assert_int_equal(p.full_total_us, 42);
  /* cpu on kernels before 5.13 has no "full" line. */
  assert_int_equal(parse_str(psi, "some avg10=0 avg60=0 avg300=0 total=7\n", &p),
                   0);
  assert_true(p.has_some);
  assert_false(p.has_full);
}

static void psi_rejects_garbled_input(void **state) {
  (void)state;
  tg_psi_t p;
  assert_int_equal(parse_str(psi, "some avg10=1.0\n", &p), TG_EPARSE);
  assert_int_equal(parse_str(psi, "some total=x\n", &p), TG_EPARSE);
  assert_int_equal(parse_str(psi, "some total=12x\n", &p), TG_EPARSE);
  assert_int_equal(parse_str(psi, "half total=1\n", &p), TG_EPARSE);
  assert_int_equal(parse_str(psi, "full total=1\n", &p), TG_EPARSE);
  assert_int_equal(parse_str(psi, "", &p), TG_EPARSE);
}

/* --- /proc/<pid>/smaps_rollup -------------------------------------------- */

static void smaps_rollup_reads_sizes(void **state) {
  (void)state;
  tg_smaps_rollup_t r;
  assert_int_equal(parse_str(smaps,
                             "5615f117e000-7ffc41f8f000 ---p 00000000 00:00 0  "
                             "                        [rollup]\n"
                             "Rss:                1756 kB\n"
                             "Pss:                 192 kB\n"
                             "Pss_Anon:            116 kB\n"
                             "Pss_File:             76 kB\n"
                             "Pss_Shmem:             0 kB\n"
                             "Shared_Clean:       1604 kB\n"
                             "SwapPss:               8 kB\n",
                             &r),
                   0);
  assert_int_equal(r.rss_kb, 1756);
  assert_int_equal(r.pss_kb, 192);
  assert_int_equal(r.pss_anon_kb, 116);
  assert_int_equal(r.pss_file_kb, 76);
  assert_int_equal(r.swap_pss_kb, 8);
  /* A kernel thread's file is empty. */
  assert_int_equal(parse_str(smaps, "", &r), TG_EPARSE);
  assert_int_equal(parse_str(smaps, "Rss: lots kB\n", &r), TG_EPARSE);
}

/* --- the encoder --------------------------------------------------------- */

static void sys_stats_packet_holds_every_group(void **state) {
  (void)state;
  static tg_vmstat_t v;
  static tg_buddyinfo_t b;
  static tg_diskstats_t d;
  tg_psi_t cpu, io;
  assert_int_equal(parse_str(vmstat, "nr_free_pages 5\npgfault 6\n", &v), 0);
  assert_int_equal(parse_str(buddy, buddy_fixture, &b), 0);
  assert_int_equal(
      parse_str(disks, "8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n", &d),
      0);
  assert_int_equal(parse_str(psi, "some total=10\nfull total=3\n", &cpu), 0);
  assert_int_equal(parse_str(psi, "some total=20\n", &io), 0);
  uint64_t mask[TG_VMSTAT_IDS / 64] = {0};
  tg_vmstat_set(mask, ID(PGFAULT));
  const uint32_t khz[] = {1800000, 0, 2400000};
  tg_sys_stats_sample_t s = {.ts_ns = 7, .end_ts_ns = 8, .vmstat = &v,
                             .vmstat_mask = mask, .cpufreq_khz = khz,
                             .n_cpufreq = 3, .buddyinfo = &b, .diskstats = &d,
                             .psi = {&cpu, &io, NULL}};
  uint8_t buf[4096];
  tg_pbw_t w;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  tg_probes_write_sys_stats(&w, &s);
  assert_int_equal(tg_pbw_error(&w), 0);
  Perfetto__Protos__TracePacket *p = perfetto__protos__trace_packet__unpack(
      NULL, (size_t)tg_pbw_written(&w), buf);
  assert_non_null(p);
  const Perfetto__Protos__SysStats *ss = p->sys_stats;
  assert_non_null(ss);
  /* The mask keeps pgfault only. */
  assert_int_equal(ss->n_vmstat, 1);
  assert_int_equal(ss->vmstat[0]->key, ID(PGFAULT));
  assert_int_equal(ss->vmstat[0]->value, 6);
  assert_int_equal(ss->n_cpufreq_khz, 3);
  assert_int_equal(ss->cpufreq_khz[2], 2400000);
  assert_int_equal(ss->n_buddy_info, 3);
  assert_string_equal(ss->buddy_info[1]->zone, "DMA32");
  assert_int_equal(ss->buddy_info[1]->n_order_pages, 5);
  assert_int_equal(ss->buddy_info[1]->order_pages[4], 752);
  assert_int_equal(ss->n_disk_stat, 1);
  assert_string_equal(ss->disk_stat[0]->device_name, "sda");
  assert_int_equal(ss->disk_stat[0]->flush_time_ms, 17);
  /* psi: cpu some/full, io some; ns from the kernel's us. */
  assert_int_equal(ss->n_psi, 3);
  assert_int_equal(ss->psi[0]->resource,
                   PERFETTO__PROTOS__SYS_STATS__PSI_SAMPLE__PSI_RESOURCE__PSI_RESOURCE_CPU_SOME);
  assert_int_equal(ss->psi[0]->total_ns, 10000);
  assert_int_equal(ss->psi[1]->resource,
                   PERFETTO__PROTOS__SYS_STATS__PSI_SAMPLE__PSI_RESOURCE__PSI_RESOURCE_CPU_FULL);
  assert_int_equal(ss->psi[2]->resource,
                   PERFETTO__PROTOS__SYS_STATS__PSI_SAMPLE__PSI_RESOURCE__PSI_RESOURCE_IO_SOME);
  assert_int_equal(ss->psi[2]->total_ns, 20000);
  assert_int_equal(ss->collection_end_timestamp, 8);
  perfetto__protos__trace_packet__free_unpacked(p, NULL);
}

/* --- config ---------------------------------------------------------------- */

static uint8_t *pack_dsc(const Perfetto__Protos__DataSourceConfig *c,
                         size_t *len) {
  *len = perfetto__protos__data_source_config__get_packed_size(c);
  uint8_t *b = malloc(*len ? *len : 1);
  assert_non_null(b);
  perfetto__protos__data_source_config__pack(c, b);
  return b;
}

static void process_stats_config_reads_the_new_flags(void **state) {
  (void)state;
  Perfetto__Protos__DataSourceConfig dsc =
      PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
  Perfetto__Protos__ProcessStatsConfig ps =
      PERFETTO__PROTOS__PROCESS_STATS_CONFIG__INIT;
  dsc.process_stats_config = &ps;
  ps.has_record_thread_names = true;
  ps.record_thread_names = true;
  ps.has_record_process_age = true;
  ps.record_process_age = true;
  ps.has_scan_smaps_rollup = true;
  ps.scan_smaps_rollup = true;
  size_t len;
  uint8_t *b = pack_dsc(&dsc, &len);
  tg_process_stats_cfg_t c;
  assert_int_equal(tg_process_stats_cfg_parse(b, len, &c), 0);
  assert_true(c.thread_names && c.record_age && c.smaps_rollup);
  assert_false(c.record_runtime);
  free(b);
}

/* --- this machine -------------------------------------------------------- */

static void real_kernel_files_parse(void **state) {
  (void)state;
  tg_buf_t file;
  tg_buf_init(&file, 4u << 20);
  static tg_vmstat_t v;
  assert_int_equal(tg_proc_read_file("/proc/vmstat", &file), 0);
  assert_int_equal(tg_vmstat_parse((const char *)tg_buf_begin(&file),
                                   tg_buf_size(&file), &v),
                   0);
  assert_true(tg_vmstat_has(v.present, ID(NR_FREE_PAGES)));
  static tg_buddyinfo_t b;
  assert_int_equal(tg_proc_read_file("/proc/buddyinfo", &file), 0);
  assert_int_equal(tg_buddyinfo_parse((const char *)tg_buf_begin(&file),
                                      tg_buf_size(&file), &b),
                   0);
  assert_true(b.n_zones >= 1);
  static tg_diskstats_t d;
  assert_int_equal(tg_proc_read_file("/proc/diskstats", &file), 0);
  assert_int_equal(tg_diskstats_parse((const char *)tg_buf_begin(&file),
                                      tg_buf_size(&file), &d),
                   0);
  if (tg_proc_read_file("/proc/pressure/memory", &file) == 0) {
    tg_psi_t p;
    assert_int_equal(tg_psi_parse((const char *)tg_buf_begin(&file),
                                  tg_buf_size(&file), &p),
                     0);
    assert_true(p.has_some && p.has_full);
  }
  tg_smaps_rollup_t r;
  assert_int_equal(tg_proc_read_file("/proc/self/smaps_rollup", &file), 0);
  assert_int_equal(tg_smaps_rollup_parse((const char *)tg_buf_begin(&file),
                                         tg_buf_size(&file), &r),
                   0);
  assert_true(r.rss_kb > 0);
  tg_buf_free(&file);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(vmstat_keys_map_to_the_enum_by_name),
      cmocka_unit_test(vmstat_parses_known_counters_and_skips_others),
      cmocka_unit_test(vmstat_rejects_garbled_input),
      cmocka_unit_test(buddyinfo_parses_nodes_and_zones),
      cmocka_unit_test(buddyinfo_rejects_garbled_input),
      cmocka_unit_test(diskstats_reads_every_kernel_generation),
      cmocka_unit_test(diskstats_rejects_garbled_input),
      cmocka_unit_test(psi_reads_some_and_full_totals),
      cmocka_unit_test(psi_rejects_garbled_input),
      cmocka_unit_test(smaps_rollup_reads_sizes),
      cmocka_unit_test(sys_stats_packet_holds_every_group),
      cmocka_unit_test(process_stats_config_reads_the_new_flags),
      cmocka_unit_test(real_kernel_files_parse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
