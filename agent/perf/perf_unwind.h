/* DWARF unwinding of a sample's user stack (UNWIND_DWARF), with elfutils'
 * libdwfl: the kernel copies the user registers and the top of the user
 * stack into each sample (PERF_SAMPLE_REGS_USER, PERF_SAMPLE_STACK_USER);
 * libdwfl walks the call frame information (.eh_frame, .debug_frame) of
 * the process's mapped files over that copy. Works on binaries built
 * without frame pointers, stripped ones included (.eh_frame stays).
 *
 * A module's file is opened as its process sees it, by perf_open.h's
 * rules (inside /proc/PID/root, never blocking, the mapping's own device
 * and inode; CAP_SYS_PTRACE for other users'), never by the path in the
 * profiler's namespace; a deleted file's image and the vDSO are read
 * from the process's memory.
 * One Dwfl per process, kept across samples (its modules are read once)
 * and forgotten when the kernel reports a new executable mapping or an
 * exec; at most TG_PERF_UNWIND_PROCS of them, past which the least
 * recently used is dropped. Each Dwfl maps its process's files anew, so
 * the cap bounds the resident pages of mapped files too.
 * Memory reads outside the copied stack fail: a frame whose return
 * address lies above the copy ends the walk there.
 *
 * x86-64 only (tg_perf_unwind_supported() says so); one thread (the
 * session's unwinder thread, perf_unwind_thread.h).
 */
#ifndef TRACEGATE_PERF_PERF_UNWIND_H
#define TRACEGATE_PERF_PERF_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_PERF_UNWIND_PROCS 32
/* Bytes of user stack the kernel copies into each sample. */
#define TG_PERF_UNWIND_STACK_BYTES 16384

typedef struct tg_perf_unwinder tg_perf_unwinder_t;

/* Whether this build and machine unwind DWARF. */
bool tg_perf_unwind_supported(void);
/* perf_event_attr.sample_regs_user for this machine, and how many
 * registers a sample then carries. */
uint64_t tg_perf_unwind_regs_mask(void);
uint32_t tg_perf_unwind_n_regs(void);

tg_perf_unwinder_t *tg_perf_unwinder_new(void);
void tg_perf_unwinder_free(tg_perf_unwinder_t *u);
/* Drops every process's Dwfl (they are rebuilt as samples come). */
void tg_perf_unwinder_clear(tg_perf_unwinder_t *u);
/* |pid|'s mappings changed: its Dwfl is rebuilt at its next sample,
 * rate-limited as maps rereads are (perf_maps.h: a burst, then one per
 * TG_PERF_MAPS_REREAD_MS); until then the old one serves. */
void tg_perf_unwinder_forget(tg_perf_unwinder_t *u, uint32_t pid);
/* Samples unwound with a Dwfl whose rebuild the rate limit put off. */
uint64_t tg_perf_unwinder_rebuilds_deferred(const tg_perf_unwinder_t *u);

/* Unwinds thread |tid| of |pid| from |regs| (tg_perf_unwind_n_regs() of
 * them, in the kernel's order) over |stack| (|stack_len| bytes copied from
 * the stack pointer up) into |pcs| (at most |cap|, the leaf first).
 * Returns the number of frames (at least the leaf when the registers are
 * there), or -errno when the process cannot be reported (-ESRCH: gone). */
int tg_perf_unwind(tg_perf_unwinder_t *u, uint32_t pid, uint32_t tid,
                   const uint64_t *regs, const uint8_t *stack,
                   size_t stack_len, uint64_t *pcs, size_t cap);

#endif /* TRACEGATE_PERF_PERF_UNWIND_H */
