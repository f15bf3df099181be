/* A client's saved TLS sessions (the CLI's and the collector's): memory,
 * the file format, the file. Owns copies of master secrets: every copy it
 * frees is wiped first. It never offers an entry of another identity or
 * CA, nor an expired one. */
#include "client/session_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd_write.h"
#include "common/fnv1a.h"

static const uint8_t MAGIC[8] = {'T', 'G', 'S', 'E', 'S', 'S', 0, 1};
#define HEADER_SIZE (sizeof(MAGIC) + 4)
/* u16 + u16 + fps + u64 + u32, names and session apart. */
#define ENTRY_FIXED (2 + 2 + 2 * TG_SC_FP_SIZE + 8 + 4)

typedef struct entry {
  char *hostport, *server_name;
  uint8_t own_fp[TG_SC_FP_SIZE], ca_fp[TG_SC_FP_SIZE];
  uint64_t expires;
  uint8_t *session;
  size_t len;
  uint64_t hash; /* of the key: key_hash() */
} entry_t;

struct tg_session_cache {
  uint8_t own_fp[TG_SC_FP_SIZE], ca_fp[TG_SC_FP_SIZE];
  entry_t *e;
  size_t n, cap;
  /* The index: open addressing over |nslots| (a power of two, at least
   * twice |n|) slots of entry index + 1; a fleet looks up each host. */
  size_t *slots;
  size_t nslots;
};

static void entry_free(entry_t *e) {
  free(e->hostport);
  free(e->server_name);
  if (e->session) explicit_bzero(e->session, e->len);
  free(e->session);
  memset(e, 0, sizeof(*e));
}

static void clear(tg_session_cache_t *sc) {
  for (size_t i = 0; i < sc->n; i++) entry_free(&sc->e[i]);
  sc->n = 0;
  if (sc->slots) memset(sc->slots, 0, sc->nslots * sizeof(*sc->slots));
}

int tg_session_cache_new(const uint8_t own_fp[TG_SC_FP_SIZE],
                         const uint8_t ca_fp[TG_SC_FP_SIZE],
                         tg_session_cache_t **out) {
  *out = calloc(1, sizeof(**out));
  if (!*out) return -ENOMEM;
  memcpy((*out)->own_fp, own_fp, TG_SC_FP_SIZE);
  memcpy((*out)->ca_fp, ca_fp, TG_SC_FP_SIZE);
  return 0;
}

void tg_session_cache_free(tg_session_cache_t *sc) {
  if (!sc) return;
  clear(sc);
  free(sc->e);
  free(sc->slots);
  free(sc);
}

size_t tg_session_cache_count(const tg_session_cache_t *sc) { return sc->n; }

static bool alive(uint64_t expires, uint64_t now) {
  return expires > now && expires - now <= TG_SC_MAX_LIFETIME_S;
}

static bool name_ok(const char *s, size_t n, bool may_be_empty) {
  if (n == 0) return may_be_empty;
  if (n > TG_SC_MAX_NAME) return false;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e) return false;
  return true;
}

/* Over the whole key; the names' terminators keep them apart. */
static uint64_t key_hash(const char *hostport, const char *server_name,
                         const uint8_t *own, const uint8_t *ca) {
  uint64_t h = tg_fnv1a(TG_FNV1A_SEED, hostport, strlen(hostport) + 1);
  h = tg_fnv1a(h, server_name, strlen(server_name) + 1);
  h = tg_fnv1a(h, own, TG_SC_FP_SIZE);
  return tg_fnv1a(h, ca, TG_SC_FP_SIZE);
}

static void index_add(tg_session_cache_t *sc, size_t idx) {
  size_t mask = sc->nslots - 1;
  size_t i = (size_t)sc->e[idx].hash & mask;
  while (sc->slots[i]) i = (i + 1) & mask;
  sc->slots[i] = idx + 1;
}

/* Rebuilds the index with room for |want| entries. */
static int index_rebuild(tg_session_cache_t *sc, size_t want) {
  size_t nslots = sc->nslots ? sc->nslots : 32;
  while (nslots < 2 * want) nslots *= 2;
  if (nslots != sc->nslots) {
    size_t *slots = calloc(nslots, sizeof(*slots));
    if (!slots) return -ENOMEM;
    free(sc->slots);
    sc->slots = slots;
    sc->nslots = nslots;
  } else {
    memset(sc->slots, 0, nslots * sizeof(*sc->slots));
  }
  for (size_t i = 0; i < sc->n; i++) index_add(sc, i);
  return 0;
}

static entry_t *find(const tg_session_cache_t *sc, const char *hostport,
                     const char *server_name, const uint8_t *own,
                     const uint8_t *ca) {
  if (!sc->nslots) return NULL;
  uint64_t h = key_hash(hostport, server_name, own, ca);
  size_t mask = sc->nslots - 1;
  for (size_t i = (size_t)h & mask; sc->slots[i]; i = (i + 1) & mask) {
    entry_t *e = &sc->e[sc->slots[i] - 1];
    if (e->hash == h && !strcmp(e->hostport, hostport) &&
        !strcmp(e->server_name, server_name) &&
        !memcmp(e->own_fp, own, TG_SC_FP_SIZE) &&
        !memcmp(e->ca_fp, ca, TG_SC_FP_SIZE))
      return e;
  }
  return NULL;
}

/* Adds or replaces; takes nothing from the caller (copies). */
static int put_fp(tg_session_cache_t *sc, const char *hostport, size_t hl,
                  const char *server_name, size_t sl, const uint8_t *own,
                  const uint8_t *ca, const uint8_t *data, size_t len,
                  uint64_t expires) {
  if (!name_ok(hostport, hl, false) || !name_ok(server_name, sl, true) ||
      len == 0 || len > TG_SC_MAX_SESSION)
    return -EINVAL;
  entry_t ne = {0};
  ne.hostport = strndup(hostport, hl);
  ne.server_name = strndup(server_name, sl);
  ne.session = malloc(len);
  if (!ne.hostport || !ne.server_name || !ne.session) {
    entry_free(&ne);
    return -ENOMEM;
  }
  memcpy(ne.own_fp, own, TG_SC_FP_SIZE);
  memcpy(ne.ca_fp, ca, TG_SC_FP_SIZE);
  memcpy(ne.session, data, len);
  ne.len = len;
  ne.expires = expires;
  ne.hash = key_hash(ne.hostport, ne.server_name, own, ca);
  entry_t *old = find(sc, ne.hostport, ne.server_name, own, ca);
  if (old) {
    entry_free(old);
    *old = ne;
    return 0;
  }
  if (sc->n >= TG_SC_MAX_ENTRIES) {
    entry_free(&ne);
    return -ENOSPC;
  }
  if (sc->n == sc->cap) {
    size_t cap = sc->cap ? sc->cap * 2 : 16;
    entry_t *e = realloc(sc->e, cap * sizeof(*e));
    if (!e) {
      entry_free(&ne);
      return -ENOMEM;
    }
    sc->e = e;
    sc->cap = cap;
  }
  if (2 * (sc->n + 1) > sc->nslots && index_rebuild(sc, sc->n + 1) < 0) {
    entry_free(&ne);
    return -ENOMEM;
  }
  sc->e[sc->n++] = ne;
  index_add(sc, sc->n - 1);
  return 0;
}

int tg_session_cache_put(tg_session_cache_t *sc, const char *hostport,
                         const char *server_name, const uint8_t *data,
                         size_t len, uint64_t expires) {
  if (!server_name) server_name = "";
  return put_fp(sc, hostport, strlen(hostport), server_name,
                strlen(server_name), sc->own_fp, sc->ca_fp, data, len,
                expires);
}

const uint8_t *tg_session_cache_get(const tg_session_cache_t *sc,
                                    const char *hostport,
                                    const char *server_name, uint64_t now,
                                    size_t *len) {
  *len = 0;
  const entry_t *e = find(sc, hostport, server_name ? server_name : "",
                          sc->own_fp, sc->ca_fp);
  if (!e || !alive(e->expires, now)) return NULL;
  *len = e->len;
  return e->session;
}

void tg_session_cache_forget(tg_session_cache_t *sc, const char *hostport,
                             const char *server_name) {
  entry_t *e = find(sc, hostport, server_name ? server_name : "", sc->own_fp,
                    sc->ca_fp);
  if (!e) return;
  entry_free(e);
  *e = sc->e[--sc->n];
  /* Rare (a session the relay refused): the moved entry is re-indexed
   * with the rest, in the slots it already has. */
  (void)index_rebuild(sc, sc->n);
}

/* --- the format ---------------------------------------------------------- */

static uint64_t rd(const uint8_t *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static uint8_t *wr(uint8_t *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
  return p + bytes;
}

/* A cursor over untrusted bytes: every take is bounds-checked. */
typedef struct cursor {
  const uint8_t *p;
  size_t left;
} cursor_t;

static const uint8_t *take(cursor_t *c, size_t n) {
  if (n > c->left) return NULL;
  const uint8_t *p = c->p;
  c->p += n;
  c->left -= n;
  return p;
}

static int parse_entries(tg_session_cache_t *sc, cursor_t *c, uint64_t now) {
  const uint8_t *h = take(c, HEADER_SIZE);
  if (!h || memcmp(h, MAGIC, sizeof(MAGIC)) != 0) return -EINVAL;
  uint64_t count = rd(h + sizeof(MAGIC), 4);
  if (count > TG_SC_MAX_ENTRIES) return -EINVAL;
  for (uint64_t i = 0; i < count; i++) {
    const uint8_t *p;
    if (!(p = take(c, 2))) return -EINVAL;
    size_t hl = (size_t)rd(p, 2);
    const char *host = (const char *)take(c, hl);
    if (!host || !(p = take(c, 2))) return -EINVAL;
    size_t sl = (size_t)rd(p, 2);
    const char *sni = (const char *)take(c, sl);
    const uint8_t *own = take(c, TG_SC_FP_SIZE);
    const uint8_t *ca = take(c, TG_SC_FP_SIZE);
    const uint8_t *exp = take(c, 8);
    const uint8_t *lp = take(c, 4);
    if (!sni || !own || !ca || !exp || !lp) return -EINVAL;
    uint64_t len = rd(lp, 4);
    if (len == 0 || len > TG_SC_MAX_SESSION) return -EINVAL;
    const uint8_t *sess = take(c, (size_t)len);
    if (!sess) return -EINVAL;
    uint64_t expires = rd(exp, 8);
    if (!alive(expires, now)) continue; /* well-formed, only stale */
    int rv = put_fp(sc, host, hl, sni ? sni : "", sl, own, ca, sess,
                    (size_t)len, expires);
    if (rv) return rv;
  }
  return c->left == 0 ? 0 : -EINVAL;
}

int tg_session_cache_parse(tg_session_cache_t *sc,
                           const uint8_t *data_untrusted, size_t len,
                           uint64_t now) {
  clear(sc);
  if (len > TG_SC_MAX_FILE) return -EINVAL;
  cursor_t c = {data_untrusted, len};
  int rv = parse_entries(sc, &c, now);
  if (rv) clear(sc);
  return rv;
}

int tg_session_cache_serialize(const tg_session_cache_t *sc, uint64_t now,
                               tg_buf_t *out) {
  size_t total = HEADER_SIZE, n = 0;
  for (size_t i = 0; i < sc->n; i++) {
    const entry_t *e = &sc->e[i];
    if (!alive(e->expires, now)) continue;
    total += ENTRY_FIXED + strlen(e->hostport) + strlen(e->server_name) + e->len;
    n++;
  }
  /* One reservation: no reallocation leaves a copy of a secret behind. */
  uint8_t *p = tg_buf_reserve(out, total), *start = p;
  if (!p) return -ENOMEM;
  memcpy(p, MAGIC, sizeof(MAGIC));
  p = wr(p + sizeof(MAGIC), n, 4);
  for (size_t i = 0; i < sc->n; i++) {
    const entry_t *e = &sc->e[i];
    if (!alive(e->expires, now)) continue;
    size_t hl = strlen(e->hostport), sl = strlen(e->server_name);
    p = wr(p, hl, 2);
    memcpy(p, e->hostport, hl);
    p = wr(p + hl, sl, 2);
    memcpy(p, e->server_name, sl);
    p += sl;
    memcpy(p, e->own_fp, TG_SC_FP_SIZE);
    memcpy(p + TG_SC_FP_SIZE, e->ca_fp, TG_SC_FP_SIZE);
    p = wr(p + 2 * TG_SC_FP_SIZE, e->expires, 8);
    p = wr(p, e->len, 4);
    memcpy(p, e->session, e->len);
    p += e->len;
  }
  tg_buf_commit(out, (size_t)(p - start));
  return 0;
}

/* --- the file ------------------------------------------------------------ */

int tg_session_cache_resolve(const char *setting, char *path, size_t n) {
  if (!setting || !strcmp(setting, "off")) return 0;
  int w;
  if (!strcmp(setting, "on")) {
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (xdg && xdg[0] == '/')
      w = snprintf(path, n, "%s/tracegate/sessions", xdg);
    else if (home && home[0] == '/')
      w = snprintf(path, n, "%s/.cache/tracegate/sessions", home);
    else
      return -EINVAL;
  } else if (strchr(setting, '/')) {
    w = snprintf(path, n, "%s", setting);
  } else {
    return -EINVAL;
  }
  return w > 0 && (size_t)w < n ? 1 : -EINVAL;
}

static void warn_ignored(char *warn, size_t warnn, const char *path,
                         const char *why) {
  snprintf(warn, warnn, "session cache %s %s: ignoring it (full TLS "
           "handshakes this time; it is rewritten at the end)", path, why);
}

int tg_session_cache_load(tg_session_cache_t *sc, const char *path,
                          uint64_t now, char *warn, size_t warnn) {
  clear(sc);
  if (warnn) warn[0] = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno != ENOENT) warn_ignored(warn, warnn, path, strerror(errno));
    return 0;
  }
  struct stat st;
  const char *why = NULL;
  if (fstat(fd, &st) < 0) why = strerror(errno);
  else if (!S_ISREG(st.st_mode)) why = "is not a regular file";
  else if (st.st_uid != getuid()) why = "is not owned by this user";
  else if (st.st_mode & 077) why = "is readable or writable by others (chmod 600)";
  else if ((uint64_t)st.st_size > TG_SC_MAX_FILE) why = "is too large";
  if (why) {
    close(fd);
    warn_ignored(warn, warnn, path, why);
    return 0;
  }
  size_t size = (size_t)st.st_size, got = 0;
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) {
    close(fd);
    return -ENOMEM;
  }
  while (got < size) {
    ssize_t r = read(fd, buf + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  int rv = 0;
  if (got != size) {
    warn_ignored(warn, warnn, path, "changed while it was read");
  } else {
    rv = tg_session_cache_parse(sc, buf, size, now);
    if (rv == -EINVAL) warn_ignored(warn, warnn, path, "is truncated or corrupt");
    if (rv == -EINVAL || rv == -ENOSPC) rv = 0;
  }
  explicit_bzero(buf, size);
  free(buf);
  return rv;
}

/* Makes |path|'s directory (0700) if it is missing, and the cache root
 * above it when that is missing too. */
static int make_dir_of(const char *path) {
  char dir[4096];
  int w = snprintf(dir, sizeof(dir), "%s", path);
  if (w <= 0 || (size_t)w >= sizeof(dir)) return -ENAMETOOLONG;
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir) return 0;
  *slash = 0;
  if (mkdir(dir, 0700) == 0 || errno == EEXIST) return 0;
  if (errno != ENOENT) return -errno;
  char *up = strrchr(dir, '/');
  if (!up || up == dir) return -ENOENT;
  *up = 0;
  if (mkdir(dir, 0700) < 0 && errno != EEXIST) return -errno;
  *up = '/';
  return mkdir(dir, 0700) == 0 || errno == EEXIST ? 0 : -errno;
}

int tg_session_cache_store(const tg_session_cache_t *sc, const char *path,
                           uint64_t now, char *err, size_t errn) {
  tg_buf_t b;
  tg_buf_init(&b, 0);
  int rv = tg_session_cache_serialize(sc, now, &b);
  if (rv) goto out;
  if (tg_buf_size(&b) == HEADER_SIZE) {
    /* Nothing alive: no file keeps stale secrets at rest. */
    if (unlink(path) < 0 && errno != ENOENT) rv = -errno;
    goto out;
  }
  rv = make_dir_of(path);
  if (rv) goto out;
  char tmp[4200];
  int w = snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
  if (w <= 0 || (size_t)w >= sizeof(tmp)) {
    rv = -ENAMETOOLONG;
    goto out;
  }
  int fd = mkostemp(tmp, O_CLOEXEC); /* 0600 */
  if (fd < 0) {
    rv = -errno;
    goto out;
  }
  rv = fchmod(fd, 0600) < 0 ? -errno : 0;
  if (!rv) rv = tg_write_all(fd, tg_buf_begin(&b), tg_buf_size(&b));
  if (!rv && fsync(fd) < 0) rv = -errno;
  if (close(fd) < 0 && !rv) rv = -errno;
  if (!rv && rename(tmp, path) < 0) rv = -errno;
  if (rv) unlink(tmp);
out:
  if (rv)
    snprintf(err, errn, "cannot write the session cache %s: %s", path,
             strerror(-rv));
  if (b.data) explicit_bzero(b.data, b.cap);
  tg_buf_free(&b);
  return rv;
}
