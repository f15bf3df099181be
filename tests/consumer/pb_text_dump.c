/* Canonical text dump of a decoded protobuf-c message (pb_text_dump.h).
 *
 * Reads the message through its descriptor's offsets, the way protobuf-c's
 * own packer does, so it works for every generated type. Never used on
 * anything but messages protobuf-c itself unpacked.
 */
#include "pb_text_dump.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

__attribute__((format(printf, 2, 3))) static int put(tg_buf_t *out,
                                                     const char *fmt, ...) {
  char line[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof(line)) return -EINVAL;
  return tg_buf_append(out, line, (size_t)n);
}

static int indent(tg_buf_t *out, unsigned depth) {
  for (unsigned i = 0; i < depth; i++) {
    int rc = tg_buf_append(out, "  ", 2);
    if (rc) return rc;
  }
  return 0;
}

/* Printable ASCII as is, the rest as three-digit octal escapes, which the
 * text format reads back as the same bytes. */
static int put_quoted(tg_buf_t *out, const uint8_t *s, size_t n) {
  int rc = tg_buf_append(out, "\"", 1);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    uint8_t c = s[i];
    if (c == '"' || c == '\\')
      rc = put(out, "\\%c", c);
    else if (c >= ' ' && c < 0x7f)
      rc = tg_buf_append(out, &c, 1);
    else
      rc = put(out, "\\%03o", c);
  }
  return rc ? rc : tg_buf_append(out, "\"", 1);
}

/* nan and infinities in the spellings the text format reads; %.17g and
 * %.9g round-trip every double and float. */
static int put_float(tg_buf_t *out, double v, bool is_double) {
  if (isnan(v)) return put(out, "nan");
  if (isinf(v)) return put(out, v < 0 ? "-inf" : "inf");
  return put(out, is_double ? "%.17g" : "%.9g", v);
}

static int dump_fields(const ProtobufCMessage *msg, unsigned depth,
                       tg_buf_t *out);

static size_t element_size(ProtobufCType type) {
  switch (type) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
      return 8;
    case PROTOBUF_C_TYPE_BOOL:
      return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
      return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
      return sizeof(ProtobufCBinaryData);
    default:
      return 4;
  }
}

/* One "name: value" line (or "name {...}" block) for the value at |p|. */
static int dump_value(const ProtobufCFieldDescriptor *f, const void *p,
                      unsigned depth, tg_buf_t *out) {
  int rc = indent(out, depth);
  if (rc) return rc;
  if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
    const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
    rc = put(out, "%s {\n", f->name);
    if (rc == 0) rc = dump_fields(sub, depth + 1, out);
    if (rc == 0) rc = indent(out, depth);
    return rc ? rc : put(out, "}\n");
  }
  rc = put(out, "%s: ", f->name);
  if (rc) return rc;
  int32_t i32;
  uint32_t u32;
  int64_t i64;
  uint64_t u64;
  switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
      memcpy(&i32, p, 4);
      rc = put(out, "%" PRId32, i32);
      break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
      memcpy(&u32, p, 4);
      rc = put(out, "%" PRIu32, u32);
      break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
      memcpy(&i64, p, 8);
      rc = put(out, "%" PRId64, i64);
      break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
      memcpy(&u64, p, 8);
      rc = put(out, "%" PRIu64, u64);
      break;
    case PROTOBUF_C_TYPE_FLOAT: {
      float v;
      memcpy(&v, p, 4);
      rc = put_float(out, v, false);
      break;
    }
    case PROTOBUF_C_TYPE_DOUBLE: {
      double v;
      memcpy(&v, p, 8);
      rc = put_float(out, v, true);
      break;
    }
    case PROTOBUF_C_TYPE_BOOL:
      rc = put(out, "%s", *(const protobuf_c_boolean *)p ? "true" : "false");
      break;
    case PROTOBUF_C_TYPE_ENUM: {
      memcpy(&i32, p, 4);
      const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(
          (const ProtobufCEnumDescriptor *)f->descriptor, i32);
      rc = ev ? put(out, "%s", ev->name) : put(out, "%" PRId32, i32);
      break;
    }
    case PROTOBUF_C_TYPE_STRING: {
      const char *s = *(const char *const *)p;
      rc = put_quoted(out, (const uint8_t *)s, strlen(s));
      break;
    }
    case PROTOBUF_C_TYPE_BYTES: {
      const ProtobufCBinaryData *b = p;
      rc = put_quoted(out, b->data, b->len);
      break;
    }
    default:
      return -EINVAL;
  }
  return rc ? rc : put(out, "\n");
}

/* Whether an optional or proto3 singular field is set, as the packer
 * decides it. */
static bool present(const ProtobufCMessage *msg,
                    const ProtobufCFieldDescriptor *f) {
  const char *base = (const char *)msg;
  const void *p = base + f->offset;
  if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
    return *(const uint32_t *)(base + f->quantifier_offset) == f->id;
  if (f->label == PROTOBUF_C_LABEL_REQUIRED) return true;
  if (f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING) {
    const void *ptr = *(const void *const *)p;
    return ptr != NULL && ptr != f->default_value;
  }
  if (f->label == PROTOBUF_C_LABEL_OPTIONAL)
    return *(const protobuf_c_boolean *)(base + f->quantifier_offset);
  /* proto3 scalars without presence: set when not zero. */
  static const uint8_t zero[sizeof(ProtobufCBinaryData)];
  if (f->type == PROTOBUF_C_TYPE_BYTES)
    return ((const ProtobufCBinaryData *)p)->len != 0;
  return memcmp(p, zero, element_size(f->type)) != 0;
}

static int dump_fields(const ProtobufCMessage *msg, unsigned depth,
                       tg_buf_t *out) {
  const ProtobufCMessageDescriptor *d = msg->descriptor;
  const char *base = (const char *)msg;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    int rc = 0;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t n = *(const size_t *)(base + f->quantifier_offset);
      const char *arr = *(const char *const *)(base + f->offset);
      for (size_t k = 0; rc == 0 && k < n; k++)
        rc = dump_value(f, arr + k * element_size(f->type), depth, out);
    } else if (present(msg, f)) {
      rc = dump_value(f, base + f->offset, depth, out);
    }
    if (rc) return rc;
  }
  return 0;
}

int tg_test_pb_text_dump(const ProtobufCMessage *msg, tg_buf_t *out) {
  return dump_fields(msg, 0, out);
}
