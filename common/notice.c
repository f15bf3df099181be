/* tg_notice_tag(): one table (TG_NOTICE_MAP) gives the codes. */
#include "common/notice.h"

#include <stdio.h>
#include <string.h>

const char *tg_notice_tag(tg_notice_t n) {
  switch (n) {
    case TG_N_NONE:
      break;
#define TG__NOTICE_TAG(name, num, prog, meaning) \
  case TG_N_##name:                              \
    return "[TG-" #num "]";
    TG_NOTICE_MAP(TG__NOTICE_TAG)
#undef TG__NOTICE_TAG
  }
  return "[TG-0000]";
}

void tg_notice_prefix(char *buf, size_t cap, tg_notice_t n) {
  if (cap == 0) return;
  const char *tag = tg_notice_tag(n);
  size_t t = strlen(tag) + 1; /* the tag and a space */
  if (t >= cap) return;     /* no room for any text: left as it is */
  size_t len = strnlen(buf, cap - 1);
  if (len > cap - 1 - t) len = cap - 1 - t;
  memmove(buf + t, buf, len);
  memcpy(buf, tag, t - 1);
  buf[t - 1] = ' ';
  buf[t + len] = 0;
}

const char *tg_notice_coded(char *buf, size_t cap, tg_notice_t n,
                            const char *text) {
  if (cap == 0) return "";
  snprintf(buf, cap, "%s %s", tg_notice_tag(n), text ? text : "");
  return buf;
}
