// SPDX-License-Identifier: Apache-2.0
/* The bucket's keys (s3_credentials.h). */
#include "collector/s3/s3_credentials.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

static bool value_ok(const char *v, size_t n) {
  if (n == 0 || n > TG_S3_CREDENTIAL_MAX) return false;
  for (size_t i = 0; i < n; i++)
    if (v[i] <= ' ' || v[i] >= 0x7f) return false;
  return true;
}

static size_t trim_end(const char *s, size_t n) {
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) n--;
  return n;
}

int tg_s3_credentials_parse(const char *text_untrusted, size_t n,
                            tg_s3_credentials_t *out, char *why, size_t cap) {
  memset(out, 0, sizeof *out);
  if (cap) why[0] = '\0';
  const char *p = text_untrusted, *end = text_untrusted + n;
  unsigned line = 0;
  while (p < end) {
    line++;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    const char *l = p;
    p = nl ? nl + 1 : end;
    while (len && (*l == ' ' || *l == '\t')) l++, len--;
    len = trim_end(l, len);
    if (!len || l[0] == '#') continue;
    const char *eq = memchr(l, '=', len);
    if (!eq) {
      snprintf(why, cap, "line %u: expected NAME=VALUE", line);
      goto fail;
    }
    size_t kn = trim_end(l, (size_t)(eq - l));
    const char *v = eq + 1;
    size_t vn = len - (size_t)(v - l);
    while (vn && (*v == ' ' || *v == '\t')) v++, vn--;
    char *dst;
    if (kn == 17 && memcmp(l, "AWS_ACCESS_KEY_ID", 17) == 0) {
      dst = out->access_key;
    } else if (kn == 21 && memcmp(l, "AWS_SECRET_ACCESS_KEY", 21) == 0) {
      dst = out->secret_key;
    } else {
      snprintf(why, cap,
               "line %u: expected AWS_ACCESS_KEY_ID or AWS_SECRET_ACCESS_KEY",
               line);
      goto fail;
    }
    if (dst[0]) {
      snprintf(why, cap, "line %u: expected each name once", line);
      goto fail;
    }
    if (!value_ok(v, vn)) {
      snprintf(why, cap,
               "line %u: expected 1 to %d printable bytes without blanks",
               line, TG_S3_CREDENTIAL_MAX);
      goto fail;
    }
    memcpy(dst, v, vn);
    dst[vn] = '\0';
  }
  if (!out->access_key[0] || !out->secret_key[0]) {
    snprintf(why, cap, "expected AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
    goto fail;
  }
  return 0;
fail:
  tg_s3_credentials_clear(out);
  return -EINVAL;
}

static int from_env(tg_s3_credentials_t *out, char *why, size_t cap) {
  const char *ak = getenv("AWS_ACCESS_KEY_ID");
  const char *sk = getenv("AWS_SECRET_ACCESS_KEY");
  if (!ak || !sk || !value_ok(ak, strlen(ak)) || !value_ok(sk, strlen(sk))) {
    snprintf(why, cap,
             "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not both set "
             "(1 to %d printable bytes without blanks) and no "
             "s3_credentials_file is named",
             TG_S3_CREDENTIAL_MAX);
    return -EINVAL;
  }
  snprintf(out->access_key, sizeof out->access_key, "%s", ak);
  snprintf(out->secret_key, sizeof out->secret_key, "%s", sk);
  return 0;
}

/* |path| read and parsed. |own_mode|: refused unless only its owner may
 * read or write it. */
static int from_file(const char *path, bool own_mode,
                     tg_s3_credentials_t *out, char *why, size_t cap) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    int err = -errno;
    snprintf(why, cap, "%s", strerror(errno));
    return err;
  }
  struct stat st;
  char buf[TG_S3_CREDENTIALS_FILE_MAX];
  int err = 0;
  ssize_t got = 0;
  if (fstat(fd, &st) != 0) {
    err = -errno;
    snprintf(why, cap, "%s", strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    err = -EINVAL;
    snprintf(why, cap, "not a regular file");
  } else if (own_mode && (st.st_mode & 077)) {
    err = -EPERM;
    snprintf(why, cap,
             "its group or others may read or write it (mode %03o): it "
             "holds a secret; chmod 600 it",
             (unsigned)(st.st_mode & 0777));
  } else if (st.st_size > (off_t)sizeof buf) {
    err = -EFBIG;
    snprintf(why, cap, "larger than %zu bytes", sizeof buf);
  } else {
    size_t off = 0;
    while (off < sizeof buf && (got = read(fd, buf + off, sizeof buf - off)) > 0)
      off += (size_t)got;
    if (got < 0) {
      err = -errno;
      snprintf(why, cap, "%s", strerror(errno));
    } else {
      err = tg_s3_credentials_parse(buf, off, out, why, cap);
    }
  }
  OPENSSL_cleanse(buf, sizeof buf);
  close(fd);
  return err;
}

/* systemd's credential: its directory is the unit's alone, and systemd
 * grants the unit's user read access by an ACL on a root-owned 0400 file,
 * which shows as group-readable (the ACL's mask): so its mode is not
 * checked. Absent (-ENOENT): the environment's turn. */
static int from_credential(tg_s3_credentials_t *out, char *why, size_t cap) {
  const char *dir = getenv("CREDENTIALS_DIRECTORY");
  if (!dir || !*dir) return -ENOENT;
  char path[4096], inner[256];
  int n = snprintf(path, sizeof path, "%s/%s", dir, TG_S3_CREDENTIAL_NAME);
  if (n < 0 || (size_t)n >= sizeof path) {
    snprintf(why, cap, "$CREDENTIALS_DIRECTORY is too long");
    return -ENAMETOOLONG;
  }
  if (access(path, F_OK) != 0 && errno == ENOENT) return -ENOENT;
  int err = from_file(path, false, out, inner, sizeof inner);
  if (err) snprintf(why, cap, "%s: %s", path, inner);
  return err;
}

int tg_s3_credentials_load(const char *path, tg_s3_credentials_t *out,
                           char *why, size_t cap) {
  memset(out, 0, sizeof *out);
  if (cap) why[0] = '\0';
  if (path && *path) return from_file(path, true, out, why, cap);
  int err = from_credential(out, why, cap);
  return err == -ENOENT ? from_env(out, why, cap) : err;
}

void tg_s3_credentials_clear(tg_s3_credentials_t *c) {
  OPENSSL_cleanse(c, sizeof *c);
}
