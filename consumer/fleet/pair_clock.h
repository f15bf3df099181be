/* Two hosts' clocks from the requests between them (docs/merge.md,
 * "Clocks from requests"). A request seen on both ends gives the four
 * times NTP reads: the client sends at c1 and reads the answer at c2 (its
 * clock), the server reads the request at s1 and answers at s2 (its
 * clock). With theta the server's clock minus the client's, nothing
 * travels back in time, so
 *
 *   s2 - c2  <=  theta  <=  s1 - c1
 *
 * Each request bounds theta from both sides; the bounds' width is the
 * request's time on the network, whatever the asymmetry. Thousands of
 * requests bound a line theta(t) = offset + drift * (t - t0) far tighter
 * than one ClockSync round trip bounds a constant, and follow the drift
 * that one offset per sync period cannot.
 *
 * The fit is the line that leaves the widest margin to every bound: for a
 * drift d the offsets allowed form an interval whose width is concave in
 * d, so a search on d finds its widest; the offset is the middle of that
 * interval. A non-negative margin means the line keeps every request in
 * order (no server time before its client's send once placed); it is
 * also the error bound when the true drift is the one found. A negative
 * margin means no line keeps them all (a clock stepped, or the path's
 * delays changed within the window): the fit is then the line that
 * breaks the bounds least, and says so.
 *
 * Pure: no clock, no I/O, no allocation. The times are what hosts wrote
 * in their traces (untrusted): a sample whose times contradict
 * themselves (an answer before its request on either side, a server that
 * took longer than its client waited, a span past TG_PAIR_SPAN_MAX) or
 * what ClockSync knows (tg_pair_prior_t) is not used and counted.
 */
#ifndef TRACEGATE_CONSUMER_FLEET_PAIR_CLOCK_H
#define TRACEGATE_CONSUMER_FLEET_PAIR_CLOCK_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

/* The drifts searched: two quartz clocks differ by tens of ppm; this
 * leaves room for a clock disciplined in steps. */
#define TG_PAIR_DRIFT_MAX 1e-3
/* Samples spanning less than this (ns) fix no drift: over a short span
 * the widest band leans as far as the search allows and, carried past
 * the span, would be wild. Their line is flat (drift 0). */
#define TG_PAIR_DRIFT_SPAN_MIN 1000000000ll
/* A sample's round trip, and a window's span, at most this long (ns): a
 * day. Past it a sample is not used (nothing real waits that long for
 * an answer, and times that far apart would lose precision). */
#define TG_PAIR_SPAN_MAX (86400ll * 1000000000ll)

typedef struct tg_pair_sample {
  /* The client's clock: the request sent, the answer read. */
  int64_t c1, c2;
  /* The server's clock: the request read, the answer sent. */
  int64_t s1, s2;
} tg_pair_sample_t;

typedef struct tg_pair_fit {
  /* theta(t) = offset_ns + drift * (t - t0), t on the client's clock. */
  int64_t t0;
  double offset_ns;
  double drift;
  /* The smallest distance of the line to a bound (ns); negative when no
   * line keeps every sample in order. */
  double margin_ns;
  /* Samples used and not used (times that contradict themselves). */
  size_t used, rejected;
} tg_pair_fit_t;

/* What is known of theta before the requests (ns): the two hosts'
 * ClockSync estimates, each within its bound, widened by the drift they
 * may have had since. A host writes its own times, so its requests alone
 * could claim any offset; a sample whose bounds leave this interval is
 * not used, and no host moves another past what ClockSync allows. */
typedef struct tg_pair_prior {
  double lo_ns, hi_ns;
} tg_pair_prior_t;

/* Fits |n| samples at |s| (borrowed; any order), those within |prior|
 * when it is not NULL. 0, or -EINVAL when no sample is usable (|out|
 * then says how many were rejected). */
int tg_pair_clock_fit(const tg_pair_sample_t *s, size_t n,
                      const tg_pair_prior_t *prior, tg_pair_fit_t *out);

/* Whether |s| is a sample tg_pair_clock_fit could use under |prior|
 * (NULL: none): its times in order and within the prior. */
bool tg_pair_clock_usable(const tg_pair_sample_t *s,
                          const tg_pair_prior_t *prior);

/* Whether |s|'s upper bound (theta <= s1 - c1: the server read the
 * request after the client sent it) is one to hold a line under, used or
 * not: each side's own times in order, the bound representable within
 * TG_PAIR_SPAN_MAX, and not below what |prior| (NULL: none) allows. A
 * request whose server went on past its client's end (served > rtt) or
 * whose lower bound leaves the prior is not fitted on, yet it is a
 * request trace processor joins only when its server begins after its
 * client: its upper bound still holds. */
bool tg_pair_clock_orderable(const tg_pair_sample_t *s,
                             const tg_pair_prior_t *prior);

/* The server's clock minus the client's at client time |t|, by |fit|. */
double tg_pair_clock_theta(const tg_pair_fit_t *fit, int64_t t);

#endif
