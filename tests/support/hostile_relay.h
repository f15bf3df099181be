/* A hostile host for tests: a TLS man-in-the-middle that holds the relay's
 * own certificate, in front of a real tracegate-relay, rewriting the
 * consumer protocol's replies on their way to the client.
 *
 *   client ==TLS (the relay's cert)==> hostile relay ==TLS (a client
 *   cert)==> tracegate-relay --UNIX--> tracegated
 *
 * It listens on 127.0.0.1:<any port>; every accepted connection gets a
 * thread of its own that completes the client's handshake as the relay
 * would, dials the real relay as a client, and forwards plaintext both
 * ways. What the client sends goes through unchanged, read only to learn
 * which request ids are which method (BindService replies name them), so
 * that a reply can be told by its method. What the relay sends back is cut
 * into IPC frames ([u32 len][IPCFrame]) and, depending on the mode, passed
 * or rewritten:
 *
 *   PASS          everything unchanged (a plain forwarder)
 *   ENDLESS_READ  a ReadBuffers stream never ends: every reply goes out
 *                 with has_more, and after the relay's last one the
 *                 stream goes on with forged packets of about 4 KiB, as
 *                 fast as the client reads, until it closes
 *   SEQ_FLOOD     the same, with tiny forged packets that each carry a
 *                 new trusted_packet_sequence_id (from 1 << 20 up)
 *   ENDLESS_PACKET  the same, the forged slices all of one packet that
 *                 never ends (no last_slice_for_packet)
 *   TRICKLE       the same, but slowly: one frame of one small forged
 *                 packet (about TG_HOSTILE_TRICKLE_BYTES) every
 *                 TG_HOSTILE_TRICKLE_MS of real time, never a long silence
 *   INJECT        a ReadBuffers stream ends as the relay's does, but after
 *                 its last packet come the packets the test gave
 *                 (tg_hostile_relay_set_packets), each whole in one slice,
 *                 once per connection for each set given (a client reads
 *                 a clone until a read brings nothing): a host whose
 *                 producers or relay write exactly those bytes
 *   INJECT_FIRST  the same, the packets before the relay's first one (and
 *                 so before the service's own ClockSnapshot)
 *
 * Apart from the mode, tg_hostile_relay_set_clock_sync_error() makes every
 * TracegateRelay.ClockSync reply a refusal (success false, no body): a
 * relay that gives the client no clock estimate.
 * The mode is read at each ReadBuffers request, so a test may switch it
 * between snapshots; streams already forged go on until their connection
 * closes.
 *
 * What it cannot do: rewrite a stream the relay compresses (the replies
 * after a TracegateRelay.SetCompression), since it does not inflate zstd.
 * Clients under test ask for no compression (the collector's
 * `compress_level = 0`); a connection that negotiates it is still
 * forwarded, but its frames after the reply are not looked at, which is
 * only right in PASS mode.
 *
 * Threads: the accept thread and one per connection; every call here may
 * be made while they run. tg_hostile_relay_stop() closes every socket and
 * joins every thread.
 */
#ifndef TRACEGATE_TESTS_SUPPORT_HOSTILE_RELAY_H
#define TRACEGATE_TESTS_SUPPORT_HOSTILE_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An ENDLESS_READ packet carries this many bytes of TestEvent.str
 * ("hostile:" then 'x's), and a few more. */
#define TG_HOSTILE_ENDLESS_PAD 4000u
/* A TRICKLE packet's size, at most, and the time between two. */
#define TG_HOSTILE_TRICKLE_BYTES 40u
#define TG_HOSTILE_TRICKLE_MS 10

typedef enum tg_hostile_mode {
  TG_HOSTILE_PASS = 0,
  TG_HOSTILE_ENDLESS_READ,
  TG_HOSTILE_SEQ_FLOOD,
  TG_HOSTILE_ENDLESS_PACKET,
  TG_HOSTILE_TRICKLE,
  TG_HOSTILE_INJECT,
  TG_HOSTILE_INJECT_FIRST,
} tg_hostile_mode_t;

/* Paths are read during tg_hostile_relay_start() only. */
typedef struct tg_hostile_opts {
  int target_port; /* the real relay, on 127.0.0.1 */
  /* Presented to clients: the relay's own certificate and key. */
  const char *cert_file, *key_file;
  /* The CA both ends are verified against. */
  const char *ca_file;
  /* Presented to the real relay (a certificate its authz admits). */
  const char *client_cert_file, *client_key_file;
  /* The name the real relay's certificate carries ("relay.test"). */
  const char *server_name;
  tg_hostile_mode_t mode;
} tg_hostile_opts_t;

typedef struct tg_hostile_relay tg_hostile_relay_t;

/* Loads the TLS files, listens and starts the accept thread. Returns 0 and
 * *out (the caller's until tg_hostile_relay_stop), or a negative error
 * with nothing left running; |err| says why. */
int tg_hostile_relay_start(const tg_hostile_opts_t *o, tg_hostile_relay_t **out,
                           char *err, size_t errlen);
/* Closes every connection, joins every thread, frees |h|. */
void tg_hostile_relay_stop(tg_hostile_relay_t *h);
int tg_hostile_relay_port(const tg_hostile_relay_t *h);
/* From the next ReadBuffers request on. */
void tg_hostile_relay_set_mode(tg_hostile_relay_t *h, tg_hostile_mode_t m);

/* The packets INJECT streams end with: |n| TracePackets, |pkts[i]| of
 * |lens[i]| bytes each, copied. Replaces what was given before; streams
 * already ending take the old ones. Returns 0 or -ENOMEM (nothing
 * changed); each packet must fit an IPC frame with room to spare
 * (-EMSGSIZE past TG_HOSTILE_INJECT_MAX). */
#define TG_HOSTILE_INJECT_MAX (64u * 1024)
int tg_hostile_relay_set_packets(tg_hostile_relay_t *h,
                                 const uint8_t *const *pkts,
                                 const size_t *lens, size_t n);
/* From the next ClockSync reply on: refused (|on|) or passed. */
void tg_hostile_relay_set_clock_sync_error(tg_hostile_relay_t *h, bool on);

/* Counters, read at any time. */
typedef struct tg_hostile_stats {
  uint64_t accepted;       /* client connections forwarded to the relay */
  uint64_t endless_reads;  /* ReadBuffers streams made endless */
  uint64_t forged_packets; /* packets made up and sent */
  uint64_t forged_bytes;   /* their bytes */
  uint64_t injected;       /* INJECT packets sent */
  uint64_t clock_refused;  /* ClockSync replies made refusals */
} tg_hostile_stats_t;
void tg_hostile_relay_stats(tg_hostile_relay_t *h, tg_hostile_stats_t *st);

#endif /* TRACEGATE_TESTS_SUPPORT_HOSTILE_RELAY_H */
