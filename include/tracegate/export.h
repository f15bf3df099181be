/* Symbol visibility: everything is built with -fvisibility=hidden and the few
 * symbols a library exports are marked TG_EXPORT (cf. libuv's UV_EXTERN). */
#ifndef TRACEGATE_EXPORT_H
#define TRACEGATE_EXPORT_H

#if defined(__GNUC__)
#define TG_EXPORT __attribute__((visibility("default")))
#else
#define TG_EXPORT
#endif

#endif /* TRACEGATE_EXPORT_H */
