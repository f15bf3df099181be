/* common/direct_write_test.h: tests' hooks into the direct writer
 * (common/direct_write.h), kept out of the header the product includes. */
#ifndef TRACEGATE_COMMON_DIRECT_WRITE_TEST_H
#define TRACEGATE_COMMON_DIRECT_WRITE_TEST_H

#include "common/direct_write.h"

/* For tests: makes the next direct write of |w| act as if the file system
 * had refused it (EINVAL), to exercise the page-cache fallback. */
void tg_direct_writer_refuse_next_for_test(tg_direct_writer_t *w);
/* For tests: where block |i| (< TG_DIRECT_WRITE_BUFS) lies. */
const void *tg_direct_writer_block_for_test(const tg_direct_writer_t *w,
                                            unsigned i);

#endif /* TRACEGATE_COMMON_DIRECT_WRITE_TEST_H */
