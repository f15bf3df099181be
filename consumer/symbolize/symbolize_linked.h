/* SPDX-License-Identifier: Apache-2.0 */
/* The files a debug file names inside itself, which libdw would open on
 * its own, with a plain blocking open(2) of a path the file chose:
 *
 *  - the dwz alt file (.gnu_debugaltlink: a path and a build id), looked
 *    for by libdw on the first DW_FORM_GNU_strp_alt / DW_FORM_GNU_ref_alt
 *    it reads (a name, an abstract origin, even a line table's file
 *    entry), at that path, under /usr/lib/debug/.build-id, and through
 *    debuginfod when DEBUGINFOD_URLS is set, uncapped;
 *  - the .dwo (or .dwp) of each split-DWARF skeleton unit
 *    (DW_AT_dwo_name, DW_AT_comp_dir), looked for by libdw whenever a
 *    skeleton unit's split unit is asked for (dwarf_get_units and
 *    dwarf_cu_info with a sub DIE).
 *
 * A hostile debug file (a trace's module file, a debuginfod answer) can
 * name a FIFO there and hold the one symbolize worker for good. So:
 *
 *  - the alt file is found here, through tg_sym_open (each debug dir by
 *    build id, then the path the file names, as a named path) and only
 *    with the build id the link asks for, and given to libdw with
 *    dwarf_setalt before any DIE is read, so that libdw never looks for
 *    one itself; when none is found, an empty Dwarf (no .debug_info, no
 *    .debug_str) takes its place, and every alt reference is then an
 *    error libdw reports, never a search;
 *  - split units are never entered: libdw has no documented way to be
 *    handed a .dwo opened here (linking a skeleton to its split unit is
 *    libdw's internal affair), so the symbolizer never asks for a
 *    skeleton's split unit and never walks a skeleton unit's DIEs; an
 *    address in one is named from the ELF symbols, with the line from
 *    the skeleton's own line table (which DWARF keeps in the skeleton's
 *    file). Each skeleton unit counts one refusal, `split_dwarf`.
 *
 * Internal to consumer/symbolize. */
#ifndef TRACEGATE_CONSUMER_SYMBOLIZE_LINKED_H
#define TRACEGATE_CONSUMER_SYMBOLIZE_LINKED_H

#include <elfutils/libdw.h>
#include <stdbool.h>

#include "consumer/symbolize/symbolize.h"

/* What tg__sym_guard_links set on a module's Dwarf: it must outlive that
 * Dwarf (free it after dwfl_end). */
typedef struct tg__sym_linked {
  Dwarf *alt;        /* the alt file's, or the empty one; NULL: no link */
  Elf *alt_elf;
  int alt_fd;        /* -1: none (the empty Dwarf is in memory) */
  void *empty_image; /* the empty Dwarf's ELF bytes */
  bool alt_found;    /* |alt| is the file the link names (its build id) */
  size_t skeletons;  /* split-DWARF skeleton units of the Dwarf */
} tg__sym_linked_t;

/* tg_sym_open of |path|, a refusal counted once per module and reason
 * (m->refused, o->stats). */
int tg__sym_open_counted(const char *path, bool named, tg_sym_module_t *m,
                         const tg_sym_opts_t *o);

/* Guards |dw|, the Dwarf of |m|'s debug file |debug_path|, before any of
 * its DIEs is read: its alt file set (found, or the empty one), its
 * skeleton units counted (o->stats->refused[TG_SYM_REFUSED_SPLIT_DWARF]).
 * Returns 0, -ENOMEM, or -EIO when not even the empty Dwarf could be set
 * (then no DIE nor line table of |dw| may be read: libdw would look for
 * the alt file itself); |*l| is to be freed with tg__sym_linked_free
 * either way. */
int tg__sym_guard_links(Dwarf *dw, const char *debug_path, tg_sym_module_t *m,
                        const tg_sym_opts_t *o, tg__sym_linked_t *l);

void tg__sym_linked_free(tg__sym_linked_t *l);

/* Whether |cudie| is a split-DWARF skeleton unit's (DWARF 5's
 * DW_TAG_skeleton_unit, or GNU's DWARF 4 form: a DW_AT_GNU_dwo_name),
 * asked without looking for its split unit. */
bool tg__sym_is_skeleton(Dwarf_Die *cudie);

#endif /* TRACEGATE_CONSUMER_SYMBOLIZE_LINKED_H */
