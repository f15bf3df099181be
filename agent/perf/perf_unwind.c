/* DWARF unwinding with libdwfl: see perf_unwind.h. */
#include "agent/perf/perf_unwind.h"

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/perf/perf_maps.h"
#include "agent/perf/perf_open.h"
#include "common/dwfl_decline.h"

/* x86-64: perf's register numbers (asm/perf_regs.h) of what DWARF needs,
 * in the kernel's order (ascending bit), and their DWARF numbers. */
enum {
  PR_AX = 0, PR_BX, PR_CX, PR_DX, PR_SI, PR_DI, PR_BP, PR_SP, PR_IP,
  PR_R8 = 16,
};
#define N_REGS 17 /* AX..IP (9) and R8..R15 (8) */
#define IDX_R8 9  /* R8's index among the sample's registers */
#define DWARF_REGS 17 /* rax..r15 (0-15) and the return address (16) */

typedef struct sample {
  uint32_t tid;
  const uint64_t *regs;
  const uint8_t *stack;
  size_t stack_len;
  uint64_t sp;
} sample_t;

typedef struct proc_dwfl {
  uint32_t pid;
  Dwfl *dwfl; /* NULL: slot free */
  uint64_t used; /* the unwinder's clock at this Dwfl's last use */
  /* The process's file mappings when the Dwfl was built: the device and
   * inode a module's file must have (find_elf). */
  tg_perf_maps_t maps;
  /* The mappings changed since: rebuilt at the next sample the rate
   * limit allows (each rebuild rereads the maps). */
  bool stale;
  tg_perf_reread_limit_t rebuilds;
} proc_dwfl_t;

struct tg_perf_unwinder {
  proc_dwfl_t procs[TG_PERF_UNWIND_PROCS];
  size_t n;
  uint64_t clock; /* counts lookups */
  uint64_t rebuilds_deferred; /* samples unwound with a stale Dwfl */
  sample_t cur; /* the sample being unwound: the callbacks' argument */
};

bool tg_perf_unwind_supported(void) {
#if defined(__x86_64__)
  return true;
#else
  return false;
#endif
}

uint64_t tg_perf_unwind_regs_mask(void) {
  return 0x1ffull | (0xffull << PR_R8);
}

uint32_t tg_perf_unwind_n_regs(void) { return N_REGS; }

/* The process whose Dwfl is being built or walked, and its mappings:
 * libdwfl opens a module's file lazily (when the Dwfl is attached, and
 * during the walk), and its callback is not told whose. One thread per
 * unwinder. */
typedef struct find_ctx {
  uint32_t pid;
  const tg_perf_maps_t *maps;
} find_ctx_t;
static _Thread_local const find_ctx_t *current;

static const tg_perf_map_t *map_named(const tg_perf_maps_t *maps,
                                      const char *name) {
  for (size_t i = 0; i < maps->n; i++)
    if (strcmp(maps->v[i].path, name) == 0) return &maps->v[i];
  return NULL;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

/* A module's file as its process sees it, by perf_open.h's rules: inside
 * /proc/PID/root, never blocking, the mapping's own regular file; never
 * the path in the profiler's namespace, which libdwfl's own
 * dwfl_linux_proc_find_elf would open (after a stat: a FIFO swapped in
 * between blocks it for good). What is not a path (the vDSO, "[vdso:
 * PID]") and a deleted file's image are read from the process's memory
 * (/proc/PID/mem) by libdwfl: the latter by asking for it under the
 * vDSO's name form, the one libdwfl reads from memory without looking
 * at any path. */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *name,
                    Dwarf_Addr base, char **file_name, Elf **elfp) {
  const find_ctx_t *c = current;
  if (!name || !c) return -1;
  if (name[0] != '/' || ends_with(name, " (deleted)")) {
    char mem_name[32];
    if (name[0] == '/') {
      snprintf(mem_name, sizeof(mem_name), "[vdso: %u]", c->pid);
      name = mem_name;
    }
    if (strncmp(name, "[vdso: ", 7) != 0) return -1;
    return dwfl_linux_proc_find_elf(mod, userdata, name, base, file_name,
                                    elfp);
  }
  const tg_perf_map_t *m = map_named(c->maps, name);
  if (!m) return -1;
  int root = tg_perf_open_root("/proc/%d/root", (int)c->pid);
  if (root < 0) return -1;
  struct stat st;
  tg_perf_open_why_t why;
  int fd = tg_perf_open_mapped(root, name, m->dev_major, m->dev_minor,
                               m->inode, &st, &why);
  close(root);
  if (fd < 0) return -1;
  /* libdwfl owns both from here; the name is only shown, never opened
   * (no debug file is looked for). */
  char path[PATH_MAX + 32];
  snprintf(path, sizeof(path), "/proc/%u/root%s", c->pid, name);
  if ((*file_name = strdup(path))) return fd;
  close(fd);
  return -1;
}

/* No separate debug file: the unwinder reads the CFI of the file itself
 * (.eh_frame, and .debug_frame when the file has one). libdwfl asks for
 * .debug_frame whenever .eh_frame ends the walk, which every sample's
 * outermost frame does; with a debug file found by build id (Debian's
 * -dbgsym packages, libc6-dbg), that would open it and inflate its
 * compressed DWARF sections once per process's Dwfl, for no frame more.
 * Names from debug files are the symbolizer's work, not the reader's.
 *
 * libdwfl also asks it for a dwz alt file (|debuglink_file| the path the
 * module's .gnu_debugaltlink holds, crc 0) when it loads the DWARF for
 * .debug_frame: declined too, and no name handed back, which libdwfl
 * would open itself. Nothing else here can make libdw open a file a
 * module names: libdw looks for the alt file only when a DIE's alt form
 * is read, and for a split unit's .dwo only when a skeleton's split unit
 * is asked for, and the unwinder reads call frame information alone,
 * never a DIE (test_perf_unwind: both made FIFOs). */
static const Dwfl_Callbacks proc_callbacks = {
    .find_elf = find_elf,
    .find_debuginfo = tg_dwfl_no_debuginfo,
};

static pid_t next_thread(Dwfl *dwfl, void *dwfl_arg, void **thread_argp) {
  (void)dwfl;
  if (*thread_argp) return 0;
  sample_t *s = dwfl_arg;
  *thread_argp = s;
  return (pid_t)s->tid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *dwfl_arg,
                       void **thread_argp) {
  (void)dwfl;
  sample_t *s = dwfl_arg;
  if ((uint32_t)tid != s->tid) return false;
  *thread_argp = s;
  return true;
}

/* Only the copied stack is readable: the process has run on since. */
static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result,
                        void *dwfl_arg) {
  (void)dwfl;
  sample_t *s = dwfl_arg;
  if (addr < s->sp || addr - s->sp > s->stack_len ||
      s->stack_len - (addr - s->sp) < sizeof(*result))
    return false;
  memcpy(result, s->stack + (addr - s->sp), sizeof(*result));
  return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *thread_arg) {
  sample_t *s = thread_arg;
  const uint64_t *r = s->regs;
  Dwarf_Word d[DWARF_REGS - 1] = {
      r[PR_AX], r[PR_DX], r[PR_CX], r[PR_BX], r[PR_SI], r[PR_DI],
      r[PR_BP], r[PR_SP],
  };
  for (int i = 0; i < 8; i++) d[8 + i] = r[IDX_R8 + i];
  if (!dwfl_thread_state_registers(thread, 0, DWARF_REGS - 1, d)) return false;
  dwfl_thread_state_register_pc(thread, r[PR_IP]);
  return true;
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
    .next_thread = next_thread,
    .get_thread = get_thread,
    .memory_read = memory_read,
    .set_initial_registers = set_initial_registers,
};

tg_perf_unwinder_t *tg_perf_unwinder_new(void) {
  return calloc(1, sizeof(tg_perf_unwinder_t));
}

static void proc_end(proc_dwfl_t *pd) {
  dwfl_end(pd->dwfl);
  tg_perf_maps_free(&pd->maps);
}

void tg_perf_unwinder_clear(tg_perf_unwinder_t *u) {
  for (size_t i = 0; i < u->n; i++) proc_end(&u->procs[i]);
  u->n = 0;
}

void tg_perf_unwinder_free(tg_perf_unwinder_t *u) {
  if (!u) return;
  tg_perf_unwinder_clear(u);
  free(u);
}

void tg_perf_unwinder_forget(tg_perf_unwinder_t *u, uint32_t pid) {
  for (size_t i = 0; i < u->n; i++)
    if (u->procs[i].pid == pid) u->procs[i].stale = true;
}

uint64_t tg_perf_unwinder_rebuilds_deferred(const tg_perf_unwinder_t *u) {
  return u->rebuilds_deferred;
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The process's Dwfl: its modules reported from /proc/PID/maps and its
 * state attached to this unwinder's current sample; |*ctx| is set for
 * find_elf (the caller makes it current for the walk). */
static Dwfl *dwfl_of(tg_perf_unwinder_t *u, uint32_t pid, find_ctx_t *ctx,
                     int *err) {
  u->clock++;
  uint64_t now = now_ms();
  tg_perf_reread_limit_t limit;
  tg_perf_reread_fill(&limit, now);
  for (size_t i = 0; i < u->n; i++) {
    proc_dwfl_t *pd = &u->procs[i];
    if (pd->pid != pid) continue;
    pd->used = u->clock;
    if (!pd->stale || !tg_perf_reread_take(&pd->rebuilds, now)) {
      if (pd->stale) u->rebuilds_deferred++;
      *ctx = (find_ctx_t){pid, &pd->maps};
      return pd->dwfl;
    }
    /* Rebuilt below, keeping what is left of its rereads. */
    limit = pd->rebuilds;
    proc_end(pd);
    u->procs[i] = u->procs[--u->n];
    break;
  }
  /* Full: the least recently used goes, so that the busy processes keep
   * theirs while short-lived ones (a build's compilers) come and go. */
  if (u->n == TG_PERF_UNWIND_PROCS) {
    size_t old = 0;
    for (size_t i = 1; i < u->n; i++)
      if (u->procs[i].used < u->procs[old].used) old = i;
    proc_end(&u->procs[old]);
    u->procs[old] = u->procs[--u->n];
  }
  proc_dwfl_t *pd = &u->procs[u->n];
  *pd = (proc_dwfl_t){.pid = pid, .used = u->clock, .rebuilds = limit};
  int rv = tg_perf_maps_read((int)pid, NULL, false, &pd->maps);
  if (rv < 0) {
    *err = rv == -ENOMEM ? rv : -ESRCH;
    return NULL;
  }
  *ctx = (find_ctx_t){pid, &pd->maps};
  current = ctx; /* attach_state opens a module's file already */
  Dwfl *d = dwfl_begin(&proc_callbacks);
  if (!d) {
    *err = -ENOMEM;
    goto fail;
  }
  dwfl_report_begin(d);
  rv = dwfl_linux_proc_report(d, (pid_t)pid);
  if (dwfl_report_end(d, NULL, NULL) != 0 || rv != 0) {
    *err = rv > 0 ? -rv : -ESRCH;
    goto fail;
  }
  if (!dwfl_attach_state(d, NULL, (pid_t)pid, &thread_callbacks, &u->cur)) {
    *err = -ENOTSUP;
    goto fail;
  }
  pd->dwfl = d;
  u->n++;
  return d;
fail:
  dwfl_end(d);
  tg_perf_maps_free(&pd->maps);
  return NULL;
}

typedef struct walk {
  uint64_t *pcs;
  size_t n, cap;
} walk_t;

static int on_frame(Dwfl_Frame *state, void *arg) {
  walk_t *w = arg;
  Dwarf_Addr pc;
  bool activation;
  if (!dwfl_frame_pc(state, &pc, &activation) || pc == 0)
    return DWARF_CB_ABORT;
  w->pcs[w->n++] = pc;
  return w->n < w->cap ? DWARF_CB_OK : DWARF_CB_ABORT;
}

int tg_perf_unwind(tg_perf_unwinder_t *u, uint32_t pid, uint32_t tid,
                   const uint64_t *regs, const uint8_t *stack,
                   size_t stack_len, uint64_t *pcs, size_t cap) {
  if (!cap || !regs) return 0;
  u->cur = (sample_t){tid, regs, stack, stack_len, regs[PR_SP]};
  find_ctx_t ctx = {0};
  int err = 0;
  Dwfl *d = dwfl_of(u, pid, &ctx, &err);
  current = &ctx;
  if (!d) {
    current = NULL;
    /* The leaf alone: it needs no unwinding. */
    pcs[0] = regs[PR_IP];
    return err == -ENOMEM ? err : 1;
  }
  walk_t w = {pcs, 0, cap};
  /* It ends with -1 where the frames do (the stack's top, a return
   * address above the copy, a module without CFI): what was walked until
   * then is the callstack. */
  (void)dwfl_getthread_frames(d, (pid_t)tid, on_frame, &w);
  current = NULL;
  if (!w.n) pcs[w.n++] = regs[PR_IP];
  return (int)w.n;
}
