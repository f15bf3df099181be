/* SPDX-License-Identifier: Apache-2.0 */
/* Debug files by build id and libdw's answers for a module's addresses
 * (symbolize.h). A file is used only when its GNU build id is the
 * mapping's: a file of the same path from another build would name the
 * wrong functions. Every file is opened here, through tg_sym_open, and
 * handed to libelf and libdwfl as a descriptor: their callbacks that
 * would look for files themselves (by build id, by debuglink, through
 * debuginfod when DEBUGINFOD_URLS is set) all decline, and the files a
 * debug file names inside itself (a dwz alt file, split-DWARF .dwo
 * files) are kept from libdw's own opens (symbolize_linked.h). */
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
#include <sys/stat.h>
#include <unistd.h>

#include "common/dwfl_decline.h"
#include "common/elf_plt.h"
#include "consumer/symbolize/symbolize.h"
#include "consumer/symbolize/symbolize_linked.h"

/* The offline Dwfl reports one file that holds everything it has: no
 * separate debug file is searched for (the caller chose it by build id),
 * and no main file either (the module is reported with its descriptor). */
static int no_elf(Dwfl_Module *mod, void **userdata, const char *modname,
                  Dwarf_Addr base, char **file_name, Elf **elfp) {
  (void)mod, (void)userdata, (void)modname, (void)base;
  *file_name = NULL;
  *elfp = NULL;
  return -1;
}

/* Also asked for the dwz alt file (|debuglink_file| the link's path, crc
 * 0) when libdwfl loads the DWARF: declined, and nothing named, which
 * libdwfl would open itself; symbolize_linked.c sets the alt file
 * (tg_dwfl_no_debuginfo). */
static const Dwfl_Callbacks offline_cb = {
    .find_elf = no_elf,
    .find_debuginfo = tg_dwfl_no_debuginfo,
    .section_address = dwfl_offline_section_address,
};

/* Whether |path| is an ELF file with |m|'s build id and, when
 * |need_names|, a .symtab or DWARF. |named|: the trace chose the path. */
static bool file_matches(const char *path, bool named, tg_sym_module_t *m,
                         const tg_sym_opts_t *o, bool need_names) {
  int fd = tg__sym_open_counted(path, named, m, o);
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
  void (*set_progressfn)(void *, int (*)(void *, long, long));
  void (*set_user_data)(void *, void *);
  void *(*get_user_data)(void *);
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
  *(void **)&dbgf.set_progressfn = dlsym(lib, "debuginfod_set_progressfn");
  *(void **)&dbgf.set_user_data = dlsym(lib, "debuginfod_set_user_data");
  *(void **)&dbgf.get_user_data = dlsym(lib, "debuginfod_get_user_data");
  /* Without the progress callback no cap could cut a download short. */
  dbgf.ok = dbgf.begin && dbgf.find && dbgf.end && dbgf.set_progressfn &&
            dbgf.set_user_data && dbgf.get_user_data;
  if (!dbgf.ok) dlclose(lib);
  return dbgf.ok;
}

static uint64_t now_ns(const tg_sym_opts_t *o) {
  return tg_clock_ns(o->clock ? o->clock : &tg_clock_monotonic);
}

/* One lookup's share of the run's caps, read by its progress callback. */
typedef struct dbgf_lookup {
  const tg_sym_opts_t *o;
  uint64_t start_ns, ns_left, bytes_left;
  uint64_t got; /* bytes downloaded, as the callback last heard */
  bool transferred, capped;
} dbgf_lookup_t;

/* libdebuginfod calls it during a transfer (about once a second while
 * it waits): non-zero cuts the lookup short. The byte and time caps are
 * enforced here and not through DEBUGINFOD_MAXSIZE / DEBUGINFOD_MAXTIME:
 * those are read from the environment, which a pool thread must not
 * change while others read it. */
static int dbgf_progress(void *client, long a, long b) {
  dbgf_lookup_t *l = dbgf.get_user_data(client);
  l->transferred = true;
  if (a > 0 && (uint64_t)a > l->got) l->got = (uint64_t)a;
  if (tg_sym_should_stop(l->o)) return 1;
  if (l->got > l->bytes_left || (b > 0 && (uint64_t)b > l->bytes_left) ||
      now_ns(l->o) - l->start_ns >= l->ns_left) {
    l->capped = true;
    return 1;
  }
  return 0;
}

static uint64_t or_default(uint64_t v, uint64_t dflt) { return v ? v : dflt; }

/* The file from debuginfod (its cache), or NULL: asked only while the
 * run's caps (o->stats counts against them) leave room. */
static char *from_debuginfod(const tg_sym_module_t *m, const tg_sym_opts_t *o) {
  tg_sym_stats_t *st = o->stats;
  if (!st) return NULL;
  uint64_t max_n = or_default(o->debuginfod_max_lookups,
                              TG_SYM_DEBUGINFOD_MAX_LOOKUPS);
  uint64_t max_b = or_default(o->debuginfod_max_bytes,
                              TG_SYM_DEBUGINFOD_MAX_BYTES);
  uint64_t max_ns = or_default(o->debuginfod_max_ns,
                               TG_SYM_DEBUGINFOD_MAX_S * 1000000000ull);
  if (st->debuginfod_lookups >= max_n || st->debuginfod_bytes >= max_b ||
      st->debuginfod_ns >= max_ns) {
    st->debuginfod_refused++;
    return NULL;
  }
  if (!dbgf_open()) return NULL;
  void *c = dbgf.begin();
  if (!c) return NULL;
  st->debuginfod_lookups++;
  dbgf_lookup_t l = {.o = o, .start_ns = now_ns(o),
                     .ns_left = max_ns - st->debuginfod_ns,
                     .bytes_left = max_b - st->debuginfod_bytes};
  dbgf.set_user_data(c, &l);
  dbgf.set_progressfn(c, dbgf_progress);
  char *path = NULL;
  int fd = dbgf.find(c, m->build_id, (int)m->build_id_len, &path);
  if (fd >= 0) {
    struct stat sb;
    /* The last progress call may precede the transfer's last bytes. */
    if (l.transferred && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size > l.got)
      l.got = (uint64_t)sb.st_size;
    close(fd);
  } else {
    free(path);
    path = NULL;
  }
  dbgf.end(c);
  st->debuginfod_ns += now_ns(o) - l.start_ns;
  st->debuginfod_bytes += l.got;
  st->debuginfod_cut += l.capped;
  return path;
}

static char *find_file(tg_sym_module_t *m, const tg_sym_opts_t *o,
                       tg_sym_source_t *src) {
  char p[TG_SYM_MAX_PATH + 128];
  /* libelf refuses every file until told the ELF version in use. */
  if (elf_version(EV_CURRENT) == EV_NONE) return NULL;
  if (m->build_id_len >= 2)
    for (size_t i = 0; i < o->n_debug_dirs; i++)
      if (tg_sym_build_id_path(o->debug_dirs[i], m->build_id, m->build_id_len,
                               p, sizeof(p)) == 0 &&
          file_matches(p, false, m, o, true)) {
        *src = TG_SYM_SRC_BUILD_ID;
        return strdup(p);
      }
  if (o->module_files && m->build_id_len && m->path[0] == '/' &&
      file_matches(m->path, true, m, o, true)) {
    *src = TG_SYM_SRC_MODULE;
    return strdup(m->path);
  }
  if (o->debuginfod && m->build_id_len) {
    char *d = from_debuginfod(m, o);
    if (d && file_matches(d, false, m, o, true)) {
      if (o->stats) o->stats->debuginfod_found++;
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
 * site in it for the others). |dies|: the module's DWARF may be read (its
 * links are guarded, symbolize_linked.h); else the ELF symbols alone. A
 * skeleton unit's DIEs are never walked: its functions are in its .dwo,
 * which is not opened; its line table is its own. */
static int resolve_addr(Dwfl_Module *mod, Dwarf_Addr addr, bool dies,
                        tg_sym_addr_t *out) {
  const char *file = NULL;
  int line = 0;
  Dwfl_Line *l = dies ? dwfl_module_getsrc(mod, addr) : NULL;
  if (l) file = dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);
  Dwarf_Addr bias = 0;
  Dwarf_Die *cu = dies ? dwfl_module_addrdie(mod, addr, &bias) : NULL;
  Dwarf_Die *scopes = NULL;
  int n = cu && !tg__sym_is_skeleton(cu)
              ? dwarf_getscopes(cu, addr - bias, &scopes)
              : 0;
  int rv = 0;
  bool any = false;
  for (int i = 0; i < n && !rv; i++) {
    int tag = dwarf_tag(&scopes[i]);
    if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine) continue;
    const char *fn = die_name(&scopes[i]);
    /* A name the DWARF cannot give (an alt file not found): the
     * function's own symbol. */
    if (!fn && tag == DW_TAG_subprogram) fn = dwfl_module_addrname(mod, addr);
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
static int plt_of_file(const char *path, bool named, tg_sym_module_t *m,
                       const tg_sym_opts_t *o, tg_plt_t *out) {
  memset(out, 0, sizeof(*out));
  int fd = tg__sym_open_counted(path, named, m, o);
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
static int plt_of_module(tg_sym_module_t *m, const char *path, bool named,
                         const tg_sym_opts_t *o, tg_plt_t *out) {
  int rv = plt_of_file(path, named, m, o, out);
  if (rv || out->n) return rv;
  if (o->module_files && m->path[0] == '/' && strcmp(m->path, path) != 0 &&
      file_matches(m->path, true, m, o, false))
    rv = plt_of_file(m->path, true, m, o, out);
  return rv;
}

int tg_sym_resolve(tg_sym_module_t *m, const tg_sym_opts_t *o) {
  m->source = TG_SYM_SRC_NONE;
  int stop = tg_sym_should_stop(o);
  if (stop) return stop;
  char *path = find_file(m, o, &m->source);
  if (!path) return 0;
  m->debug_file = path;
  bool named = m->source == TG_SYM_SRC_MODULE;
  Dwfl *dwfl = dwfl_begin(&offline_cb);
  if (!dwfl) return -ENOMEM;
  /* Given a descriptor, libdwfl keeps it on success and leaves it to us
   * on failure. */
  int fd = tg__sym_open_counted(path, named, m, o);
  Dwfl_Module *mod = fd >= 0 ? dwfl_report_offline(dwfl, "", path, fd) : NULL;
  if (!mod && fd >= 0) close(fd);
  dwfl_report_end(dwfl, NULL, NULL);
  GElf_Addr bias = 0;
  if (!mod || !dwfl_module_getelf(mod, &bias)) {
    /* Found by build id but not readable as one: no names from it. */
    m->source = TG_SYM_SRC_NONE;
    dwfl_end(dwfl);
    return 0;
  }
  /* Guarded before any DIE is read (the alt file is set only then). */
  tg__sym_linked_t links = {.alt_fd = -1};
  Dwarf_Addr dbias;
  Dwarf *dw = dwfl_module_getdwarf(mod, &dbias);
  int rv = dw ? tg__sym_guard_links(dw, path, m, o, &links) : 0;
  bool dies = dw && !rv;
  if (rv != -ENOMEM) rv = 0;
  tg_plt_t plt = {0};
  if (!rv) rv = plt_of_module(m, path, named, o, &plt);
  m->addrs = calloc(m->n_pcs ? m->n_pcs : 1, sizeof(*m->addrs));
  if (!m->addrs) rv = -ENOMEM;
  for (size_t i = 0; i < m->n_pcs && !rv; i++) {
    if ((rv = tg_sym_should_stop(o))) break;
    tg_sym_addr_t *a = &m->addrs[m->n_addrs];
    a->rel_pc = m->pcs[i];
    /* A PLT entry has a name and no source line; DWARF does not cover it and
     * the nearest symbol before it is another function's. */
    const char *plt_name = tg_plt_find(&plt, m->pcs[i]);
    if (plt_name) {
      rv = add_line(a, plt_name, NULL, 0);
      m->n_plt += a->n_lines != 0;
    } else {
      rv = resolve_addr(mod, m->pcs[i] + bias, dies, a);
    }
    if (a->n_lines) m->n_addrs++;
  }
  tg_plt_free(&plt);
  dwfl_end(dwfl);
  tg__sym_linked_free(&links);
  return rv;
}

/* Here, below symbolize.c, as both files ask it. */
int tg_sym_should_stop(const tg_sym_opts_t *o) {
  if (o->cancel && atomic_load_explicit(o->cancel, memory_order_relaxed))
    return -ECANCELED;
  if (!o->deadline_ns) return 0;
  return now_ns(o) >= o->deadline_ns ? -ETIMEDOUT : 0;
}
