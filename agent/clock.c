/* Calibrating the TSC against CLOCK_BOOTTIME (see clock.h). */
#include "agent/clock.h"

#include "agent/agent_internal.h"

#include <stdio.h>
#include <string.h>

tg__clock_calib_t tg__clock;

#define SNAP_NS 1000000ull     /* larger errors jump instead of slewing */
#define PERIOD_NS 1000000000ull /* the line aims one second ahead */

/* The previous sample, agent's thread only. */
static uint64_t g_prev_tsc, g_prev_ns;

/* True when every word of |words| (NULL-terminated, fewer than 32) appears
 * in |path| as a blank-separated token. One pass over the file. */
static bool file_has_all(const char *path, const char *const *words) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  unsigned n = 0;
  while (words[n]) n++;
  unsigned found = 0, all = (1u << n) - 1u;
  char line[4096];
  while (found != all && fgets(line, sizeof(line), f)) {
    for (unsigned i = 0; i < n; i++) {
      size_t len = strlen(words[i]);
      for (char *p = strstr(line, words[i]); p && !(found & (1u << i));
           p = strstr(p + 1, words[i])) {
        bool left = p == line || p[-1] == ' ' || p[-1] == '\t';
        bool right = p[len] == 0 || p[len] == ' ' || p[len] == '\n';
        if (left && right) found |= 1u << i;
      }
    }
  }
  fclose(f);
  return found == all;
}

bool tg__clock_tsc_usable(void) {
#if defined(__x86_64__)
  /* The kernel's own verdict: it only keeps "tsc" as its clocksource when
   * the TSC is invariant and synchronised across CPUs. */
  static const char *const clocksource[] = {"tsc", NULL};
  static const char *const cpu_flags[] = {"constant_tsc", "nonstop_tsc", NULL};
  return file_has_all("/sys/devices/system/clocksource/clocksource0/"
                      "current_clocksource",
                      clocksource) &&
         file_has_all("/proc/cpuinfo", cpu_flags);
#else
  return false;
#endif
}

static void publish(uint64_t base_tsc, uint64_t base_ns, uint64_t mult) {
  uint32_t s = atomic_load_explicit(&tg__clock.seq, memory_order_relaxed);
  atomic_store_explicit(&tg__clock.seq, s | 1u, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  atomic_store_explicit(&tg__clock.base_tsc, base_tsc, memory_order_relaxed);
  atomic_store_explicit(&tg__clock.base_ns, base_ns, memory_order_relaxed);
  atomic_store_explicit(&tg__clock.mult, mult, memory_order_relaxed);
  /* Never 0 again once published: 0 means "not calibrated". */
  atomic_store_explicit(&tg__clock.seq, (s | 1u) + 1u, memory_order_release);
}

void tg__clock_calibrate(void) {
#if defined(__x86_64__)
  uint64_t tsc = __rdtsc();
  uint64_t ns = tg__clock_boottime();
  if (g_prev_tsc == 0 || tsc <= g_prev_tsc || ns <= g_prev_ns) {
    g_prev_tsc = tsc;
    g_prev_ns = ns;
    return;
  }
  /* Measured rate since the previous sample. */
  uint64_t rate = (uint64_t)(((unsigned __int128)(ns - g_prev_ns) << 32) /
                             (tsc - g_prev_tsc));
  g_prev_tsc = tsc;
  g_prev_ns = ns;
  uint32_t seq = atomic_load_explicit(&tg__clock.seq, memory_order_relaxed);
  if (seq == 0) {
    publish(tsc, ns, rate);
    return;
  }
  /* Continue the current line from here, and aim at the real clock one
   * period ahead: continuous timestamps, converging error. */
  uint64_t base_tsc = atomic_load_explicit(&tg__clock.base_tsc,
                                           memory_order_relaxed);
  uint64_t base_ns = atomic_load_explicit(&tg__clock.base_ns,
                                          memory_order_relaxed);
  uint64_t mult = atomic_load_explicit(&tg__clock.mult, memory_order_relaxed);
  uint64_t here = base_ns + (uint64_t)(((unsigned __int128)(tsc - base_tsc) *
                                        mult) >> 32);
  int64_t err = (int64_t)(ns - here);
  if (err > (int64_t)SNAP_NS || err < -(int64_t)SNAP_NS) {
    publish(tsc, ns, rate);
    return;
  }
  /* ticks in one period at the measured rate; the new slope covers
   * PERIOD_NS + err over them. */
  uint64_t ticks = (uint64_t)(((unsigned __int128)PERIOD_NS << 32) / rate);
  if (ticks == 0) return;
  uint64_t slope = (uint64_t)((((unsigned __int128)(int64_t)(PERIOD_NS + err))
                               << 32) /
                              ticks);
  publish(tsc, here, slope);
#endif
}

void tg__clock_ask(void) {
  /* Release pairs with the agent thread's acquire in on_async and
   * agent_thread; the exchange makes the wake happen once. */
  if (!atomic_exchange_explicit(&tg__clock.asked, true, memory_order_release))
    tg__agent_wake(NULL);
}

void tg__clock_reset(void) {
  atomic_store_explicit(&tg__clock.asked, false, memory_order_relaxed);
  atomic_store_explicit(&tg__clock.seq, 0, memory_order_release);
  g_prev_tsc = g_prev_ns = 0;
}
