/* A counting TCP forwarder for the benches: listens on 127.0.0.1:0 and
 * relays each connection to 127.0.0.1:|to_port| on threads of this
 * process, counting the bytes that cross it each way. Put between the
 * two ends of a network path, it tells how many bytes that path put on
 * the wire (TCP payload; loopback's own headers are not counted). */
#ifndef TRACEGATE_BENCH_FORWARD_H
#define TRACEGATE_BENCH_FORWARD_H

#include <stdint.h>

typedef struct bench_forward bench_forward_t;

/* Starts a forwarder to 127.0.0.1:|to_port|; *port is where it listens.
 * Returns it, or NULL (printed). */
bench_forward_t *bench_forward_start(int to_port, int *port);
/* Stops it (every connection cut, every thread joined) and gives the
 * bytes that went towards |to_port| (*up) and back (*down). */
void bench_forward_stop(bench_forward_t *fw, uint64_t *up, uint64_t *down);

/* A TCP port on 127.0.0.1 that was free a moment ago (for servers that
 * cannot listen on port 0 and say which port they got), or -1. */
int bench_free_port(void);

#endif /* TRACEGATE_BENCH_FORWARD_H */
