/* A fault-injecting loopback TCP proxy for tests: it listens on
 * 127.0.0.1:<any port>, connects every accepted client to 127.0.0.1:
 * <target>, and forwards both ways from a thread of its own, until told
 * to misbehave:
 *
 *   reset   every open connection is aborted with an RST on both sides
 *           (SO_LINGER 0); new connections go on being accepted.
 *   stall   a silent partition: nothing moves either way, nothing is
 *           closed, no new connection is accepted (the kernel still
 *           queues them), the way a dead NAT or a pulled cable looks
 *           from userspace. Bytes already read stay in the proxy.
 *   hold down  half a partition: what clients send goes on to the target,
 *           what the target sends back is read and held in the proxy (a
 *           reply lost in flight; tg_fault_proxy_wait_held_bytes sees it).
 *   resume  forwarding goes on where it stopped, held bytes first.
 *
 * What a userspace proxy cannot fake: its kernel still acknowledges what
 * it receives during a stall, so TCP keepalive and TCP_USER_TIMEOUT on
 * either end do not fire through it; only application heartbeats and
 * idle timeouts can notice. Tests of the kernel options need a real
 * network fault.
 *
 * Every call but tg_fault_proxy_stop() may be made while the proxy runs;
 * commands return once the proxy thread has carried them out. Waits are on
 * events (a condition variable signalled by the thread), never sleeps.
 */
#ifndef TRACEGATE_TESTS_SUPPORT_FAULT_PROXY_H
#define TRACEGATE_TESTS_SUPPORT_FAULT_PROXY_H

#include <stdint.h>

typedef struct tg_fault_proxy tg_fault_proxy_t;

/* Starts a proxy to 127.0.0.1:|target_port|. Returns 0 and *out, or a
 * negative errno (nothing left running). */
int tg_fault_proxy_start(int target_port, tg_fault_proxy_t **out);
/* Stops the thread, closes every socket, frees |p|. */
void tg_fault_proxy_stop(tg_fault_proxy_t *p);
/* The port it listens on. */
int tg_fault_proxy_port(const tg_fault_proxy_t *p);

void tg_fault_proxy_reset(tg_fault_proxy_t *p);
void tg_fault_proxy_stall(tg_fault_proxy_t *p);
void tg_fault_proxy_resume(tg_fault_proxy_t *p);
void tg_fault_proxy_hold_down(tg_fault_proxy_t *p);

/* Connections accepted and forwarded so far. */
unsigned tg_fault_proxy_accepted(tg_fault_proxy_t *p);
/* Bytes forwarded to clients (from the target) so far. */
uint64_t tg_fault_proxy_down_bytes(tg_fault_proxy_t *p);
/* Connections open now (each a client and its target connection). */
unsigned tg_fault_proxy_open(tg_fault_proxy_t *p);

/* Wait until at least |n| connections were accepted, |n| bytes went to
 * clients, or at most |n| connections are open. Return 0, or -ETIMEDOUT
 * after |timeout_ms|. */
int tg_fault_proxy_wait_accepted(tg_fault_proxy_t *p, unsigned n, int timeout_ms);
int tg_fault_proxy_wait_down_bytes(tg_fault_proxy_t *p, uint64_t n,
                                   int timeout_ms);
/* ... or at least |n| bytes from the target are held in the proxy (hold
 * down reads them and keeps them until resume). */
int tg_fault_proxy_wait_held_bytes(tg_fault_proxy_t *p, uint64_t n,
                                   int timeout_ms);
int tg_fault_proxy_wait_open_at_most(tg_fault_proxy_t *p, unsigned n,
                                     int timeout_ms);

#endif /* TRACEGATE_TESTS_SUPPORT_FAULT_PROXY_H */
