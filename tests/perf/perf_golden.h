/* Golden perf ring records, as the kernel writes them (little-endian) for
 * an event opened with sample_type IP|TID|TIME|CPU|PERIOD|CALLCHAIN and
 * sample_id_all: shared by test_perf_record and the fuzz corpus seeds. */
#ifndef TRACEGATE_TESTS_PERF_PERF_GOLDEN_H
#define TRACEGATE_TESTS_PERF_PERF_GOLDEN_H

#include <stdint.h>

#define G32(x)                                                         \
  (uint8_t)((x)&0xff), (uint8_t)(((x) >> 8) & 0xff),                   \
      (uint8_t)(((x) >> 16) & 0xff), (uint8_t)(((x) >> 24) & 0xff)
#define G64(x) G32((uint64_t)(x)&0xffffffffu), G32((uint64_t)(x) >> 32)
#define G16(x) (uint8_t)((x)&0xff), (uint8_t)(((x) >> 8) & 0xff)
/* type, misc, size */
#define GHDR(type, misc, size) G32(type), G16(misc), G16(size)
/* The sample_id trailer: pid, tid, time, cpu, reserved. */
#define GID(pid, tid, time, cpu) G32(pid), G32(tid), G64(time), G32(cpu), G32(0)

#define GOLDEN_SAMPLE_TYPE (0x1u | 0x2u | 0x4u | 0x80u | 0x100u | 0x20u)

/* A user-mode sample of pid 100 tid 101 on cpu 1, callchain: kernel
 * marker, a kernel address, user marker, two user addresses. */
static const uint8_t golden_sample[] = {
    GHDR(9, 2, 96),
    G64(0x401136),                  /* ip */
    G32(100), G32(101),             /* pid, tid */
    G64(5000000000ull),             /* time */
    G32(1), G32(0),                 /* cpu, reserved */
    G64(250000),                    /* period */
    G64(5),                         /* nr */
    G64(0xffffffffffffff80ull),     /* PERF_CONTEXT_KERNEL */
    G64(0xffffffff81000010ull),
    G64(0xfffffffffffffe00ull),     /* PERF_CONTEXT_USER */
    G64(0x401136),
    G64(0x401180),
};

static const uint8_t golden_lost[] = {
    GHDR(2, 0, 48), G64(7), G64(42), GID(0, 0, 5000000100ull, 1),
};

static const uint8_t golden_throttle[] = {
    GHDR(5, 0, 56), G64(5000000200ull), G64(7), G64(7),
    GID(0, 0, 5000000200ull, 0),
};

/* COMM of an exec: "work". */
static const uint8_t golden_comm[] = {
    GHDR(3, 1u << 13, 48), G32(100), G32(100),
    'w', 'o', 'r', 'k', 0, 0, 0, 0,
    GID(100, 100, 5000000300ull, 0),
};

/* MMAP2 of /tmp/w, executable (prot 5), with device and inode. */
static const uint8_t golden_mmap2[] = {
    GHDR(10, 2, 104), G32(100), G32(100),
    G64(0x400000), G64(0x2000), G64(0x1000),
    G32(8), G32(1), G64(1234), G64(1),
    G32(5), G32(2),
    '/', 't', 'm', 'p', '/', 'w', 0, 0,
    GID(100, 100, 5000000400ull, 0),
};

/* The same with a build id instead of device and inode. */
static const uint8_t golden_mmap2_build_id[] = {
    GHDR(10, 2u | (1u << 14), 104), G32(100), G32(100),
    G64(0x400000), G64(0x2000), G64(0x1000),
    20, 0, G16(0),
    0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
    15, 16,
    G32(5), G32(2),
    '/', 't', 'm', 'p', '/', 'w', 0, 0,
    GID(100, 100, 5000000500ull, 0),
};

/* DWARF unwinding's layout: IP|TID|TIME|CPU|PERIOD|REGS_USER|STACK_USER
 * with three user registers and 16 bytes of stack, 12 of them valid. */
#define GOLDEN_DWARF_SAMPLE_TYPE \
  (0x1u | 0x2u | 0x4u | 0x80u | 0x100u | (1u << 12) | (1u << 13))
static const uint8_t golden_dwarf_sample[] = {
    GHDR(9, 2, 112),
    G64(0x401136),
    G32(100), G32(100),
    G64(6000000000ull),
    G32(0), G32(0),
    G64(10000),
    G64(2),                          /* PERF_SAMPLE_REGS_ABI_64 */
    G64(0x7ffc0000), G64(0x7ffb0000), G64(0x401136), /* bp, sp, ip */
    G64(16),                         /* stack size */
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
    G64(12),                         /* dyn_size */
};

#endif /* TRACEGATE_TESTS_PERF_PERF_GOLDEN_H */
