/*
 * step_table.c: the executor's index of its own waiting steps, by
 * (direction, peer, tag or note value), so that each driver event finds
 * its step in O(1): open addressing over a power-of-two array of step
 * indices (exec.h's hslots).
 */
#include "coll/exec.h"

static int step_dir(const coll_step *st) {
  switch ((coll_step_kind)st->kind) {
  case COLL_STEP_SEND:
    return DIR_SEND;
  case COLL_STEP_RECV:
    return DIR_RECV;
  case COLL_STEP_WAIT_NOTE:
    return DIR_NOTE;
  case COLL_STEP_NOP:
  case COLL_STEP_REDUCE:
  case COLL_STEP_COPY:
  case COLL_STEP_FINISH:
  case COLL_STEP_NOTE:
    break;
  }
  return -1;
}

static uint64_t step_id(const coll_step *st) {
  return st->kind == COLL_STEP_WAIT_NOTE ? st->value : st->tag;
}

static uint32_t key_hash(int dir, uint32_t peer, uint64_t id) {
  /* splitmix64's finaliser: cheap and mixes every input bit. */
  uint64_t x = id ^ ((uint64_t)peer << 32) ^ ((uint64_t)dir << 62);
  x ^= x >> 30;
  x *= UINT64_C(0xbf58476d1ce4e5b9);
  x ^= x >> 27;
  x *= UINT64_C(0x94d049bb133111eb);
  x ^= x >> 31;
  return (uint32_t)x;
}

#define HSLOT_EMPTY UINT32_MAX
#define HSLOT_TOMB (UINT32_MAX - 1)

uint32_t coll_table_find(const dlcp_coll *op, int dir, uint32_t peer,
                           uint64_t id) {
  if (!op->hslots) {
    return COLL_NO_STEP;
  }
  uint32_t h = key_hash(dir, peer, id) & op->hmask;
  for (;;) {
    uint32_t s = op->hslots[h];
    if (s == HSLOT_EMPTY) {
      return COLL_NO_STEP;
    }
    if (s != HSLOT_TOMB) {
      const coll_step *st = &op->plan.steps[s];
      if (step_dir(st) == dir && st->peer == peer && step_id(st) == id) {
        return s;
      }
    }
    h = (h + 1) & op->hmask;
  }
}

/* Inserts step |idx|; DLCP_ERR_INTERNAL if its key is taken (a plan that
 * reuses a tag between the same pair: a builder bug). */
int coll_table_insert(dlcp_coll *op, uint32_t idx) {
  const coll_step *st = &op->plan.steps[idx];
  int dir = step_dir(st);
  if (dir < 0) {
    return 0;
  }
  if (coll_table_find(op, dir, st->peer, step_id(st)) != COLL_NO_STEP) {
    return DLCP_ERR_INTERNAL;
  }
  uint32_t h = key_hash(dir, st->peer, step_id(st)) & op->hmask;
  while (op->hslots[h] != HSLOT_EMPTY && op->hslots[h] != HSLOT_TOMB) {
    h = (h + 1) & op->hmask;
  }
  op->hslots[h] = idx;
  return 0;
}

void coll_table_remove(dlcp_coll *op, uint32_t idx) {
  const coll_step *st = &op->plan.steps[idx];
  int dir = step_dir(st);
  if (dir < 0) {
    return;
  }
  uint32_t h = key_hash(dir, st->peer, step_id(st)) & op->hmask;
  while (op->hslots[h] != HSLOT_EMPTY) {
    if (op->hslots[h] == idx) {
      op->hslots[h] = HSLOT_TOMB;
      return;
    }
    h = (h + 1) & op->hmask;
  }
}
