/* Reads /proc/self/comm; owns no state. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "agent/process_name.h"

bool tg__process_name(char *out, size_t n) {
  out[0] = '\0';
  int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t r = read(fd, out, n - 1);
  close(fd);
  if (r <= 0) return false;
  out[r] = '\0';
  out[strcspn(out, "\n")] = '\0';
  return true;
}
