/* Fuzzes linux.inode_file_map's /proc/self/mountinfo parser
 * (agent/probes/mountinfo.h): the text is the kernel's, or anything.
 *
 * Every mount kept must have a mount point that starts with '/', holds no
 * NUL and is shorter than PATH_MAX, with its length as said; root and fs
 * type must be NUL-terminated strings inside the table; kept plus bad plus
 * skipped lines must not exceed the lines given; and after sorting, every
 * mount point must be found as one. Nothing may crash or leak.
 */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/probes/mountinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  size_t lines = 1;
  for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
  tg_mountinfo_t mi;
  memset(&mi, 0, sizeof(mi));
  int n = tg_mountinfo_parse(&mi, text, size);
  if (n < 0) return 0; /* out of memory */
  if ((size_t)n != mi.n || mi.n > TG_MOUNTINFO_MAX ||
      mi.n + mi.bad_lines + mi.skipped > lines)
    abort();
  for (size_t i = 0; i < mi.n; i++) {
    const tg_mount_t *m = &mi.v[i];
    if (m->point[0] != '/' || m->point_len >= PATH_MAX ||
        strlen(m->point) != m->point_len || strlen(m->root) >= PATH_MAX ||
        strlen(m->fstype) >= PATH_MAX || m->fstype[0] == '\0')
      abort();
  }
  tg_mountinfo_sort(&mi);
  for (size_t i = 0; i < mi.n; i++) {
    if (!tg_mountinfo_is_point(&mi, mi.v[i].point, mi.v[i].point_len)) abort();
    if (i && strcmp(mi.v[i - 1].point, mi.v[i].point) > 0) abort();
  }
  /* Parsing again into a used table replaces it. */
  if (tg_mountinfo_parse(&mi, text, size) != n && mi.n != 0) abort();
  tg_mountinfo_free(&mi);
  return 0;
}
