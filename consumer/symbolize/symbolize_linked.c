/* SPDX-License-Identifier: Apache-2.0 */
/* The alt file and the split units a debug file names, kept from libdw's
 * own opens: see symbolize_linked.h. */
#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <gelf.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "consumer/symbolize/symbolize_linked.h"

int tg__sym_open_counted(const char *path, bool named, tg_sym_module_t *m,
                         const tg_sym_opts_t *o) {
  tg_sym_refusal_t why;
  int fd = tg_sym_open(path, named, &why);
  if (fd < 0 && why != TG_SYM_REFUSED_NONE && m->refused != why) {
    m->refused = why;
    if (o->stats) o->stats->refused[why]++;
  }
  return fd;
}

bool tg__sym_is_skeleton(Dwarf_Die *cudie) {
  return dwarf_tag(cudie) == DW_TAG_skeleton_unit ||
         dwarf_hasattr(cudie, DW_AT_dwo_name) ||
         dwarf_hasattr(cudie, DW_AT_GNU_dwo_name);
}

/* An ELF file of one section, a one-byte .debug_line: the least libdw
 * takes for a Dwarf (one of .debug_info, .debug_line, .debug_frame).
 * Set as the alt file it has no .debug_info nor .debug_str, so that an
 * alt reference into it is an error, and its line table is never read
 * (nothing names it). */
typedef struct empty_elf {
  Elf64_Ehdr eh;
  Elf64_Shdr sh[3]; /* none, .shstrtab, .debug_line */
  char names[24];
  char line[1];
} empty_elf_t;

static const char empty_names[24] = "\0.shstrtab\0.debug_line";

static Dwarf *empty_dwarf(tg__sym_linked_t *l) {
  empty_elf_t *img = calloc(1, sizeof(*img));
  if (!img) return NULL;
  l->empty_image = img;
  memcpy(img->eh.e_ident, ELFMAG, SELFMAG);
  img->eh.e_ident[EI_CLASS] = ELFCLASS64;
  img->eh.e_ident[EI_DATA] =
      __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;
  img->eh.e_ident[EI_VERSION] = EV_CURRENT;
  img->eh.e_type = ET_EXEC;
  img->eh.e_version = EV_CURRENT;
  img->eh.e_ehsize = sizeof(Elf64_Ehdr);
  img->eh.e_shoff = offsetof(empty_elf_t, sh);
  img->eh.e_shentsize = sizeof(Elf64_Shdr);
  img->eh.e_shnum = 3;
  img->eh.e_shstrndx = 1;
  memcpy(img->names, empty_names, sizeof(img->names));
  img->sh[1] = (Elf64_Shdr){.sh_name = 1, .sh_type = SHT_STRTAB,
                            .sh_offset = offsetof(empty_elf_t, names),
                            .sh_size = sizeof(img->names), .sh_addralign = 1};
  img->sh[2] = (Elf64_Shdr){.sh_name = 11, .sh_type = SHT_PROGBITS,
                            .sh_offset = offsetof(empty_elf_t, line),
                            .sh_size = sizeof(img->line), .sh_addralign = 1};
  l->alt_elf = elf_memory((char *)img, sizeof(*img));
  return l->alt_elf ? dwarf_begin_elf(l->alt_elf, DWARF_C_READ, NULL) : NULL;
}

/* |path| as |l|'s alt file when it is an ELF file with build id |id|. */
static bool try_alt(const char *path, bool named, const void *id, size_t len,
                    tg_sym_module_t *m, const tg_sym_opts_t *o,
                    tg__sym_linked_t *l) {
  int fd = tg__sym_open_counted(path, named, m, o);
  if (fd < 0) return false;
  Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  const void *got;
  Dwarf *alt = NULL;
  if (e && elf_kind(e) == ELF_K_ELF &&
      dwelf_elf_gnu_build_id(e, &got) == (ssize_t)len &&
      !memcmp(got, id, len))
    alt = dwarf_begin_elf(e, DWARF_C_READ, NULL);
  if (!alt) {
    if (e) elf_end(e);
    close(fd);
    return false;
  }
  l->alt = alt;
  l->alt_elf = e;
  l->alt_fd = fd;
  l->alt_found = true;
  return true;
}

/* The alt file |dw|'s link names: by its build id in each debug dir, then
 * at the path the link holds (relative to |debug_path|'s directory), a
 * path a debug file chose and so checked as one a trace names. */
static void find_alt(Dwarf *dw, const char *debug_path, tg_sym_module_t *m,
                     const tg_sym_opts_t *o, tg__sym_linked_t *l) {
  const char *name;
  const void *id;
  ssize_t len = dwelf_dwarf_gnu_debugaltlink(dw, &name, &id);
  if (len < 2 || len > TG_SYM_MAX_BUILD_ID) return;
  char p[TG_SYM_MAX_PATH + 128];
  for (size_t i = 0; i < o->n_debug_dirs; i++)
    if (tg_sym_build_id_path(o->debug_dirs[i], id, (size_t)len, p,
                             sizeof(p)) == 0 &&
        try_alt(p, false, id, (size_t)len, m, o, l))
      return;
  if (!name || !name[0]) return;
  const char *slash = strrchr(debug_path, '/');
  int n = name[0] == '/' || !slash
              ? snprintf(p, sizeof(p), "%s", name)
              : snprintf(p, sizeof(p), "%.*s/%s", (int)(slash - debug_path),
                         debug_path, name);
  if (n > 0 && (size_t)n < sizeof(p))
    try_alt(p, true, id, (size_t)len, m, o, l);
}

int tg__sym_guard_links(Dwarf *dw, const char *debug_path, tg_sym_module_t *m,
                        const tg_sym_opts_t *o, tg__sym_linked_t *l) {
  memset(l, 0, sizeof(*l));
  l->alt_fd = -1;
  find_alt(dw, debug_path, m, o, l);
  /* Set even without a link: libdw then never looks for a file of its
   * own for an alt form (nor for a supplementary file, where a later
   * libdw reads .debug_sup the same way). */
  if (!l->alt && !(l->alt = empty_dwarf(l)))
    return l->empty_image ? -EIO : -ENOMEM;
  dwarf_setalt(dw, l->alt);
  Dwarf_CU *cu = NULL;
  Dwarf_Die cudie;
  uint8_t type;
  /* No sub DIE asked: a skeleton's split unit is not looked for. */
  while (dwarf_get_units(dw, cu, &cu, NULL, &type, &cudie, NULL) == 0)
    if (type == DW_UT_skeleton ||
        (cudie.cu && tg__sym_is_skeleton(&cudie)))
      l->skeletons++;
  if (l->skeletons) {
    m->refused = TG_SYM_REFUSED_SPLIT_DWARF;
    if (o->stats) o->stats->refused[TG_SYM_REFUSED_SPLIT_DWARF] += l->skeletons;
  }
  return 0;
}

void tg__sym_linked_free(tg__sym_linked_t *l) {
  if (l->alt) dwarf_end(l->alt);
  if (l->alt_elf) elf_end(l->alt_elf);
  if (l->alt_fd >= 0) close(l->alt_fd);
  free(l->empty_image);
  memset(l, 0, sizeof(*l));
  l->alt_fd = -1;
}
