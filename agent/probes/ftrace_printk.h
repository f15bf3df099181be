/* The kernel's string constants, from tracefs' printk_formats: what a
 * "const char *" field of a record (TG_FTRACE_FIELD_STRPTR, e.g.
 * power/suspend_resume's action) points at.
 *
 * Tracepoints that log a string constant store its address, not its bytes;
 * the kernel lists those constants (tracepoint_string(), trace_printk()
 * formats) in printk_formats, one per line:
 *   0xffffffff8281a8ff : "thaw_processes"
 * As Perfetto's probes do (printk_formats_parser.cc), the text is split at
 * the first ':', the address is hex with or without "0x", the string is
 * what follows with one surrounding pair of quotes dropped, and kept as
 * the kernel printed it: its escapes (\n, \t, \") are not undone, since
 * the kernel leaves a backslash itself unescaped and so the text cannot be
 * decoded back without ambiguity. Address 0 (a reader the kernel hides
 * addresses from) and empty strings are not kept; of one address listed
 * twice, the first string is.
 *
 * The text is untrusted: lines are bounded (longer ones are skipped whole),
 * the hex is checked for overflow, strings are cut at TG_PRINTK_STR_MAX and
 * past TG_PRINTK_MAX_ENTRIES entries or TG_PRINTK_STRS_MAX string bytes the
 * rest are counted, not kept. It is fed in pieces of any size, so the file
 * is read in chunks and storage grows by doubling, never per line. After
 * tg_printk_formats_finish the table is sorted by address and read only:
 * a lookup is a binary search that allocates nothing. Only
 * tg_printk_formats_load does I/O; text passed in is borrowed for the call.
 */
#ifndef TRACEGATE_PROBES_FTRACE_PRINTK_H
#define TRACEGATE_PROBES_FTRACE_PRINTK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/sys/addr_strs.h"
#include "agent/sys/text.h"

/* Longer lines are skipped whole (real ones are below 200 bytes). */
#define TG_PRINTK_LINE_MAX 2048
#define TG_PRINTK_STR_MAX 1024
/* Real kernels list a few hundred to a few thousand. */
#define TG_PRINTK_MAX_ENTRIES (1u << 18)
#define TG_PRINTK_STRS_MAX (16u << 20)
#define TG_PRINTK_FILE "printk_formats"

typedef struct tg_printk_formats {
  /* String by address; sorted after tg_printk_formats_finish. Its
   * |dropped| counts the entries past the caps. */
  tg__addr_strs_t strs;
  /* The line being parsed, across tg_printk_formats_feed calls. */
  tg__lines_t lines;
  bool finished;
  uint64_t zero_addrs; /* entries whose address read as 0 */
  uint64_t bad_lines;  /* too long, no ':', bad or overflowing hex */
  uint64_t cut;        /* strings cut at TG_PRINTK_STR_MAX */
} tg_printk_formats_t;

void tg_printk_formats_init(tg_printk_formats_t *t);
/* Parses |len| more bytes of printk_formats text. Returns 0 or -ENOMEM
 * (what was parsed stays usable). */
int tg_printk_formats_feed(tg_printk_formats_t *t, const char *text_untrusted,
                           size_t len);
/* Ends the text (a last line without a newline counts) and sorts. Returns
 * the number of entries, or -ENOMEM. */
int tg_printk_formats_finish(tg_printk_formats_t *t);
/* tg_printk_formats_init, one feed of the whole text, finish. */
int tg_printk_formats_parse(tg_printk_formats_t *t, const char *text_untrusted,
                            size_t len);
/* Reads <tracefs_root>/printk_formats in chunks into |t| (initialised
 * here; empty after an error). Returns the number of entries or -errno. */
int tg_printk_formats_load(tg_printk_formats_t *t, const char *tracefs_root);
void tg_printk_formats_free(tg_printk_formats_t *t);

/* The string at exactly |addr|: |*len| bytes, not NUL-terminated, valid
 * until tg_printk_formats_free; NULL when the table does not list it.
 * |t| may be NULL (no table: nothing is listed). */
const char *tg_printk_formats_lookup(const tg_printk_formats_t *t,
                                     uint64_t addr, size_t *len);

/* Bytes held. */
size_t tg_printk_formats_mem(const tg_printk_formats_t *t);

#endif /* TRACEGATE_PROBES_FTRACE_PRINTK_H */
