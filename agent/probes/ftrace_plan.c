/* Building field plans; see ftrace_plan.h. Runs when a session's table is
 * built, never per record. */
#include "agent/probes/ftrace_plan.h"

#include <string.h>

#include "agent/probes/ftrace_put.h"
#include "tracegate/pb_wire.h"

/* The 16-byte char arrays of sched events and most others. */
#define COMM_SIZE 16
/* The longest varint of a length below 2^32. */
#define LEN_VARINT_MAX 5

void tg__ftrace_plan_init(tg_ftrace_plan_t *pl, uint32_t msg_field,
                          uint16_t pid_offset) {
  memset(pl, 0, sizeof(*pl));
  pl->msg_tag = tg__ftrace_tag_word(msg_field, TG_PB_WT_LEN, &pl->msg_tag_len);
  pl->pid_offset = pid_offset;
  pl->min_len = (uint32_t)pid_offset + 4;
  pl->bound = tg__ftrace_plan_bound_of(pl, 0);
  if (msg_field >= (1u << 18) || !pl->bound) pl->min_len = UINT32_MAX;
}

/* The mask and sign bit that extend a |size|-byte value read as a word. */
static void word_read(tg_ftrace_op_t *op, unsigned size, bool is_signed) {
  op->mask = size >= 8 ? UINT64_MAX : (UINT64_C(1) << (8 * size)) - 1;
  op->sign = is_signed ? UINT64_C(1) << (8 * size - 1) : 0;
}

static uint8_t int_op(const tg_ftrace_field_t *f, bool array) {
  unsigned size = array ? f->elem_size : f->size;
  uint8_t base = array ? TG_FTRACE_OP_ARRAY_U8
                       : f->is_signed ? TG_FTRACE_OP_S8 : TG_FTRACE_OP_U8;
  switch (size) {
    case 1:
      return base;
    case 2:
      return (uint8_t)(base + 1);
    case 4:
      return (uint8_t)(base + 2);
    case 8:
      return (uint8_t)(base + 3);
    default:
      return 0;
  }
}

/* The op reading |f|, with the worst-case bytes of its value (key aside)
 * and whether the value is as long as the record at most; false when no
 * op reads its layout. */
static bool op_for(const tg_ftrace_field_t *f, tg_ftrace_op_t *op,
                   uint32_t *worst_per_key, uint32_t *worst, bool *var) {
  memset(op, 0, sizeof(*op));
  op->offset = f->offset;
  op->size = f->size;
  op->end = (uint32_t)f->offset + f->size;
  *var = false;
  *worst_per_key = 0;
  *worst = 0;
  switch (f->kind) {
    case TG_FTRACE_FIELD_INT:
      op->kind = f->role == TG_FTRACE_ROLE_DEV ? TG_FTRACE_OP_DEV
                                               : int_op(f, false);
      if (op->kind) word_read(op, f->size, f->is_signed);
      *worst = TG_PB_MAX_VARINT_SIZE;
      *worst_per_key = 1;
      break;
    case TG_FTRACE_FIELD_INT_ARRAY:
      op->kind = int_op(f, true);
      if (op->kind) {
        word_read(op, f->elem_size, false);
        /* A key and a varint per element. */
        *worst_per_key = (uint32_t)(f->size / f->elem_size);
        *worst = *worst_per_key * TG_PB_MAX_VARINT_SIZE;
      }
      break;
    case TG_FTRACE_FIELD_CHARS:
      op->kind = f->size == COMM_SIZE ? TG_FTRACE_OP_COMM : TG_FTRACE_OP_CHARS;
      *worst = LEN_VARINT_MAX + f->size;
      *worst_per_key = 1;
      break;
    case TG_FTRACE_FIELD_DATA_LOC:
    case TG_FTRACE_FIELD_REL_LOC:
      /* The u32 locator; the string itself lies inside the record. */
      op->kind = f->kind == TG_FTRACE_FIELD_DATA_LOC ? TG_FTRACE_OP_DATA_LOC
                                                      : TG_FTRACE_OP_REL_LOC;
      *worst = LEN_VARINT_MAX;
      *worst_per_key = 1;
      *var = true;
      break;
    case TG_FTRACE_FIELD_TAIL:
      op->kind = TG_FTRACE_OP_TAIL;
      op->end = f->offset;
      *worst = LEN_VARINT_MAX;
      *worst_per_key = 1;
      *var = true;
      break;
    default:
      break;
  }
  if (op->kind == TG_FTRACE_OP_DEV) {
    op->cls = TG_FTRACE_OPC_DEV;
    op->sign = 0;
  } else if (op->kind >= TG_FTRACE_OP_ARRAY_U8) {
    op->cls = TG_FTRACE_OPC_ARRAY;
    op->elem_size = (uint8_t)f->elem_size;
    op->count = (uint16_t)(f->size / f->elem_size);
  } else if (op->kind == TG_FTRACE_OP_COMM) {
    op->cls = TG_FTRACE_OPC_COMM;
  } else if (op->kind >= TG_FTRACE_OP_CHARS) {
    op->cls = TG_FTRACE_OPC_STRING;
  } else if (op->kind) {
    op->cls = TG_FTRACE_OPC_SCALAR;
  }
  return op->kind != 0;
}

bool tg__ftrace_op_of(const tg_ftrace_field_t *f, tg_ftrace_op_t *op) {
  uint32_t keys, worst;
  bool var;
  return op_for(f, op, &keys, &worst, &var);
}

void tg__ftrace_plan_add(tg_ftrace_plan_t *pl, const tg_ftrace_field_t *f,
                         uint32_t proto_field) {
  if (pl->min_len == UINT32_MAX) return;
  tg_ftrace_op_t op;
  uint32_t keys, worst;
  bool var;
  if (pl->n_ops >= TG_FTRACE_MAX_FIELDS || proto_field >= (1u << 18) ||
      !op_for(f, &op, &keys, &worst, &var)) {
    pl->min_len = UINT32_MAX;
    return;
  }
  bool varint = f->kind == TG_FTRACE_FIELD_INT ||
                f->kind == TG_FTRACE_FIELD_INT_ARRAY;
  op.tag = tg__ftrace_tag_word(proto_field,
                               varint ? TG_PB_WT_VARINT : TG_PB_WT_LEN,
                               &op.tag_len);
  pl->fixed += worst + keys * op.tag_len;
  pl->n_var += var;
  pl->ops[pl->n_ops++] = op;
  if (op.end > pl->min_len) pl->min_len = op.end;
  pl->bound = tg__ftrace_plan_bound_of(pl, 0);
  /* Beyond a plan even for the shortest record: the general path's. */
  if (!pl->bound) pl->min_len = UINT32_MAX;
}
