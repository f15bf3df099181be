/* SPDX-License-Identifier: Apache-2.0 */
/* State machines: one table form and one policy for every machine of the
 * tree (docs/architecture.md, "State machines: one helper, one policy").
 *
 * A machine is a table: per state, the bitmask of the states it may go to
 * (next[from] & TG_FSM_BIT(to)), and a name per state for the logs. Each
 * machine keeps its one checked setter, a few lines over tg_fsm_move().
 *
 * The policy: a move the table has no arrow for is refused (the state stays
 * as it is), counted in the machine's counter and logged at ERROR with who
 * and why. A machine that goes on in a state it can explain beats one in a
 * state its table has no arrow to; an assert would abort a daemon on what
 * may come from outside. Never asserts, never moves anyway.
 *
 * Owns: nothing; the tables are the callers' constant data. Must never:
 * allocate, or know a machine.
 */
#ifndef TRACEGATE_COMMON_FSM_H
#define TRACEGATE_COMMON_FSM_H

#include <stdbool.h>
#include <stdint.h>

/* A table's arrow set holds at most 32 states. */
#define TG_FSM_MAX_STATES 32u
#define TG_FSM_BIT(st) (UINT32_C(1) << (st))
/* Entries of a constant array: for the _Static_asserts that a table has an
 * arrow set and a name per state. */
#define TG_FSM_COUNT(a) (sizeof(a) / sizeof((a)[0]))

typedef struct tg_fsm_def {
  const char *what;          /* the machine, for logs: "bridge", ... */
  unsigned n_states;         /* at most TG_FSM_MAX_STATES */
  const uint32_t *next;      /* n_states arrow sets: next[from] */
  const char *const *names;  /* n_states names */
} tg_fsm_def_t;

/* Whether |d| has an arrow |from| -> |to|. A state to itself is none unless
 * the table says so; a state out of range has none. */
bool tg_fsm_allowed(const tg_fsm_def_t *d, unsigned from, unsigned to);

/* |st|'s name; "?" out of range. */
const char *tg_fsm_name(const tg_fsm_def_t *d, unsigned st);

/* Moves *state to |to| when |d| has the arrow, logging at DEBUG; returns
 * true when moved. from == to is no move: false, not counted. Any other
 * move the table lacks (out-of-range states included) is refused: *state
 * unchanged, *bad incremented (|bad| may be NULL only for a machine that
 * has no counter yet), logged at ERROR as "<what> <who>: <from> -> <to> ...
 * (<why>)"; false. |who| and |why| may be NULL. */
bool tg_fsm_move(const tg_fsm_def_t *d, unsigned *state, unsigned to,
                 uint64_t *bad, const char *who, const char *why);

#endif /* TRACEGATE_COMMON_FSM_H */
