/* The CLI's small request/reply state machines (record --is_detached,
 * record --clone, stats --attach ...): each state sends one request on
 * the connection, and its reply picks the next state from a table.
 *
 * cli_sm_run() is the one place that waits for a reply, tells a refusal
 * from a lost connection, says why a step failed and logs each transition
 * (at debug level). A wait ends with the reply or with the connection:
 * the consumer library runs every pending callback when it closes, so a
 * machine never outlives its requests. Single-threaded, on the
 * connection's loop; the machine lives on its owner's stack.
 */
#ifndef TRACEGATE_CLI_STEP_H
#define TRACEGATE_CLI_STEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/notice.h"
#include "cli/cli.h"

/* How a state's request ended. */
typedef enum cli_sm_outcome {
  CLI_SM_OK,      /* answered, success */
  CLI_SM_REFUSED, /* answered, failure: the reply's message says why */
  CLI_SM_LOST,    /* not sent, or the connection ended before the answer */
} cli_sm_outcome_t;

#define CLI_SM_END (-1)   /* as a next state: the machine is done */
#define CLI_SM_TABLE (-2) /* from decide(): the table's on_ok / on_fail */

typedef struct cli_sm cli_sm_t;

typedef struct cli_sm_state {
  const char *name; /* in the transition log */
  /* Sends the state's request with |m| as its callback's context; the
   * callback ends in cli_sm_reply() (cli_sm_on_done does only that).
   * Returns what the consumer call returned (negative: not sent). */
  int (*send)(cli_sm_t *m);
  int on_ok, on_fail; /* the next states (indexes into the table) */
  /* On failure: "tracegate: FAIL: why" on stderr, and the machine's exit
   * code becomes |fail_code| (CLI_EXIT_OK: a warning, the code stays).
   * NULL: decide() says it. */
  const char *fail;
  int fail_code;
  /* Optional: sees the outcome first (a refusal that means "no", a read
   * that brought nothing new) and returns the next state, or CLI_SM_TABLE
   * for the table's choice (|fail| printed on failure). */
  int (*decide)(cli_sm_t *m, cli_sm_outcome_t outcome);
  /* The code of |fail|'s line (common/notice.h); TG_N_NONE: none. */
  tg_notice_t notice;
} cli_sm_state_t;

struct cli_sm {
  cli_conn_t *cc;               /* borrowed: the connection asked */
  const cli_sm_state_t *states; /* borrowed: the table, indexed by state */
  void *ctx;                    /* the owner's, for send() and decide() */
  int code;                     /* the exit code so far: CLI_EXIT_OK first */
  /* The step in progress. */
  int state;
  bool done;      /* the answer came */
  int status;     /* its status: 0 success */
  int send_rv;    /* what send() returned */
  char msg[512];  /* its message */
  cli_sm_outcome_t outcome; /* once it was judged */
};

/* Runs |m| from state |first| until a transition to CLI_SM_END. Fills
 * the step fields itself; set cc, states and ctx before. Returns m->code. */
int cli_sm_run(cli_sm_t *m, int first);

/* The answer to the current step (call once per step, from the request's
 * callback). |msg| may be NULL. */
void cli_sm_reply(cli_sm_t *m, int status, const char *msg);
/* cli_sm_reply as a tg_consumer_done_cb and a tg_consumer_attach_cb,
 * with the machine as |ctx|. */
void cli_sm_on_done(tg_consumer_t *c, void *ctx, int status, const char *msg);
void cli_sm_on_attached(tg_consumer_t *c, void *ctx, int status,
                        const char *msg, const uint8_t *cfg, size_t len);

/* Why the current step failed: the send error, the answer's message, or
 * why the connection ended. */
const char *cli_sm_why(const cli_sm_t *m);

/* For decide(): "tracegate: WHAT: why" on stderr, with |what| formatted,
 * and the exit code becomes |code| (CLI_EXIT_OK: unchanged). */
void cli_sm_fail(cli_sm_t *m, int code, tg_notice_t notice, const char *fmt,
                 ...)
    __attribute__((format(printf, 4, 5)));

#endif /* TRACEGATE_CLI_STEP_H */
