/* tg_notice_tag(): one table (TG_NOTICE_MAP) gives the codes. */
#include "common/notice.h"

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
