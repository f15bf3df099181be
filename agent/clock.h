/* The agent's event clock: CLOCK_BOOTTIME nanoseconds, cheaply.
 *
 * clock_gettime(CLOCK_BOOTTIME) costs ~25-30 ns in a VM, as much as a whole
 * track event may. When the kernel itself trusts the TSC (clocksource
 * "tsc", invariant TSC), events read the TSC (~10 ns) and convert it with a
 * calibration the agent's thread refreshes against CLOCK_BOOTTIME every
 * second. Each refresh starts where the previous line ends and aims at the
 * real clock one period later, so timestamps stay continuous and converge
 * instead of jumping; an error above 1 ms (suspend, migration) snaps to the
 * real clock. Without a usable TSC every read is a clock_gettime().
 *
 * The calibration is a seqlock: readers retry if the agent's thread
 * changed it meanwhile (once a second, for a few nanoseconds).
 *
 * Calibrating wakes the agent's thread once a second, so it only starts
 * once something reads this clock: the first read (clock_gettime, being
 * uncalibrated) sets |asked| and wakes the agent's thread, which starts
 * calibrating. A process that never reads it (tracegate-probes stamps its
 * packets with CLOCK_BOOTTIME) never wakes for it. Later uncalibrated
 * reads see |asked| set: one relaxed load, no system call.
 */
#ifndef TRACEGATE_AGENT_CLOCK_H
#define TRACEGATE_AGENT_CLOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

typedef struct tg__clock_calib {
  _Atomic uint32_t seq;      /* odd while being written; 0: not calibrated */
  _Atomic uint64_t base_tsc;
  _Atomic uint64_t base_ns;
  _Atomic uint64_t mult;     /* ns per TSC tick, << 32 */
  _Atomic bool asked;        /* a reader wants calibration (tg__clock_ask) */
} tg__clock_calib_t;

extern tg__clock_calib_t tg__clock;

static inline uint64_t tg__clock_boottime(void) {
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Any thread, cold: sets |asked| and, the first time, wakes the agent's
 * thread to start calibrating (if the agent runs; tg_agent_init looks at
 * |asked| otherwise). */
void tg__clock_ask(void);

static inline uint64_t tg__clock_now(void) {
#if defined(__x86_64__)
  for (;;) {
    uint32_t s1 = atomic_load_explicit(&tg__clock.seq, memory_order_acquire);
    if (__builtin_expect(s1 == 0, 0)) { /* not calibrated (yet) */
      if (!atomic_load_explicit(&tg__clock.asked, memory_order_relaxed))
        tg__clock_ask();
      break;
    }
    uint64_t tsc = __rdtsc();
    uint64_t base_tsc =
        atomic_load_explicit(&tg__clock.base_tsc, memory_order_relaxed);
    uint64_t base_ns =
        atomic_load_explicit(&tg__clock.base_ns, memory_order_relaxed);
    uint64_t mult = atomic_load_explicit(&tg__clock.mult, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    uint32_t s2 = atomic_load_explicit(&tg__clock.seq, memory_order_relaxed);
    if (__builtin_expect(s1 != s2 || (s1 & 1u), 0)) continue;
    /* A TSC a hair behind the base (read on another core) counts as 0. */
    uint64_t d = tsc > base_tsc ? tsc - base_tsc : 0;
    return base_ns + (uint64_t)(((unsigned __int128)d * mult) >> 32);
  }
#endif
  return tg__clock_boottime();
}

/* Agent's thread: true when the TSC path may be used on this machine. */
bool tg__clock_tsc_usable(void);
/* Agent's thread, about once a second (the first call only samples). */
void tg__clock_calibrate(void);
/* Back to clock_gettime, not asked for (agent shutdown). */
void tg__clock_reset(void);

#endif /* TRACEGATE_AGENT_CLOCK_H */
