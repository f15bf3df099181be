/* Processes, mappings and their files: see perf_procs.h. */
#include "agent/perf/perf_procs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/perf/perf_elf.h"
#include "agent/sys/proc_read.h"

#define PID_SLOTS (TG_PERF_PROCS_MAX * 2)
#define ARGV0_MAX 512
#define FILE_UNSET (-1)
#define FILE_NONE (-2)

typedef struct file {
  char *path;
  uint64_t inode;
  uint32_t maj, min;
  bool ok; /* an ELF was read */
  tg_elf_t elf;
  tg_elf_syms_t syms;
} file_t;

typedef struct proc {
  uint32_t pid;
  bool used;
  bool loaded, stale, reread;
  int maps_error; /* the last read's error, 0 when it was read */
  tg_perf_reread_limit_t rereads;
  bool argv0_read;
  char argv0[ARGV0_MAX];
  tg_perf_maps_t maps;
  /* The maps before the last read of this round: the frames of the sample
   * being written may still point at their paths (a pc outside every
   * mapping rereads them mid-sample). Freed at the next round. */
  tg_perf_maps_t prev;
  int *file_of; /* per mapping: index in files, FILE_UNSET or FILE_NONE */
} proc_t;

struct tg_perf_procs {
  proc_t *slots; /* PID_SLOTS, open addressing by pid */
  size_t n_procs;
  file_t *files;
  size_t n_files;
  char *root_fmt, *maps_fmt;
  uint64_t now_ms;     /* the round's */
  size_t syms_bytes;   /* of every file's symbols: the budget's */
  tg_perf_procs_stats_t stats;
};

static void proc_clear(proc_t *pr) {
  tg_perf_maps_free(&pr->maps);
  tg_perf_maps_free(&pr->prev);
  free(pr->file_of);
  memset(pr, 0, sizeof(*pr));
}

static void files_clear(tg_perf_procs_t *p) {
  for (size_t i = 0; i < p->n_files; i++) {
    free(p->files[i].path);
    tg_elf_syms_free(&p->files[i].syms);
  }
  p->n_files = 0;
  p->syms_bytes = 0;
}

static void procs_clear(tg_perf_procs_t *p) {
  for (size_t i = 0; i < PID_SLOTS; i++)
    if (p->slots[i].used) proc_clear(&p->slots[i]);
  p->n_procs = 0;
}

tg_perf_procs_t *tg_perf_procs_new(const char *root_fmt, const char *maps_fmt) {
  tg_perf_procs_t *p = calloc(1, sizeof(*p));
  if (!p) return NULL;
  p->slots = calloc(PID_SLOTS, sizeof(*p->slots));
  p->files = calloc(TG_PERF_FILES_MAX, sizeof(*p->files));
  p->root_fmt = strdup(root_fmt ? root_fmt : "/proc/%d/root");
  p->maps_fmt = strdup(maps_fmt ? maps_fmt : "/proc/%d/maps");
  if (!p->slots || !p->files || !p->root_fmt || !p->maps_fmt) {
    tg_perf_procs_free(p);
    return NULL;
  }
  return p;
}

void tg_perf_procs_free(tg_perf_procs_t *p) {
  if (!p) return;
  if (p->slots) procs_clear(p);
  if (p->files) files_clear(p);
  free(p->slots);
  free(p->files);
  free(p->root_fmt);
  free(p->maps_fmt);
  free(p);
}

const tg_perf_procs_stats_t *tg_perf_procs_stats(const tg_perf_procs_t *p) {
  return &p->stats;
}

static proc_t *find(tg_perf_procs_t *p, uint32_t pid, bool create) {
  size_t j = (pid * 2654435761u) % PID_SLOTS;
  while (p->slots[j].used) {
    if (p->slots[j].pid == pid) return &p->slots[j];
    j = (j + 1) % PID_SLOTS;
  }
  if (!create) return NULL;
  if (p->n_procs >= TG_PERF_PROCS_MAX) {
    procs_clear(p);
    j = (pid * 2654435761u) % PID_SLOTS;
  }
  p->slots[j].used = true;
  p->slots[j].pid = pid;
  p->n_procs++;
  return &p->slots[j];
}

void tg_perf_procs_new_round(tg_perf_procs_t *p, uint64_t now_ms) {
  p->now_ms = now_ms;
  for (size_t i = 0; i < PID_SLOTS; i++) {
    p->slots[i].reread = false;
    tg_perf_maps_free(&p->slots[i].prev);
  }
}

void tg_perf_procs_invalidate(tg_perf_procs_t *p, uint32_t pid, bool exec) {
  proc_t *pr = find(p, pid, false);
  if (pr) {
    pr->stale = true;
    pr->argv0_read = false;
    /* A new image starts with its few mappings: cheap to read, and the
     * ones read before are all wrong now. */
    if (exec) tg_perf_reread_fill(&pr->rereads, p->now_ms);
  }
}

/* Whether |pr|'s maps, read before, may be read again now. */
static bool may_reread(tg_perf_procs_t *p, proc_t *pr) {
  if (tg_perf_reread_take(&pr->rereads, p->now_ms)) return true;
  p->stats.maps_rereads_deferred++;
  return false;
}

/* Reads |pr|'s maps unless they are current, or stale with no reread
 * left for now. */
static bool maps_due(tg_perf_procs_t *p, proc_t *pr) {
  if (!pr->loaded) {
    tg_perf_reread_fill(&pr->rereads, p->now_ms);
    return true;
  }
  return pr->stale && may_reread(p, pr);
}

static void load_maps(tg_perf_procs_t *p, proc_t *pr) {
  char path[128];
  snprintf(path, sizeof(path), p->maps_fmt, (int)pr->pid);
  free(pr->file_of);
  pr->file_of = NULL;
  tg_perf_maps_free(&pr->prev);
  pr->prev = pr->maps;
  memset(&pr->maps, 0, sizeof(pr->maps));
  p->stats.maps_reads++;
  int n = tg_perf_maps_read((int)pr->pid, path, true, &pr->maps);
  pr->loaded = true;
  pr->stale = false;
  pr->maps_error = n < 0 ? n : 0;
  if (n < 0) {
    p->stats.maps_failed++;
    tg_perf_maps_free(&pr->maps);
    return;
  }
  if (pr->maps.n && !(pr->file_of = malloc(pr->maps.n * sizeof(int)))) {
    tg_perf_maps_free(&pr->maps);
    return;
  }
  for (size_t i = 0; i < pr->maps.n; i++) pr->file_of[i] = FILE_UNSET;
}

const char *tg_perf_procs_argv0(tg_perf_procs_t *p, uint32_t pid) {
  proc_t *pr = find(p, pid, true);
  if (pr->argv0_read) return pr->argv0;
  pr->argv0_read = true;
  pr->argv0[0] = '\0';
  char path[64];
  snprintf(path, sizeof(path), "/proc/%u/cmdline", pid);
  /* argv[0] ends at its NUL; a process gone or unreadable has none. */
  if (tg_proc_read_head(path, pr->argv0, ARGV0_MAX) < 0) pr->argv0[0] = '\0';
  return pr->argv0;
}

/* Reads the ELF facts of |m|'s file, once per session. */
static int file_of(tg_perf_procs_t *p, proc_t *pr, size_t mi) {
  if (pr->file_of[mi] != FILE_UNSET) return pr->file_of[mi];
  const tg_perf_map_t *m = &pr->maps.v[mi];
  if (m->path[0] != '/' || !m->inode) return pr->file_of[mi] = FILE_NONE;
  for (size_t i = 0; i < p->n_files; i++) {
    file_t *f = &p->files[i];
    if (f->inode == m->inode && f->maj == m->dev_major &&
        f->min == m->dev_minor && strcmp(f->path, m->path) == 0)
      return pr->file_of[mi] = (int)i;
  }
  if (p->n_files == TG_PERF_FILES_MAX) {
    /* Every process's indices go with the files. */
    files_clear(p);
    for (size_t i = 0; i < PID_SLOTS; i++) {
      proc_t *o = &p->slots[i];
      if (o->used && o->file_of)
        for (size_t k = 0; k < o->maps.n; k++) o->file_of[k] = FILE_UNSET;
    }
  }
  file_t *f = &p->files[p->n_files];
  memset(f, 0, sizeof(*f));
  if (!(f->path = strdup(m->path))) return FILE_NONE;
  f->inode = m->inode;
  f->maj = m->dev_major;
  f->min = m->dev_minor;
  int idx = (int)p->n_files++;
  pr->file_of[mi] = idx;
  /* Inside the process's root only, never blocking, and only the
   * mapping's own regular file (perf_open.h). */
  struct stat st;
  tg_perf_open_why_t why = TG_PERF_OPEN_MISSING;
  int root = tg_perf_open_root(p->root_fmt, (int)pr->pid);
  int fd = root < 0 ? root
                    : tg_perf_open_mapped(root, m->path, m->dev_major,
                                          m->dev_minor, m->inode, &st, &why);
  if (root >= 0) close(root);
  if (fd < 0) {
    p->stats.files_failed++;
    p->stats.files_refused[why]++;
    return idx;
  }
  if ((uint64_t)st.st_size > TG_PERF_FILE_MAX_BYTES || st.st_size == 0) {
    close(fd);
    p->stats.files_failed++;
    p->stats.files_refused[TG_PERF_OPEN_OK]++;
    return idx;
  }
  void *buf = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (buf == MAP_FAILED) {
    p->stats.files_failed++;
    p->stats.files_refused[TG_PERF_OPEN_OK]++;
    return idx;
  }
  p->stats.files_read++;
  if (tg_elf_parse(buf, (size_t)st.st_size, &f->elf) == 0) {
    f->ok = true;
    if (tg_elf_syms_load(buf, (size_t)st.st_size, &f->syms) < 0)
      tg_elf_syms_free(&f->syms);
    p->stats.syms_dropped += f->syms.dropped;
    size_t bytes = tg_addr_names_bytes(&f->syms);
    if (bytes > TG_PERF_SYMS_BUDGET_BYTES - p->syms_bytes) {
      tg_elf_syms_free(&f->syms);
      p->stats.files_over_budget++;
    } else {
      p->syms_bytes += bytes;
    }
  }
  munmap(buf, (size_t)st.st_size);
  return idx;
}

int tg_perf_procs_load(tg_perf_procs_t *p, uint32_t pid) {
  proc_t *pr = find(p, pid, true);
  if (maps_due(p, pr)) load_maps(p, pr);
  return pr->maps_error;
}

void tg_perf_procs_frame(tg_perf_procs_t *p, uint32_t pid, uint64_t pc,
                         bool return_addr, tg_perf_emit_mapping_t *map,
                         tg_perf_emit_frame_t *f) {
  memset(map, 0, sizeof(*map));
  memset(f, 0, sizeof(*f));
  f->mapping = map;
  proc_t *pr = find(p, pid, true);
  if (maps_due(p, pr)) load_maps(p, pr);
  uint64_t look = return_addr && pc ? pc - 1 : pc;
  const tg_perf_map_t *m = tg_perf_maps_find(&pr->maps, look);
  if (!m && !pr->reread && may_reread(p, pr)) {
    pr->reread = true;
    load_maps(p, pr);
    m = tg_perf_maps_find(&pr->maps, look);
  }
  if (!m || !pr->file_of) {
    p->stats.unknown_pcs++;
    map->path = "[unknown]";
    f->rel_pc = pc;
    return;
  }
  p->stats.resolved_pcs++;
  size_t mi = (size_t)(m - pr->maps.v);
  map->start = m->start;
  map->end = m->end;
  map->exact_offset = m->pgoff;
  map->path = m->path[0] ? m->path : "[anon]";
  uint64_t off = pc - m->start + m->pgoff;
  f->rel_pc = off;
  int fi = file_of(p, pr, mi);
  if (fi < 0 || !p->files[fi].ok) return;
  const file_t *file = &p->files[fi];
  map->load_bias = file->elf.load_bias;
  map->build_id = file->elf.build_id;
  map->build_id_len = file->elf.build_id_len;
  f->rel_pc = tg_elf_vaddr(&file->elf, off);
  f->function = tg_elf_syms_find(&file->syms,
                                 tg_elf_vaddr(&file->elf, look - m->start + m->pgoff));
  if (f->function) p->stats.named_pcs++;
}
