/* The smallest TCP proxy the fleet tests need between the CLI and a
 * relay: a thread of the test process that forwards every accepted
 * loopback connection to 127.0.0.1:<target>, counts the bytes going to
 * the client, and on request cuts every connection with a plain close (it
 * keeps accepting). In hold mode what comes from the relay is read and
 * counted but never delivered: it is in flight, and the next cut (which
 * ends hold mode) loses it.
 *
 * Why not tests/support/fault_proxy.h: its reset aborts with an RST and
 * its hold keeps at most 256 KiB and gives it back on resume. The link
 * cuts of test_fleet_e2e and test_relay_survival_e2e are closes, and
 * their holds swallow whole rounds of replies; moving them would change
 * what those tests exercise.
 *
 * Every wait has a deadline and fails the running cmocka test past it.
 */
#ifndef TRACEGATE_TESTS_CONSUMER_FLEET_PROXY_H
#define TRACEGATE_TESTS_CONSUMER_FLEET_PROXY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Owned by the test (usually on its stack) from fleet_proxy_start() to
 * fleet_proxy_stop(); the thread uses it in between, so it must not move.
 * The test reads only |port| and the atomic counters. */
typedef struct fleet_proxy {
  int listen_fd, port, target_port;
  int ctl[2];    /* 'c': cut, 'h': hold, 'q': quit */
  int notify[2]; /* a byte after each accept and each read from the relay */
  pthread_t thread;
  atomic_ullong down_bytes; /* delivered to clients */
  atomic_int accepted;      /* connections accepted and forwarded */
  atomic_ullong held_bytes; /* read in hold mode and never delivered */
  bool hold;                /* the proxy thread's own */
  int cli[8], up[8];
  int n;
} fleet_proxy_t;

/* Listens on 127.0.0.1:<any> (p->port) and forwards to |target_port|. */
void fleet_proxy_start(fleet_proxy_t *p, int target_port);
/* Quits the thread, closes every connection and fd. */
void fleet_proxy_stop(fleet_proxy_t *p);
/* Closes every open connection (and ends hold mode). */
void fleet_proxy_cut(fleet_proxy_t *p);
/* From now until the next cut, what the relay sends stays in the proxy. */
void fleet_proxy_hold(fleet_proxy_t *p);
/* Waits for the proxy's next event (an accept, a read from the relay),
 * bounded by |deadline| (tg_test_now_ms() time). */
void fleet_proxy_wait(fleet_proxy_t *p, int64_t deadline);
/* Waits (bounded) until at least |n| more bytes than |base| went to the
 * client. */
void fleet_proxy_wait_down_bytes(fleet_proxy_t *p, unsigned long long base,
                                 unsigned long long n);

#endif /* TRACEGATE_TESTS_CONSUMER_FLEET_PROXY_H */
