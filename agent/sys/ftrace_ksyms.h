/* The kernel's function symbols, from /proc/kallsyms: which function an
 * address lies in, for FtraceConfig.symbolize_ksyms (tracegate-probes) and
 * the kernel frames of linux.perf samples (tracegate-perf).
 *
 * kallsyms lines read "<hex address> <type> <name>[\t[module]]". Only text
 * symbols (type t or T) with a non-zero address are kept: the rest are data,
 * and an unprivileged reader, or any reader under kptr_restrict, sees every
 * address as 0 (counted in |zero_addrs|, so the caller can say why nothing
 * is symbolized). The text is untrusted: lines are bounded, the hex is
 * checked, names are cut at TG_KSYMS_NAME_MAX, and past TG_KSYMS_MAX_SYMS
 * symbols or TG_KSYMS_NAMES_MAX name bytes the rest are counted, not kept.
 *
 * The parser takes the text in pieces of any size (tg_ksyms_feed), so the
 * file is read in chunks and never held whole; storage grows by doubling,
 * never per line. After tg_ksyms_finish the symbols are sorted by address,
 * one per address (the first listed), and read only.
 */
#ifndef TRACEGATE_AGENT_SYS_FTRACE_KSYMS_H
#define TRACEGATE_AGENT_SYS_FTRACE_KSYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/sys/addr_strs.h"
#include "agent/sys/text.h"

/* Longer lines are skipped whole (real ones are below 300 bytes). */
#define TG_KSYMS_LINE_MAX 512
#define TG_KSYMS_NAME_MAX 256
/* Real kernels have some 10^5 text symbols. */
#define TG_KSYMS_MAX_SYMS (1u << 21)
#define TG_KSYMS_NAMES_MAX (64u << 20)
/* An address this far past the nearest symbol is not in that function
 * (Perfetto's kSymMaxSizeBytes): past the end of the kernel's text. */
#define TG_KSYMS_MAX_FUNC_SIZE (1u << 20)

typedef struct tg_ksyms {
  /* Name by address; sorted after tg_ksyms_finish. Its |dropped| counts
   * the text symbols past the caps. */
  tg__addr_strs_t syms;
  /* The line being parsed, across tg_ksyms_feed calls. */
  tg__lines_t lines;
  bool finished;
  uint64_t zero_addrs; /* text symbols whose address read as 0 */
  uint64_t bad_lines;  /* too long, bad hex, no type or no name */
} tg_ksyms_t;

void tg_ksyms_init(tg_ksyms_t *k);
/* Parses |len| more bytes of kallsyms text. Returns 0 or -ENOMEM (what was
 * parsed stays usable). */
int tg_ksyms_feed(tg_ksyms_t *k, const char *text_untrusted, size_t len);
/* Ends the text (a last line without a newline counts) and sorts. Returns
 * the number of symbols, or -ENOMEM. */
int tg_ksyms_finish(tg_ksyms_t *k);
/* tg_ksyms_init, one feed of the whole text, tg_ksyms_finish. */
int tg_ksyms_parse(tg_ksyms_t *k, const char *text_untrusted, size_t len);
/* Reads |path| (/proc/kallsyms) in chunks into |k| (initialised here).
 * Returns the number of symbols, or -errno. */
int tg_ksyms_load(tg_ksyms_t *k, const char *path);
void tg_ksyms_free(tg_ksyms_t *k);

/* The function |addr| lies in: the symbol with the greatest address <= it,
 * at most TG_KSYMS_MAX_FUNC_SIZE below. Returns its name (not
 * NUL-terminated, |*len| bytes, valid until tg_ksyms_free) or NULL. */
const char *tg_ksyms_lookup(const tg_ksyms_t *k, uint64_t addr, size_t *len);

/* Bytes held. */
size_t tg_ksyms_mem(const tg_ksyms_t *k);

#endif /* TRACEGATE_AGENT_SYS_FTRACE_KSYMS_H */
