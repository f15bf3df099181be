/* SPDX-License-Identifier: Apache-2.0 */
/* libdwfl's find_debuginfo callback for owners that name every file
 * libdwfl may read themselves (tracegate-perf's unwinder, the
 * symbolizer): it declines, and names nothing, so that libdwfl never
 * opens a path of its own choosing (a debuglink's, a dwz alt file's) on
 * a host's word. Header-only: only users that link elfutils' libdw
 * include it. */
#ifndef TRACEGATE_COMMON_DWFL_DECLINE_H
#define TRACEGATE_COMMON_DWFL_DECLINE_H

#include <elfutils/libdwfl.h>

static inline int tg_dwfl_no_debuginfo(Dwfl_Module *mod, void **userdata,
                                       const char *modname, Dwarf_Addr base,
                                       const char *file_name,
                                       const char *debuglink_file,
                                       GElf_Word debuglink_crc,
                                       char **debuginfo_file_name) {
  (void)mod, (void)userdata, (void)modname, (void)base, (void)file_name;
  (void)debuglink_file, (void)debuglink_crc, (void)debuginfo_file_name;
  return -1;
}

#endif /* TRACEGATE_COMMON_DWFL_DECLINE_H */
