/* tg_strerror(): one table (TG_ERRNO_MAP) gives names and messages. */
#include "tracegate/error.h"

#include <string.h>

const char *tg_strerror(int err) {
  switch (err) {
    case 0:
      return "success";
#define TG__ERR_MSG(name, value, msg) \
  case (value):                       \
    return msg;
    TG_ERRNO_MAP(TG__ERR_MSG)
#undef TG__ERR_MSG
    default:
      break;
  }
  if (err < 0 && err > -4096)
    return strerror(-err); /* glibc: static strings for known errnos */
  return "unknown error";
}

const char *tg_err_name(int err) {
  switch (err) {
    case 0:
      return "OK";
#define TG__ERR_NAME(name, value, msg) \
  case (value):                        \
    return "TG_E" #name;
    TG_ERRNO_MAP(TG__ERR_NAME)
#undef TG__ERR_NAME
    default:
      break;
  }
  if (err < 0 && err > -4096) {
    const char *n = strerrorname_np(-err);
    if (n) return n;
  }
  return "UNKNOWN";
}
