/* SPDX-License-Identifier: Apache-2.0 */
/* Debug files by build id and libdw's answers for a module's addresses
 * (symbolize.h). A file is used only when its GNU build id is the
 * mapping's: a file of the same path from another build would name the
 * wrong functions. */
#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/elf_plt.h"
#include "consumer/symbolize/symbolize.h"

int tg_sym_build_id_path(const char *dir, const uint8_t *id, size_t len,
                         char *out, size_t out_size) {
  static const char hex[] = "0123456789abcdef";
  if (len < 2) return -EINVAL;
  char h[2 * TG_SYM_MAX_BUILD_ID + 1];
  if (len > TG_SYM_MAX_BUILD_ID) return -EINVAL;
  for (size_t i = 0; i < len; i++) {
    h[2 * i] = hex[id[i] >> 4];
    h[2 * i + 1] = hex[id[i] & 15];
  }
  h[2 * len] = '\0';
  int n = snprintf(out, out_size, "%s/.build-id/%.2s/%s.debug", dir, h,
                   h + 2);
  if (n < 0 || (size_t)n >= out_size) return -ENAMETOOLONG;
  return 0;
}

/* The offline Dwfl reports one file that holds everything it has: no
 * separate debug file is searched for (the caller chose it by build id). */
static int no_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
                        Dwarf_Addr base, const char *file_name,
                        const char *debuglink_file, GElf_Word debuglink_crc,
                        char **debuginfo_file_name) {
  (void)mod, (void)userdata, (void)modname, (void)base, (void)file_name;
  (void)debuglink_file, (void)debuglink_crc, (void)debuginfo_file_name;
  return -1;
}

static const Dwfl_Callbacks offline_cb = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = no_debuginfo,
    .section_address = dwfl_offline_section_address,
};

/* Whether |path| is an ELF file with |m|'s build id and, when
 * |need_names|, a .symtab or DWARF. */
static bool file_matches(const char *path, const tg_sym_module_t *m,
                         bool need_names) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = false;
  Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  if (e && elf_kind(e) == ELF_K_ELF) {
    const void *id;
    ssize_t n = dwelf_elf_gnu_build_id(e, &id);
    ok = n > 0 && (size_t)n == m->build_id_len &&
         !memcmp(id, m->build_id, (size_t)n);
    if (ok && need_names) {
      ok = false;
      size_t shstrndx;
      Elf_Scn *scn = NULL;
      if (elf_getshdrstrndx(e, &shstrndx) == 0)
        while ((scn = elf_nextscn(e, scn))) {
          GElf_Shdr sh;
          if (!gelf_getshdr(scn, &sh)) continue;
          const char *name = elf_strptr(e, shstrndx, sh.sh_name);
          if (sh.sh_type == SHT_SYMTAB ||
              (name && !strcmp(name, ".debug_info") && sh.sh_type != SHT_NOBITS))
            ok = true;
        }
    }
  }
  if (e) elf_end(e);
  close(fd);
  return ok;
}

/* libdebuginfod, opened at run time: Debian ships it apart (libdebuginfod1)
 * and a build without it still symbolizes from local files. Opened once
 * and kept for the process: libcurl, under it, keeps global state that
 * closing it would leak. */
typedef struct dbgf {
  bool tried, ok;
  void *(*begin)(void);
  int (*find)(void *, const unsigned char *, int, char **);
  void (*end)(void *);
} dbgf_t;

static dbgf_t dbgf;

static bool dbgf_open(void) {
  if (dbgf.tried) return dbgf.ok;
  dbgf.tried = true;
  void *lib = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return false;
  *(void **)&dbgf.begin = dlsym(lib, "debuginfod_begin");
  *(void **)&dbgf.find = dlsym(lib, "debuginfod_find_debuginfo");
  *(void **)&dbgf.end = dlsym(lib, "debuginfod_end");
  dbgf.ok = dbgf.begin && dbgf.find && dbgf.end;
  if (!dbgf.ok) dlclose(lib);
  return dbgf.ok;
}

/* The file from debuginfod (its cache), or NULL. */
static char *from_debuginfod(const tg_sym_module_t *m) {
  if (!dbgf_open()) return NULL;
  char *path = NULL;
  void *c = dbgf.begin();
  if (c) {
    int fd = dbgf.find(c, m->build_id, (int)m->build_id_len, &path);
    if (fd >= 0) {
      close(fd);
    } else {
      free(path);
      path = NULL;
    }
    dbgf.end(c);
  }
  return path;
}

static char *find_file(const tg_sym_module_t *m, const tg_sym_opts_t *o,
                       tg_sym_source_t *src) {
  char p[TG_SYM_MAX_PATH + 128];
  /* libelf refuses every file until told the ELF version in use. */
  if (elf_version(EV_CURRENT) == EV_NONE) return NULL;
  if (m->build_id_len >= 2)
    for (size_t i = 0; i < o->n_debug_dirs; i++)
      if (tg_sym_build_id_path(o->debug_dirs[i], m->build_id, m->build_id_len,
                               p, sizeof(p)) == 0 &&
          file_matches(p, m, true)) {
        *src = TG_SYM_SRC_BUILD_ID;
        return strdup(p);
      }
  if (o->module_files && m->build_id_len && m->path[0] == '/' &&
      file_matches(m->path, m, true)) {
    *src = TG_SYM_SRC_MODULE;
    return strdup(m->path);
  }
  if (o->debuginfod && m->build_id_len) {
    char *d = from_debuginfod(m);
    if (d && file_matches(d, m, true)) {
      *src = TG_SYM_SRC_DEBUGINFOD;
      return d;
    }
    free(d);
  }
  return NULL;
}

static char *dupz(const char *s) { return s ? strdup(s) : NULL; }

static const char *die_name(Dwarf_Die *d) {
  Dwarf_Attribute a;
  const char *n = NULL;
  if (dwarf_attr_integrate(d, DW_AT_linkage_name, &a) ||
      dwarf_attr_integrate(d, DW_AT_MIPS_linkage_name, &a))
    n = dwarf_formstring(&a);
  return n ? n : dwarf_diename(d);
}

static int add_line(tg_sym_addr_t *a, const char *fn, const char *file,
                    uint32_t line) {
  tg_sym_line_t *g = realloc(a->lines, (a->n_lines + 1) * sizeof(*g));
  if (!g) return -ENOMEM;
  a->lines = g;
  tg_sym_line_t *l = &g[a->n_lines++];
  l->function = dupz(fn);
  l->file = dupz(file);
  l->line = line;
  if ((fn && !l->function) || (file && !l->file)) return -ENOMEM;
  return 0;
}

/* The file name of a call site's DW_AT_call_file. */
static const char *call_file(Dwarf_Die *inl, Dwarf_Die *cu) {
  Dwarf_Attribute a;
  Dwarf_Word idx;
  Dwarf_Files *files;
  if (!dwarf_attr(inl, DW_AT_call_file, &a) || dwarf_formudata(&a, &idx) != 0)
    return NULL;
  if (dwarf_getsrcfiles(cu, &files, NULL) != 0) return NULL;
  return dwarf_filesrc(files, idx, NULL, NULL);
}

/* The lines of |addr| (Dwfl's address): innermost inlined function first,
 * each with the place it is at (the pc's line for the innermost, the call
 * site in it for the others). */
static int resolve_addr(Dwfl_Module *mod, Dwarf_Addr addr, tg_sym_addr_t *out) {
  const char *file = NULL;
  int line = 0;
  Dwfl_Line *l = dwfl_module_getsrc(mod, addr);
  if (l) file = dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);
  Dwarf_Addr bias = 0;
  Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias);
  Dwarf_Die *scopes = NULL;
  int n = cu ? dwarf_getscopes(cu, addr - bias, &scopes) : 0;
  int rv = 0;
  bool any = false;
  for (int i = 0; i < n && !rv; i++) {
    int tag = dwarf_tag(&scopes[i]);
    if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine) continue;
    const char *fn = die_name(&scopes[i]);
    rv = add_line(out, fn, file, line > 0 ? (uint32_t)line : 0);
    any = true;
    if (tag == DW_TAG_subprogram) break;
    /* The caller's place is this inlined call's site. */
    Dwarf_Attribute a;
    Dwarf_Word cl = 0;
    file = call_file(&scopes[i], cu);
    line = dwarf_attr(&scopes[i], DW_AT_call_line, &a) &&
                   dwarf_formudata(&a, &cl) == 0 && cl <= INT32_MAX
               ? (int)cl
               : 0;
  }
  free(scopes);
  if (!any && !rv) {
    const char *sym = dwfl_module_addrname(mod, addr);
    if (sym) rv = add_line(out, sym, file, line > 0 ? (uint32_t)line : 0);
  }
  return rv;
}

/* The PLT entry names of the file at |path| (libelf's image of it). */
static int plt_of_file(const char *path, tg_plt_t *out) {
  memset(out, 0, sizeof(*out));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  int rv = 0;
  Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  size_t len = 0;
  const char *raw = e && elf_kind(e) == ELF_K_ELF ? elf_rawfile(e, &len) : NULL;
  if (raw) rv = tg_plt_load((const uint8_t *)raw, len, out);
  if (e) elf_end(e);
  close(fd);
  /* A file whose sections cannot be read names no PLT entry: not an error. */
  return rv == -ENOMEM ? rv : 0;
}

/* |m|'s PLT entry names: from its debug file |path| when that holds the
 * PLT's relocations and symbols, else from the module's own file (same
 * build id), which keeps them when stripped; --only-keep-debug files
 * have those sections as SHT_NOBITS. */
static int plt_of_module(const tg_sym_module_t *m, const char *path,
                         const tg_sym_opts_t *o, tg_plt_t *out) {
  int rv = plt_of_file(path, out);
  if (rv || out->n) return rv;
  if (o->module_files && m->path[0] == '/' && strcmp(m->path, path) != 0 &&
      file_matches(m->path, m, false))
    rv = plt_of_file(m->path, out);
  return rv;
}

int tg_sym_resolve(tg_sym_module_t *m, const tg_sym_opts_t *o) {
  m->source = TG_SYM_SRC_NONE;
  int stop = tg_sym_should_stop(o);
  if (stop) return stop;
  char *path = find_file(m, o, &m->source);
  if (!path) return 0;
  m->debug_file = path;
  Dwfl *dwfl = dwfl_begin(&offline_cb);
  if (!dwfl) return -ENOMEM;
  Dwfl_Module *mod = dwfl_report_offline(dwfl, "", path, -1);
  dwfl_report_end(dwfl, NULL, NULL);
  GElf_Addr bias = 0;
  if (!mod || !dwfl_module_getelf(mod, &bias)) {
    /* Found by build id but not readable as one: no names from it. */
    m->source = TG_SYM_SRC_NONE;
    dwfl_end(dwfl);
    return 0;
  }
  tg_plt_t plt;
  int rv = plt_of_module(m, path, o, &plt);
  m->addrs = calloc(m->n_pcs ? m->n_pcs : 1, sizeof(*m->addrs));
  if (!m->addrs) rv = -ENOMEM;
  for (size_t i = 0; i < m->n_pcs && !rv; i++) {
    if ((i & 255) == 255 && (rv = tg_sym_should_stop(o))) break;
    tg_sym_addr_t *a = &m->addrs[m->n_addrs];
    a->rel_pc = m->pcs[i];
    /* A PLT entry has a name and no source line; DWARF does not cover it and
     * the nearest symbol before it is another function's. */
    const char *plt_name = tg_plt_find(&plt, m->pcs[i]);
    if (plt_name) {
      rv = add_line(a, plt_name, NULL, 0);
      m->n_plt += a->n_lines != 0;
    } else {
      rv = resolve_addr(mod, m->pcs[i] + bias, a);
    }
    if (a->n_lines) m->n_addrs++;
  }
  tg_plt_free(&plt);
  dwfl_end(dwfl);
  return rv;
}

/* Here, below symbolize.c, as both files ask it. */
int tg_sym_should_stop(const tg_sym_opts_t *o) {
  if (o->cancel && atomic_load_explicit(o->cancel, memory_order_relaxed))
    return -ECANCELED;
  if (!o->deadline_ns) return 0;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  return now >= o->deadline_ns ? -ETIMEDOUT : 0;
}
