/* The one alphabet of identities (common/identity.h). */
#include "common/identity.h"

#include <stdio.h>
#include <string.h>

static bool word_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '@' || c == '.' ||
         c == '-';
}

bool tg_identity_valid(const char *s, size_t n, const char **why) {
  const char *bad = NULL;
  if (!s || n == 0) {
    bad = "an identity may not be empty";
  } else if (n > TG_IDENTITY_MAX) {
    bad = "an identity is at most 253 characters";
  } else if (s[0] == '.' || s[0] == '-') {
    bad = "an identity may not start with '.' or '-'";
  } else {
    for (size_t i = 0; i < n && !bad; i++) {
      unsigned char c = (unsigned char)s[i];
      if (word_char(c)) continue;
      bad = c == '/'   ? "'/' separates an identity from its sessions' names"
            : c == ':' ? "':' is reserved for the relay's ssh: identities"
                       : "an identity has only letters, digits and '.', "
                         "'_', '@', '-'";
    }
  }
  if (bad && why) *why = bad;
  return !bad;
}

bool tg_identity_valid_listed(const char *s, size_t n, const char **why) {
  size_t p = sizeof(TG_IDENTITY_SSH_PREFIX) - 1;
  if (s && n > p && !memcmp(s, TG_IDENTITY_SSH_PREFIX, p))
    return tg_identity_valid(s + p, n - p, why);
  return tg_identity_valid(s, n, why);
}

void tg_identity_ssh(char *out, size_t cap, const char *user, unsigned uid) {
  if (user && tg_identity_valid(user, strlen(user), NULL))
    snprintf(out, cap, TG_IDENTITY_SSH_PREFIX "%s", user);
  else
    snprintf(out, cap, TG_IDENTITY_SSH_PREFIX "uid-%u", uid);
}
