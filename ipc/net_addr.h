/* ipc/net_addr.h: the one parser and formatter of network addresses as
 * people write them ("host:port", "[v6]:port", "host" with a default
 * port), shared by the CLI's -H targets, the relay's --listen and the TLS
 * dialer. Pure: no I/O, no event loop (the dialer is ipc/net_addr_dial.h).
 *
 * Accepted forms:
 *   host:port        relay.example:7467, 10.0.0.1:7467
 *   [v6]:port        [::1]:7467, [fe80::1%eth0]:7467
 *   host, [v6]       only with TG_NET_ADDR_PORT_OPTIONAL: the default port
 *   v6 (bare)        "::1": more than one ':' without brackets is an IPv6
 *                    address with no port (so only with PORT_OPTIONAL)
 * A host is 1..TG_NET_HOST_MAX bytes of [A-Za-z0-9._:%-], never starting
 * with '-' (it may reach ssh's command line, where it would be an option).
 * A port is 1 to 5 decimal digits, 1..65535 (0 only with
 * TG_NET_ADDR_PORT_ZERO).
 */
#ifndef TRACEGATE_IPC_NET_ADDR_H
#define TRACEGATE_IPC_NET_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Longest host name (a DNS name is at most 253 bytes). */
#define TG_NET_HOST_MAX 255
/* Room for any tg_net_addr_format() or tg_net_sockaddr_format() result. */
#define TG_NET_ADDR_STRLEN (TG_NET_HOST_MAX + sizeof("[]:65535"))

typedef struct tg_net_addr {
  char host[TG_NET_HOST_MAX + 1]; /* without brackets */
  uint16_t port;
  bool ipv6; /* written as an IPv6 literal (in brackets, or bare) */
} tg_net_addr_t;

enum tg_net_addr_flags {
  /* "host", "[v6]" and bare v6 are accepted and get |default_port|. */
  TG_NET_ADDR_PORT_OPTIONAL = 1u << 0,
  /* An explicit port 0 is accepted (a listener: any free port). */
  TG_NET_ADDR_PORT_ZERO = 1u << 1,
};

/* Parses |s_untrusted| (NUL-terminated) into *out. Returns 0, or -EINVAL
 * when it is none of the forms above; *out is then undefined. */
int tg_net_addr_parse(const char *s_untrusted, unsigned flags,
                      uint16_t default_port, tg_net_addr_t *out);

/* Writes |a| back as "host:port" or "[v6]:port" into |buf| (|len| bytes).
 * Returns 0, or -ENOSPC when it does not fit (|buf| then holds "" if
 * |len| > 0). */
int tg_net_addr_format(const tg_net_addr_t *a, char *buf, size_t len);

/* Formats a resolved address as "1.2.3.4:5678" or "[::1]:5678" ("(family
 * N)" for anything else), truncated to |len|, for logs. */
void tg_net_sockaddr_format(const struct sockaddr *sa, char *buf, size_t len);

/* For a numeric host (IPv4 dotted quad, or IPv6 when a->ipv6): the socket
 * address to bind or connect to. Returns 0, or -EINVAL for a name (this
 * never resolves). */
int tg_net_addr_to_sockaddr(const tg_net_addr_t *a,
                            struct sockaddr_storage *ss);

#endif /* TRACEGATE_IPC_NET_ADDR_H */
