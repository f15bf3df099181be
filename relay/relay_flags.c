/* SPDX-License-Identifier: Apache-2.0 */
/* tracegate-relay's flag table and flag rules (relay_flags.h). */
#include "relay/relay_flags.h"

#include <string.h>

#include "common/log.h"
#include "relay/audit.h"
#include "ipc/channel.h"
#include "tls/session.h"

void relay_opts_defaults(relay_opts_t *o) {
  *o = (relay_opts_t){
      .listen = RELAY_DEFAULT_LISTEN,
      .consumer_socket = tg_ipc_default_socket(false),
      .compress = "allow",
      .max_conns = 64,
      .hs_timeout = 10000,
      .idle_timeout = 600000,
      .evict_after_ms = 1000,
      .high_water_kb = 4096,
      .dead_link_s = 10,
      .replay_window_kb = 8192,
      .ticket_lifetime_s = TG_TLS_TICKET_LIFETIME_DEFAULT_S,
      .audit_burst = TG_AUDIT_DENIAL_BURST,
      .audit_per_s = TG_AUDIT_DENIALS_PER_S,
      .log_level = TG_LOG_INFO,
  };
}

size_t relay_flag_table(relay_opts_t *o, tg_flag_t *out, size_t cap) {
  const tg_flag_t flags[] = {
      {"listen", TG_FLAG_STRING, &o->listen, "ADDR:PORT",
       "TLS listen address: 0.0.0.0:7467, [::]:7467, 127.0.0.1:0 (port 0: "
       "any free port, logged and written to --ready-fd)", 0, 0},
      {"consumer-socket", TG_FLAG_STRING, &o->consumer_socket, "PATH",
       "the tracing service's consumer socket: a path or @abstract name", 0, 0},
      {"cert", TG_FLAG_STRING, &o->cert, "FILE",
       "the relay's certificate (PEM; required unless --stdio)", 0, 0},
      {"key", TG_FLAG_STRING, &o->key, "FILE",
       "its private key (PEM; required unless --stdio)", 0, 0},
      {"ca", TG_FLAG_STRING, &o->ca, "FILE",
       "CA that signs client certificates (PEM; required unless --stdio)", 0,
       0},
      {"crl", TG_FLAG_STRING, &o->crl, "FILE",
       "certificate revocation list (PEM), reloaded on SIGHUP", 0, 0},
      {"authz", TG_FLAG_STRING, &o->authz_path, "FILE",
       "authorization file: \"identity observe|record\" lines, reloaded on "
       "SIGHUP (required unless --stdio)", 0, 0},
      {"session-ticket-lifetime", TG_FLAG_SECONDS, &o->ticket_lifetime_s,
       "DURATION",
       "issue TLS session tickets accepted this long, so that a client "
       "reconnecting within it resumes without any public-key operation "
       "(its certificate is still checked against the CRL in force and its "
       "dates). The keys that seal tickets live in memory only, are "
       "replaced every lifetime, and a restart forgets them. 0: no tickets, "
       "every handshake a full one (forward secrecy for every connection)",
       0, TG_TLS_TICKET_LIFETIME_MAX_S},
      {"compress", TG_FLAG_STRING, &o->compress, "MODE",
       "allow or never: whether a client may have what this relay sends "
       "zstd-compressed (tracegate record asks by default). Compression "
       "comes before encryption, so whoever sees the sizes of the link's "
       "records and can also write trace packets on this host (an app "
       "producing into the same session) may learn other packets' contents "
       "from how well they compress together, as in CRIME. never keeps every "
       "link plain, at the cost of several times the bytes on the wire", 0,
       0},
      {"max-conns", TG_FLAG_UINT, &o->max_conns, "N",
       "connections at once (handshakes included); more are refused", 1,
       65535},
      {"max-conns-per-identity", TG_FLAG_UINT, &o->per_identity, "N",
       "connections one client identity may hold at once; more are refused "
       "after their handshake, told why, so that one client cannot take "
       "every slot (0: half of --max-conns, rounded up)", 0, 65535},
      {"handshake-timeout-ms", TG_FLAG_MS, &o->hs_timeout, "DURATION",
       "from accept to a verified client", 100, 600000},
      {"unverified-evict-ms", TG_FLAG_MS, &o->evict_after_ms, "DURATION",
       "with --max-conns reached, a new connection closes the oldest one "
       "that has not presented a verified certificate after this long, "
       "instead of being refused: peers without a certificate holding "
       "connections open cannot keep clients out (a client's handshake "
       "takes a few round trips; 0: refuse the new one)", 0, 600000},
      {"idle-timeout-ms", TG_FLAG_MS, &o->idle_timeout, "DURATION",
       "close a connection that has been silent this long (0: never)", 0,
       86400000},
      {"dead-link-timeout", TG_FLAG_SECONDS, &o->dead_link_s, "DURATION",
       "declare a client's link dead once it has been silent this long: TCP "
       "keepalive and TCP_USER_TIMEOUT, and the connection is closed "
       "(tracegate clients send a heartbeat every second; 0: neither)", 0,
       3600},
      {"high-water-kb", TG_FLAG_KIB, &o->high_water_kb, "SIZE",
       "output queued per connection and direction before reading the "
       "other side pauses (hard cap: 16x)", 64, 1048576},
      {"session-lease-ms", TG_FLAG_MS, &o->session_lease_ms, "DURATION",
       "how long tracegated keeps a session with a resume key when the "
       "relay goes away (a crash, a restart) before its client re-attaches "
       "(0: tracegated's --session-lease-ms, which also caps it)", 0,
       86400000},
      {"replay-window-kb", TG_FLAG_KIB, &o->replay_window_kb, "SIZE",
       "per session key, ReadBuffers replies kept until the client "
       "acknowledges them, to send again what a lost link swallowed (0: "
       "none); sent compressed, they are kept as the compressed bytes, so "
       "the same memory holds several times more; beyond it the oldest go "
       "and a resuming client is told exactly what is lost", 0, 262144},
      {"audit-log", TG_FLAG_STRING, &o->audit_path, "FILE",
       "append audit lines here, reopened on SIGHUP (default: the log; "
       "syslog with --stdio)", 0,
       0},
      {"audit-burst", TG_FLAG_UINT, &o->audit_burst, "N",
       "lines about refusals and denials written at once before "
       "--audit-lines-per-s applies; past it they are counted, and the next "
       "line written says how many were held back. Each connection's denied "
       "calls have a budget of this size, and so do all unverified peers "
       "together and all refused clients together, so that a flood cannot "
       "flood the audit trail", 1, 1000000},
      {"audit-lines-per-s", TG_FLAG_UINT, &o->audit_per_s, "N",
       "the rate at which each budget of --audit-burst refills", 1, 100000},
      {"log-level", TG_FLAG_LOG_LEVEL, &o->log_level, "LEVEL",
       "error, warn, info or debug", 0, 0},
      {"ready-fd", TG_FLAG_UINT, &o->ready_fd, "FD",
       "write \"ready PORT\\n\" to this fd once listening, then close it (0: "
       "none)", 0, 1024},
      {"stdio", TG_FLAG_BOOL, &o->stdio, NULL,
       "bridge stdin/stdout to the service instead of listening", 0, 0},
  };
  size_t n = sizeof(flags) / sizeof(flags[0]);
  if (n > cap) return 0;
  memcpy(out, flags, sizeof(flags));
  return n;
}

/* Listening takes TLS and an authorization file; --stdio takes neither
 * (ssh authenticated the caller). */
const tg_flag_rule_t relay_rules[] = {
    TG_FLAG_ANY_OF(("cert", "stdio"),
                   "--cert is required (or --stdio; see --help)"),
    TG_FLAG_ANY_OF(("key", "stdio"),
                   "--key is required (or --stdio; see --help)"),
    TG_FLAG_ANY_OF(("ca", "stdio"),
                   "--ca is required (or --stdio; see --help)"),
    TG_FLAG_ANY_OF(("authz", "stdio"),
                   "--authz is required (or --stdio; see --help)"),
};
const size_t relay_n_rules = sizeof(relay_rules) / sizeof(relay_rules[0]);
