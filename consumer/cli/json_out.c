/* JSON output: see json_out.h. */
#include "consumer/cli/json_out.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/printable.h"

void cli_json_str(FILE *f, const char *s) {
  if (!s) {
    fputs("null", f);
    return;
  }
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    uint32_t cp;
    size_t n;
    if (*p == '"' || *p == '\\') {
      fprintf(f, "\\%c", *p++);
    } else if (*p >= 0x20 && *p < 0x7f) {
      fputc(*p++, f);
    } else if (*p >= 0x80 && (n = tg_utf8_sequence((const char *)p, &cp))) {
      fwrite(p, 1, n, f); /* JSON is UTF-8: the text as it is */
      p += n;
    } else {
      /* A control byte, DEL, or a byte that is not part of well-formed
       * UTF-8: as the code point of its value, which snapshot_json.c
       * reads back as that byte. */
      fprintf(f, "\\u%04x", *p++);
    }
  }
  fputc('"', f);
}

static void put_base64(FILE *f, const uint8_t *p, size_t n) {
  static const char abc[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  fputc('"', f);
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16;
    if (i + 1 < n) v |= (uint32_t)p[i + 1] << 8;
    if (i + 2 < n) v |= p[i + 2];
    fputc(abc[v >> 18 & 63], f);
    fputc(abc[v >> 12 & 63], f);
    fputc(i + 1 < n ? abc[v >> 6 & 63] : '=', f);
    fputc(i + 2 < n ? abc[v & 63] : '=', f);
  }
  fputc('"', f);
}

static void put_double(FILE *f, double d) {
  if (isfinite(d))
    fprintf(f, "%.17g", d);
  else
    fputs("null", f);
}

/* One value of |fd|'s type at |v|. */
static void put_value(FILE *f, const ProtobufCFieldDescriptor *fd,
                      const void *v) {
  switch (fd->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
      fprintf(f, "%" PRId32, *(const int32_t *)v);
      break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
      fprintf(f, "%" PRId64, *(const int64_t *)v);
      break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
      fprintf(f, "%" PRIu32, *(const uint32_t *)v);
      break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
      fprintf(f, "%" PRIu64, *(const uint64_t *)v);
      break;
    case PROTOBUF_C_TYPE_FLOAT:
      put_double(f, *(const float *)v);
      break;
    case PROTOBUF_C_TYPE_DOUBLE:
      put_double(f, *(const double *)v);
      break;
    case PROTOBUF_C_TYPE_BOOL:
      fputs(*(const protobuf_c_boolean *)v ? "true" : "false", f);
      break;
    case PROTOBUF_C_TYPE_ENUM: {
      int e = *(const int *)v;
      const ProtobufCEnumValue *ev =
          protobuf_c_enum_descriptor_get_value(fd->descriptor, e);
      if (ev)
        cli_json_str(f, ev->name);
      else
        fprintf(f, "%d", e);
      break;
    }
    case PROTOBUF_C_TYPE_STRING:
      cli_json_str(f, *(char *const *)v);
      break;
    case PROTOBUF_C_TYPE_BYTES: {
      const ProtobufCBinaryData *b = v;
      put_base64(f, b->data, b->len);
      break;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
      cli_json_pb(f, *(ProtobufCMessage *const *)v);
      break;
  }
}

static size_t value_size(ProtobufCType t) {
  switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
      return 8;
    case PROTOBUF_C_TYPE_DOUBLE:
      return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL:
      return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_ENUM:
      return sizeof(int);
    case PROTOBUF_C_TYPE_STRING:
      return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
      return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
      return sizeof(ProtobufCMessage *);
    default:
      return 4; /* the 32-bit integers and float */
  }
}

/* Whether a field of a message holds a value (repeated fields: at least
 * one). */
static bool present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *fd) {
  const uint8_t *base = (const uint8_t *)m;
  const void *v = base + fd->offset;
  if (fd->label == PROTOBUF_C_LABEL_REPEATED)
    return *(const size_t *)(base + fd->quantifier_offset) > 0;
  if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
    return *(const uint32_t *)(base + fd->quantifier_offset) == fd->id;
  bool pointer = fd->type == PROTOBUF_C_TYPE_STRING ||
                 fd->type == PROTOBUF_C_TYPE_MESSAGE;
  if (pointer) {
    const void *p = *(const void *const *)v;
    /* A proto2 string with a default points at it when unset. */
    return p != NULL && p != fd->default_value;
  }
  if (fd->label == PROTOBUF_C_LABEL_OPTIONAL && fd->quantifier_offset)
    return *(const protobuf_c_boolean *)(base + fd->quantifier_offset);
  return true; /* required, or a proto3 scalar */
}

void cli_json_pb(FILE *f, const ProtobufCMessage *m) {
  if (!m) {
    fputs("null", f);
    return;
  }
  const ProtobufCMessageDescriptor *d = m->descriptor;
  const uint8_t *base = (const uint8_t *)m;
  bool first = true;
  fputc('{', f);
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *fd = &d->fields[i];
    if (!present(m, fd)) continue;
    fputs(first ? "" : ", ", f);
    first = false;
    cli_json_str(f, fd->name);
    fputs(": ", f);
    if (fd->label != PROTOBUF_C_LABEL_REPEATED) {
      put_value(f, fd, base + fd->offset);
      continue;
    }
    size_t n = *(const size_t *)(base + fd->quantifier_offset);
    const uint8_t *arr = *(const uint8_t *const *)(base + fd->offset);
    size_t step = value_size(fd->type);
    fputc('[', f);
    for (size_t k = 0; k < n; k++) {
      if (k) fputs(", ", f);
      put_value(f, fd, arr + k * step);
    }
    fputc(']', f);
  }
  fputc('}', f);
}

int cli_json_file_write(const char *path, void (*put)(FILE *f, const void *arg),
                        const void *arg) {
  if (!strcmp(path, "-")) {
    put(stdout, arg);
    return fflush(stdout) == 0 ? 0 : -errno;
  }
  size_t n = strlen(path) + 16;
  char *tmp = malloc(n);
  if (!tmp) return -ENOMEM;
  snprintf(tmp, n, "%s.tmp-XXXXXX", path);
  int fd = mkstemp(tmp);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  int rv = 0;
  if (!f) {
    rv = -errno;
    if (fd >= 0) close(fd);
  } else {
    put(f, arg);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) rv = -errno;
    if (fclose(f) != 0 && rv == 0) rv = -errno;
    if (rv == 0 && rename(tmp, path) != 0) rv = -errno;
  }
  if (rv < 0 && fd >= 0) unlink(tmp);
  free(tmp);
  return rv;
}
