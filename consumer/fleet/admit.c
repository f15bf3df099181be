/* A fleet's admission windows: see admit.h. */
#include "consumer/fleet/admit.h"

void tg_fleet_admit_init(tg_fleet_admit_t *a, size_t n, size_t start_max,
                         size_t burst_max) {
  *a = (tg_fleet_admit_t){
      .n = n,
      .start_max = start_max ? start_max : TG_FLEET_STARTING_MAX,
      .burst_max = burst_max ? burst_max : TG_FLEET_BURSTING_MAX,
  };
}

bool tg_fleet_admit_start(tg_fleet_admit_t *a, size_t *index) {
  if (a->halted || a->starting >= a->start_max || a->next_start >= a->n)
    return false;
  *index = a->next_start++;
  a->starting++;
  return true;
}

bool tg_fleet_admit_burst(tg_fleet_admit_t *a, size_t *index) {
  if (a->bursting >= a->burst_max || a->next_burst >= a->n) return false;
  *index = a->next_burst++;
  a->bursting++;
  return true;
}

void tg_fleet_admit_release(tg_fleet_admit_t *a, tg_fleet_slot_t *slot) {
  /* A count never goes below zero, whatever a caller's slip. */
  if (*slot == TG_FLEET_SLOT_STARTING && a->starting) a->starting--;
  if (*slot == TG_FLEET_SLOT_BURSTING && a->bursting) a->bursting--;
  *slot = TG_FLEET_SLOT_NONE;
}
