/* The records of a perf_event ring buffer (perf_event_open(2)): a bounded
 * parser for the record types tracegate-perf asks the kernel for, and the
 * reader that takes records out of the ring's data area.
 *
 * The parser trusts nothing: every length and count is checked against
 * the record's size before use, so a corrupt ring (or a fuzzer) yields
 * -EBADMSG, never a read out of bounds. Pointers in a parsed record point
 * into the bytes given to the parser and live as long as those.
 */
#ifndef TRACEGATE_PERF_PERF_RECORD_H
#define TRACEGATE_PERF_PERF_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The kernel's ABI values (linux/perf_event.h), spelled here so that the
 * parser and its tests do not depend on the build machine's headers. */
#define TG_PERF_RECORD_MMAP 1
#define TG_PERF_RECORD_LOST 2
#define TG_PERF_RECORD_COMM 3
#define TG_PERF_RECORD_EXIT 4
#define TG_PERF_RECORD_THROTTLE 5
#define TG_PERF_RECORD_UNTHROTTLE 6
#define TG_PERF_RECORD_FORK 7
#define TG_PERF_RECORD_SAMPLE 9
#define TG_PERF_RECORD_MMAP2 10

#define TG_PERF_SAMPLE_IP (1u << 0)
#define TG_PERF_SAMPLE_TID (1u << 1)
#define TG_PERF_SAMPLE_TIME (1u << 2)
#define TG_PERF_SAMPLE_CPU (1u << 7)
#define TG_PERF_SAMPLE_PERIOD (1u << 8)
#define TG_PERF_SAMPLE_READ (1u << 4) /* with read_format 0: one u64 */
#define TG_PERF_SAMPLE_CALLCHAIN (1u << 5)
#define TG_PERF_SAMPLE_REGS_USER (1u << 12)
#define TG_PERF_SAMPLE_STACK_USER (1u << 13)
/* The only bits the parser knows the layout of. */
#define TG_PERF_SAMPLE_KNOWN                                             \
  (TG_PERF_SAMPLE_IP | TG_PERF_SAMPLE_TID | TG_PERF_SAMPLE_TIME |         \
   TG_PERF_SAMPLE_CPU | TG_PERF_SAMPLE_PERIOD | TG_PERF_SAMPLE_READ |     \
   TG_PERF_SAMPLE_CALLCHAIN | TG_PERF_SAMPLE_REGS_USER |                   \
   TG_PERF_SAMPLE_STACK_USER)
/* perf_event_attr.sample_regs_user has at most 64 bits. */
#define TG_PERF_MAX_USER_REGS 64

/* header.misc */
#define TG_PERF_MISC_CPUMODE_MASK 7u
#define TG_PERF_MISC_COMM_EXEC (1u << 13)
#define TG_PERF_MISC_MMAP_BUILD_ID (1u << 14)

/* Callchain context markers: the entries that follow are of that mode. */
#define TG_PERF_CONTEXT_HV ((uint64_t)-32)
#define TG_PERF_CONTEXT_KERNEL ((uint64_t)-128)
#define TG_PERF_CONTEXT_USER ((uint64_t)-512)
#define TG_PERF_CONTEXT_GUEST ((uint64_t)-2048)
#define TG_PERF_CONTEXT_GUEST_KERNEL ((uint64_t)-2176)
#define TG_PERF_CONTEXT_GUEST_USER ((uint64_t)-2560)
#define TG_PERF_CONTEXT_MAX ((uint64_t)-4095)

#define TG_PERF_HEADER_SIZE 8
#define TG_PERF_MAX_BUILD_ID 20

/* The trailing fields of a non-sample record with attr.sample_id_all set:
 * those of |sample_type| among TID, TIME and CPU. */
typedef struct tg_perf_sample_id {
  uint32_t pid, tid;
  uint64_t time;
  uint32_t cpu;
} tg_perf_sample_id_t;

typedef struct tg_perf_record {
  uint32_t type;
  uint16_t misc;
  uint16_t size;
  bool has_id; /* |id| was read (sample_id_all, a non-sample record) */
  tg_perf_sample_id_t id;
  union {
    struct {
      uint64_t ip;
      uint32_t pid, tid;
      uint64_t time;
      uint32_t cpu;
      uint64_t period;
      uint64_t read_value; /* READ: the counter's (the leader's) value */
      /* READ of a group (layout read_group): |read_nr| values, the
       * leader's first, then each follower's in the order opened. */
      uint64_t read_nr;
      const uint8_t *read_values; /* |read_nr| u64, maybe unaligned */
      uint64_t nr;          /* callchain entries, markers included */
      const uint8_t *ips;   /* |nr| u64 in host order, maybe unaligned */
      /* REGS_USER: the user registers of sample_regs_user, lowest bit
       * first, when |regs_abi| is not 0 (PERF_SAMPLE_REGS_ABI_NONE: a
       * kernel thread). */
      uint64_t regs_abi;
      const uint8_t *regs; /* |n_regs| u64, maybe unaligned */
      uint32_t n_regs;
      /* STACK_USER: |stack_size| bytes copied from the user stack pointer
       * up, of which the first |stack_dyn_size| are valid. */
      uint64_t stack_size, stack_dyn_size;
      const uint8_t *stack;
    } sample;
    struct {
      uint64_t id, lost;
    } lost;
    struct {
      uint64_t time, id, stream_id;
    } throttle; /* THROTTLE and UNTHROTTLE */
    struct {
      uint32_t pid, tid;
      uint64_t addr, len, pgoff;
      uint32_t maj, min;
      uint64_t ino, ino_generation;
      uint8_t build_id_size; /* with TG_PERF_MISC_MMAP_BUILD_ID */
      const uint8_t *build_id;
      uint32_t prot, flags;
      const char *filename; /* not NUL-terminated: |filename_len| bytes */
      size_t filename_len;
    } mmap2;
    struct {
      uint32_t pid, tid;
      const char *comm; /* |comm_len| bytes, no NUL */
      size_t comm_len;
    } comm;
  } u;
} tg_perf_record_t;

/* How the event was opened: what its records hold. */
typedef struct tg_perf_layout {
  /* Bits outside TG_PERF_SAMPLE_KNOWN: -ENOTSUP. READ is read as the
   * event was opened with read_format 0 (the value alone). */
  uint64_t sample_type;
  bool sample_id_all;
  uint32_t n_user_regs; /* bits set in sample_regs_user (REGS_USER) */
  /* READ is a group's (read_format PERF_FORMAT_GROUP alone): u64 nr, then
   * nr u64 values. */
  bool read_group;
} tg_perf_layout_t;

/* Parses the record of |len| bytes at |p| (its header's size must be
 * |len|) as the kernel writes it for an event opened as |lay| says.
 * Types other than SAMPLE, LOST, COMM, THROTTLE, UNTHROTTLE and MMAP2 are
 * returned with their header only. Returns 0, -EBADMSG (a length or count
 * that does not fit) or -ENOTSUP. */
int tg_perf_record_parse(const uint8_t *p, size_t len,
                         const tg_perf_layout_t *lay, tg_perf_record_t *out);

/* Entry |i| (< nr) of a parsed sample's callchain. */
uint64_t tg_perf_callchain_at(const tg_perf_record_t *r, size_t i);
/* Value |i| of a parsed sample's group READ (0 past |read_nr|). */
uint64_t tg_perf_read_value_at(const tg_perf_record_t *r, size_t i);

/* What read(2) of a group leader opened with read_format
 * PERF_FORMAT_GROUP returns: u64 nr, then nr u64 values. Copies at most
 * |cap| of them into |values| and sets |*n| to how many. Returns 0, or
 * -EBADMSG when |len| does not hold what nr says. */
int tg_perf_group_read_parse(const uint8_t *buf, size_t len, uint64_t *values,
                             size_t cap, size_t *n);

/* User register |i| of a parsed sample (0 past |n_regs|). */
uint64_t tg_perf_user_reg_at(const tg_perf_record_t *r, size_t i);

/* --- the ring ------------------------------------------------------------ */

/* The data area of a ring: |size| bytes (a power of two), written by the
 * kernel up to |head|; records start at |*tail|. */
typedef struct tg_perf_ring_view {
  const uint8_t *data;
  uint64_t size;
  uint64_t head;
} tg_perf_ring_view_t;

/* Takes the record at |*tail| out of the ring: points |*rec| at it (in the
 * ring, or copied into |scratch| of |cap| >= 65536 bytes when it wraps
 * around the end), sets |*rec_len| and advances |*tail|. Returns 1 for a
 * record, 0 when the ring is empty, -EBADMSG when the header is corrupt
 * (a size below 8 or past |head|): then |*tail| is moved to |head|, as
 * nothing after a bad header can be framed. */
int tg_perf_ring_next(const tg_perf_ring_view_t *v, uint64_t *tail,
                      uint8_t *scratch, size_t cap, const uint8_t **rec,
                      size_t *rec_len);

#endif /* TRACEGATE_PERF_PERF_RECORD_H */
