/* linux.inode_file_map end to end: a real tracegated and tracegate-probes
 * resolving a file this test fsyncs, named by linux.ftrace in the same
 * session. The parts are test_inode_file_map's; the harness is
 * probes_e2e.h.
 *
 * Needs root and tracefs: without them the test is skipped with the
 * reason, unless TG_REQUIRE_FTRACE is set (then it fails).
 */
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cmocka.h>

#include "probes_e2e.h"
#include "probes_fixtures.h"
#include "test_proc.h"

typedef struct found {
  size_t maps, entries, ftrace_packets;
  bool entry, right_dev, right_path;
} found_t;

/* Reads what the session has and looks for |ino|'s entry. */
static void look_for_entry(raw_consumer_t *c, uint64_t ino, uint64_t dev,
                           const char *name, found_t *f) {
  size_t n = 0;
  Perfetto__Protos__TracePacket **pk = raw_consumer_read(c, &n);
  assert_non_null(pk);
  size_t name_len = strlen(name);
  for (size_t i = 0; i < n; i++) {
    if (pk[i]->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
      f->ftrace_packets++;
    const Perfetto__Protos__InodeFileMap *m = pk[i]->inode_file_map;
    if (pk[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_INODE_FILE_MAP)
      continue;
    f->maps++;
    for (size_t j = 0; j < m->n_entries; j++) {
      const Perfetto__Protos__InodeFileMap__Entry *e = m->entries[j];
      f->entries++;
      if (e->inode_number != ino) continue;
      f->entry = true;
      f->right_dev = m->block_device_id == dev;
      for (size_t k = 0; k < e->n_paths; k++) {
        size_t l = strlen(e->paths[k]);
        if (l > name_len && e->paths[k][l - name_len - 1] == '/' &&
            strcmp(e->paths[k] + l - name_len, name) == 0 &&
            e->type == PERFETTO__PROTOS__INODE_FILE_MAP__ENTRY__TYPE__FILE)
          f->right_path = true;
      }
    }
  }
  free_packets(pk, n);
}

/* linux.ftrace (ext4_sync_file_enter, or filemap's page cache adds when
 * the directory is on another file system) and linux.inode_file_map in one
 * session: a file this test writes and fsyncs gets its InodeFileMap entry
 * with its st_dev, its inode and its name. */
static void inode_file_map_resolves_a_file_named_by_ftrace(void **state) {
  e2e_require_ftrace();
  test_service_t *ts = *state;
  /* Under / as the kernel events see it; scanned alone (mapping). */
  char dir[] = "/tg-inode-e2e-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[sizeof(dir) + 32];
  snprintf(path, sizeof(path), "%s/synced-file", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  struct stat st;
  assert_int_equal(fstat(fd, &st), 0);
  struct statfs sfs;
  assert_int_equal(fstatfs(fd, &sfs), 0);
  bool ext4 = sfs.f_type == 0xEF53; /* EXT4_SUPER_MAGIC */
  char mp[PATH_MAX];
  mount_point_of(st.st_dev, mp, sizeof(mp));

  char err_path[160];
  /* Started once the service lists its six data sources. */
  pid_t probes = e2e_start_probes(ts, err_path, sizeof(err_path),
                                  "probes.err", false, 6);

  char *events[] = {ext4 ? "ext4/ext4_sync_file_enter"
                         : "filemap/mm_filemap_add_to_page_cache"};
  e2e_session_t s;
  e2e_session_config(&s, events, 1, false);
  /* One file's events: smaller buffers, no compact_sched. */
  s.sc.buf.size_kb = 8 * 1024;
  s.fc.buffer_size_kb = 1024;
  s.fc.compact_sched = NULL;
  Perfetto__Protos__DataSourceConfig dsc2;
  Perfetto__Protos__InodeFileConfig ic;
  Perfetto__Protos__InodeFileConfig__MountPointMappingEntry me, *mep = &me;
  perfetto__protos__data_source_config__init(&dsc2);
  perfetto__protos__inode_file_config__init(&ic);
  perfetto__protos__inode_file_config__mount_point_mapping_entry__init(&me);
  char *roots[] = {dir};
  me.mountpoint = mp;
  me.n_scan_roots = 1;
  me.scan_roots = roots;
  ic.n_mount_point_mapping = 1;
  ic.mount_point_mapping = &mep;
  ic.has_scan_delay_ms = ic.has_scan_interval_ms = 1;
  ic.scan_delay_ms = 10;
  ic.scan_interval_ms = 10;
  dsc2.name = "linux.inode_file_map";
  dsc2.inode_file_config = &ic;
  e2e_session_add_source(&s, &dsc2);
  e2e_session_enable(&s, ts);

  /* Written and synced until the entry shows up: the first fsyncs may
   * come before both data sources run. */
  found_t f = {0};
  int64_t end = tg_test_now_ms() + E2E_WAIT_MS;
  while (!f.entry && tg_test_now_ms() < end) {
    assert_int_equal(pwrite(fd, "data\n", 5, 0), 5);
    assert_int_equal(fsync(fd), 0);
    e2e_sleep_ms(100);
    e2e_flush(&s.c);
    look_for_entry(&s.c, st.st_ino, st.st_dev, "synced-file", &f);
  }
  assert_int_equal(raw_consumer_disable(&s.c, E2E_WAIT_MS), 0);
  look_for_entry(&s.c, st.st_ino, st.st_dev, "synced-file", &f);
  e2e_session_close(&s);
  print_message(
      "%s: %zu ftrace packets, %zu InodeFileMap packets with %zu "
      "entries\n",
      events[0], f.ftrace_packets, f.maps, f.entries);
  close(fd);
  unlink(path);
  rmdir(dir);
  e2e_stop_probes(probes, err_path);
  assert_true(f.entry);
  assert_true(f.right_dev);
  assert_true(f.right_path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          inode_file_map_resolves_a_file_named_by_ftrace, test_service_setup,
          test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
