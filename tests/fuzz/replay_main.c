/* Replays fuzz inputs without libFuzzer: `<target>_replay DIR|FILE...`.
 *
 * Linked with one fuzz target's source when building with gcc (or without
 * TG_FUZZ), so the ctests `<target>_corpus` run every corpus file through the
 * target under whatever sanitizers the build uses. Each input gets its own
 * exact-size heap buffer, as libFuzzer does, so over-reads are caught. Fails
 * when an argument cannot be read or holds no input at all: an empty replay
 * would pass silently.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return -1;
  }
  uint8_t *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      cap = cap ? 2 * cap : 4096;
      uint8_t *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        return -1;
      }
      buf = nb;
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    if (n == 0) break;
    len += n;
  }
  int err = ferror(f);
  fclose(f);
  if (err) {
    fprintf(stderr, "%s: read error\n", path);
    free(buf);
    return -1;
  }
  uint8_t *exact = malloc(len ? len : 1);
  if (!exact) {
    free(buf);
    return -1;
  }
  if (len) memcpy(exact, buf, len);
  free(buf);
  LLVMFuzzerTestOneInput(exact, len);
  free(exact);
  return 0;
}

static int run_dir(const char *path, unsigned *count) {
  DIR *d = opendir(path);
  if (!d) {
    perror(path);
    return -1;
  }
  int rv = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    size_t n = strlen(path) + strlen(e->d_name) + 2;
    char *full = malloc(n);
    if (!full) {
      rv = -1;
      break;
    }
    snprintf(full, n, "%s/%s", path, e->d_name);
    struct stat st;
    if (stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
      if (run_file(full) != 0) rv = -1;
      else (*count)++;
    }
    free(full);
  }
  closedir(d);
  return rv;
}

int main(int argc, char **argv) {
  unsigned count = 0;
  int rv = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      perror(argv[i]);
      rv = 1;
    } else if (S_ISDIR(st.st_mode)) {
      if (run_dir(argv[i], &count) != 0) rv = 1;
    } else if (run_file(argv[i]) != 0) {
      rv = 1;
    } else {
      count++;
    }
  }
  printf("replayed %u input(s)\n", count);
  if (count == 0) {
    fprintf(stderr, "usage: %s DIR|FILE... (no inputs found)\n", argv[0]);
    return 1;
  }
  return rv;
}
