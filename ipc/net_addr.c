/* Parsing and formatting "host:port" addresses; see ipc/net_addr.h. */
#include "ipc/net_addr.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "common/decimal.h"

static bool host_char_ok(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_' ||
         c == ':' || c == '%';
}

/* Copies the |len| bytes at |h_untrusted| into out->host if they make a
 * host name (see the header). */
static int take_host(const char *h_untrusted, size_t len, tg_net_addr_t *out) {
  if (len == 0 || len > TG_NET_HOST_MAX || h_untrusted[0] == '-')
    return -EINVAL;
  for (size_t i = 0; i < len; i++)
    if (!host_char_ok((unsigned char)h_untrusted[i])) return -EINVAL;
  memcpy(out->host, h_untrusted, len);
  out->host[len] = 0;
  return 0;
}

/* Digits only (common/decimal.h says why). */
static int take_port(const char *p_untrusted, unsigned flags, uint16_t *port) {
  uint64_t v;
  if (tg_decimal_u64(p_untrusted, 65535, &v) < 0 ||
      (v == 0 && !(flags & TG_NET_ADDR_PORT_ZERO)))
    return -EINVAL;
  *port = (uint16_t)v;
  return 0;
}

int tg_net_addr_parse(const char *s_untrusted, unsigned flags,
                      uint16_t default_port, tg_net_addr_t *out) {
  if (!s_untrusted || !out) return -EINVAL;
  memset(out, 0, sizeof(*out));
  const char *port = NULL; /* text after the separating ':', if any */
  int rv;
  if (s_untrusted[0] == '[') {
    const char *end = strchr(s_untrusted, ']');
    if (!end) return -EINVAL;
    rv = take_host(s_untrusted + 1, (size_t)(end - s_untrusted - 1), out);
    if (rv) return rv;
    out->ipv6 = true;
    if (end[1] == ':') port = end + 2;
    else if (end[1] != 0) return -EINVAL;
  } else {
    const char *colon = strchr(s_untrusted, ':');
    if (colon && strchr(colon + 1, ':')) {
      /* Bare IPv6: the colons are the address's own, there is no port. */
      rv = take_host(s_untrusted, strlen(s_untrusted), out);
      if (rv) return rv;
      out->ipv6 = true;
    } else {
      size_t hl = colon ? (size_t)(colon - s_untrusted) : strlen(s_untrusted);
      rv = take_host(s_untrusted, hl, out);
      if (rv) return rv;
      if (colon) port = colon + 1;
    }
  }
  if (port) return take_port(port, flags, &out->port);
  if (!(flags & TG_NET_ADDR_PORT_OPTIONAL)) return -EINVAL;
  out->port = default_port;
  return 0;
}

int tg_net_addr_format(const tg_net_addr_t *a, char *buf, size_t len) {
  int n = snprintf(buf, len, a->ipv6 ? "[%s]:%u" : "%s:%u", a->host,
                   (unsigned)a->port);
  if (n < 0 || (size_t)n >= len) {
    if (len > 0) buf[0] = 0;
    return -ENOSPC;
  }
  return 0;
}

void tg_net_sockaddr_format(const struct sockaddr *sa, char *buf, size_t len) {
  char ip[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
    uv_ip4_name(a, ip, sizeof(ip));
    snprintf(buf, len, "%s:%d", ip, ntohs(a->sin_port));
  } else if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
    uv_ip6_name(a, ip, sizeof(ip));
    snprintf(buf, len, "[%s]:%d", ip, ntohs(a->sin6_port));
  } else {
    snprintf(buf, len, "(family %d)", (int)sa->sa_family);
  }
}

int tg_net_addr_to_sockaddr(const tg_net_addr_t *a,
                            struct sockaddr_storage *ss) {
  memset(ss, 0, sizeof(*ss));
  int rv = a->ipv6 ? uv_ip6_addr(a->host, a->port, (struct sockaddr_in6 *)ss)
                   : uv_ip4_addr(a->host, a->port, (struct sockaddr_in *)ss);
  return rv ? -EINVAL : 0;
}
