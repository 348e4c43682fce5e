/*
 * Shared-memory datagram rings (see shm.h).  Layout of a segment: a
 * header, then one ring per rank of the world; a ring is two cache lines
 * (the producer's tail, the consumer's head) and DLCP_SHM_SLOTS slots of
 * a length word and DLCP_SHM_SLOT_DATA bytes.  Indices only grow; the slot
 * of index i is i % DLCP_SHM_SLOTS.  The segment is sparse: only the rings
 * of the peers that share the host are ever mapped, each on its own at a
 * page-aligned offset, so a world of thousands costs a few rings of memory
 * and address space.
 */
#include "rt/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlcp/dlcp_types.h"

#define SHM_MAGIC UINT64_C(0x4d48535f50434c44) /* "DLCP_SHM" */
#define SHM_VERSION 2u
#define LINE 64u
/* Mapping offsets are multiples of this: the largest page size Linux
 * runs with (arm64's 64 KiB), so the layout is the same everywhere. */
#define SHM_ALIGN 65536u
#define HEADER_BYTES SHM_ALIGN
#define SLOT_HDR LINE
#define SLOT_STRIDE ((size_t)SLOT_HDR + DLCP_SHM_SLOT_DATA)
#define RING_BYTES (2u * LINE + (size_t)DLCP_SHM_SLOTS * SLOT_STRIDE)
#define RING_STRIDE                                                            \
  ((RING_BYTES + SHM_ALIGN - 1) / SHM_ALIGN * (size_t)SHM_ALIGN)

struct dlcp_shm_header {
  uint64_t magic;
  uint64_t nonce;
  uint32_t version, job, owner, world, slots, slot_data;
  alignas(LINE) atomic_uint sleeping; /* the consumer stopped looking */
};

struct dlcp_shm_ring {
  alignas(LINE) atomic_uint_fast64_t tail; /* written by the producer */
  alignas(LINE) atomic_uint_fast64_t head; /* written by the consumer */
};

_Static_assert(sizeof(struct dlcp_shm_header) <= HEADER_BYTES,
               "segment header fits its page");
_Static_assert(sizeof(struct dlcp_shm_ring) == 2 * LINE,
               "ring control is two cache lines");

static size_t segment_size(uint32_t world) {
  return HEADER_BYTES + (size_t)world * RING_STRIDE;
}

static off_t ring_offset(uint32_t src) {
  return (off_t)(HEADER_BYTES + (size_t)src * RING_STRIDE);
}

static uint8_t *slot_of(struct dlcp_shm_ring *r, uint64_t index) {
  return (uint8_t *)r + 2 * LINE +
         (size_t)(index % DLCP_SHM_SLOTS) * SLOT_STRIDE;
}

/* Writes every page of a ring just mapped once through this mapping,
 * changing nothing: an atomic add of zero to its first word, so the other
 * end may already be using the ring (its stores and this one are ordered
 * by the cache line, and this one stores what it read).  Populating the
 * mapping is not enough on the VMs we measure on (2 cores, AMD EPYC, a
 * PVM guest: the hypervisor shadows each process's page tables and
 * builds a shadow entry on first use, unseen by the guest): each slot
 * page's first writes through each end's mapping were slow, though the
 * guest counted no page fault, so every new message size in a process
 * took 20-30 operations to warm up, a step per pass round the 32 slots
 * (2 ranks, 32 KiB: ~140, then ~40, then 7 us an operation).
 * MAP_POPULATE alone, MADV_POPULATE_WRITE, or reading each page left it;
 * a store per page from one end only halved it; from both ends, none is
 * left (docs/runtime.md, "Ranks on one host"). */
static void touch_ring(struct dlcp_shm_ring *r) {
  long page = sysconf(_SC_PAGESIZE);
  size_t step = page > 0 ? (size_t)page : 4096u;
  for (size_t off = 0; off < RING_BYTES; off += step) {
    atomic_fetch_add_explicit((_Atomic uint64_t *)((uint8_t *)r + off), 0,
                              memory_order_relaxed);
  }
}

/* Maps the ring |src| writes into, with every page of it in place: else
 * each first use of a slot page costs two page faults, and with 32 slots
 * a ring takes dozens of operations to warm up (measured with 4-rank
 * recursive doubling: with the first 8 KiB in place only, 60 KiB took
 * 500 us against 230 us over TCP).  Populating writes nothing, so either
 * end may map while the other already uses the ring; nor does
 * touch_ring change a byte.  Returns 0, or an error code with |eb| set. */
static int map_ring(int fd, uint32_t src, struct dlcp_shm_ring **ring,
                    dlcp_errbuf *eb) {
  void *r = mmap(NULL, RING_BYTES, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_POPULATE, fd, ring_offset(src));
  if (r == MAP_FAILED) {
    return dlcp_errbuf_set(eb, -errno, "mapping the ring of rank %u: %s", src,
                           strerror(errno));
  }
  touch_ring(r);
  *ring = r;
  return 0;
}

int dlcp_shm_in_create(dlcp_shm_in *in, uint32_t job, uint32_t rank,
                       uint32_t world, uint64_t nonce, dlcp_errbuf *eb) {
  memset(in, 0, sizeof(*in));
  in->fd = -1;
  size_t size = segment_size(world);
  int fd = memfd_create("dlcp-shm", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
    int e = errno;
    if (fd >= 0) {
      close(fd);
    }
    return dlcp_errbuf_set(eb, -e, "shared-memory segment (%zu bytes): %s",
                           size, strerror(e));
  }
  void *base =
      mmap(NULL, HEADER_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    int e = errno;
    close(fd);
    return dlcp_errbuf_set(eb, -e, "mapping the shared-memory segment: %s",
                           strerror(e));
  }
  struct dlcp_shm_header *h = base;
  h->nonce = nonce;
  h->version = SHM_VERSION;
  h->job = job;
  h->owner = rank;
  h->world = world;
  h->slots = DLCP_SHM_SLOTS;
  h->slot_data = DLCP_SHM_SLOT_DATA;
  atomic_store(&h->sleeping, 1u);
  /* The magic last: a peer that sees it sees a complete header. */
  atomic_thread_fence(memory_order_release);
  h->magic = SHM_MAGIC;
  in->hdr = h;
  in->fd = fd;
  in->world = world;
  in->rank = rank;
  in->nonce = nonce;
  return 0;
}

static bool pow2_within(uint32_t d, uint32_t reach) {
  return d != 0 && (d & (d - 1)) == 0 && d <= reach;
}

/* Ranks at distance d or world - d, for d a power of two up to |reach|:
 * each is counted once (world - d may itself be such a power). */
static uint32_t partners_within(uint32_t world, uint32_t reach) {
  uint32_t n = 0;
  for (uint32_t d = 1; d < world && d <= reach; d *= 2) {
    n += pow2_within(world - d, reach) ? 1u : 2u;
  }
  return n;
}

bool dlcp_shm_partners(uint32_t a, uint32_t b, uint32_t world) {
  if (a >= world || b >= world || a == b) {
    return false;
  }
  uint32_t reach = 0;
  for (uint32_t d = 1; d < world && d <= UINT32_MAX / 2; d *= 2) {
    if (partners_within(world, d) > DLCP_SHM_MAX_PEERS) {
      break;
    }
    reach = d;
  }
  uint32_t dist = (uint32_t)(((uint64_t)b + world - a) % world);
  return pow2_within(dist, reach) || pow2_within(world - dist, reach);
}

int dlcp_shm_in_admit(dlcp_shm_in *in, uint32_t src, dlcp_errbuf *eb) {
  if (in->admitted == DLCP_SHM_MAX_PEERS || src >= in->world ||
      src == in->rank) {
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "no ring for rank %u (%u of %u taken)", src,
                           in->admitted, DLCP_SHM_MAX_PEERS);
  }
  int rv = map_ring(in->fd, src, &in->ring[in->admitted], eb);
  if (rv == 0) {
    in->src[in->admitted++] = src;
  }
  return rv;
}

void dlcp_shm_in_close(dlcp_shm_in *in) {
  for (uint32_t i = 0; i < in->admitted; i++) {
    munmap(in->ring[i], RING_BYTES);
  }
  if (in->hdr) {
    munmap(in->hdr, HEADER_BYTES);
  }
  if (in->fd >= 0) {
    close(in->fd);
  }
  memset(in, 0, sizeof(*in));
  in->fd = -1;
}

int dlcp_shm_out_open(dlcp_shm_out *out, pid_t pid, int fd, uint64_t nonce,
                      uint32_t job, uint32_t peer, uint32_t me,
                      uint32_t world, dlcp_errbuf *eb) {
  memset(out, 0, sizeof(*out));
  char path[64];
  snprintf(path, sizeof(path), "/proc/%ld/fd/%d", (long)pid, fd);
  int mfd = open(path, O_RDWR | O_CLOEXEC);
  if (mfd < 0) {
    return dlcp_errbuf_set(eb, -errno, "rank %u's segment %s: %s", peer,
                           path, strerror(errno));
  }
  size_t size = segment_size(world);
  struct stat st;
  if (fstat(mfd, &st) != 0 || st.st_size != (off_t)size) {
    close(mfd);
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "rank %u's segment %s: expected %zu bytes", peer,
                           path, size);
  }
  void *base =
      mmap(NULL, HEADER_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
  if (base == MAP_FAILED) {
    int e = errno;
    close(mfd);
    return dlcp_errbuf_set(eb, -e, "mapping rank %u's segment: %s", peer,
                           strerror(e));
  }
  struct dlcp_shm_header *h = base;
  if (h->magic != SHM_MAGIC || h->nonce != nonce ||
      h->version != SHM_VERSION || h->job != job || h->owner != peer ||
      h->world != world || h->slots != DLCP_SHM_SLOTS ||
      h->slot_data != DLCP_SHM_SLOT_DATA) {
    munmap(base, HEADER_BYTES);
    close(mfd);
    /* Another process's descriptor (a PID namespace, a reused number):
     * the nonce is what tells. */
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "%s is not rank %u's segment of this job", path,
                           peer);
  }
  int rv = map_ring(mfd, me, &out->ring, eb);
  close(mfd);
  if (rv != 0) {
    munmap(base, HEADER_BYTES);
    return rv;
  }
  out->hdr = h;
  out->tail = atomic_load_explicit(&out->ring->tail, memory_order_relaxed);
  return 0;
}

void dlcp_shm_out_close(dlcp_shm_out *out) {
  if (out->hdr) {
    munmap(out->ring, RING_BYTES);
    munmap(out->hdr, HEADER_BYTES);
  }
  memset(out, 0, sizeof(*out));
}

uint32_t dlcp_shm_free_slots(const dlcp_shm_out *out) {
  uint64_t head = atomic_load_explicit(&out->ring->head, memory_order_acquire);
  uint64_t used = out->tail - head;
  return used < DLCP_SHM_SLOTS ? (uint32_t)(DLCP_SHM_SLOTS - used) : 0u;
}

bool dlcp_shm_put(dlcp_shm_out *out, dlcp_shm_kind kind, const uint8_t *hdr,
                  size_t hdr_len, const void *payload, size_t payload_len) {
  struct dlcp_shm_ring *r = out->ring;
  if (hdr_len + payload_len > DLCP_SHM_SLOT_DATA) {
    return false;
  }
  if (dlcp_shm_free_slots(out) == 0) {
    return false;
  }
  uint8_t *slot = slot_of(r, out->tail);
  uint32_t len = (uint32_t)(hdr_len + payload_len), k = (uint32_t)kind;
  memcpy(slot, &len, sizeof(len));
  memcpy(slot + sizeof(len), &k, sizeof(k));
  memcpy(slot + SLOT_HDR, hdr, hdr_len);
  if (payload_len > 0) {
    memcpy(slot + SLOT_HDR + hdr_len, payload, payload_len);
  }
  out->tail++;
  atomic_store_explicit(&r->tail, out->tail, memory_order_release);
  out->dirty = true;
  return true;
}

bool dlcp_shm_needs_doorbell(dlcp_shm_out *out) {
  if (!out->dirty) {
    return false;
  }
  out->dirty = false;
  /* Our tail store, then the consumer's flag: see shm.h. */
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&out->hdr->sleeping, memory_order_relaxed) == 0) {
    return false;
  }
  return atomic_exchange(&out->hdr->sleeping, 0u) != 0;
}

/* The ring rank |src| writes into, NULL if it was not admitted. */
static struct dlcp_shm_ring *ring_from(const dlcp_shm_in *in, uint32_t src) {
  for (uint32_t i = 0; i < in->admitted; i++) {
    if (in->src[i] == src) {
      return in->ring[i];
    }
  }
  return NULL;
}

const uint8_t *dlcp_shm_peek(dlcp_shm_in *in, uint32_t src, size_t *len,
                             dlcp_shm_kind *kind) {
  struct dlcp_shm_ring *r = ring_from(in, src);
  if (!r) {
    return NULL;
  }
  uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
  if (tail == head) {
    return NULL;
  }
  uint8_t *slot = slot_of(r, head);
  uint32_t n, k;
  memcpy(&n, slot, sizeof(n));
  memcpy(&k, slot + sizeof(n), sizeof(k));
  /* The producer is another process: never trust its length. */
  *len = n <= DLCP_SHM_SLOT_DATA ? n : 0;
  *kind = k == DLCP_SHM_CONTROL ? DLCP_SHM_CONTROL : DLCP_SHM_DATAGRAM;
  return slot + SLOT_HDR;
}

bool dlcp_shm_pending(const dlcp_shm_in *in) {
  for (uint32_t i = 0; i < in->admitted; i++) {
    struct dlcp_shm_ring *r = in->ring[i];
    if (atomic_load_explicit(&r->tail, memory_order_relaxed) !=
        atomic_load_explicit(&r->head, memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

void dlcp_shm_release(dlcp_shm_in *in, uint32_t src) {
  struct dlcp_shm_ring *r = ring_from(in, src);
  uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  atomic_store_explicit(&r->head, head + 1, memory_order_release);
}

void dlcp_shm_begin_drain(dlcp_shm_in *in) {
  atomic_store_explicit(&in->hdr->sleeping, 0u, memory_order_relaxed);
}

bool dlcp_shm_try_sleep(dlcp_shm_in *in) {
  atomic_store_explicit(&in->hdr->sleeping, 1u, memory_order_relaxed);
  /* Our flag store, then the producers' tails: see shm.h. */
  atomic_thread_fence(memory_order_seq_cst);
  if (dlcp_shm_pending(in)) {
    atomic_store_explicit(&in->hdr->sleeping, 0u, memory_order_relaxed);
    return false;
  }
  return true;
}
