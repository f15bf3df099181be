/* SPDX-License-Identifier: Apache-2.0 */
/* Prints the PLT entry names common/elf_plt.h gives for FILE, one
 * "ADDR SIZE NAME" line each (hex), for test_elf_plt_objdump.sh to
 * compare with objdump's labels. Exit 0, or 1 when FILE cannot be read
 * or parsed. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/elf_plt.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: elf_plt_dump FILE\n");
    return 2;
  }
  int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0) {
    perror(argv[1]);
    return 1;
  }
  void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  tg_plt_t p;
  int n = tg_plt_load(map, (size_t)st.st_size, &p);
  if (n < 0) {
    fprintf(stderr, "%s: not a readable ELF file (%d)\n", argv[1], n);
    munmap(map, (size_t)st.st_size);
    return 1;
  }
  for (size_t i = 0; i < p.n; i++)
    printf("%" PRIx64 " %" PRIx64 " %s\n", p.v[i].addr, p.v[i].size,
           p.pool + p.v[i].name);
  tg_plt_free(&p);
  munmap(map, (size_t)st.st_size);
  return 0;
}
