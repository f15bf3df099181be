/* The decision on a producer-provided SMB (service/producer_smb_offer.h),
 * one rule per test, from a sound offer changed in one field. The
 * end-to-end side (real memfds, the fallback, hostile producers) is
 * test_e2e_producer_smb.c. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "service/producer_smb_offer.h"

#define KB 1024u
#define ALL_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

static tg_smb_offer_t sound(void) {
  return (tg_smb_offer_t){.access_mode = O_RDWR, .seals = ALL_SEALS,
                          .regular = true, .on_shmem = true,
                          .size = 256 * KB, .size_hint = 256 * KB,
                          .page_hint = 4 * KB};
}

static void offer_sealed_memfd_of_valid_geometry_is_adopted(void **state) {
  (void)state;
  tg_smb_offer_t o = sound();
  assert_null(tg__smb_offer_refusal(&o));
  o.size_hint = 0; /* the file's size stands */
  assert_null(tg__smb_offer_refusal(&o));
  const uint64_t pages[] = {4 * KB, 8 * KB, 16 * KB, 32 * KB};
  for (size_t i = 0; i < 4; i++) {
    o = sound();
    o.page_hint = pages[i];
    o.size = o.size_hint = 32u * KB * KB;
    assert_null(tg__smb_offer_refusal(&o));
  }
}

static void offer_without_all_three_seals_is_refused(void **state) {
  (void)state;
  const int seals[] = {-1, 0, F_SEAL_SHRINK, F_SEAL_SHRINK | F_SEAL_GROW,
                       F_SEAL_GROW | F_SEAL_SEAL, F_SEAL_SEAL};
  for (size_t i = 0; i < sizeof(seals) / sizeof(seals[0]); i++) {
    tg_smb_offer_t o = sound();
    o.seals = seals[i];
    assert_non_null(tg__smb_offer_refusal(&o));
  }
}

static void offer_not_read_write_regular_shmem_is_refused(void **state) {
  (void)state;
  tg_smb_offer_t o = sound();
  o.access_mode = O_RDONLY;
  assert_non_null(tg__smb_offer_refusal(&o));
  o = sound();
  o.access_mode = -1;
  assert_non_null(tg__smb_offer_refusal(&o));
  o = sound();
  o.regular = false;
  assert_non_null(tg__smb_offer_refusal(&o));
  o = sound();
  o.on_shmem = false; /* hugetlbfs */
  assert_non_null(tg__smb_offer_refusal(&o));
}

static void offer_of_bad_size_is_refused(void **state) {
  (void)state;
  const int64_t sizes[] = {0, -1, 4 * KB - 1, 36 * KB + 2,
                           32u * KB * KB + 4 * KB, 64u * KB * KB};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    tg_smb_offer_t o = sound();
    o.size = sizes[i];
    o.size_hint = 0;
    assert_non_null(tg__smb_offer_refusal(&o));
  }
  tg_smb_offer_t o = sound();
  o.size_hint = 128 * KB; /* not what the file is */
  assert_non_null(tg__smb_offer_refusal(&o));
}

static void offer_of_bad_page_size_is_refused(void **state) {
  (void)state;
  const uint64_t pages[] = {0, 1, 2 * KB, 6 * KB, 12 * KB, 64 * KB,
                            1ull << 40};
  for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
    tg_smb_offer_t o = sound();
    o.page_hint = pages[i];
    assert_non_null(tg__smb_offer_refusal(&o));
  }
  tg_smb_offer_t o = sound();
  o.size = o.size_hint = 40 * KB; /* not a multiple of 16 KiB */
  o.page_hint = 16 * KB;
  assert_non_null(tg__smb_offer_refusal(&o));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(offer_sealed_memfd_of_valid_geometry_is_adopted),
      cmocka_unit_test(offer_without_all_three_seals_is_refused),
      cmocka_unit_test(offer_not_read_write_regular_shmem_is_refused),
      cmocka_unit_test(offer_of_bad_size_is_refused),
      cmocka_unit_test(offer_of_bad_page_size_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
