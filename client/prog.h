/* client/prog.h (private to client/): what every line the library prints
 * to stderr starts with, the name users know its programs by. */
#ifndef TRACEGATE_CLIENT_PROG_H
#define TRACEGATE_CLIENT_PROG_H

#define TG_CLIENT_PROG "tracegate"

#endif /* TRACEGATE_CLIENT_PROG_H */
