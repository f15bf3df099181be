/* Field plans: how one known event's records become FtraceEvent bytes,
 * worked out once when the event joins the table.
 *
 * Per field of Perfetto's message the plan holds where the value lies
 * (offset, size, and so the record length it needs), how to read it (an
 * op per layout and signedness) and the proto key as ready varint bytes.
 * Per event it holds the FtraceEvent key of the message and the worst
 * case of the bytes a record can produce. The encoder (ftrace_encode.c)
 * checks room for that worst case once per record and then runs the ops
 * with unchecked writes (ftrace_put.h): no string compares, no kind
 * lookups, no writer calls per field.
 *
 * The nested sizes of FtraceEvent and its message are 4-byte redundant
 * varints back-filled at the end, as tg_pbw_begin_nested() writes them:
 * the bytes are those of the general path, field for field.
 *
 * Wire form: int and uint fields as varints of the value sign- or
 * zero-extended by the field's signedness (protobuf's int32/int64), strings
 * as bytes, arrays as one key-value pair per element: Perfetto's
 * SysEnterFtraceEvent.args is a repeated uint64 without [packed=true].
 */
#ifndef TRACEGATE_PROBES_FTRACE_PLAN_H
#define TRACEGATE_PROBES_FTRACE_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "agent/probes/ftrace_format.h"
#include "agent/probes/ftrace_put.h"
#include "tracegate/pb_wire.h"

enum {
  TG_FTRACE_OP_U8 = 1, /* unsigned scalars, by size */
  TG_FTRACE_OP_U16,
  TG_FTRACE_OP_U32,
  TG_FTRACE_OP_U64,
  TG_FTRACE_OP_S8, /* signed scalars, sign-extended */
  TG_FTRACE_OP_S16,
  TG_FTRACE_OP_S32,
  TG_FTRACE_OP_S64,
  TG_FTRACE_OP_CHARS,    /* char name[N] */
  TG_FTRACE_OP_COMM,     /* char name[16]: the comms, copied as one block */
  TG_FTRACE_OP_DATA_LOC, /* __data_loc char[] */
  TG_FTRACE_OP_REL_LOC,  /* __rel_loc char[] */
  TG_FTRACE_OP_TAIL,     /* char name[] at the end */
  TG_FTRACE_OP_ARRAY_U8, /* fixed arrays of unsigned elements, by size */
  TG_FTRACE_OP_ARRAY_U16,
  TG_FTRACE_OP_ARRAY_U32,
  TG_FTRACE_OP_ARRAY_U64,
  TG_FTRACE_OP_DEV, /* a dev_t of 4 or 8 bytes, as tg_ftrace_dev_to_user */
};

/* What the encoder's loop switches on: ops of a class are written alike. */
enum {
  TG_FTRACE_OPC_SCALAR = 1, /* U8..S64 */
  TG_FTRACE_OPC_COMM,
  TG_FTRACE_OPC_STRING, /* CHARS, DATA_LOC, REL_LOC, TAIL */
  TG_FTRACE_OPC_ARRAY,  /* ARRAY_* */
  TG_FTRACE_OPC_DEV,    /* DEV */
};

typedef struct tg_ftrace_op {
  /* Scalars and array elements read as a whole word: the value is
   * ((word & mask) ^ sign) - sign, which zero- or sign-extends it. */
  uint64_t mask, sign;
  uint32_t tag;    /* the proto key (tg__ftrace_put_tag bytes) */
  uint32_t end;    /* offset + size: records shorter than this lack it */
  uint16_t offset; /* in the record */
  uint16_t size;   /* chars: the array's bytes; arrays: all elements' */
  uint16_t count;  /* arrays: elements */
  uint8_t kind;    /* TG_FTRACE_OP_* */
  uint8_t cls;     /* TG_FTRACE_OPC_* */
  uint8_t tag_len;
  uint8_t elem_size; /* arrays */
} tg_ftrace_op_t;

/* Nested sizes the plans write: below 2^14, so their 4-byte redundant
 * varints take two bytes of value and a fixed tail (0x80 0x00). */
#define TG_FTRACE_PLAN_MAX_EVENT 0x3fff

typedef struct tg_ftrace_plan {
  /* Records shorter than this go the general path: they lack common_pid
   * or a field (truncated), and so the plan's ops read every fixed field
   * unchecked. UINT32_MAX: every record does (no plan). */
  uint32_t min_len;
  /* tg__ftrace_plan_need() worked out, for plans without n_var. */
  uint32_t bound;
  uint8_t n_ops;
  uint8_t n_var; /* string fields as long as the record at most */
  uint8_t msg_tag_len;
  uint16_t pid_offset;
  uint32_t msg_tag; /* the message's key in FtraceEvent */
  /* Worst-case bytes of the message's fields, each variable string
   * counted without its content (which adds at most the record length). */
  uint32_t fixed;
  tg_ftrace_op_t ops[TG_FTRACE_MAX_FIELDS];
} tg_ftrace_plan_t;

/* Starts the plan of a known event: its message is field |msg_field| of
 * FtraceEvent; common_pid at |pid_offset| (UINT16_MAX: none). */
void tg__ftrace_plan_init(tg_ftrace_plan_t *pl, uint32_t msg_field,
                          uint16_t pid_offset);
/* Adds field |f| as field |proto_field| of the message, in the order the
 * fields are to be written. Fields of layouts the plan does not know turn
 * the plan off (the general path writes the event). */
void tg__ftrace_plan_add(tg_ftrace_plan_t *pl, const tg_ftrace_field_t *f,
                         uint32_t proto_field);

/* Worst-case bytes of one FtraceEvent (key and size included) for a record
 * of |len| bytes, or 0 above TG_FTRACE_PLAN_MAX_EVENT. */
static inline uint32_t tg__ftrace_plan_bound_of(const tg_ftrace_plan_t *pl,
                                                uint32_t len) {
  uint64_t content = (uint64_t)pl->fixed + (uint64_t)pl->n_var * len;
  /* timestamp (key + 10), pid (key + 5), the message's key and size. */
  uint64_t event = 11 + 6 + pl->msg_tag_len + TG_PB_REDUNDANT_VARINT_SIZE +
                   content;
  if (event > TG_FTRACE_PLAN_MAX_EVENT) return 0;
  return (uint32_t)(1 + TG_PB_REDUNDANT_VARINT_SIZE + event);
}

/* The bytes the plan may write for a record of |len| bytes (the encoder
 * runs it with that much room plus TG_FTRACE_PUT_SLACK), or 0: the
 * general path writes the record. */
static inline uint32_t tg__ftrace_plan_need(const tg_ftrace_plan_t *pl,
                                            uint32_t len) {
  if (len < pl->min_len) return 0;
  return pl->n_var ? tg__ftrace_plan_bound_of(pl, len) : pl->bound;
}

/* |f| as an op without a key (the compact_sched sources). Returns false
 * when no op reads its layout. */
bool tg__ftrace_op_of(const tg_ftrace_field_t *f, tg_ftrace_op_t *op);

/* --- reading a field by its op (every record: inlined) ------------------- */

/* A scalar op's value, sign- or zero-extended to 64 bits. The caller has
 * checked op->end against the record's length. */
static inline uint64_t tg__ftrace_op_int(uint8_t kind, const uint8_t *p) {
  switch (kind) {
    case TG_FTRACE_OP_U8:
      return *p;
    case TG_FTRACE_OP_U16: {
      uint16_t v;
      memcpy(&v, p, 2);
      return v;
    }
    case TG_FTRACE_OP_U32: {
      uint32_t v;
      memcpy(&v, p, 4);
      return v;
    }
    case TG_FTRACE_OP_S8:
      return (uint64_t)(int64_t)(int8_t)*p;
    case TG_FTRACE_OP_S16: {
      int16_t v;
      memcpy(&v, p, 2);
      return (uint64_t)(int64_t)v;
    }
    case TG_FTRACE_OP_S32: {
      int32_t v;
      memcpy(&v, p, 4);
      return (uint64_t)(int64_t)v;
    }
    default: /* U64, S64 */
      return tg__ftrace_ld64(p);
  }
}

/* A string op's bytes, without the NUL: false when they lie outside the
 * record of |len| bytes. */
static inline bool tg__ftrace_op_str(const tg_ftrace_op_t *op,
                                     const uint8_t *rec, uint32_t len,
                                     const uint8_t **s, size_t *n) {
  uint32_t start = op->offset, max = op->size;
  switch (op->kind) {
    case TG_FTRACE_OP_CHARS:
    case TG_FTRACE_OP_COMM:
      if (op->end > len) return false;
      break;
    case TG_FTRACE_OP_TAIL:
      if (op->offset > len) return false;
      max = len - op->offset;
      break;
    default: { /* DATA_LOC, REL_LOC: u32 length << 16 | offset */
      if (op->end > len) return false;
      uint32_t loc;
      memcpy(&loc, rec + op->offset, 4);
      start = loc & 0xffff;
      max = loc >> 16;
      if (op->kind == TG_FTRACE_OP_REL_LOC) start += (uint32_t)op->offset + 4;
      if (start > len || max > len - start) return false;
      break;
    }
  }
  const uint8_t *p = rec + start;
  *s = p;
  if (max <= 64) {
    *n = tg__ftrace_strnlen(p, max);
  } else {
    const uint8_t *nul = memchr(p, 0, max);
    *n = nul ? (size_t)(nul - p) : max;
  }
  return true;
}

#endif /* TRACEGATE_PROBES_FTRACE_PLAN_H */
