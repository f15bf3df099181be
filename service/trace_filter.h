/* Perfetto's packet filter (TraceConfig.trace_filter): which fields of a
 * TracePacket leave the service, and which strings are redacted.
 *
 * Three pure parts, no I/O, no session: each is a binary contract with
 * Perfetto's tools and can be fuzzed and tested alone.
 *
 *  1. The bytecode: an allow-list of field ids per message, made by
 *     Perfetto's proto_filter tool from a .proto schema. It is a packed run
 *     of varints, one word each, closed by a checksum word (the low 32 bits
 *     of the 64-bit FNV-1a of the words before it, each hashed as its 4
 *     little-endian bytes). Word = (field_id << 3) | opcode:
 *
 *       0 END_OF_MESSAGE      closes the current message (index 0, 1, ...)
 *       1 SIMPLE_FIELD        field_id passes through as it is
 *       2 SIMPLE_FIELD_RANGE  next word = n: fields [field_id, field_id+n)
 *       3 NESTED_FIELD        next word = index of the message to recurse in
 *       4 FILTER_STRING       a string the string filter rules apply to
 *
 *     bytecode (Android T) and bytecode_v2 (Android U, adds opcode 4) share
 *     the format; the service takes v2 when set. An overlay (Perfetto v54,
 *     not in v50's TraceConfig: the config path never passes one) adds or
 *     upgrades fields: [msg_index, field word (opcode 1 or 4), arg] triples,
 *     sorted by (msg_index, field_id), with the same checksum word.
 *     Loading expands it into a table: per message, one state word per
 *     field id below 128 and [start, end, state] ranges for the others.
 *
 *  2. The string filter: the rules of string_filter_chain, PCRE2 patterns
 *     applied in order to every FILTER_STRING field; the first rule that
 *     applies ends the string's filtering.
 *
 *  3. The message filter: rewrites one packet (given as slices) into a
 *     buffer the filter owns and reuses, as Perfetto's MessageFilter does,
 *     byte for byte: tags and varints re-encoded at their shortest, nested
 *     lengths kept as wide as in the input (then filled in), any malformed
 *     input (bad wire type, a length past its parent, a field cut by its
 *     message's end, an empty packet) an error that yields no output.
 *     The output is never larger than the input.
 *
 * Nesting is iterative over a stack fixed at creation: a packet nested
 * deeper than TG_TRACE_FILTER_MAX_DEPTH is an error (Perfetto's stack has
 * no bound but the packet's length; no schema nests that deep).
 */
#ifndef TRACEGATE_SERVICE_TRACE_FILTER_H
#define TRACEGATE_SERVICE_TRACE_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* --- 1. bytecode ------------------------------------------------------------ */

/* A field's state word: 0 is "not allowed"; otherwise the allowed bit and
 * either TG_FILTER_SIMPLE, TG_FILTER_STRING or the nested message index. */
#define TG_FILTER_ALLOWED 0x80000000u
#define TG_FILTER_SIMPLE 0x7fffffffu
#define TG_FILTER_STRING 0x7ffffffeu
/* Field ids below this have a state word of their own in each message. */
#define TG_FILTER_DIRECT_LIMIT 128u

typedef struct tg_filter_bytecode {
  uint32_t *words;      /* per message: [n direct][direct...][ranges...] */
  size_t n_words;
  uint32_t *msg_offset; /* n_messages + 1 entries; the last ends the table */
  size_t n_messages;
} tg_filter_bytecode_t;

/* Parses |code_untrusted| (and |overlay_untrusted| when |overlay_len| > 0)
 * into |bc| (owned by the caller; free with tg_filter_bytecode_free).
 * Returns 0; -EINVAL with a reason in |why| when either does not parse
 * (bad varint, checksum, opcode, field id 0, unterminated word, message
 * index out of range, overlapping ranges, unsorted overlay); -ENOMEM. On
 * failure |bc| is left empty. */
int tg_filter_bytecode_load(tg_filter_bytecode_t *bc,
                            const uint8_t *code_untrusted, size_t len,
                            const uint8_t *overlay_untrusted,
                            size_t overlay_len, char *why, size_t why_len);
void tg_filter_bytecode_free(tg_filter_bytecode_t *bc);

/* The state word of |field_id| in message |msg_index|: 0 when not allowed
 * or when |msg_index| is not a message of |bc|. */
uint32_t tg_filter_bytecode_query(const tg_filter_bytecode_t *bc,
                                  uint32_t msg_index, uint32_t field_id);

/* --- 2. string filter ------------------------------------------------------- */

/* TraceConfig.TraceFilter.StringFilterPolicy, same numbers. */
typedef enum tg_string_filter_policy {
  TG_SFP_MATCH_REDACT_GROUPS = 1,
  TG_SFP_ATRACE_MATCH_REDACT_GROUPS = 2,
  TG_SFP_MATCH_BREAK = 3,
  TG_SFP_ATRACE_MATCH_BREAK = 4,
  TG_SFP_ATRACE_REPEATED_SEARCH_REDACT_GROUPS = 5,
} tg_string_filter_policy_t;

/* What a redacted group becomes: this text, cut to the group's length, and
 * '-' for the rest of a longer group (the string keeps its length). */
#define TG_STRING_FILTER_REDACTED "P60REDACTED"

typedef struct tg_string_filter tg_string_filter_t;

tg_string_filter_t *tg_string_filter_new(void);
void tg_string_filter_free(tg_string_filter_t *sf);
/* Appends a rule. |pattern| and |atrace_prefix| (may be NULL: "") are
 * copied. Returns 0; -EINVAL with a reason in |why| for an unknown policy
 * or a pattern that does not compile; -ENOMEM. */
int tg_string_filter_add_rule(tg_string_filter_t *sf, int policy,
                              const char *pattern, const char *atrace_prefix,
                              char *why, size_t why_len);
/* A copy with the same rules and match state of its own; NULL on
 * -ENOMEM. */
tg_string_filter_t *tg_string_filter_dup(const tg_string_filter_t *sf);
size_t tg_string_filter_n_rules(const tg_string_filter_t *sf);
/* Applies the rules to |s| (|len| bytes, not NUL-terminated) in place.
 * Returns true when it redacted something. No allocation. */
bool tg_string_filter_apply(tg_string_filter_t *sf, char *s, size_t len);

/* --- 3. message filter ------------------------------------------------------ */

/* Deepest nesting a filtered packet may have (root message = depth 1). */
#define TG_TRACE_FILTER_MAX_DEPTH 512

typedef struct tg_trace_filter tg_trace_filter_t;

/* A filter over |bc| (moved in: |*bc| is left empty) and |sf| (moved in;
 * may be NULL: no string rules). |root| lists the field ids from message 0
 * to the message packets are filtered as: the service passes {1}
 * (Trace.packet), since its packets have no Trace around them. Returns 0;
 * -EINVAL with a reason in |why| when a field of the path is not an allowed
 * nested message; -ENOMEM. On failure the inputs are freed. */
int tg_trace_filter_new(tg_trace_filter_t **out, tg_filter_bytecode_t *bc,
                        tg_string_filter_t *sf, const uint32_t *root,
                        size_t n_root, char *why, size_t why_len);
/* A filter with the same rules and its own buffers (for a clone). NULL on
 * -ENOMEM. */
tg_trace_filter_t *tg_trace_filter_dup(const tg_trace_filter_t *f);
void tg_trace_filter_free(tg_trace_filter_t *f);

/* Filters the message made of |n| slices. Returns the output length (0 is
 * a valid output: nothing allowed) with |*out| pointing into the filter's
 * buffer, valid until the next call; or -EINVAL (malformed input, nothing
 * written) or -ENOMEM. */
long tg_trace_filter_run(tg_trace_filter_t *f, const uint8_t *const *slices,
                         const size_t *lens, unsigned n, const uint8_t **out);

/* The three parts' reasons: formats into |why| (|n| bytes; none when
 * NULL or 0). */
void tg__trace_filter_say(char *why, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif /* TRACEGATE_SERVICE_TRACE_FILTER_H */
