/*
 * packet.c: the packet free list.
 *
 * Packets are carved from 64-byte aligned chunks of DLCP_SIM_PACKET_CHUNK
 * two-line records (see packet.h for the layout); freed
 * packets go back on a singly linked free list and are reused LIFO, which
 * keeps the working set hot in cache.  Chunks are only released when the
 * pool is destroyed, so the steady state does no allocation at all.
 */
#include "sim/packet.h"

#include <string.h>

#include "sim/engine.h"

#define DLCP_SIM_PACKET_CHUNK 1024u

void dlcp_sim_packet_pool_init(dlcp_sim_packet_pool *pool,
                               const dlcp_mem *mem) {
  memset(pool, 0, sizeof(*pool));
  pool->mem = dlcp_sim_mem(mem);
}

void dlcp_sim_packet_pool_free(dlcp_sim_packet_pool *pool) {
  for (size_t i = 0; i < pool->nchunks; i++) {
    pool->mem->free(pool->chunks[i], pool->mem->user);
  }
  if (pool->chunks) {
    pool->mem->free(pool->chunks, pool->mem->user);
  }
  pool->chunks = NULL;
  pool->nchunks = pool->chunks_cap = 0;
  pool->free_list = NULL;
}

static int pool_grow(dlcp_sim_packet_pool *pool) {
  if (pool->nchunks == pool->chunks_cap) {
    size_t ncap = pool->chunks_cap ? pool->chunks_cap * 2 : 16;
    void **nchunks = pool->mem->realloc(pool->chunks, ncap * sizeof(void *),
                                        pool->mem->user);
    if (!nchunks) {
      return DLCP_ERR_NOMEM;
    }
    pool->chunks = nchunks;
    pool->chunks_cap = ncap;
  }
  /* Over-allocate by one line so packets start on 64-byte boundaries. */
  uint8_t *raw = pool->mem->malloc(
      DLCP_SIM_PACKET_CHUNK * sizeof(dlcp_sim_packet) + 64, pool->mem->user);
  if (!raw) {
    return DLCP_ERR_NOMEM;
  }
  pool->chunks[pool->nchunks++] = raw;
  dlcp_sim_packet *chunk =
      (dlcp_sim_packet *)(void *)(raw + (64 - (uintptr_t)raw % 64) % 64);
  for (size_t i = 0; i < DLCP_SIM_PACKET_CHUNK; i++) {
    chunk[i].next = pool->free_list;
    pool->free_list = &chunk[i];
  }
  return 0;
}

dlcp_sim_packet *dlcp_sim_packet_alloc(dlcp_sim_packet_pool *pool) {
  if (!pool->free_list && pool_grow(pool) != 0) {
    return NULL;
  }
  dlcp_sim_packet *pkt = pool->free_list;
  pool->free_list = pkt->next;
  memset(pkt, 0, sizeof(*pkt));
  pool->live++;
  if (pool->live > pool->peak) {
    pool->peak = pool->live;
  }
  return pkt;
}

void dlcp_sim_packet_free(dlcp_sim_packet_pool *pool, dlcp_sim_packet *pkt) {
  if (pkt->kind == DLCP_SIM_PKT_INA && pool->release_ina) {
    pool->release_ina(pool->release_ctx, pkt);
  }
  pkt->next = pool->free_list;
  pool->free_list = pkt;
  pool->live--;
}
