/* JSON output: see json_out.h. */
#include "cli/json_out.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "common/json.h"
#include "cli/cli.h"

/* |n| bytes at |p| as a base64 string (RFC 4648, padded), by libcrypto's
 * encoder. EVP_EncodeBlock takes an int length: a bytes field of 1.5 GiB
 * or more (none fits a trace packet) is refused. */
static json_t *base64(const uint8_t *p, size_t n) {
  if (n > (size_t)INT_MAX / 4 * 3) return NULL;
  size_t len = (n + 2) / 3 * 4;
  unsigned char *out = malloc(len + 1);
  if (!out) return NULL;
  int w = EVP_EncodeBlock(out, p, (int)n);
  json_t *j = w == (int)len ? json_stringn((const char *)out, len) : NULL;
  free(out);
  return j;
}

static json_t *real(double d) { return isfinite(d) ? json_real(d) : json_null(); }

/* One value of |fd|'s type at |v|. */
static json_t *value(const ProtobufCFieldDescriptor *fd, const void *v) {
  switch (fd->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
      return json_integer(*(const int32_t *)v);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
      return json_integer(*(const int64_t *)v);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
      return json_integer(*(const uint32_t *)v);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
      return tg_json_u64(*(const uint64_t *)v);
    case PROTOBUF_C_TYPE_FLOAT:
      return real(*(const float *)v);
    case PROTOBUF_C_TYPE_DOUBLE:
      return real(*(const double *)v);
    case PROTOBUF_C_TYPE_BOOL:
      return json_boolean(*(const protobuf_c_boolean *)v);
    case PROTOBUF_C_TYPE_ENUM: {
      int e = *(const int *)v;
      const ProtobufCEnumValue *ev =
          protobuf_c_enum_descriptor_get_value(fd->descriptor, e);
      return ev ? tg_json_text(ev->name) : json_integer(e);
    }
    case PROTOBUF_C_TYPE_STRING:
      return tg_json_text(*(char *const *)v);
    case PROTOBUF_C_TYPE_BYTES: {
      const ProtobufCBinaryData *b = v;
      return base64(b->data, b->len);
    }
    case PROTOBUF_C_TYPE_MESSAGE:
      return cli_json_pb(*(ProtobufCMessage *const *)v);
  }
  return NULL;
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

/* A field's values: one, or an array of them. */
static json_t *field(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *fd) {
  const uint8_t *base = (const uint8_t *)m;
  if (fd->label != PROTOBUF_C_LABEL_REPEATED) return value(fd, base + fd->offset);
  size_t n = *(const size_t *)(base + fd->quantifier_offset);
  const uint8_t *arr = *(const uint8_t *const *)(base + fd->offset);
  size_t step = value_size(fd->type);
  json_t *a = json_array();
  for (size_t k = 0; a && k < n; k++) a = tg_json_push(a, value(fd, arr + k * step));
  return a;
}

json_t *cli_json_pb(const ProtobufCMessage *m) {
  if (!m) return json_null();
  const ProtobufCMessageDescriptor *d = m->descriptor;
  json_t *o = json_object();
  for (unsigned i = 0; o && i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *fd = &d->fields[i];
    if (present(m, fd)) o = tg_json_put(o, fd->name, field(m, fd));
  }
  return o;
}

int cli_json_stdout(const json_t *doc) {
  int rv = doc ? tg_json_dumpf_line(doc, stdout, 0) : -ENOMEM;
  if (rv == 0 && fflush(stdout) != 0) rv = -errno;
  if (rv < 0) {
    fprintf(stderr, CLI_PROG ": cannot write JSON to stdout: %s\n", strerror(-rv));
    return CLI_EXIT_FAIL;
  }
  return 0;
}

typedef struct doc_arg {
  const json_t *doc;
  size_t flags;
} doc_arg_t;

static int put_doc(FILE *f, const void *arg) {
  const doc_arg_t *d = arg;
  return tg_json_dumpf_line(d->doc, f, d->flags);
}

int cli_json_doc_write(const char *path, const json_t *doc, size_t flags) {
  doc_arg_t d = {doc, flags};
  return cli_json_file_write(path, put_doc, &d);
}

int cli_json_file_write(const char *path, int (*put)(FILE *f, const void *arg),
                        const void *arg) {
  if (!strcmp(path, "-")) {
    int rv = put(stdout, arg);
    if (rv == 0 && fflush(stdout) != 0) rv = -errno;
    return rv;
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
    rv = put(f, arg);
    if (rv == 0 && (fflush(f) != 0 || fsync(fileno(f)) != 0)) rv = -errno;
    if (fclose(f) != 0 && rv == 0) rv = -errno;
    if (rv == 0 && rename(tmp, path) != 0) rv = -errno;
  }
  if (rv < 0 && fd >= 0) unlink(tmp);
  free(tmp);
  return rv;
}
