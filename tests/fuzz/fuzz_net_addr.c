/* Fuzzes the "host:port" parser (ipc/net_addr.h): every -H target, hosts
 * file line and --listen value goes through it, and a host it accepts may
 * reach getaddrinfo or ssh's command line.
 *
 * Input: [flags u8][address text...]; the low two bits of the first byte
 * are the parse flags (port optional, port zero allowed), the rest is the
 * text, cut at its first NUL like any C string from argv or a file.
 *
 * Invariants (trap on violation):
 * - an accepted host is 1..TG_NET_HOST_MAX bytes of [A-Za-z0-9._:%-] and
 *   does not start with '-';
 * - port 0 only with TG_NET_ADDR_PORT_ZERO, or as the default port;
 * - formatting an accepted address and parsing the result (port required)
 *   gives the same address back;
 * - tg_net_addr_to_sockaddr() never crashes on what the parser accepts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ipc/net_addr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Longer than any address the parser accepts, so the length checks run. */
#define TEXT_MAX 1024
#define DEFAULT_PORT 7467

static int host_ok(const char *h) {
  size_t n = strlen(h);
  if (n == 0 || n > TG_NET_HOST_MAX || h[0] == '-') return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)h[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || strchr("._:%-", c)))
      return 0;
  }
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  unsigned flags = data[0] & (TG_NET_ADDR_PORT_OPTIONAL | TG_NET_ADDR_PORT_ZERO);
  size_t n = size - 1 < TEXT_MAX ? size - 1 : TEXT_MAX;
  char text[TEXT_MAX + 1];
  memcpy(text, data + 1, n);
  text[n] = 0;

  tg_net_addr_t a;
  if (tg_net_addr_parse(text, flags, DEFAULT_PORT, &a) != 0) return 0;
  if (!host_ok(a.host)) __builtin_trap();
  if (a.port == 0 && !(flags & TG_NET_ADDR_PORT_ZERO)) __builtin_trap();

  char buf[TG_NET_ADDR_STRLEN];
  if (tg_net_addr_format(&a, buf, sizeof(buf)) != 0) __builtin_trap();
  tg_net_addr_t back;
  if (tg_net_addr_parse(buf, flags & TG_NET_ADDR_PORT_ZERO, 0, &back) != 0)
    __builtin_trap();
  if (strcmp(back.host, a.host) != 0 || back.port != a.port ||
      back.ipv6 != a.ipv6)
    __builtin_trap();

  struct sockaddr_storage ss;
  (void)tg_net_addr_to_sockaddr(&a, &ss);
  return 0;
}
