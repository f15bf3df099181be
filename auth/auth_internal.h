/* Shared by the files of auth/; not for its users. */
#ifndef TRACEGATE_AUTH_INTERNAL_H
#define TRACEGATE_AUTH_INTERNAL_H

#include <stddef.h>

/* Writes the message into |err| (|errlen| bytes, 0: none) and returns
 * |rv|: every failure of the library says why in its caller's buffer. */
int tg__auth_fail(char *err, size_t errlen, int rv, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif /* TRACEGATE_AUTH_INTERNAL_H */
