/* tests/fuzz/fuzz_input.h: a fuzz input read as a stream of choices, for
 * the harnesses that build their calls from it. Past the end every byte
 * reads as 0, so a short input is still a complete one. */
#ifndef TRACEGATE_TESTS_FUZZ_INPUT_H
#define TRACEGATE_TESTS_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

typedef struct input {
  const uint8_t *p;
  size_t left;
} input_t;

static inline uint8_t take(input_t *in) {
  if (!in->left) return 0;
  in->left--;
  return *in->p++;
}

/* |bytes| (at most 4) bytes, little endian. */
static inline uint32_t take_le(input_t *in, unsigned bytes) {
  uint32_t v = 0;
  for (unsigned i = 0; i < bytes; i++) v |= (uint32_t)take(in) << (8 * i);
  return v;
}

#endif /* TRACEGATE_TESTS_FUZZ_INPUT_H */
