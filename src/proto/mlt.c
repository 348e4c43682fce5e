/*
 * The MLT connection: transfer bookkeeping, the sender's rounds and the
 * receiver's placement, all driven by the caller's events and clock.
 *
 * Model.  Each transfer is a small state machine.  A sender transfer waits
 * for the receiver's START (WAIT_START), then sends rounds: the first round
 * is every segment in order, later rounds are the missing ranges of the
 * last BITMAP (ACTIVE).  After a round it waits one drain interval for its
 * last packets to land (DRAIN), then PROBEs and waits for the BITMAP
 * (PROBED).  A STOP from the receiver ends it in any state.  A START that
 * arrives before the application posted the send is kept as an UNMATCHED
 * record, so either side may post first.  A receiver transfer is ACTIVE
 * from its post until it holds (1 - p) of the bytes.
 *
 * Output.  Control messages and completions are not queued as bytes:
 * a transfer with something to say sets bits in |pend| and joins the
 * pending list, and dlcp_mlt_poll turns bits into messages when it has a
 * buffer.  That keeps the per-packet path free of allocation and lets
 * several STARTs share one message.  Data packets are produced by poll
 * whenever the pacer allows, from the sending transfer with the most
 * urgent priority (equal priorities: earliest posted first, which finishes
 * tensors one by one instead of all late).
 *
 * Eager transfers.  A transfer no larger than cfg.eager_max_bytes skips
 * the handshake: the sender copies the tensor into one EAGER control
 * message at once and completes; the receiver copies it into the posted
 * buffer, or keeps a copy (UNEXPECTED list) until the matching post.  A
 * receiver that cancels a posted eager receive leaves a TOMB record in its
 * place that swallows the message still on its way, so a later receive
 * with the same tensor id never gets it.  Both ends decide by size alone,
 * so they agree whenever the sizes do.
 *
 * Timers.  Each transfer keeps one deadline; the connection caches the
 * earliest.  A cached value may be too early (a deadline moved later), in
 * which case the scan it triggers finds nothing and recomputes it.
 */
#include "proto/mlt.h"

#include <string.h>

#include "proto/ctlchan.h"
#include "proto/pathset.h"
#include "proto/rate.h"
#include "proto/rng.h"
#include "proto/rtt.h"
#include "proto/tag.h"
#include "wire/bits.h"
#include "wire/wire.h"

/* Early BITMAPs of sprayed packets follow up to this many paths (npaths
 * above: off). */
#define MLT_EARLY_PATHS 8

enum xfer_state {
  X_WAIT_START, /* sender: posted, no START yet */
  X_UNMATCHED,  /* sender: START arrived, not posted yet */
  X_ACTIVE,     /* sender: sending a round; receiver: receiving */
  X_DRAIN,      /* sender: round sent, waiting before PROBE */
  X_PROBED,     /* sender: PROBE sent, waiting for BITMAP or STOP */
  X_DONE,       /* finished; only pending output remains */
  X_TOMB,       /* receiver: a cancelled eager receive whose message may
                   still arrive; swallows it, or expires */
};

/* Pending output, emitted in this order. */
enum {
  PEND_EAGER = 1u << 7, /* sender: the whole tensor as one EAGER message */
  PEND_START = 1u << 0,
  PEND_ACK = 1u << 1,
  PEND_PROBE = 1u << 2,
  PEND_BITMAP = 1u << 3,
  PEND_STOP = 1u << 4,
  PEND_FINISH = 1u << 5,
  PEND_COMPLETE = 1u << 6,
  PEND_OFFER = 1u << 8, /* sender: an OFFER of a send still without START */
};

typedef struct mlt_xfer mlt_xfer;
struct mlt_xfer {
  mlt_xfer *next;      /* conn->sends or conn->recvs */
  mlt_xfer *pend_next; /* conn's pending list */
  bool in_pending;
  bool is_send;
  bool eager; /* goes as one EAGER message (cfg.eager_max_bytes) */
  uint8_t state;
  uint32_t pend;
  int status;

  uint32_t tensor;
  uint32_t id; /* transfer id; 0 until START for a sender */
  uint64_t user_data;
  uint64_t size;
  uint32_t seg_size;
  uint32_t nsegs;
  dlcp_tstamp start_ns;
  dlcp_tstamp end_ns;
  dlcp_tstamp last_progress_ns;
  dlcp_tstamp timer_ns;

  /* sender */
  const uint8_t *sbuf;
  uint32_t layer, nlayers;
  dlcp_mlt_prio_fn prio_fn;
  void *prio_user;
  dlcp_mlt_importance importance;
  uint8_t prio;             /* layer priority when there is no prio_fn */
  uint32_t stage;           /* a collective's stage: a send's priority is
                               this many levels lower; a receive's tells
                               when it shares the link (share) */
  uint64_t *important_bits; /* F32 magnitude mode: bit per segment */
  uint16_t *seg_path;       /* per segment, 1 + the path its last
                               transmission took, 0 once charged as lost
                               or never sent; NULL with one path */
  uint32_t next_seg;        /* first round cursor */
  dlcp_wire_range *retx;    /* later rounds: the missing ranges */
  uint32_t nretx, retx_cap, retx_idx, retx_pos;
  bool retx_round;
  uint32_t seq;
  uint32_t round;
  uint32_t last_have;
  uint32_t noprog_rounds;
  dlcp_duration probe_rto;
  dlcp_duration offer_wait; /* WAIT_START: the wait before the next OFFER */
  uint64_t pkts_sent, retx_sent;
  dlcp_tstamp round_end_ns; /* sender: the last round's last packet left */
  uint64_t acked_pkts; /* of pkts_sent (seq order), out of the window */
  uint64_t peer_bytes; /* from STOP */
  bool stop_seen;      /* UNMATCHED: STOP arrived before the post */
  int stop_status;
  uint32_t unmatched_loss_ppm;

  /* receiver */
  uint8_t *rbuf;
  uint64_t needed_bytes;
  uint64_t *have_bits;
  uint32_t have_segs;
  uint64_t have_bytes;
  uint32_t rx_pkts;
  uint64_t dups;
  uint32_t bitmap_round;
  uint64_t ack_echo_ts;
  dlcp_tstamp ack_arrived; /* when the packet the pending ACK answers
                              reached this host */
  dlcp_tstamp nack_at;     /* receiver: ask for the missing segments then
                              (unprompted BITMAP); 0 = not armed */
  dlcp_tstamp stop_at;     /* receiver: a PROBE found the bound met while
                              data was still arriving; stop then, if it
                              has stopped arriving (0 = not armed) */
  dlcp_tstamp last_data_at; /* when the last DATA packet arrived */
  /* Early BITMAPs.  A path delivers in order and the first round sends
   * the segments in order, so a segment missing below what the first
   * round has passed (seen_end: on every path, the least of path_end, or
   * in bursts the highest segment that arrived) is lost, or overtaken by
   * the reordering window.  Holes below nacked_end have been asked for;
   * those below early_end will be at early_at (0 = not armed); lost_bytes
   * counts the holes [0, seen_end) had when seen_end passed them. */
  uint32_t path_end[MLT_EARLY_PATHS];
  uint32_t seen_end, nacked_end, early_end;
  uint64_t lost_bytes;
  bool no_early; /* a path id beyond npaths: early BITMAPs off */
  uint32_t nack_from; /* the end-of-round BITMAP's window starts here */
  dlcp_tstamp early_at;
  uint32_t bitmap_first, bitmap_end; /* the pending BITMAP's window */
  uint32_t ack_rx_pkts;
  uint32_t ack_seq;
  bool keep_previous;   /* missing ranges keep the buffer's old bytes */
  dlcp_mlt_place_fn place; /* NULL: payloads are copied into rbuf */
  void *place_user;
  bool counted;         /* in the connection's and host's active receives */
  bool sharing;         /* ... and in the connection's rx_sharing: of
                           stage 0, or its data has begun */
  uint32_t ack_covered; /* packets (and CE marks) the pending ACK reports */
  uint32_t ack_ce;
  uint32_t loss_ppm;
  bool rx_seq_seen;     /* rx_top_*: the highest sequence number arrived, */
  uint32_t rx_top_seq;  /* and when, to time a reordering */
  dlcp_tstamp rx_top_at;
  uint64_t rx_top_tx_ts; /* its sender's time stamp, for a quiet ACK */
  dlcp_tstamp ackq_at;   /* receiver: acknowledge what came unacknowledged
                            once nothing has come for the reordering
                            window (0 = not armed) */
};

/* A NOTE of the driver's that came through the control channel, waiting
 * for dlcp_mlt_poll to hand it over (a NOTE has one fixed length). */
typedef struct mlt_note {
  struct mlt_note *next;
  uint8_t bytes[DLCP_WIRE_NOTE_LEN];
} mlt_note;

/* An EAGER message that arrived before its receive was posted. */
typedef struct mlt_unexpected {
  struct mlt_unexpected *next;
  uint32_t tensor;
  uint64_t len;
  uint64_t cap;   /* bytes |data| has room for */
  uint8_t data[]; /* the tensor's bytes */
} mlt_unexpected;

struct dlcp_mlt_conn {
  dlcp_mlt_config cfg;
  const dlcp_mem *mem;
  dlcp_rng rng;
  dlcp_rate rate;
  mlt_xfer *sends; /* posted ones in post order; UNMATCHED records
                     among them in arrival order */
  mlt_xfer *recvs;
  size_t nsends, nrecvs;
  mlt_xfer *pend_head, *pend_tail;
  mlt_xfer *sending;     /* cached choice of the next transfer to send */
  bool resched;          /* |sending| must be recomputed */
  uint64_t inputs;       /* dlcp_mlt_inputs */
  mlt_xfer *last_recv;   /* lookup cache for the data path */
  uint32_t next_xfer_id;
  uint32_t path_rr;
  dlcp_pathset paths; /* which paths the rotation uses (pathset.h) */
  uint32_t ctl_path;  /* the path control datagrams take */
  uint64_t ctl_resent, ctl_trouble; /* the channel's resends, and resends
                                       + duplicates, when last looked at */
  dlcp_tstamp ctl_moved_at;         /* when ctl_path last moved on */
  dlcp_tstamp next_send_ns;
  dlcp_tstamp timer_ns;
  dlcp_duration srtt_ns, rttvar_ns;
  /* The same smoothing of the network's part of the RTT (on_ack). */
  dlcp_duration net_srtt_ns, net_rttvar_ns;
  dlcp_duration reorder_ns; /* receiver: how late an overtaken packet came
                               (a slow average of the worst); 0: none yet */
  dlcp_duration pkt_gap_ns; /* tx time of a full packet at the current
                               rate, recomputed when the rate changes */
  uint64_t inflight_pkts;     /* sent, not yet acknowledged or settled */
  /* The RTT of each priority class's sends alone (window_rtt; srtt 0:
   * no sample yet). */
  dlcp_duration class_srtt_ns[DLCP_WIRE_PRIO_MASK + 1];
  dlcp_duration class_rttvar_ns[DLCP_WIRE_PRIO_MASK + 1];
  uint32_t rx_since_ack;      /* data packets received since our last ACK */
  uint32_t ce_since_ack;      /* of which CE marked */
  uint32_t since_ack_req;     /* data packets sent since one asked for an
                                 ACK */
  dlcp_tstamp window_since_ns; /* last ACK, or the first packet of a window */
  dlcp_tstamp last_send_ns;    /* the last data packet */
  uint32_t rx_active;          /* receives in progress, for grants */
  uint32_t rx_sharing;         /* of which sharing the link now: the
                                  connection is in active_conns */
  uint64_t peer_grant;         /* the peer's latest window grant; 0 none */
  uint32_t start_grant;        /* ours, held in the host's pool until data
                                  arrives */
  bool ctl_on;                 /* control messages go as datagrams */
  dlcp_ctlchan ctl;
  mlt_note *notes_head, *notes_tail; /* the driver's NOTEs received through
                                        |ctl|, until polled */
  dlcp_mlt_range *missing;
  size_t missing_cap;
  mlt_unexpected *unexpected_head, *unexpected_tail; /* arrival order */
  size_t nunexpected;
  /* the block of the last EAGER a receive took from the list, kept for
   * the next one that comes first (unexpected_alloc) */
  mlt_unexpected *unexpected_spare;
  size_t ntombs; /* X_TOMB records among |recvs| */
  dlcp_mlt_stats stats;
};

/* --- helpers ---------------------------------------------------------- */

static dlcp_tstamp add_sat(dlcp_tstamp t, dlcp_duration d) {
  return t > DLCP_TSTAMP_NEVER - d ? DLCP_TSTAMP_NEVER : t + d;
}

static bool bit_get(const uint64_t *w, uint32_t i) {
  return (w[i >> 6] >> (i & 63)) & 1u;
}

static void bit_set(uint64_t *w, uint32_t i) {
  w[i >> 6] |= (uint64_t)1 << (i & 63);
}

static size_t words_for(uint32_t nbits) {
  return ((size_t)nbits + 63) / 64;
}

static uint32_t segs_for(uint64_t size, uint32_t seg_size) {
  return (uint32_t)((size + seg_size - 1) / seg_size);
}

static uint32_t seg_len(const mlt_xfer *x, uint32_t seg) {
  uint64_t off = (uint64_t)seg * x->seg_size;
  uint64_t rem = x->size - off;
  return rem < x->seg_size ? (uint32_t)rem : x->seg_size;
}

/* The receiver's next hole at or after segment |s| and below |to|: the
 * missing segments [*start, *stop).  False when there is none. */
static bool next_hole(const mlt_xfer *x, uint32_t s, uint32_t to,
                      uint32_t *start, uint32_t *stop) {
  *start = dlcp_bits_next_missing(x->have_bits, s, to);
  if (*start == to) {
    return false;
  }
  *stop = dlcp_bits_next_held(x->have_bits, *start + 1, to);
  return true;
}

/* Byte offset of segment |seg|, or the tensor's size for the end. */
static uint64_t seg_offset(const mlt_xfer *x, uint32_t seg) {
  uint64_t off = (uint64_t)seg * x->seg_size;
  return off < x->size ? off : x->size;
}

/* Bytes the receiver must hold before it may stop: size - floor(p * size),
 * computed without overflowing 64 bits. */
/* Priority |prio| lowered by |stage| levels, at most to the lowest. */
static uint8_t lowered(const dlcp_mlt_conn *conn, uint8_t prio,
                       uint32_t stage) {
  uint64_t p = (uint64_t)prio + stage;
  return (uint8_t)(p < conn->cfg.nprio ? p : conn->cfg.nprio - 1);
}

/* Priority |prio| raised by |levels|, at most to the most urgent (0). */
static uint8_t raised(uint8_t prio, uint32_t levels) {
  return (uint8_t)(levels < prio ? prio - levels : 0);
}

static uint64_t needed_bytes(uint64_t size, uint32_t loss_ppm) {
  uint64_t whole = size / DLCP_WIRE_PPM, frac = size % DLCP_WIRE_PPM;
  uint64_t may_lose = whole * loss_ppm + frac * loss_ppm / DLCP_WIRE_PPM;
  return size - may_lose;
}

/* Whether the holes the first round has passed are more
 * than the loss bound lets the receive give up. */
static bool holes_beyond_bound(const mlt_xfer *x) {
  return x->lost_bytes > x->size - x->needed_bytes;
}

/* Where a request for holes not asked for before |from| starts: at
 * |from|, or later, at the first hole the loss bound does not cover.  The
 * holes before that add up to no more than the bound lets the receive give
 * up, so once every hole from there on has arrived the receive holds
 * (1 - p).  The bound is spent on the first holes, and only the excess is
 * asked for: asking for every hole once the bound was exceeded, a transfer
 * that lost a little more than p (half of them where the loss rate is p)
 * retransmitted all it lost, after the round, as if p were 0
 * (docs/protocol.md, "Only the excess").  |from| with p = 0. */
static uint32_t first_hole_to_ask(const mlt_xfer *x, uint32_t from) {
  uint64_t may_lose = x->size - x->needed_bytes;
  uint64_t lost = 0;
  uint32_t start;
  uint32_t stop;
  if (may_lose == 0) {
    return from;
  }
  for (uint32_t s = 0; next_hole(x, s, x->nsegs, &start, &stop); s = stop) {
    for (uint32_t k = start; k < stop; k++) {
      lost += seg_offset(x, k + 1) - seg_offset(x, k);
      if (lost > may_lose) {
        return k > from ? k : from;
      }
    }
  }
  return x->nsegs > from ? x->nsegs : from;
}

/* A BITMAP of every missing segment is on its way: no early one need ask
 * for the holes it names. */
static void covered_by_full_bitmap(mlt_xfer *x) {
  x->nacked_end = x->nsegs;
  x->early_at = 0;
}

/* The bytes of the segments missing in [from, to). */
static uint64_t missing_bytes(const mlt_xfer *x, uint32_t from, uint32_t to) {
  uint64_t n = 0;
  uint32_t start;
  uint32_t stop;
  for (uint32_t s = from; next_hole(x, s, to, &start, &stop); s = stop) {
    n += seg_offset(x, stop) - seg_offset(x, start);
  }
  return n;
}

/* A first-round packet of segment |seg| came on |path|: whether the
 * segments the first round has passed (seen_end) went further, the holes
 * they passed counted in lost_bytes.  Sprayed a packet per path
 * (path_burst 1), the paths overtake one another all the time, so a
 * segment is passed once every path has delivered a later one.  Sent in
 * bursts (the runtime's send batches, docs/runtime.md "Paths"), paths
 * overtake one another only where a burst ends, which the reordering
 * window covers, so the segments below the highest one that arrived are
 * passed: the least of the paths' ends waits (npaths - 1) bursts for a
 * path's next one, which left a transfer of a few hundred packets no hole
 * asked for before its round's end (docs/protocol.md, "Early BITMAPs and
 * path bursts"). */
static bool passed_by_first_round(const dlcp_mlt_conn *conn, mlt_xfer *x,
                                  uint32_t seg, uint8_t path) {
  uint32_t passed = seg + 1;
  if (conn->cfg.path_burst == 1) {
    uint32_t npaths = conn->cfg.npaths;
    if (x->no_early || npaths > MLT_EARLY_PATHS || path >= npaths) {
      x->no_early = true;
      return false;
    }
    if (seg + 1 > x->path_end[path]) {
      x->path_end[path] = seg + 1;
    }
    passed = x->path_end[0];
    for (uint32_t p = 1; p < npaths; p++) {
      passed = x->path_end[p] < passed ? x->path_end[p] : passed;
    }
  }
  if (passed <= x->seen_end) {
    return false;
  }
  x->lost_bytes += missing_bytes(x, x->seen_end, passed);
  x->seen_end = passed;
  return true;
}

static void set_timer(dlcp_mlt_conn *conn, mlt_xfer *x, dlcp_tstamp t) {
  x->timer_ns = t;
  if (t < conn->timer_ns) {
    conn->timer_ns = t;
  }
}

static void pend(dlcp_mlt_conn *conn, mlt_xfer *x, uint32_t bits) {
  x->pend |= bits;
  if (x->in_pending) {
    return;
  }
  x->in_pending = true;
  x->pend_next = NULL;
  if (conn->pend_tail) {
    conn->pend_tail->pend_next = x;
  } else {
    conn->pend_head = x;
  }
  conn->pend_tail = x;
}

static void unlink_xfer(dlcp_mlt_conn *conn, mlt_xfer *x) {
  mlt_xfer **pp = x->is_send ? &conn->sends : &conn->recvs;
  for (; *pp; pp = &(*pp)->next) {
    if (*pp == x) {
      *pp = x->next;
      break;
    }
  }
  x->next = NULL;
  if (x->is_send) {
    conn->nsends--;
  } else {
    conn->nrecvs--;
  }
  if (conn->sending == x) {
    conn->sending = NULL;
  }
  if (conn->last_recv == x) {
    conn->last_recv = NULL;
  }
  conn->resched = true;
}

/* Puts send |x| last in conn->sends. */
static void append_send(dlcp_mlt_conn *conn, mlt_xfer *x) {
  mlt_xfer **pp = &conn->sends;
  while (*pp) {
    pp = &(*pp)->next;
  }
  *pp = x;
  conn->nsends++;
}

static void xfer_free(dlcp_mlt_conn *conn, mlt_xfer *x) {
  const dlcp_mem *m = conn->mem;
  m->free(x->important_bits, m->user);
  m->free(x->seg_path, m->user);
  m->free(x->retx, m->user);
  m->free(x->have_bits, m->user);
  m->free(x, m->user);
}

static mlt_xfer *find_send(dlcp_mlt_conn *conn, uint32_t id) {
  for (mlt_xfer *x = conn->sends; x; x = x->next) {
    if (x->id == id && x->state != X_WAIT_START) {
      return x;
    }
  }
  return NULL;
}

static mlt_xfer *find_recv(dlcp_mlt_conn *conn, uint32_t id) {
  if (conn->last_recv && conn->last_recv->id == id) {
    return conn->last_recv;
  }
  for (mlt_xfer *x = conn->recvs; x; x = x->next) {
    if (x->id == id) {
      conn->last_recv = x;
      return x;
    }
  }
  return NULL;
}

/* Ends a transfer: it leaves the lookup lists at once (later packets for it
 * are stale and never touch its buffer) and its remaining output is
 * |extra| followed by the completion. */
/* Takes what |x| sent out of the connection's in-flight count: at the
 * end of a round (its BITMAP accounts for everything sent before) and at
 * the end of the transfer, every packet is either delivered or lost. */
static void settle(dlcp_mlt_conn *conn, mlt_xfer *x) {
  uint64_t out = x->pkts_sent - x->acked_pkts;
  conn->inflight_pkts = out < conn->inflight_pkts ? conn->inflight_pkts - out
                                                  : 0;
  x->acked_pkts = x->pkts_sent;
}

/* Zero-fills what a successful receive is missing, now, while the buffer
 * is certainly still posted: after this the connection never touches it
 * again, even if the completion is polled much later. */
static void zero_missing(mlt_xfer *x) {
  uint32_t start;
  uint32_t stop;
  for (uint32_t s = 0; next_hole(x, s, x->nsegs, &start, &stop); s = stop) {
    uint64_t off = seg_offset(x, start);
    memset(x->rbuf + off, 0, (size_t)(seg_offset(x, stop) - off));
  }
}

/* Returns the connection's START grant to the host's pool: its data is
 * flowing (ACKs grant from now on) or it receives nothing more. */
static void release_start_grant(dlcp_mlt_conn *conn) {
  dlcp_mlt_rx_share *sh = conn->cfg.rx_share;
  if (sh && conn->start_grant) {
    sh->granted = sh->granted > conn->start_grant
                      ? sh->granted - conn->start_grant
                      : 0;
  }
  conn->start_grant = 0;
}

/* Counts receive |x| among those sharing the link now, which puts its
 * connection in the host's active_conns. */
static void share(dlcp_mlt_conn *conn, mlt_xfer *x) {
  if (!x->counted || x->sharing) {
    return;
  }
  x->sharing = true;
  if (conn->rx_sharing++ == 0 && conn->cfg.rx_share) {
    conn->cfg.rx_share->active_conns++;
  }
}

/* Takes a receive out of the active counts that grants divide by. */
static void uncount(dlcp_mlt_conn *conn, mlt_xfer *x) {
  if (!x->counted) {
    return;
  }
  x->counted = false;
  if (x->sharing) {
    x->sharing = false;
    if (--conn->rx_sharing == 0 && conn->cfg.rx_share &&
        conn->cfg.rx_share->active_conns > 0) {
      conn->cfg.rx_share->active_conns--;
    }
  }
  if (--conn->rx_active == 0) {
    release_start_grant(conn);
  }
  if (conn->cfg.rx_share && conn->cfg.rx_share->active > 0) {
    conn->cfg.rx_share->active--;
  }
}

/* Two BDPs times |share|, at least the window floor, in bytes. */
static uint32_t share_of_pool(const dlcp_mlt_conn *conn, double share) {
  double g = 2.0 * (double)conn->cfg.rx_share->bdp_bytes * share;
  if (g < (double)conn->cfg.min_window_bytes) {
    g = (double)conn->cfg.min_window_bytes;
  }
  return g >= (double)UINT32_MAX ? UINT32_MAX : (uint32_t)g;
}

/* The window an ACK grants the peer, in bytes (0: none): the pool shared
 * equally among the connections with receives sharing the link (share),
 * however many each has.  Shared by receives, a collective's receives
 * posted ahead for later steps (a halving-doubling rank posts 16 from one
 * peer and 8 from the other) held the step in progress to a third of the
 * pool, under one BDP (issue 14); shared by every connection with
 * receives posted, to half of it, one BDP, which its ACK every 10 packets
 * does not keep full (a 4 MiB halving-doubling on the simulated 4-host 10
 * Gbit/s testbed, docs/protocol.md).  Shared only among connections whose
 * data has begun, the first of a parameter server's incast got the whole
 * pool and its port overflowed as the others began (the default
 * scenario: 14,723 buffer drops against none): so stage 0 shares from the
 * post, later stages from their first packet. */
static uint32_t ack_grant_bytes(const dlcp_mlt_conn *conn) {
  const dlcp_mlt_rx_share *sh = conn->cfg.rx_share;
  if (!sh || sh->bdp_bytes == 0 || conn->rx_active == 0) {
    return 0;
  }
  if (conn->rx_sharing == 0 || sh->active_conns == 0) {
    /* Only receives of later stages, none begun: a peer running ahead. */
    return share_of_pool(conn, 0.0);
  }
  return share_of_pool(conn, 1.0 / (double)sh->active_conns);
}

/* The window a START grants, in bytes (0: none): the pool shared among
 * the receives posted on the host, since their data may all begin at
 * once (an incast posts them together). */
static uint32_t grant_bytes(const dlcp_mlt_conn *conn) {
  const dlcp_mlt_rx_share *sh = conn->cfg.rx_share;
  if (!sh || sh->bdp_bytes == 0 || sh->active == 0 || conn->rx_active == 0) {
    return 0;
  }
  return share_of_pool(conn, (double)conn->rx_active / (double)sh->active);
}

/* A START's grant: the fair share, within what other connections'
 * STARTs left of the pool.  The peer's window follows the latest grant of
 * the connection, so the connection holds one amount in the pool, which
 * a later START replaces. */
static uint32_t start_grant_bytes(dlcp_mlt_conn *conn) {
  uint32_t g = grant_bytes(conn);
  dlcp_mlt_rx_share *sh = conn->cfg.rx_share;
  if (g == 0) {
    return 0;
  }
  if (conn->rx_sharing == 0) {
    /* Only later stages, posted ahead: their data cannot begin before
     * the stages in progress end (one peer per stage), so they hold
     * nothing of the pool and are granted the share they will have
     * beside those sharing now. */
    return share_of_pool(conn, 1.0 / (double)(sh->active_conns + 1));
  }
  uint64_t others = sh->granted > conn->start_grant
                        ? sh->granted - conn->start_grant
                        : 0;
  uint64_t pool = 2 * sh->bdp_bytes;
  uint64_t left = pool > others ? pool - others : 0;
  if (left < conn->cfg.min_window_bytes) {
    left = conn->cfg.min_window_bytes;
  }
  if (left < g) {
    g = (uint32_t)left;
  }
  sh->granted = others + g;
  conn->start_grant = g;
  return g;
}

static void finish(dlcp_mlt_conn *conn, mlt_xfer *x, int status,
                   uint32_t extra, dlcp_tstamp now) {
  uncount(conn, x);
  if (!x->is_send && status == 0 && x->have_segs < x->nsegs &&
      !x->keep_previous) {
    zero_missing(x);
  }
  if (x->is_send) {
    settle(conn, x);
  }
  x->status = status;
  x->state = X_DONE;
  x->end_ns = now;
  x->timer_ns = DLCP_TSTAMP_NEVER;
  unlink_xfer(conn, x);
  pend(conn, x, extra | PEND_COMPLETE);
}

/* A status a peer reported is passed on when it is one of ours, so a size
 * mismatch reads as such on both ends. */
static int peer_status(int32_t st) {
  if (st <= DLCP_ERR_INVALID_ARGUMENT && st >= DLCP_ERR_SYSTEM) {
    return st;
  }
  return DLCP_ERR_PEER_ABORTED;
}

/* --- configuration ------------------------------------------------------ */

void dlcp_mlt_config_default(dlcp_mlt_config *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  dlcp_rate_params rp;
  dlcp_rate_params_default(&rp, 10000000000ull);
  cfg->job = 1;
  cfg->segment_size = 1456; /* 1500-byte MTU - IPv4 - UDP - MLT header */
  cfg->npaths = 4;
  cfg->nroutes = 1;
  cfg->path_burst = 1;
  cfg->nprio = 8;
  cfg->line_rate_bps = rp.line_rate_bps;
  cfg->min_rate_bps = rp.min_rate_bps;
  cfg->t_low_ns = rp.t_low_ns;
  cfg->t_high_ns = rp.t_high_ns;
  cfg->queue_pkts = rp.queue_pkts;
  cfg->alpha_bps = rp.alpha_bps;
  cfg->beta = rp.beta;
  cfg->ecn_gain = rp.ecn_gain;
  cfg->min_window_bytes = rp.min_window_bytes;
  cfg->initial_window_bytes = 0;
  cfg->ack_every = 10;
  cfg->burst_pkts = 16;
  cfg->initial_rtt_ns = 50000;
  cfg->min_drain_ns = 20000;
  cfg->probe_timeout_ns = 1000000;
  cfg->max_probe_timeout_ns = 200000000;
  cfg->control_ack_delay_ns = 1000000;
  cfg->datagram_max = DLCP_WIRE_DGRAM_MAX;
  cfg->stall_timeout_ns = 10000000000ull;
  cfg->max_rounds_without_progress = 16;
  cfg->max_transfers = 1024;
  cfg->seed = 1;
}

/* The controller's parameters: the configured ones, and its own defaults
 * for those the connection does not expose (hai_after, delay_filter). */
static void rate_params_of(dlcp_rate_params *rp, const dlcp_mlt_config *cfg) {
  dlcp_rate_params_default(rp, cfg->line_rate_bps);
  rp->line_rate_bps = cfg->line_rate_bps;
  rp->min_rate_bps = cfg->min_rate_bps;
  rp->t_low_ns = cfg->t_low_ns;
  rp->t_high_ns = cfg->t_high_ns;
  rp->queue_pkts = cfg->queue_pkts;
  rp->pkt_bytes = cfg->segment_size + DLCP_WIRE_DATA_HDR_LEN;
  rp->alpha_bps = cfg->alpha_bps;
  rp->beta = cfg->beta;
  rp->ecn_gain = cfg->ecn_gain;
  rp->ack_every = cfg->ack_every;
  rp->min_window_bytes = cfg->min_window_bytes;
  rp->initial_window_bytes = cfg->initial_window_bytes;
  rp->rise_to_share = cfg->rise_to_share;
  if (rp->initial_window_bytes == 0) {
    double bdp = (double)cfg->line_rate_bps * (double)cfg->initial_rtt_ns / 8e9;
    rp->initial_window_bytes = bdp < 1.0 ? 1 : bdp >= 1.8e19 ? UINT64_MAX
                                                             : (uint64_t)bdp;
  }
}

int dlcp_mlt_config_check(const dlcp_mlt_config *cfg) {
  dlcp_rate_params rp;
  rate_params_of(&rp, cfg);
  if (dlcp_rate_params_check(&rp) != 0 ||
      cfg->segment_size < DLCP_WIRE_MIN_SEG ||
      cfg->segment_size > DLCP_WIRE_MAX_SEG ||
      cfg->datagram_max > DLCP_WIRE_DGRAM_MAX ||
      cfg->segment_size + DLCP_WIRE_DATA_HDR_LEN > cfg->datagram_max ||
      cfg->npaths == 0 || cfg->npaths > 256 || cfg->nroutes == 0 ||
      cfg->nroutes > DLCP_PATHSET_MAX_ROUTES || cfg->path_burst == 0 ||
      cfg->path_burst > 65536 || cfg->nprio == 0 ||
      cfg->nprio > DLCP_WIRE_PRIO_MASK + 1 || cfg->ack_every == 0 ||
      cfg->burst_pkts == 0 || cfg->initial_rtt_ns == 0 ||
      cfg->probe_timeout_ns == 0 ||
      cfg->max_probe_timeout_ns < cfg->probe_timeout_ns ||
      cfg->stall_timeout_ns == 0 || cfg->max_rounds_without_progress == 0 ||
      cfg->max_transfers == 0 ||
      cfg->eager_max_bytes > DLCP_WIRE_CTRL_MAX - DLCP_WIRE_EAGER_HDR_LEN ||
      (cfg->control_datagrams &&
       cfg->eager_max_bytes > DLCP_MLT_CTL_DGRAM_EAGER_MAX)) {
    return DLCP_ERR_CONFIG;
  }
  return 0;
}

static void update_pkt_gap(dlcp_mlt_conn *conn) {
  conn->pkt_gap_ns = dlcp_rate_tx_time(
      &conn->rate, (uint64_t)conn->cfg.segment_size + DLCP_WIRE_DATA_HDR_LEN);
}

int dlcp_mlt_conn_new(dlcp_mlt_conn **pconn, const dlcp_mlt_config *cfg,
                      const dlcp_mem *mem, dlcp_tstamp now) {
  (void)now;
  if (!pconn || !cfg) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  int rv = dlcp_mlt_config_check(cfg);
  if (rv != 0) {
    return rv;
  }
  if (!mem) {
    mem = dlcp_mem_default();
  }
  dlcp_mlt_conn *conn = mem->calloc(1, sizeof(*conn), mem->user);
  if (!conn) {
    return DLCP_ERR_NOMEM;
  }
  conn->cfg = *cfg;
  conn->mem = mem;
  if (dlcp_pathset_init(&conn->paths, mem, cfg->npaths, cfg->nroutes) != 0) {
    mem->free(conn, mem->user);
    return DLCP_ERR_NOMEM;
  }
  dlcp_rng_seed(&conn->rng, cfg->seed);
  dlcp_rate_params rp;
  rate_params_of(&rp, cfg);
  dlcp_rate_init(&conn->rate, &rp);
  update_pkt_gap(conn);
  conn->next_xfer_id = 1;
  conn->timer_ns = DLCP_TSTAMP_NEVER;
  conn->srtt_ns = cfg->initial_rtt_ns;
  conn->rttvar_ns = cfg->initial_rtt_ns / 2;
  conn->net_srtt_ns = conn->srtt_ns;
  conn->net_rttvar_ns = conn->rttvar_ns;
  /* Each connection's control channel starts on a path of its own: with
   * every one on path 0, a simulated leaf-spine that routes by path id
   * carried all the pairs' control traffic over one spine. */
  conn->ctl_path =
      (uint32_t)(dlcp_rng_mix(cfg->seed ^ 0xC71Aull) % cfg->npaths);
  conn->ctl_on = cfg->control_datagrams;
  if (conn->ctl_on) {
    /* A control datagram no larger than a full data packet fits the
     * path's frame as the data does; longer messages go in pieces.  Its
     * timeouts are no shorter than the data path's drain. */
    dlcp_ctlchan_init(&conn->ctl, mem, cfg->job, cfg->control_ack_delay_ns,
                      cfg->min_drain_ns,
                      cfg->segment_size + DLCP_WIRE_DATA_HDR_LEN -
                          DLCP_WIRE_CDATA_HDR_LEN);
  }
  *pconn = conn;
  return 0;
}

void dlcp_mlt_conn_del(dlcp_mlt_conn *conn) {
  if (!conn) {
    return;
  }
  mlt_xfer *x, *next;
  for (x = conn->sends; x; x = next) {
    next = x->next;
    if (!x->in_pending) {
      xfer_free(conn, x);
    }
  }
  for (x = conn->recvs; x; x = next) {
    next = x->next;
    if (!x->in_pending) {
      xfer_free(conn, x);
    }
  }
  for (x = conn->pend_head; x; x = next) {
    next = x->pend_next;
    xfer_free(conn, x);
  }
  while (conn->unexpected_head) {
    mlt_unexpected *u = conn->unexpected_head;
    conn->unexpected_head = u->next;
    conn->mem->free(u, conn->mem->user);
  }
  conn->mem->free(conn->unexpected_spare, conn->mem->user);
  while (conn->notes_head) {
    mlt_note *k = conn->notes_head;
    conn->notes_head = k->next;
    conn->mem->free(k, conn->mem->user);
  }
  if (conn->ctl_on) {
    dlcp_ctlchan_fini(&conn->ctl);
  }
  dlcp_pathset_fini(&conn->paths, conn->mem);
  conn->mem->free(conn->missing, conn->mem->user);
  conn->mem->free(conn, conn->mem->user);
}

/* --- sender ------------------------------------------------------------- */

/* Tags segments by gradient magnitude (MLT seed 4.2.2.1).  Needs whole
 * floats per segment; otherwise every packet stays important. */
static int tag_importance(dlcp_mlt_conn *conn, mlt_xfer *x) {
  if (x->importance != DLCP_MLT_IMPORTANCE_F32_MAGNITUDE || x->nsegs == 0) {
    return 0;
  }
  if (x->seg_size % sizeof(float) != 0 || x->size % sizeof(float) != 0) {
    x->importance = DLCP_MLT_IMPORTANCE_ALL;
    return 0;
  }
  const dlcp_mem *m = conn->mem;
  size_t count = (size_t)(x->size / sizeof(float));
  size_t nsample = dlcp_tag_sample_size(count, DLCP_TAG_SAMPLE_PERMILLE);
  float *scratch = m->malloc(nsample * sizeof(float), m->user);
  x->important_bits = m->calloc(words_for(x->nsegs), sizeof(uint64_t),
                                m->user);
  if (!scratch || !x->important_bits) {
    m->free(scratch, m->user);
    return DLCP_ERR_NOMEM;
  }
  /* The buffer is read through memcpy inside the tag functions, so a
   * float pointer into a byte buffer never dereferences misaligned. */
  const float *g = (const float *)(const void *)x->sbuf;
  float median = dlcp_tag_median_abs_f32(g, count, DLCP_TAG_SAMPLE_PERMILLE,
                                         &conn->rng, scratch);
  m->free(scratch, m->user);
  for (uint32_t s = 0; s < x->nsegs; s++) {
    size_t first = (size_t)((uint64_t)s * x->seg_size / sizeof(float));
    size_t n = seg_len(x, s) / sizeof(float);
    if (dlcp_tag_mean_abs_above(g + first, n, median)) {
      bit_set(x->important_bits, s);
    }
  }
  return 0;
}

static void start_round(dlcp_mlt_conn *conn, mlt_xfer *x, dlcp_tstamp now) {
  x->state = X_ACTIVE;
  x->timer_ns = DLCP_TSTAMP_NEVER;
  conn->resched = true;
  if (x->nsegs == 0 || (x->retx_round && x->nretx == 0)) {
    x->state = X_DRAIN;
    set_timer(conn, x, now);
  }
}

/* The receiver's START met the application's post: check they agree and
 * begin the first round. */
static void match(dlcp_mlt_conn *conn, mlt_xfer *x, uint32_t id,
                  uint64_t size, uint32_t seg_size, dlcp_tstamp now) {
  x->id = id;
  x->seg_size = seg_size;
  x->last_progress_ns = now;
  x->probe_rto = conn->cfg.probe_timeout_ns;
  if (size != x->size) {
    finish(conn, x, DLCP_ERR_SIZE_MISMATCH, PEND_FINISH, now);
    return;
  }
  x->nsegs = segs_for(size, seg_size);
  int rv = tag_importance(conn, x);
  if (rv == 0 && conn->cfg.npaths > 1 && x->nsegs > 0) {
    x->seg_path =
        conn->mem->calloc(x->nsegs, sizeof(*x->seg_path), conn->mem->user);
    rv = x->seg_path ? 0 : DLCP_ERR_NOMEM;
  }
  if (rv != 0) {
    finish(conn, x, rv, PEND_FINISH, now);
    return;
  }
  if (x->stop_seen) {
    finish(conn, x, x->stop_status, 0, now);
    return;
  }
  start_round(conn, x, now);
}

bool dlcp_mlt_config_eager(const dlcp_mlt_config *cfg, uint64_t len) {
  return cfg->eager_max_bytes > 0 && len <= cfg->eager_max_bytes;
}

static bool is_eager(const dlcp_mlt_conn *conn, uint64_t len) {
  return dlcp_mlt_config_eager(&conn->cfg, len);
}

/* A send waiting for its START fails at the stall timeout.  With eager
 * transfers on, it OFFERs itself before that, after 1/64 of the timeout
 * and then after twice as long each time: a receive of the same tensor
 * posted at the eager size waits for an EAGER that never comes and would
 * send no START, so without it both ends would wait out the timeout.  The
 * first OFFER comes far beyond a START's round trip, so a run whose
 * receives are posted in time sends none. */
static void arm_wait_start(dlcp_mlt_conn *conn, mlt_xfer *x, dlcp_tstamp now) {
  dlcp_tstamp stall = add_sat(x->start_ns, conn->cfg.stall_timeout_ns);
  dlcp_tstamp offer = add_sat(now, x->offer_wait);
  set_timer(conn, x,
            conn->cfg.eager_max_bytes > 0 && offer < stall ? offer : stall);
}

/* The sender's side of an eager transfer is over once its message is
 * queued: the reliable channel delivers it or the driver loses the peer.
 * The record lives only on the pending list, for the message and the
 * completion. */
static int post_eager_send(dlcp_mlt_conn *conn, const dlcp_mlt_send *req,
                           dlcp_tstamp now) {
  mlt_xfer *x = conn->mem->calloc(1, sizeof(*x), conn->mem->user);
  if (!x) {
    return DLCP_ERR_NOMEM;
  }
  x->is_send = true;
  x->eager = true;
  x->tensor = req->tensor;
  x->sbuf = req->buf;
  x->size = req->len;
  x->user_data = req->user_data;
  x->layer = req->layer;
  x->stage = req->stage;
  x->prio = lowered(conn, dlcp_tag_priority(req->layer, req->nlayers,
                                            conn->cfg.nprio), x->stage);
  x->start_ns = now;
  x->end_ns = now;
  x->peer_bytes = req->len;
  x->state = X_DONE;
  x->timer_ns = DLCP_TSTAMP_NEVER;
  pend(conn, x, PEND_EAGER | PEND_COMPLETE);
  return 0;
}

int dlcp_mlt_post_send(dlcp_mlt_conn *conn, const dlcp_mlt_send *req,
                       dlcp_tstamp now) {
  if (!conn || !req || (!req->buf && req->len > 0) ||
      req->importance > DLCP_MLT_IMPORTANCE_NONE) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  conn->inputs++;
  /* An UNMATCHED record of the same tensor is adopted in arrival order. */
  mlt_xfer *x = NULL;
  size_t active = 0;
  for (mlt_xfer *it = conn->sends; it; it = it->next) {
    if (it->state == X_UNMATCHED) {
      if (!x && it->tensor == req->tensor) {
        x = it;
      }
    } else {
      active++;
    }
  }
  if (!x && is_eager(conn, req->len)) {
    return post_eager_send(conn, req, now);
  }
  if (!x) {
    if (conn->nsends >= conn->cfg.max_transfers) {
      return DLCP_ERR_LIMIT;
    }
    x = conn->mem->calloc(1, sizeof(*x), conn->mem->user);
    if (!x) {
      return DLCP_ERR_NOMEM;
    }
    x->is_send = true;
    x->state = X_WAIT_START;
    x->tensor = req->tensor;
    append_send(conn, x);
  } else if (active >= conn->cfg.max_transfers) {
    return DLCP_ERR_LIMIT;
  } else {
    /* The record sat where its START arrived; adopted, it goes behind
     * the sends posted before it (best_send serves equals in list
     * order), so a receiver posting ahead cannot reorder the sender's
     * steps. */
    unlink_xfer(conn, x);
    append_send(conn, x);
  }
  uint64_t size_from_start = x->size;
  x->sbuf = req->buf;
  x->size = req->len;
  x->user_data = req->user_data;
  x->layer = req->layer;
  x->nlayers = req->nlayers;
  x->prio_fn = req->prio_fn;
  x->prio_user = req->prio_user;
  x->importance = req->importance;
  x->stage = req->stage;
  x->prio = lowered(conn, dlcp_tag_priority(req->layer, req->nlayers,
                                            conn->cfg.nprio), x->stage);
  x->start_ns = now;
  if (x->state == X_UNMATCHED) {
    match(conn, x, x->id, size_from_start, x->seg_size, now);
  } else {
    x->offer_wait = conn->cfg.stall_timeout_ns / 64;
    if (x->offer_wait == 0) {
      x->offer_wait = 1; /* a tiny timeout: doubling must still move on */
    }
    arm_wait_start(conn, x, now);
  }
  return 0;
}

static void on_start_entry(dlcp_mlt_conn *conn,
                           const dlcp_wire_start_entry *e, dlcp_tstamp now) {
  conn->peer_grant = e->grant;
  for (mlt_xfer *it = conn->sends; it; it = it->next) {
    if (it->id == e->xfer && it->state != X_WAIT_START) {
      conn->stats.dropped_stale++; /* a repeated START */
      return;
    }
  }
  for (mlt_xfer *it = conn->sends; it; it = it->next) {
    if (it->state == X_WAIT_START && it->tensor == e->tensor) {
      match(conn, it, e->xfer, e->size, e->seg_size, now);
      return;
    }
  }
  if (conn->nsends >= conn->cfg.max_transfers) {
    conn->stats.dropped_invalid++;
    return;
  }
  mlt_xfer *x = conn->mem->calloc(1, sizeof(*x), conn->mem->user);
  if (!x) {
    conn->stats.dropped_invalid++;
    return;
  }
  x->is_send = true;
  x->state = X_UNMATCHED;
  x->tensor = e->tensor;
  x->id = e->xfer;
  x->size = e->size;
  x->seg_size = e->seg_size;
  x->unmatched_loss_ppm = e->loss_ppm;
  x->timer_ns = DLCP_TSTAMP_NEVER;
  append_send(conn, x);
}

/* The active send of the highest priority (the lowest number), first
 * posted among equals; NULL if none. */
static mlt_xfer *best_send(const dlcp_mlt_conn *conn) {
  mlt_xfer *best = NULL;
  for (mlt_xfer *x = conn->sends; x; x = x->next) {
    if (x->state == X_ACTIVE && (!best || x->prio < best->prio)) {
      best = x;
    }
  }
  return best;
}

static void choose_sending(dlcp_mlt_conn *conn) {
  conn->sending = best_send(conn);
  conn->resched = false;
}

uint32_t dlcp_mlt_send_class(const dlcp_mlt_conn *conn) {
  const mlt_xfer *x = conn->resched ? best_send(conn) : conn->sending;
  if (!x) {
    return UINT32_MAX;
  }
  uint64_t done = x->retx_round ? x->size : (uint64_t)x->next_seg * x->seg_size;
  uint64_t left = done < x->size ? x->size - done : 0;
  uint32_t cls = 0;
  while (left) {
    cls++;
    left >>= 1;
  }
  return cls;
}

/* The next segment of the current round, or false if the round is over;
 * |*again| tells a retransmission.  The first round sends the segments the
 * receiver asked for early (x->retx) before its next new one. */
static bool next_segment(mlt_xfer *x, uint32_t *seg, bool *again) {
  *again = x->retx_round || x->retx_idx < x->nretx;
  if (!x->retx_round && x->retx_idx >= x->nretx) {
    if (x->next_seg >= x->nsegs) {
      return false;
    }
    *seg = x->next_seg++;
    return true;
  }
  if (x->retx_idx >= x->nretx) {
    return false;
  }
  /* Ranges are never empty (the decoder rejects them), and the cursor
   * moves past a range as soon as its last segment is taken, so
   * round_done() sees the end of the round right after its last packet. */
  const dlcp_wire_range *r = &x->retx[x->retx_idx];
  *seg = r->start + x->retx_pos++;
  if (x->retx_pos >= r->count) {
    x->retx_idx++;
    x->retx_pos = 0;
  }
  return true;
}

static bool round_done(const mlt_xfer *x) {
  return x->retx_idx >= x->nretx && (x->retx_round || x->next_seg >= x->nsegs);
}

/* srtt + 4 rttvar of an RTT estimate, at least min_drain. */
static dlcp_duration drain_of(const dlcp_mlt_conn *conn, dlcp_duration srtt,
                              dlcp_duration rttvar) {
  dlcp_duration d = dlcp_rtt_timeout(srtt, rttvar);
  return d > conn->cfg.min_drain_ns ? d : conn->cfg.min_drain_ns;
}

static dlcp_duration drain_interval(const dlcp_mlt_conn *conn) {
  return drain_of(conn, conn->srtt_ns, conn->rttvar_ns);
}

/* The drain interval of the network alone (the RTT less the hosts'
 * delay): how long a lost control datagram is waited for before it is sent
 * again.  Too short only costs a duplicate, which the channel drops. */
static dlcp_duration net_drain_interval(const dlcp_mlt_conn *conn) {
  return drain_of(conn, conn->net_srtt_ns, conn->net_rttvar_ns);
}

/* How long a receiver that saw a round's last packet waits for the packets
 * it may have overtaken (other paths, the driver's other receive queues)
 * before asking for what is missing: as long as overtaken packets were
 * seen to come late on this connection, with a quarter more as margin, and
 * min_drain where none did (RACK's reordering window, measured rather than
 * assumed).  It used to be four times the network's RTT variation, which
 * queueing inflates on a path that never reorders: 4 hosts at 10 Gbit/s,
 * HD 4 MiB at 1 % loss in the simulator waited 100-300 us per lost packet
 * for nothing, docs/protocol.md.  Asking too early costs a duplicate. */
static dlcp_duration reorder_guard(const dlcp_mlt_conn *conn) {
  dlcp_duration d = conn->reorder_ns + conn->reorder_ns / 4;
  return d > conn->cfg.min_drain_ns ? d : conn->cfg.min_drain_ns;
}

/* A packet came |late| after one sent later than it: the reordering
 * window jumps to a longer lateness and creeps down to shorter ones. */
static void note_reordering(dlcp_mlt_conn *conn, dlcp_duration late) {
  conn->stats.data_reordered++;
  if (late >= conn->reorder_ns) {
    conn->reorder_ns = late;
  } else {
    conn->reorder_ns -= (conn->reorder_ns - late) / 8;
  }
}

/* The RTT estimate that times the in-flight window out: that of the
 * sending transfer's priority class, from its own ACKs, or the
 * connection's until the class has one.  A strict-priority queue that
 * starves a low class gives its packets RTTs of milliseconds; in the
 * connection's estimate they made a more urgent class, whose window was
 * lost whole, wait 8.7 ms for its timeout (docs/protocol.md, "The
 * window's timeout"). */
static void window_rtt(const dlcp_mlt_conn *conn, dlcp_duration *srtt,
                       dlcp_duration *rttvar) {
  const mlt_xfer *x = conn->sending;
  if (x && conn->class_srtt_ns[x->prio]) {
    *srtt = conn->class_srtt_ns[x->prio];
    *rttvar = conn->class_rttvar_ns[x->prio];
  } else {
    *srtt = conn->srtt_ns;
    *rttvar = conn->rttvar_ns;
  }
}

/* The in-flight window.  ACKs come every ack_every packets and the last
 * few of a round never get one, and ACKs can be lost: so a window that
 * has seen no ACK for two drain intervals (of window_rtt) is presumed
 * drained, and sending resumes.  Rounds and STOPs settle the count
 * exactly.  Shorter waits and a tail loss probe were measured and not
 * kept (docs/protocol.md, "The window's timeout"). */
static dlcp_duration window_timeout(const dlcp_mlt_conn *conn) {
  dlcp_duration srtt, rttvar;
  window_rtt(conn, &srtt, &rttvar);
  return 2 * drain_of(conn, srtt, rttvar);
}

static uint64_t full_pkt_bytes(const dlcp_mlt_conn *conn) {
  return (uint64_t)conn->cfg.segment_size + DLCP_WIRE_DATA_HDR_LEN;
}

/* The rate control's window (a BDP at the current rate), under the fixed
 * cap if one is configured and the receiver's grant if it sent one, in
 * whole packets (at least one). */
static uint64_t window_pkts(const dlcp_mlt_conn *conn) {
  uint64_t w = dlcp_rate_window_bytes(&conn->rate);
  if (conn->cfg.max_inflight_bytes && conn->cfg.max_inflight_bytes < w) {
    w = conn->cfg.max_inflight_bytes;
  }
  if (conn->peer_grant && conn->peer_grant < w) {
    w = conn->peer_grant;
  }
  w /= full_pkt_bytes(conn);
  return w > 0 ? w : 1;
}

/* How often the sender asks for an ACK: every ack_every packets as the
 * receiver ACKs anyway, or twice per window when the window is smaller,
 * so a small window is credited (and the rate control fed) in time. */
static uint64_t ack_req_every(const dlcp_mlt_conn *conn) {
  uint64_t half = window_pkts(conn) / 2;
  if (half == 0) {
    half = 1;
  }
  return half < conn->cfg.ack_every ? half : conn->cfg.ack_every;
}

/* The packets received but not yet acknowledged (up to one ACK interval)
 * ride on top of the window, so the receiver's ACK batching never starves
 * the path. */
static uint64_t window_limit(const dlcp_mlt_conn *conn) {
  return window_pkts(conn) + ack_req_every(conn);
}

static bool window_full(const dlcp_mlt_conn *conn) {
  return conn->inflight_pkts >= window_limit(conn);
}

/* Whether the window lets a packet go now; a window that timed out is
 * presumed drained (delivered or lost) and starts again. */
static bool window_admits(dlcp_mlt_conn *conn, dlcp_tstamp now) {
  if (!window_full(conn)) {
    return true;
  }
  if (now >= conn->window_since_ns + window_timeout(conn)) {
    conn->inflight_pkts = 0;
    conn->stats.window_timeouts++;
    return true;
  }
  return false;
}

/* The path of the connection's next data packet: its place in the round
 * robin (path_burst packets a path), or, if the path set has left that
 * path out, the start of the next usable path's burst. */
static uint32_t data_path(dlcp_mlt_conn *conn, dlcp_tstamp now) {
  uint32_t burst = conn->cfg.path_burst, n = conn->cfg.npaths;
  uint32_t path = conn->path_rr / burst % n;
  for (uint32_t i = 1; i < n && !dlcp_pathset_usable(&conn->paths, path, now);
       i++) {
    conn->path_rr = (conn->path_rr / burst + 1) * burst;
    path = conn->path_rr / burst % n;
  }
  return path;
}

static int emit_data(dlcp_mlt_conn *conn, dlcp_mlt_action *act, uint8_t *buf,
                     size_t buflen, dlcp_tstamp now) {
  mlt_xfer *x = conn->sending;
  uint32_t seg;
  bool again;
  if (!next_segment(x, &seg, &again)) {
    return 0; /* cannot happen: a finished round leaves ACTIVE below */
  }
  uint64_t offset = (uint64_t)seg * x->seg_size;
  uint32_t len = seg_len(x, seg);
  uint8_t prio = x->prio;
  if (x->prio_fn) {
    prio = lowered(conn, x->prio_fn(x->prio_user, x->tensor, x->layer,
                                    offset, len), x->stage);
  }
  /* A retransmission that got nothing through last round climbs one level
   * per such round: a strict-priority queue that more urgent layers keep
   * full would otherwise starve it until max_rounds_without_progress
   * fails the send (a Transformer PS job's 128-byte pulls at priority 6). */
  if (again) {
    prio = raised(prio, x->noprog_rounds);
  }
  /* A segment the receiver asked for again is important whatever its
   * gradients: dropped once already, it must not be dropped again for
   * being unimportant, or a starved low-priority queue that drops every
   * unimportant packet keeps the transfer from progressing at all. */
  bool important = x->importance == DLCP_MLT_IMPORTANCE_ALL ||
                   (x->importance == DLCP_MLT_IMPORTANCE_F32_MAGNITUDE &&
                    (again || bit_get(x->important_bits, seg)));
  bool last = round_done(x);
  /* The packet that closes the window asks too: if the ACK asked for
   * before it is lost, this one's (cumulative by seq) reopens the window,
   * where otherwise nothing would until the window timeout, two drain
   * intervals later (issue 14: a receiver's grant of 5 packets and one
   * lost ACK held a 256 KiB transfer for 950 us at 1 % loss). */
  bool closes = conn->inflight_pkts + 1 >= window_limit(conn);
  bool ack_req = ++conn->since_ack_req >= ack_req_every(conn) || closes;
  if (ack_req) {
    conn->since_ack_req = 0;
  }
  uint32_t path = data_path(conn, now);
  dlcp_wire_data d = {
      .job = conn->cfg.job,
      .xfer = x->id,
      .flags = (uint8_t)(prio | (important ? DLCP_WIRE_FLAG_IMPORTANT : 0) |
                         (again ? DLCP_WIRE_FLAG_RETX : 0) |
                         (last ? DLCP_WIRE_FLAG_LAST : 0) |
                         (ack_req ? DLCP_WIRE_FLAG_ACK_REQ : 0)),
      .path = (uint8_t)path,
      .layer = (uint16_t)(x->layer > UINT16_MAX ? UINT16_MAX : x->layer),
      .tensor = x->tensor,
      .seq = x->seq++,
      .offset = offset,
      .tx_ts = now,
      .payload_len = (uint16_t)len,
  };
  dlcp_ssize n = dlcp_wire_data_encode(buf, buflen, &d);
  if (n < 0) {
    return (int)n;
  }
  conn->path_rr++;
  dlcp_pathset_sent(&conn->paths, path);
  if (x->seg_path) {
    x->seg_path[seg] = (uint16_t)(path + 1);
  }
  x->pkts_sent++;
  if (conn->inflight_pkts++ == 0) {
    /* Nothing in flight and nothing sent for two RTTs: an idle
     * connection starts its window afresh. */
    if (conn->last_send_ns + 2 * conn->srtt_ns < now) {
      dlcp_rate_restart(&conn->rate);
    }
    conn->window_since_ns = now;
  }
  conn->last_send_ns = now;
  conn->stats.data_sent++;
  if (again) {
    x->retx_sent++;
    conn->stats.data_retx++;
  }
  act->type = DLCP_MLT_ACT_DATAGRAM;
  act->len = (size_t)n;
  act->payload = x->sbuf + offset;
  act->payload_len = len;
  act->priority = prio;
  act->path = d.path;
  act->ect = important;

  /* Pacing: the next packet may leave one packet time later, but after an
   * idle spell up to burst_pkts may leave back to back. */
  dlcp_duration credit = conn->pkt_gap_ns * conn->cfg.burst_pkts;
  dlcp_tstamp base = conn->next_send_ns;
  if (now > credit && base < now - credit) {
    base = now - credit;
  }
  conn->next_send_ns =
      base + dlcp_rate_tx_time(&conn->rate, (uint64_t)n + len);

  if (last) {
    x->round_end_ns = now;
    x->state = X_DRAIN;
    set_timer(conn, x, add_sat(now, drain_interval(conn)));
    conn->resched = true;
  }
  return 0;
}

static void on_ack(dlcp_mlt_conn *conn, const dlcp_wire_ack *a,
                   dlcp_tstamp arrived, dlcp_tstamp now) {
  conn->stats.acks_received++;
  conn->stats.ack_hold_ns += a->hold_ns;
  if (a->hold_ns > conn->stats.ack_hold_max_ns) {
    conn->stats.ack_hold_max_ns = a->hold_ns;
  }
  /* What was in flight before this ACK's credit: whether the window is
   * in use. */
  uint64_t inflight_before = conn->inflight_pkts;
  /* Window credit: every packet sent up to the acknowledged one (seq
   * numbers every transmission of the transfer) has arrived or is lost,
   * either way no longer in flight.  Crediting by seq rather than by
   * the receiver's count keeps lost packets from holding the window shut
   * until the end of the round. */
  mlt_xfer *x = find_send(conn, a->xfer);
  uint64_t upto = (uint64_t)a->seq + 1;
  if (x && upto > x->acked_pkts && upto <= x->pkts_sent) {
    uint64_t delta = upto - x->acked_pkts;
    x->acked_pkts = upto;
    conn->inflight_pkts =
        delta < conn->inflight_pkts ? conn->inflight_pkts - delta : 0;
    conn->window_since_ns = now;
  }
  /* The round's last packet has arrived: only packets it overtook can
   * still be on their way, so the PROBE waits for the reordering window
   * (measured on this connection) instead of the rest of the drain
   * interval.  The drain interval, srtt + 4 rttvar, is as long as the
   * slowest queue this connection's packets sat in: data of a low layer
   * starved in a strict-priority queue for ms made it 12 ms, and every
   * round of that connection waited as long after its last packet had
   * arrived (gray experiment, docs/protocol.md). */
  if (x && x->state == X_DRAIN && upto == x->seq) {
    dlcp_tstamp probe_at = add_sat(now, reorder_guard(conn));
    if (probe_at < x->timer_ns) {
      set_timer(conn, x, probe_at);
    }
  }
  conn->peer_grant = a->grant;
  if (a->echo_ts > arrived) {
    return; /* not one of our time stamps */
  }
  /* The timers (drain interval, probe timeout) wait for replies as this
   * host handles them: the whole round trip.  Congestion control reads
   * only the part the network added, as Swift does: the time the ACK sat
   * here before we read it and the time the receiver held the packet
   * (its own scheduling, its receive queue) are the hosts' delay, not a
   * queue on the path. */
  dlcp_duration rtt = now - a->echo_ts;
  dlcp_duration net_rtt = arrived - a->echo_ts;
  net_rtt = net_rtt > a->hold_ns ? net_rtt - a->hold_ns : 0;
  dlcp_rtt_smooth(&conn->srtt_ns, &conn->rttvar_ns, rtt);
  dlcp_rtt_smooth(&conn->net_srtt_ns, &conn->net_rttvar_ns, net_rtt);
  if (x) {
    dlcp_rtt_sample(&conn->class_srtt_ns[x->prio],
                    &conn->class_rttvar_ns[x->prio], rtt);
  }
  conn->stats.ce_echoed += a->ce;
  dlcp_rate_ack ra = {.rtt_ns = net_rtt, .acked_pkts = a->covered,
                      .ce_pkts = a->ce,
                      .inflight_bytes = inflight_before * full_pkt_bytes(conn),
                      .acked_bytes = (uint64_t)a->covered *
                                     full_pkt_bytes(conn),
                      .grant_bytes = a->grant};
  dlcp_rate_move move = dlcp_rate_on_ack(&conn->rate, &ra, now);
  conn->stats.cuts_ecn += move == DLCP_RATE_DECREASE_ECN;
  conn->stats.cuts_delay += move == DLCP_RATE_DECREASE_DELAY;
  update_pkt_gap(conn);
}

static void send_fail(dlcp_mlt_conn *conn, mlt_xfer *x, int status,
                      dlcp_tstamp now) {
  finish(conn, x, status, PEND_FINISH, now);
}

/* Moves the connection's next packet to the start of the next path's
 * burst.  A retransmission round begins so: its holes may have been lost
 * on the path the last burst was on, and a path can lose everything (a
 * dead link until routing moves off it, a next hop's neighbour entry not
 * yet resolved); a round of fewer packets than a burst would send them
 * there again, round after round, into DLCP_ERR_NO_PROGRESS.  Moved, the
 * rounds go over every path in turn.  Sprayed a packet per path (burst
 * 1), consecutive packets change paths anyway. */
static void next_path(dlcp_mlt_conn *conn) {
  uint32_t burst = conn->cfg.path_burst;
  if (burst > 1 && conn->path_rr % burst != 0) {
    conn->path_rr = (conn->path_rr / burst + 1) * burst;
  }
}

/* Appends the missing ranges of |b| to |x|'s retransmissions. */
static int add_retx(dlcp_mlt_conn *conn, mlt_xfer *x,
                    const dlcp_wire_bitmap *b) {
  if (x->retx_idx >= x->nretx) {
    x->nretx = x->retx_idx = x->retx_pos = 0;
  }
  if (b->nranges > x->retx_cap - x->nretx) {
    size_t cap = (size_t)x->nretx + b->nranges;
    void *p = conn->mem->realloc(x->retx, cap * sizeof(*x->retx),
                                 conn->mem->user);
    if (!p) {
      return DLCP_ERR_NOMEM;
    }
    x->retx = p;
    x->retx_cap = (uint32_t)cap;
  }
  size_t cursor = 0;
  uint32_t prev_end = b->first;
  uint32_t n = 0;
  while (n < b->nranges && dlcp_wire_bitmap_next(b, &cursor, &prev_end,
                                                 &x->retx[x->nretx + n])) {
    n++;
  }
  x->nretx += n;
  return 0;
}

/* The segments |x|'s retransmission ranges hold. */
static uint64_t retx_segments(const mlt_xfer *x) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < x->nretx; i++) {
    n += x->retx[i].count;
  }
  return n;
}

/* Takes the segments of |prev| (|nprev| ranges in order) out of |x|'s
 * retransmissions. */
static int drop_in_flight(dlcp_mlt_conn *conn, mlt_xfer *x,
                          const dlcp_wire_range *prev, uint32_t nprev) {
  size_t cap = (size_t)x->nretx + nprev;
  dlcp_wire_range *out = conn->mem->malloc(cap * sizeof(*out),
                                           conn->mem->user);
  if (!out) {
    return DLCP_ERR_NOMEM;
  }
  uint32_t n = 0, j = 0;
  for (uint32_t i = 0; i < x->nretx; i++) {
    uint32_t s = x->retx[i].start, e = s + x->retx[i].count;
    while (j < nprev && prev[j].start + prev[j].count <= s) {
      j++;
    }
    for (uint32_t k = j; s < e; k++) {
      if (k >= nprev || prev[k].start >= e) {
        out[n++] = (dlcp_wire_range){s, e - s};
        break;
      }
      if (prev[k].start > s) {
        out[n++] = (dlcp_wire_range){s, prev[k].start - s};
      }
      uint32_t past = prev[k].start + prev[k].count;
      s = past > s ? past : s;
    }
  }
  conn->mem->free(x->retx, conn->mem->user);
  x->retx = out;
  x->retx_cap = (uint32_t)cap;
  x->nretx = n;
  return 0;
}

/* The receiver reported |x|'s segments in its retransmission ranges from
 * |from| on missing: each is charged as a loss to the path its last
 * transmission took (once: a segment in flight again is not in the
 * ranges), and the path set judges the paths. */
static void charge_holes(dlcp_mlt_conn *conn, mlt_xfer *x, uint32_t from,
                         dlcp_tstamp now) {
  if (!x->seg_path) {
    return;
  }
  bool charged = false;
  for (uint32_t i = from; i < x->nretx; i++) {
    uint32_t end = x->retx[i].start + x->retx[i].count;
    end = end < x->nsegs ? end : x->nsegs;
    for (uint32_t seg = x->retx[i].start; seg < end; seg++) {
      if (x->seg_path[seg] != 0) {
        dlcp_pathset_lost(&conn->paths, x->seg_path[seg] - 1u);
        x->seg_path[seg] = 0;
        charged = true;
      }
    }
  }
  if (charged) {
    dlcp_pathset_judge(&conn->paths, drain_interval(conn), now);
  }
}

/* A receiver's early BITMAP: holes that a first round still being sent
 * has passed on every path.  They go out before the round's next new
 * segment; the round, its PROBE and its accounting go on as they were. */
static void on_early_bitmap(dlcp_mlt_conn *conn, mlt_xfer *x,
                            const dlcp_wire_bitmap *b, dlcp_tstamp now) {
  if (b->nsegs != x->nsegs || b->end > x->next_seg) {
    conn->stats.dropped_invalid++;
    return;
  }
  /* Ranges still to be sent stay ahead of the new ones (add_retx). */
  uint32_t kept = x->retx_idx >= x->nretx ? 0 : x->nretx;
  int rv = add_retx(conn, x, b);
  if (rv != 0) {
    send_fail(conn, x, rv, now);
    return;
  }
  charge_holes(conn, x, kept, now);
  conn->resched = true;
}

static void on_bitmap(dlcp_mlt_conn *conn, const dlcp_wire_bitmap *b,
                      dlcp_tstamp now) {
  mlt_xfer *x = find_send(conn, b->xfer);
  if (x && b->round == 0 && x->state == X_ACTIVE && !x->retx_round) {
    on_early_bitmap(conn, x, b, now);
    return;
  }
  /* Round 0: the receiver saw the end of a round with segments missing
   * and asks unprompted; it answers a round that has been sent. */
  bool unprompted_ok = x && b->round == 0 &&
                       (x->state == X_DRAIN || x->state == X_PROBED);
  if (!x || (!unprompted_ok &&
             (x->state != X_PROBED || b->round != x->round))) {
    conn->stats.dropped_stale++;
    return;
  }
  if (b->nsegs != x->nsegs) {
    conn->stats.dropped_invalid++;
    return;
  }
  settle(conn, x);
  /* A request that comes less than a base RTT after the last round ended
   * cannot know that round's fate: it was sent before the round's packets
   * arrived (a retransmission round's last packet asks for the holes an
   * early BITMAP's answer is still filling).  Those packets are not sent
   * again, and the request says nothing about progress; if they are lost,
   * a later request asks for them. */
  bool blind = x->retx_round && x->nretx > 0 && conn->rate.base_rtt_ns > 0 &&
               now < add_sat(x->round_end_ns, conn->rate.base_rtt_ns);
  if (b->have > x->last_have) {
    x->last_have = b->have;
    x->last_progress_ns = now;
    x->noprog_rounds = 0;
    x->probe_rto = conn->cfg.probe_timeout_ns;
  } else if (!blind &&
             ++x->noprog_rounds >= conn->cfg.max_rounds_without_progress) {
    send_fail(conn, x, DLCP_ERR_NO_PROGRESS, now);
    return;
  }
  /* The last round's ranges, kept aside while the new ones are read. */
  dlcp_wire_range *prev = NULL;
  uint32_t nprev = 0;
  if (blind) {
    prev = x->retx;
    nprev = x->nretx;
    x->retx = NULL;
    x->retx_cap = 0;
  }
  x->nretx = x->retx_idx = x->retx_pos = 0;
  int rv = add_retx(conn, x, b);
  if (rv == 0 && prev) {
    uint64_t asked = retx_segments(x);
    rv = drop_in_flight(conn, x, prev, nprev);
    conn->stats.retx_in_flight_skipped += rv == 0 && retx_segments(x) < asked;
  }
  if (prev) {
    conn->mem->free(prev, conn->mem->user);
  }
  if (rv != 0) {
    send_fail(conn, x, rv, now);
    return;
  }
  charge_holes(conn, x, 0, now);
  x->retx_round = true;
  next_path(conn);
  start_round(conn, x, now);
}

static void on_stop(dlcp_mlt_conn *conn, const dlcp_wire_stop *s,
                    dlcp_tstamp now) {
  mlt_xfer *x = find_send(conn, s->xfer);
  if (!x) {
    conn->stats.dropped_stale++;
    return;
  }
  x->peer_bytes = s->bytes;
  int status = s->status == 0 ? 0 : peer_status(s->status);
  if (x->state == X_UNMATCHED) {
    if (status != 0) {
      /* The receiver gave up before anyone posted the send: forget it. */
      unlink_xfer(conn, x);
      xfer_free(conn, x);
      return;
    }
    x->stop_seen = true;
    x->stop_status = status;
    return;
  }
  finish(conn, x, status, 0, now);
}

/* --- receiver ----------------------------------------------------------- */

static void place_payload(const mlt_xfer *x, uint8_t *dst,
                          const uint8_t *payload, size_t len) {
  if (x->place) {
    x->place(x->place_user, dst, payload, len);
  } else {
    memcpy(dst, payload, len);
  }
}

/* An eager receive is complete once the message's bytes are in: the
 * sender already completed, so nothing goes back. */
static void eager_deliver(dlcp_mlt_conn *conn, mlt_xfer *x,
                          const uint8_t *data, uint64_t len, dlcp_tstamp now) {
  if (len != x->size) {
    finish(conn, x, DLCP_ERR_SIZE_MISMATCH, 0, now);
    return;
  }
  if (len > 0) {
    place_payload(x, x->rbuf, data, (size_t)len);
  }
  x->have_bytes = len;
  x->have_segs = x->nsegs;
  x->rx_pkts = 1;
  finish(conn, x, 0, 0, now);
}

/* A transfer id for a receive's START, never 0 ("none" on the wire). */
static uint32_t fresh_xfer_id(dlcp_mlt_conn *conn) {
  uint32_t id = conn->next_xfer_id++;
  if (conn->next_xfer_id == 0) {
    conn->next_xfer_id = 1;
  }
  return id;
}

/* A block for an EAGER of |len| bytes that came before its receive: the
 * kept one if it is large enough.  An all-reduce step's EAGERs often
 * come first, each of the same size: a new 64 KiB block per message,
 * freed when the receive took it, made glibc trim and fault in the top
 * of its heap every time (docs/protocol.md). */
static mlt_unexpected *unexpected_alloc(dlcp_mlt_conn *conn, uint64_t len) {
  mlt_unexpected *u = conn->unexpected_spare;
  if (u && u->cap >= len) {
    conn->unexpected_spare = NULL;
    return u;
  }
  u = conn->mem->malloc(sizeof(*u) + len, conn->mem->user);
  if (u) {
    u->cap = len;
  }
  return u;
}

/* Keeps |u| for the next EAGER that comes first, in place of a smaller
 * one, if it is no larger than the largest eager transfer. */
static void unexpected_free(dlcp_mlt_conn *conn, mlt_unexpected *u) {
  mlt_unexpected *s = conn->unexpected_spare;
  if (u->cap <= conn->cfg.eager_max_bytes && (!s || s->cap < u->cap)) {
    conn->unexpected_spare = u;
    u = s;
  }
  conn->mem->free(u, conn->mem->user);
}

static int post_eager_recv(dlcp_mlt_conn *conn, const dlcp_mlt_recv *req,
                           dlcp_tstamp now) {
  mlt_unexpected *u = conn->unexpected_head, *prev = NULL;
  while (u && u->tensor != req->tensor) {
    prev = u;
    u = u->next;
  }
  if (!u && conn->nrecvs >= conn->cfg.max_transfers) {
    return DLCP_ERR_LIMIT;
  }
  const dlcp_mem *m = conn->mem;
  mlt_xfer *x = m->calloc(1, sizeof(*x), m->user);
  if (!x) {
    return DLCP_ERR_NOMEM;
  }
  x->is_send = false;
  x->eager = true;
  x->state = X_ACTIVE;
  x->tensor = req->tensor;
  x->user_data = req->user_data;
  x->size = req->len;
  x->nsegs = 1;
  x->seg_size = conn->cfg.segment_size;
  x->rbuf = req->buf;
  x->place = req->place;
  x->place_user = req->place_user;
  x->needed_bytes = req->len;
  x->start_ns = now;
  x->last_progress_ns = now;
  x->next = conn->recvs;
  conn->recvs = x;
  conn->nrecvs++;
  if (u) {
    /* The message came first: take it off the list in arrival order. */
    if (prev) {
      prev->next = u->next;
    } else {
      conn->unexpected_head = u->next;
    }
    if (conn->unexpected_tail == u) {
      conn->unexpected_tail = prev;
    }
    conn->nunexpected--;
    eager_deliver(conn, x, u->data, u->len, now);
    unexpected_free(conn, u);
    return 0;
  }
  set_timer(conn, x, add_sat(now, conn->cfg.stall_timeout_ns));
  return 0;
}

int dlcp_mlt_post_recv(dlcp_mlt_conn *conn, const dlcp_mlt_recv *req,
                       dlcp_tstamp now) {
  if (!conn || !req || (!req->buf && req->len > 0) ||
      !(req->loss_bound >= 0.0 && req->loss_bound < 1.0)) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  conn->inputs++;
  uint32_t seg_size = conn->cfg.segment_size;
  if (req->place && (req->place_unit == 0 || seg_size % req->place_unit ||
                     req->len % req->place_unit)) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if ((req->len + seg_size - 1) / seg_size > UINT32_MAX) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (is_eager(conn, req->len)) {
    return post_eager_recv(conn, req, now);
  }
  if (conn->nrecvs >= conn->cfg.max_transfers) {
    return DLCP_ERR_LIMIT;
  }
  const dlcp_mem *m = conn->mem;
  mlt_xfer *x = m->calloc(1, sizeof(*x), m->user);
  if (!x) {
    return DLCP_ERR_NOMEM;
  }
  x->nsegs = segs_for(req->len, seg_size);
  if (x->nsegs > 0) {
    x->have_bits = m->calloc(words_for(x->nsegs), sizeof(uint64_t), m->user);
    if (!x->have_bits) {
      m->free(x, m->user);
      return DLCP_ERR_NOMEM;
    }
  }
  x->is_send = false;
  x->state = X_ACTIVE;
  x->stage = req->stage;
  x->tensor = req->tensor;
  x->id = fresh_xfer_id(conn);
  x->user_data = req->user_data;
  x->size = req->len;
  x->seg_size = seg_size;
  x->rbuf = req->buf;
  x->place = req->place;
  x->place_user = req->place_user;
  x->keep_previous = req->keep_previous || req->place;
  if (x->nsegs > 0) {
    x->counted = true;
    conn->rx_active++;
    if (conn->cfg.rx_share) {
      conn->cfg.rx_share->active++;
    }
    if (x->stage == 0) {
      share(conn, x);
    }
  }
  /* Round p down to whole ppm: the bound granted is never looser than the
   * one asked for. */
  x->loss_ppm = (uint32_t)(req->loss_bound * DLCP_WIRE_PPM);
  if (x->loss_ppm >= DLCP_WIRE_PPM) {
    x->loss_ppm = DLCP_WIRE_PPM - 1;
  }
  x->needed_bytes = needed_bytes(x->size, x->loss_ppm);
  x->start_ns = now;
  x->last_progress_ns = now;
  x->next = conn->recvs;
  conn->recvs = x;
  conn->nrecvs++;
  pend(conn, x, PEND_START);
  set_timer(conn, x, add_sat(now, conn->cfg.stall_timeout_ns));
  if (x->needed_bytes == 0) {
    finish(conn, x, 0, PEND_STOP, now);
  }
  return 0;
}

/* The receive a decoded DATA packet belongs to, or NULL (counted in the
 * stats when |count|). */
static mlt_xfer *data_target(dlcp_mlt_conn *conn, const dlcp_wire_data *d,
                             bool count, int *rv) {
  if (d->job != conn->cfg.job) {
    conn->stats.dropped_foreign += count;
    *rv = DLCP_ERR_FOREIGN_JOB;
    return NULL;
  }
  mlt_xfer *x = find_recv(conn, d->xfer);
  if (!x) {
    conn->stats.dropped_stale += count;
    *rv = DLCP_ERR_UNKNOWN_TRANSFER;
    return NULL;
  }
  if (d->tensor != x->tensor) {
    conn->stats.dropped_invalid += count;
    *rv = DLCP_ERR_INVALID_ARGUMENT;
    return NULL;
  }
  *rv = dlcp_wire_data_check_bounds(d, x->size, x->seg_size);
  if (*rv != 0) {
    conn->stats.dropped_invalid += count;
    return NULL;
  }
  return x;
}

uint8_t *dlcp_mlt_data_dest(dlcp_mlt_conn *conn, const uint8_t *hdr,
                            size_t hdr_len, size_t dgram_len) {
  dlcp_wire_data d;
  int rv;
  if (dlcp_wire_data_decode_header(&d, hdr, hdr_len, dgram_len) != 0) {
    return NULL;
  }
  mlt_xfer *x = data_target(conn, &d, false, &rv);
  if (!x || x->place ||
      bit_get(x->have_bits, (uint32_t)(d.offset / x->seg_size))) {
    return NULL;
  }
  return x->rbuf + d.offset;
}

static dlcp_tstamp xfer_deadline(const dlcp_mlt_conn *conn,
                                 const mlt_xfer *x);

/* Queues an ACK of packet |seq| (sent at |echo_ts|, here at |arrived|)
 * covering every packet of the connection received since the last. */
static void ack_packet(dlcp_mlt_conn *conn, mlt_xfer *x, uint32_t seq,
                       uint64_t echo_ts, dlcp_tstamp arrived) {
  if (!(x->pend & PEND_ACK)) {
    x->ack_covered = 0;
    x->ack_ce = 0;
  }
  x->ack_covered += conn->rx_since_ack;
  x->ack_ce += conn->ce_since_ack;
  conn->rx_since_ack = 0;
  conn->ce_since_ack = 0;
  x->ack_echo_ts = echo_ts;
  x->ack_arrived = arrived;
  x->ack_rx_pkts = x->rx_pkts;
  x->ack_seq = seq;
  x->ackq_at = 0;
  pend(conn, x, PEND_ACK);
}

/* |payload| NULL: the driver already wrote it in place (data_dest). */
static int on_data(dlcp_mlt_conn *conn, const dlcp_wire_data *dp,
                   const uint8_t *payload, bool ce, dlcp_tstamp arrived,
                   dlcp_tstamp now) {
  const dlcp_wire_data d = *dp;
  int rv;
  mlt_xfer *x = data_target(conn, &d, true, &rv);
  if (!x) {
    return rv;
  }
  uint32_t seg = (uint32_t)(d.offset / x->seg_size);
  conn->stats.data_received++;
  x->rx_pkts++;
  /* Sequence numbers grow with every packet sent, retransmissions too, so
   * only an overtaken packet arrives below the highest yet. */
  if (!x->rx_seq_seen || d.seq > x->rx_top_seq) {
    x->rx_seq_seen = true;
    x->rx_top_seq = d.seq;
    x->rx_top_at = arrived;
    x->rx_top_tx_ts = d.tx_ts;
  } else if (d.seq < x->rx_top_seq) {
    if (arrived > x->rx_top_at) {
      note_reordering(conn, arrived - x->rx_top_at);
    } else if (arrived < x->rx_top_at) {
      /* It reached this host first and was read later: the host, not the
       * network, reordered them (a packet left in a busy core's backlog
       * while later ones were read from the other core's).  Counted, not
       * learnt: a reordering window stretched to the host's stalls cost
       * 5 % at 1 % loss to save duplicates (docs/protocol.md, "Packets
       * overtaken inside the host"). */
      conn->stats.data_overtaken_in_host++;
    }
  }
  release_start_grant(conn);
  share(conn, x);
  x->last_progress_ns = now;
  x->last_data_at = arrived;
  conn->ce_since_ack += ce;
  conn->stats.ce_received += ce;
  bool regular_ack = ++conn->rx_since_ack >= conn->cfg.ack_every ||
                     (d.flags & DLCP_WIRE_FLAG_ACK_REQ) != 0;
  if (!bit_get(x->have_bits, seg)) {
    bit_set(x->have_bits, seg);
    if (payload) {
      place_payload(x, x->rbuf + d.offset, payload, d.payload_len);
    }
    x->have_segs++;
    x->have_bytes += d.payload_len;
  } else {
    x->dups++;
    conn->stats.data_duplicate++;
  }
  /* Everything here: done.  Holding (1 - p) is not enough, not even at
   * the sender's last packet of a round: packets sent before it may still
   * be on their way (other paths, the driver's other receive queues, a
   * reordering switch), and stopping then gave up data that was never
   * lost (0.3-1.3 % at 0 % loss on the testbed).  The PROBE, one drain
   * interval (srtt + 4 rttvar) after the last packet, decides. */
  bool last = (d.flags & DLCP_WIRE_FLAG_LAST) != 0;
  bool done = x->have_bytes == x->size;
  /* First transmissions go out in segment order, so a hole below one
   * that arrived was lost or overtaken: once more is missing than the
   * bound allows, ask for it a reordering window later, while the round
   * goes on, rather than after its last packet. */
  if (!done && !(d.flags & DLCP_WIRE_FLAG_RETX) &&
      passed_by_first_round(conn, x, seg, d.path)) {
    if (!last && x->early_at == 0 && holes_beyond_bound(x)) {
      x->early_end = x->seen_end;
      x->early_at = add_sat(now, reorder_guard(conn));
      set_timer(conn, x, x->early_at);
    }
  }
  /* The round's last packet with more missing than the bound allows: a
   * retransmission round is certain, so ask for it (an unprompted
   * BITMAP) once the packets this one may have overtaken had time to
   * arrive, instead of waiting for the sender's PROBE a drain interval
   * later.  Asking early costs at worst a duplicate; stopping early
   * (within the bound) is left to the PROBE, which may give up data. */
  if (last && !done && x->have_bytes < x->needed_bytes) {
    /* After a first round, the holes early BITMAPs asked for are being
     * sent again: ask only for the others. */
    x->nack_from = d.flags & DLCP_WIRE_FLAG_RETX ? 0 : x->nacked_end;
    x->nack_at = add_sat(now, reorder_guard(conn));
    set_timer(conn, x, x->nack_at);
  } else if (last && !done && (d.flags & DLCP_WIRE_FLAG_RETX) &&
             x->have_bytes >= x->needed_bytes) {
    /* A retransmission round's last packet with the bound met: the round
     * carried only holes this receiver asked for, those it did not ask
     * for were judged lost a reordering window after packets sent later
     * had come, so nothing the bound needs is still on its way but the
     * round's own packets that this one overtook.  End once they had the
     * reordering window to land, rather than a PROBE later (about an RTT
     * more).  A first round still waits for its PROBE (below, "Never on
     * data still in flight"). */
    x->stop_at = add_sat(x->last_data_at, reorder_guard(conn));
    set_timer(conn, x, x->stop_at);
  }
  /* ACK every ack_every packets of the connection (not of the transfer:
   * a stream of small transfers must still feed the rate control and the
   * window), and the last packet of a round that does not end the
   * transfer, so the sender's window is credited before its PROBE (a
   * transfer that ends here is settled by its STOP: no extra datagram on
   * the latency-critical path). */
  if (regular_ack || (last && !done)) {
    ack_packet(conn, x, d.seq, d.tx_ts, arrived);
  } else if (!done && x->ackq_at == 0) {
    x->ackq_at = add_sat(now, reorder_guard(conn));
    set_timer(conn, x, xfer_deadline(conn, x));
  }
  if (done) {
    finish(conn, x, 0, PEND_STOP, now);
  }
  return 0;
}

/* Ends a receive that holds (1 - p) with the missing within the bound,
 * unless its data is still arriving: then once none has come for the
 * reordering window.  The PROBE may overtake a round's packets queued on
 * other paths: in the default scenario a pull's PROBE, sent a drain
 * interval after its last packet, arrived while that round's packets were
 * still coming in every 0.3-3 us, before its last one, and the pull gave
 * up 1.5 % of its data with no drop anywhere. */
static void stop_when_quiet(dlcp_mlt_conn *conn, mlt_xfer *x,
                            dlcp_tstamp now) {
  dlcp_tstamp quiet_at = add_sat(x->last_data_at, reorder_guard(conn));
  if (x->rx_pkts > 0 && quiet_at > now) {
    if (x->stop_at == 0) {
      conn->stats.stops_deferred++;
    }
    x->stop_at = quiet_at;
    set_timer(conn, x, quiet_at);
    return;
  }
  finish(conn, x, 0, PEND_STOP, now);
}

static void on_probe(dlcp_mlt_conn *conn, const dlcp_wire_probe *p,
                     dlcp_tstamp now) {
  mlt_xfer *x = find_recv(conn, p->xfer);
  if (!x) {
    conn->stats.dropped_stale++; /* finished: its STOP is on the way */
    return;
  }
  /* The loss bound is spent here, at the end of a round, and not as soon
   * as (1 - p) has arrived: stopping at the threshold would cut the same
   * tail off every tensor on a clean network.  Used this way it replaces
   * retransmission rounds, never first transmissions. */
  if (x->have_bytes >= x->needed_bytes) {
    stop_when_quiet(conn, x, now);
    return;
  }
  x->bitmap_round = p->round;
  x->bitmap_first = first_hole_to_ask(x, 0);
  x->bitmap_end = 0;
  covered_by_full_bitmap(x);
  x->last_progress_ns = now;
  x->nack_at = 0; /* this BITMAP answers for the round */
  pend(conn, x, PEND_BITMAP);
}

static void on_finish(dlcp_mlt_conn *conn, const dlcp_wire_finish *f,
                      dlcp_tstamp now) {
  mlt_xfer *x = find_recv(conn, f->xfer);
  if (!x) {
    conn->stats.dropped_stale++;
    return;
  }
  /* A sender only FINISHes a live transfer when it failed. */
  finish(conn, x, f->status == 0 ? DLCP_ERR_PEER_ABORTED
                                 : peer_status(f->status),
         0, now);
}

/* Collects the receiver's missing byte ranges into the connection's
 * scratch array (finish() already zero-filled them). */
static int collect_missing(dlcp_mlt_conn *conn, mlt_xfer *x) {
  size_t n = 0;
  uint32_t start;
  uint32_t stop;
  for (uint32_t s = 0; next_hole(x, s, x->nsegs, &start, &stop); s = stop) {
    if (n == conn->missing_cap) {
      size_t cap = conn->missing_cap ? conn->missing_cap * 2 : 16;
      void *p = conn->mem->realloc(conn->missing, cap * sizeof(*conn->missing),
                                   conn->mem->user);
      if (!p) {
        return DLCP_ERR_NOMEM;
      }
      conn->missing = p;
      conn->missing_cap = cap;
    }
    uint64_t off = seg_offset(x, start);
    conn->missing[n].offset = off;
    conn->missing[n].len = seg_offset(x, stop) - off;
    n++;
  }
  return (int)n;
}

/* --- events in ---------------------------------------------------------- */

int dlcp_mlt_on_datagram(dlcp_mlt_conn *conn, const uint8_t *buf,
                         size_t len, dlcp_tstamp now) {
  return dlcp_mlt_on_datagram_arrived(conn, buf, len, NULL, now);
}

/* When the datagram reached the host: the driver's time stamp if it has a
 * sensible one, else now. */
static dlcp_tstamp arrival_time(const dlcp_mlt_arrival *arr,
                                dlcp_tstamp now) {
  return arr && arr->at != 0 && arr->at <= now ? arr->at : now;
}

typedef struct ctl_delivery {
  dlcp_mlt_conn *conn;
  dlcp_tstamp now;
} ctl_delivery;

/* keep_note queues a NOTE for the driver; false if it is not a well-formed
 * NOTE of this job or memory is short (counted as malformed: the sender
 * resends nothing it saw acknowledged, so the driver's own timeouts
 * cover it). */
static bool keep_note(dlcp_mlt_conn *conn, const uint8_t *msg, size_t len) {
  dlcp_wire_note n;
  if (dlcp_wire_note_decode(&n, msg, len) != 0 || n.job != conn->cfg.job) {
    return false;
  }
  mlt_note *k = conn->mem->malloc(sizeof(*k), conn->mem->user);
  if (k == NULL) {
    return false;
  }
  k->next = NULL;
  memcpy(k->bytes, msg, sizeof(k->bytes)); /* decode checked the length */
  if (conn->notes_tail) {
    conn->notes_tail->next = k;
  } else {
    conn->notes_head = k;
  }
  conn->notes_tail = k;
  conn->stats.control_received++;
  return true;
}

/* Whether a control message is acknowledged at once (ctlchan.h): those
 * that no control message answers.  A START is answered by data, a BITMAP
 * by retransmissions, a STOP or FINISH by nothing; a PROBE by a BITMAP or
 * STOP, and EAGERs and NOTEs mostly come in exchanges, whose replies carry
 * the acknowledgement (a CACK each cost small all-reduces 2.5-3x their
 * latency between hosts, docs/protocol.md). */
static bool control_prompt(const uint8_t *msg, size_t len) {
  dlcp_wire_preamble pre;
  if (dlcp_wire_peek(&pre, msg, len) != 0) {
    return false;
  }
  return pre.type == DLCP_WIRE_START || pre.type == DLCP_WIRE_BITMAP ||
         pre.type == DLCP_WIRE_STOP || pre.type == DLCP_WIRE_FINISH;
}

static bool deliver_control(void *user, const uint8_t *msg, size_t len) {
  ctl_delivery *d = user;
  dlcp_wire_preamble pre;
  if (dlcp_wire_peek(&pre, msg, len) == 0 && pre.type == DLCP_WIRE_NOTE) {
    if (!keep_note(d->conn, msg, len)) {
      d->conn->stats.dropped_malformed++;
    }
    return false;
  }
  /* Counted in the stats when it does not decode; never fatal. */
  (void)dlcp_mlt_on_control(d->conn, msg, len, d->now);
  return control_prompt(msg, len);
}

static int on_control_datagram(dlcp_mlt_conn *conn,
                               const dlcp_wire_preamble *pre,
                               const uint8_t *buf, size_t len,
                               dlcp_tstamp now) {
  if (pre->job != conn->cfg.job) {
    conn->stats.dropped_foreign++;
    return DLCP_ERR_FOREIGN_JOB;
  }
  ctl_delivery d = {.conn = conn, .now = now};
  int rv = dlcp_ctlchan_on_datagram(&conn->ctl, buf, len, deliver_control,
                                    &d, now);
  if (rv != 0) {
    conn->stats.dropped_malformed++;
  }
  return rv;
}

int dlcp_mlt_on_datagram_arrived(dlcp_mlt_conn *conn, const uint8_t *buf,
                                 size_t len, const dlcp_mlt_arrival *arr,
                                 dlcp_tstamp now) {
  conn->inputs++;
  bool ce = arr && arr->ce;
  dlcp_tstamp arrived = arrival_time(arr, now);
  dlcp_wire_preamble pre;
  int rv = dlcp_wire_peek(&pre, buf, len);
  if (rv != 0) {
    conn->stats.dropped_malformed++;
    return rv;
  }
  if (pre.type == DLCP_WIRE_DATA) {
    dlcp_wire_data d;
    const uint8_t *payload;
    rv = dlcp_wire_data_decode(&d, &payload, buf, len);
    if (rv != 0) {
      conn->stats.dropped_malformed++;
      return rv;
    }
    return on_data(conn, &d, payload, ce, arrived, now);
  }
  if ((pre.type == DLCP_WIRE_CDATA || pre.type == DLCP_WIRE_CACK) &&
      conn->ctl_on) {
    return on_control_datagram(conn, &pre, buf, len, now);
  }
  if (pre.type != DLCP_WIRE_ACK) {
    conn->stats.dropped_malformed++;
    return DLCP_ERR_BAD_TYPE;
  }
  dlcp_wire_ack a;
  rv = dlcp_wire_ack_decode(&a, buf, len);
  if (rv != 0) {
    conn->stats.dropped_malformed++;
    return rv;
  }
  if (a.job != conn->cfg.job) {
    conn->stats.dropped_foreign++;
    return DLCP_ERR_FOREIGN_JOB;
  }
  on_ack(conn, &a, arrived, now);
  return 0;
}

int dlcp_mlt_on_data_placed(dlcp_mlt_conn *conn, const uint8_t *hdr,
                            size_t hdr_len, size_t dgram_len,
                            dlcp_tstamp now) {
  return dlcp_mlt_on_data_placed_arrived(conn, hdr, hdr_len, dgram_len,
                                         NULL, now);
}

int dlcp_mlt_on_data_placed_arrived(dlcp_mlt_conn *conn, const uint8_t *hdr,
                                    size_t hdr_len, size_t dgram_len,
                                    const dlcp_mlt_arrival *arr,
                                    dlcp_tstamp now) {
  conn->inputs++;
  dlcp_wire_data d;
  int rv = dlcp_wire_data_decode_header(&d, hdr, hdr_len, dgram_len);
  if (rv != 0) {
    conn->stats.dropped_malformed++;
    return rv;
  }
  return on_data(conn, &d, NULL, arr && arr->ce, arrival_time(arr, now),
                 now);
}

int dlcp_mlt_on_data_apart(dlcp_mlt_conn *conn, const uint8_t *hdr,
                           size_t hdr_len, const uint8_t *payload,
                           size_t dgram_len, dlcp_tstamp now) {
  conn->inputs++;
  dlcp_wire_data d;
  int rv = dlcp_wire_data_decode_header(&d, hdr, hdr_len, dgram_len);
  if (rv != 0) {
    conn->stats.dropped_malformed++;
    return rv;
  }
  return on_data(conn, &d, payload, false, now, now);
}

static void free_tomb(dlcp_mlt_conn *conn, mlt_xfer *x) {
  unlink_xfer(conn, x);
  conn->ntombs--;
  xfer_free(conn, x);
}

/* Goes to the earliest posted eager receive (or tomb) of the tensor, as
 * START would; with none posted, waits in the UNEXPECTED list. */
static int on_eager(dlcp_mlt_conn *conn, const dlcp_wire_eager *e,
                    const uint8_t *payload, size_t len, dlcp_tstamp now) {
  mlt_xfer *first = NULL;
  for (mlt_xfer *x = conn->recvs; x; x = x->next) {
    if (x->eager && x->tensor == e->tensor) {
      first = x; /* |recvs| is newest first: the last match is earliest */
    }
  }
  if (first && first->state == X_TOMB) {
    conn->stats.dropped_stale++;
    free_tomb(conn, first);
    return 0;
  }
  if (first) {
    eager_deliver(conn, first, payload, len, now);
    return 0;
  }
  if (conn->nunexpected >= conn->cfg.max_transfers) {
    conn->stats.dropped_invalid++;
    return DLCP_ERR_LIMIT;
  }
  mlt_unexpected *u = unexpected_alloc(conn, len);
  if (!u) {
    conn->stats.dropped_invalid++;
    return DLCP_ERR_NOMEM;
  }
  u->next = NULL;
  u->tensor = e->tensor;
  u->len = len;
  if (len > 0) {
    memcpy(u->data, payload, len);
  }
  if (conn->unexpected_tail) {
    conn->unexpected_tail->next = u;
  } else {
    conn->unexpected_head = u;
  }
  conn->unexpected_tail = u;
  conn->nunexpected++;
  return 0;
}

/* A send of |o->size| bytes still waits for its START.  If this side's
 * earliest receive of the tensor is an eager one, and no receive above
 * the eager size is posted (whose START may be crossing the OFFER), the
 * sizes disagree: the receive fails, and a START of its size followed by
 * a STOP makes the send fail as well (or whichever send takes that START,
 * as after any receive that ended). */
static void on_offer(dlcp_mlt_conn *conn, const dlcp_wire_offer *o,
                     dlcp_tstamp now) {
  mlt_xfer *first = NULL;
  if (is_eager(conn, o->size)) {
    return; /* an EAGER follows */
  }
  for (mlt_xfer *x = conn->recvs; x; x = x->next) {
    if (x->tensor != o->tensor || x->state == X_TOMB) {
      continue;
    }
    if (!x->eager) {
      return;
    }
    first = x; /* |recvs| is newest first: the last match is earliest */
  }
  if (!first) {
    return; /* posted later: the send OFFERs again */
  }
  first->id = fresh_xfer_id(conn);
  finish(conn, first, DLCP_ERR_SIZE_MISMATCH, PEND_START | PEND_STOP, now);
}

int dlcp_mlt_on_control(dlcp_mlt_conn *conn, const uint8_t *buf, size_t len,
                        dlcp_tstamp now) {
  conn->inputs++;
  dlcp_wire_preamble pre;
  int rv = dlcp_wire_peek(&pre, buf, len);
  if (rv == 0 && pre.len != len) {
    rv = DLCP_ERR_BAD_LENGTH;
  }
  if (rv != 0) {
    conn->stats.dropped_malformed++;
    return rv;
  }
  if (pre.job != conn->cfg.job) {
    conn->stats.dropped_foreign++;
    return DLCP_ERR_FOREIGN_JOB;
  }
  switch ((dlcp_wire_type)pre.type) {
  case DLCP_WIRE_START: {
    uint32_t job, n;
    rv = dlcp_wire_start_decode(&job, &n, buf, len);
    if (rv != 0) {
      break;
    }
    conn->stats.control_received++;
    for (uint32_t i = 0; i < n; i++) {
      dlcp_wire_start_entry e;
      dlcp_wire_start_entry_get(&e, buf, i);
      on_start_entry(conn, &e, now);
    }
    return 0;
  }
  case DLCP_WIRE_PROBE: {
    dlcp_wire_probe p;
    rv = dlcp_wire_probe_decode(&p, buf, len);
    if (rv == 0) {
      conn->stats.control_received++;
      on_probe(conn, &p, now);
    }
    break;
  }
  case DLCP_WIRE_BITMAP: {
    dlcp_wire_bitmap b;
    rv = dlcp_wire_bitmap_decode(&b, buf, len);
    if (rv == 0) {
      conn->stats.control_received++;
      on_bitmap(conn, &b, now);
    }
    break;
  }
  case DLCP_WIRE_STOP: {
    dlcp_wire_stop s;
    rv = dlcp_wire_stop_decode(&s, buf, len);
    if (rv == 0) {
      conn->stats.control_received++;
      on_stop(conn, &s, now);
    }
    break;
  }
  case DLCP_WIRE_FINISH: {
    dlcp_wire_finish f;
    rv = dlcp_wire_finish_decode(&f, buf, len);
    if (rv == 0) {
      conn->stats.control_received++;
      on_finish(conn, &f, now);
    }
    break;
  }
  case DLCP_WIRE_EAGER: {
    dlcp_wire_eager e;
    const uint8_t *payload;
    size_t payload_len;
    rv = dlcp_wire_eager_decode(&e, &payload, &payload_len, buf, len);
    if (rv == 0) {
      conn->stats.control_received++;
      return on_eager(conn, &e, payload, payload_len, now);
    }
    break;
  }
  case DLCP_WIRE_OFFER: {
    dlcp_wire_offer o;
    rv = dlcp_wire_offer_decode(&o, buf, len);
    if (rv == 0) {
      conn->stats.control_received++;
      on_offer(conn, &o, now);
    }
    break;
  }
  case DLCP_WIRE_DATA:
  case DLCP_WIRE_ACK:
  case DLCP_WIRE_CDATA: /* datagrams, not control messages */
  case DLCP_WIRE_CACK:
  case DLCP_WIRE_NOTE: /* the driver's, for collectives */
  default:
    rv = DLCP_ERR_BAD_TYPE;
    break;
  }
  if (rv != 0) {
    conn->stats.dropped_malformed++;
  }
  return rv;
}

/* Ends |x| silently for its owner (no PEND_COMPLETE: the caller asked for
 * silence); |tell| is the message that tells the peer, or 0 if the peer
 * never heard of the transfer. */
static void cancel(dlcp_mlt_conn *conn, mlt_xfer *x, uint32_t tell,
                   dlcp_tstamp now) {
  uncount(conn, x);
  if (x->is_send) {
    settle(conn, x);
  }
  x->status = DLCP_ERR_CANCELED;
  x->state = X_DONE;
  x->end_ns = now;
  x->timer_ns = DLCP_TSTAMP_NEVER;
  unlink_xfer(conn, x);
  if (tell || x->in_pending) {
    pend(conn, x, tell);
  } else {
    xfer_free(conn, x);
  }
}

static int cancel_recv(dlcp_mlt_conn *conn, uint64_t user_data,
                       bool may_arrive, dlcp_tstamp now) {
  conn->inputs++;
  for (mlt_xfer *x = conn->recvs; x; x = x->next) {
    if (x->state == X_TOMB) {
      continue;
    }
    if (x->user_data == user_data && x->eager && may_arrive) {
      /* The sender may have sent already: keep the place in line. */
      x->state = X_TOMB;
      x->rbuf = NULL;
      x->user_data = 0;
      conn->ntombs++;
      set_timer(conn, x, add_sat(now, conn->cfg.stall_timeout_ns));
      return 0;
    }
    if (x->user_data == user_data) {
      /* A START still unsent means the sender never heard of it; an
       * eager sender has no transfer to stop. */
      uint32_t tell = x->eager || (x->pend & PEND_START) ? 0 : PEND_STOP;
      x->pend &= ~(uint32_t)(PEND_START | PEND_ACK | PEND_BITMAP);
      cancel(conn, x, tell, now);
      return 0;
    }
  }
  return DLCP_ERR_UNKNOWN_TRANSFER;
}

int dlcp_mlt_cancel_recv(dlcp_mlt_conn *conn, uint64_t user_data,
                         dlcp_tstamp now) {
  return cancel_recv(conn, user_data, true, now);
}

int dlcp_mlt_cancel_unsent_recv(dlcp_mlt_conn *conn, uint64_t user_data,
                                dlcp_tstamp now) {
  return cancel_recv(conn, user_data, false, now);
}

int dlcp_mlt_cancel_send(dlcp_mlt_conn *conn, uint64_t user_data,
                         dlcp_tstamp now) {
  conn->inputs++;
  for (mlt_xfer *x = conn->sends; x; x = x->next) {
    if (x->state != X_UNMATCHED && x->user_data == user_data) {
      /* Before START there is no transfer id: nobody to tell. */
      cancel(conn, x, x->state == X_WAIT_START ? 0 : PEND_FINISH, now);
      return 0;
    }
  }
  return DLCP_ERR_UNKNOWN_TRANSFER;
}

void dlcp_mlt_abort(dlcp_mlt_conn *conn, int status, dlcp_tstamp now) {
  conn->inputs++;
  mlt_xfer *x, *next;
  for (x = conn->sends; x; x = next) {
    next = x->next;
    if (x->state == X_UNMATCHED) {
      unlink_xfer(conn, x);
      xfer_free(conn, x);
      continue;
    }
    x->pend &= PEND_COMPLETE; /* the peer is gone: say nothing more */
    finish(conn, x, status, 0, now);
  }
  for (x = conn->recvs; x; x = next) {
    next = x->next;
    if (x->state == X_TOMB) {
      free_tomb(conn, x);
      continue;
    }
    x->pend &= PEND_COMPLETE;
    finish(conn, x, status, 0, now);
  }
  while (conn->unexpected_head) {
    mlt_unexpected *u = conn->unexpected_head;
    conn->unexpected_head = u->next;
    conn->mem->free(u, conn->mem->user);
  }
  conn->unexpected_tail = NULL;
  conn->nunexpected = 0;
}

/* --- timers ------------------------------------------------------------- */

/* The timer a transfer should have now; used when rescanning. */
static dlcp_tstamp xfer_deadline(const dlcp_mlt_conn *conn,
                                 const mlt_xfer *x) {
  if (!x->is_send && x->state == X_ACTIVE) {
    dlcp_tstamp stall = add_sat(x->last_progress_ns,
                                conn->cfg.stall_timeout_ns);
    dlcp_tstamp t = x->nack_at != 0 && x->nack_at < stall ? x->nack_at
                                                          : stall;
    t = x->early_at != 0 && x->early_at < t ? x->early_at : t;
    t = x->ackq_at != 0 && x->ackq_at < t ? x->ackq_at : t;
    return x->stop_at != 0 && x->stop_at < t ? x->stop_at : t;
  }
  return x->timer_ns;
}

/* Whether a segment in [from, to) is missing. */
static bool missing_in(const mlt_xfer *x, uint32_t from, uint32_t to) {
  return dlcp_bits_next_missing(x->have_bits, from, to) < to;
}

/* An early BITMAP is due: it asks for the holes below early_end not asked
 * for yet, unless a BITMAP is on its way already; holes the round has
 * passed since arm the next one. */
static void fire_early(dlcp_mlt_conn *conn, mlt_xfer *x, dlcp_tstamp now) {
  x->early_at = 0;
  /* Packets overtaken within a path may have filled holes since. */
  x->lost_bytes = missing_bytes(x, 0, x->seen_end);
  if (!(x->pend & PEND_BITMAP) && holes_beyond_bound(x)) {
    uint32_t first = first_hole_to_ask(x, x->nacked_end);
    if (missing_in(x, first, x->early_end)) {
      x->bitmap_round = 0;
      x->bitmap_first = first;
      x->bitmap_end = x->early_end;
      x->nacked_end = x->early_end;
      conn->stats.bitmaps_early++;
      pend(conn, x, PEND_BITMAP);
    }
  }
  if (x->seen_end > x->early_end && holes_beyond_bound(x)) {
    x->early_end = x->seen_end;
    x->early_at = add_sat(now, reorder_guard(conn));
  }
}

/* A receiver's unprompted BITMAP is due: sent if the bound is still not
 * met and no answer to a PROBE is already on its way. */
static void fire_nack(dlcp_mlt_conn *conn, mlt_xfer *x) {
  x->nack_at = 0;
  if (x->have_bytes >= x->needed_bytes || (x->pend & PEND_BITMAP)) {
    return;
  }
  uint32_t first = first_hole_to_ask(x, x->nack_from);
  if (missing_in(x, first, x->nsegs)) {
    x->bitmap_round = 0;
    x->bitmap_first = first;
    x->bitmap_end = 0;
    covered_by_full_bitmap(x);
    conn->stats.bitmaps_unprompted++;
    pend(conn, x, PEND_BITMAP);
  }
}

/* Packets came that no ACK answered (the one that would have, the 10th
 * or one asking, was lost) and none has come since for the reordering
 * window: acknowledge the highest, which reopens the sender's window
 * that, full of lost packets, would otherwise wait for its timeout. */
static void fire_quiet_ack(dlcp_mlt_conn *conn, mlt_xfer *x,
                           dlcp_tstamp now) {
  x->ackq_at = 0;
  if (x->rx_pkts == x->ack_rx_pkts || (x->pend & PEND_ACK)) {
    return;
  }
  dlcp_tstamp quiet = add_sat(x->last_data_at, reorder_guard(conn));
  if (quiet > now) {
    x->ackq_at = quiet;
    return;
  }
  conn->stats.acks_quiet++;
  ack_packet(conn, x, x->rx_top_seq, x->rx_top_tx_ts, x->rx_top_at);
}

/* Runs every timer of an active receive that is due, all of them: one
 * left due would have the connection claim work its next poll does not
 * do.  Returns false when none was (the stall timeout is). */
static bool fire_receive_timers(dlcp_mlt_conn *conn, mlt_xfer *x,
                                dlcp_tstamp now) {
  bool fired = false;
  if (x->stop_at != 0 && x->stop_at <= now) {
    stop_when_quiet(conn, x, now);
    if (x->state != X_ACTIVE) {
      return true;
    }
    fired = true;
  }
  if (x->nack_at != 0 && x->nack_at <= now) {
    fire_nack(conn, x);
    fired = true;
  }
  if (x->early_at != 0 && x->early_at <= now) {
    fire_early(conn, x, now);
    fired = true;
  }
  if (x->ackq_at != 0 && x->ackq_at <= now) {
    fire_quiet_ack(conn, x, now);
    fired = true;
  }
  x->timer_ns = xfer_deadline(conn, x);
  return fired;
}

static void fire_timer(dlcp_mlt_conn *conn, mlt_xfer *x, dlcp_tstamp now) {
  const dlcp_mlt_config *cfg = &conn->cfg;
  switch ((enum xfer_state)x->state) {
  case X_WAIT_START:
    if (now - x->start_ns >= cfg->stall_timeout_ns) {
      send_fail(conn, x, DLCP_ERR_TIMEOUT, now);
      return;
    }
    pend(conn, x, PEND_OFFER);
    x->offer_wait *= 2;
    arm_wait_start(conn, x, now);
    return;
  case X_DRAIN:
    x->round++;
    x->state = X_PROBED;
    pend(conn, x, PEND_PROBE);
    set_timer(conn, x, add_sat(now, x->probe_rto));
    break;
  case X_PROBED:
    if (now - x->last_progress_ns >= cfg->stall_timeout_ns) {
      send_fail(conn, x, DLCP_ERR_TIMEOUT, now);
      return;
    }
    /* No answer: ask again, backing off.  The round stays the same so a
     * late answer to the first PROBE is still accepted. */
    x->probe_rto = x->probe_rto * 2 > cfg->max_probe_timeout_ns
                       ? cfg->max_probe_timeout_ns
                       : x->probe_rto * 2;
    pend(conn, x, PEND_PROBE);
    set_timer(conn, x, add_sat(now, x->probe_rto));
    break;
  case X_ACTIVE:
    if (!x->is_send && fire_receive_timers(conn, x, now)) {
      return;
    }
    if (!x->is_send) {
      /* An eager sender has no transfer to stop. */
      finish(conn, x, DLCP_ERR_TIMEOUT, x->eager ? 0 : PEND_STOP, now);
      return;
    }
    x->timer_ns = DLCP_TSTAMP_NEVER;
    return;
  case X_TOMB:
    free_tomb(conn, x);
    return;
  case X_UNMATCHED:
  case X_DONE:
  default:
    x->timer_ns = DLCP_TSTAMP_NEVER;
    return;
  }
}

static void run_timers(dlcp_mlt_conn *conn, dlcp_tstamp now) {
  if (now < conn->timer_ns) {
    return;
  }
  dlcp_tstamp earliest = DLCP_TSTAMP_NEVER;
  for (int list = 0; list < 2; list++) {
    mlt_xfer *x = list == 0 ? conn->sends : conn->recvs, *next;
    for (; x; x = next) {
      next = x->next;
      dlcp_tstamp t = xfer_deadline(conn, x);
      x->timer_ns = t;
      if (t <= now) {
        bool tomb = x->state == X_TOMB; /* freed by its timer */
        fire_timer(conn, x, now);
        if (tomb || x->state == X_DONE) {
          continue;
        }
        t = x->timer_ns;
      }
      if (t < earliest) {
        earliest = t;
      }
    }
  }
  conn->timer_ns = earliest;
}

/* --- actions out -------------------------------------------------------- */

static int emit_start(dlcp_mlt_conn *conn, mlt_xfer *first,
                      dlcp_mlt_action *act, uint8_t *buf, size_t buflen) {
  /* Every transfer waiting to announce itself goes into one START, as far
   * as the buffer allows; the rest follow in the next. */
  enum { BATCH = 64 };
  dlcp_wire_start_entry e[BATCH] = {{0}};
  mlt_xfer *who[BATCH];
  size_t max = (buflen - DLCP_WIRE_START_HDR_LEN) / DLCP_WIRE_START_ENTRY_LEN;
  size_t n = 0;
  for (mlt_xfer *x = first; x && n < BATCH && n < max; x = x->pend_next) {
    if (!(x->pend & PEND_START)) {
      continue;
    }
    e[n].tensor = x->tensor;
    e[n].xfer = x->id;
    e[n].size = x->size;
    e[n].loss_ppm = x->loss_ppm;
    e[n].seg_size = x->seg_size;
    e[n].grant = start_grant_bytes(conn);
    who[n++] = x;
  }
  dlcp_ssize len = dlcp_wire_start_encode(buf, buflen, conn->cfg.job, e, n);
  if (len < 0) {
    return (int)len;
  }
  for (size_t i = 0; i < n; i++) {
    who[i]->pend &= ~(uint32_t)PEND_START;
  }
  act->type = DLCP_MLT_ACT_CONTROL;
  act->len = (size_t)len;
  return 0;
}

static void fill_completion(dlcp_mlt_conn *conn, mlt_xfer *x,
                            dlcp_mlt_completion *c, int nmissing) {
  memset(c, 0, sizeof(*c));
  c->user_data = x->user_data;
  c->tensor = x->tensor;
  c->xfer = x->id;
  c->is_send = x->is_send;
  c->status = x->status;
  c->bytes = x->size;
  c->delivered_bytes = x->is_send ? x->peer_bytes : x->have_bytes;
  if (x->status != 0 && x->is_send) {
    c->delivered_bytes = 0;
  }
  c->delivered_fraction =
      x->size == 0 ? 1.0 : (double)c->delivered_bytes / (double)x->size;
  c->packets = x->is_send ? x->pkts_sent : x->rx_pkts;
  c->retransmissions = x->retx_sent;
  c->duplicates = x->dups;
  c->rounds = x->round;
  c->start_ns = x->start_ns;
  c->end_ns = x->end_ns;
  if (nmissing > 0) {
    c->missing = conn->missing;
    c->nmissing = (size_t)nmissing;
  }
}

/* Emits the first pending output of |x|; returns whether |x| is done with
 * (and freed) or still has bits pending. */
static int emit_pending(dlcp_mlt_conn *conn, mlt_xfer *x,
                        dlcp_mlt_action *act, uint8_t *buf, size_t buflen,
                        dlcp_tstamp now) {
  dlcp_ssize len = 0;
  uint32_t job = conn->cfg.job;
  if (x->pend & PEND_EAGER) {
    dlcp_wire_eager e = {.job = job, .tensor = x->tensor,
                         .layer = (uint16_t)x->layer, .priority = x->prio};
    len = dlcp_wire_eager_encode(buf, buflen, &e, x->sbuf, (size_t)x->size);
    x->pend &= ~(uint32_t)PEND_EAGER;
    if (len < 0) {
      /* The driver's |buf| is smaller than eager_max_bytes + 24: fail the
       * send rather than report the same error on every poll. */
      x->status = (int)len;
      x->peer_bytes = 0;
      return 0;
    }
    act->type = DLCP_MLT_ACT_CONTROL;
    act->len = (size_t)len;
    conn->stats.control_sent++;
    return 0;
  }
  if (x->pend & PEND_START) {
    return emit_start(conn, x, act, buf, buflen);
  }
  if (x->pend & PEND_ACK) {
    x->pend &= ~(uint32_t)PEND_ACK;
    dlcp_wire_ack a = {
        .job = job,
        .xfer = x->id,
        .echo_ts = x->ack_echo_ts,
        .rx_pkts = x->ack_rx_pkts,
        .seq = x->ack_seq,
        .covered = (uint16_t)(x->ack_covered > UINT16_MAX ? UINT16_MAX
                                                          : x->ack_covered),
        .ce = (uint16_t)(x->ack_ce > UINT16_MAX ? UINT16_MAX : x->ack_ce),
        .grant = ack_grant_bytes(conn),
        .hold_ns = dlcp_rtt_hold_ns(x->ack_arrived, now)};
    if (a.ce > a.covered) {
      a.ce = a.covered;
    }
    len = dlcp_wire_ack_encode(buf, buflen, &a);
    conn->stats.acks_sent++;
    act->type = DLCP_MLT_ACT_DATAGRAM;
    act->priority = 0; /* ACKs carry the RTT signal: never queue them */
    act->path = (uint8_t)dlcp_pathset_usable_from(
        &conn->paths, x->ack_rx_pkts / conn->cfg.ack_every % conn->cfg.npaths,
        now);
    act->ect = true;
  } else if (x->pend & PEND_PROBE) {
    x->pend &= ~(uint32_t)PEND_PROBE;
    dlcp_wire_probe p = {.job = job, .xfer = x->id, .round = x->round,
                         .sent = (uint32_t)x->pkts_sent};
    len = dlcp_wire_probe_encode(buf, buflen, &p);
    act->type = DLCP_MLT_ACT_CONTROL;
  } else if (x->pend & PEND_BITMAP) {
    x->pend &= ~(uint32_t)PEND_BITMAP;
    dlcp_wire_bitmap b = {.job = job, .xfer = x->id, .round = x->bitmap_round,
                          .nsegs = x->nsegs, .first = x->bitmap_first,
                          .end = x->bitmap_end, .have = x->have_segs};
    if (b.end != 0 && !missing_in(x, b.first, b.end)) {
      return 0; /* an early BITMAP's holes filled since: nothing to ask */
    }
    len = dlcp_wire_bitmap_encode_words(buf, buflen, &b, x->have_bits);
    act->type = DLCP_MLT_ACT_CONTROL;
  } else if (x->pend & PEND_STOP) {
    x->pend &= ~(uint32_t)PEND_STOP;
    dlcp_wire_stop s = {.job = job, .xfer = x->id, .status = x->status,
                        .have = x->have_segs, .bytes = x->have_bytes};
    len = dlcp_wire_stop_encode(buf, buflen, &s);
    act->type = DLCP_MLT_ACT_CONTROL;
  } else if (x->pend & PEND_OFFER) {
    x->pend &= ~(uint32_t)PEND_OFFER;
    if (x->state != X_WAIT_START) {
      return 0; /* a START came, or the send ended, since */
    }
    dlcp_wire_offer o = {.job = job, .tensor = x->tensor, .size = x->size};
    len = dlcp_wire_offer_encode(buf, buflen, &o);
    act->type = DLCP_MLT_ACT_CONTROL;
  } else if (x->pend & PEND_FINISH) {
    x->pend &= ~(uint32_t)PEND_FINISH;
    dlcp_wire_finish f = {.job = job, .xfer = x->id, .status = x->status,
                          .sent = (uint32_t)x->pkts_sent};
    len = dlcp_wire_finish_encode(buf, buflen, &f);
    act->type = DLCP_MLT_ACT_CONTROL;
    if (x->id == 0) {
      /* Never started: the receiver has nothing to hear about. */
      act->type = DLCP_MLT_ACT_NONE;
      len = 0;
    }
  } else if (x->pend & PEND_COMPLETE) {
    x->pend = 0;
    int nmissing = 0;
    if (!x->is_send && x->status == 0 && x->nsegs > 0 &&
        x->have_segs < x->nsegs) {
      nmissing = collect_missing(conn, x);
      if (nmissing < 0) {
        return nmissing;
      }
    }
    act->type = DLCP_MLT_ACT_COMPLETE;
    fill_completion(conn, x, &act->completion, nmissing);
    return 0;
  }
  if (len < 0) {
    return (int)len;
  }
  act->len = (size_t)len;
  if (act->type == DLCP_MLT_ACT_CONTROL) {
    conn->stats.control_sent++;
  }
  return 0;
}

/* The path of the control datagram about to go out: one path, so that
 * the channel's messages keep their order, moved on to the next usable
 * path when the channel sent one again or received one twice (this path,
 * or the one the peer's acknowledgements take, may be dead: a channel
 * that stayed on path 0 failed the job when that path was,
 * docs/protocol.md "Dead paths"), at most once per drain interval (the
 * pieces of a message lost together are resent together), and off a path
 * the path set has left out; the path it leaves takes its next route
 * (pathset.h, "Routes").  Its resends are charged to the path as
 * losses, so the data leaves a dead path out on the control channel's
 * evidence too. */
static uint32_t control_path(dlcp_mlt_conn *conn, dlcp_tstamp now) {
  uint64_t resent = conn->ctl.retransmissions;
  uint64_t trouble = resent + conn->ctl.duplicates;
  uint32_t path = conn->ctl_path;
  if (trouble != conn->ctl_trouble) {
    for (; conn->ctl_resent < resent; conn->ctl_resent++) {
      dlcp_pathset_lost(&conn->paths, path);
    }
    dlcp_pathset_judge(&conn->paths, drain_interval(conn), now);
    if (now >= add_sat(conn->ctl_moved_at, net_drain_interval(conn))) {
      dlcp_pathset_reroute(&conn->paths, path);
      path = (path + 1) % conn->cfg.npaths;
      conn->ctl_moved_at = now;
    }
    conn->ctl_trouble = trouble;
  }
  conn->ctl_path = dlcp_pathset_usable_from(&conn->paths, path, now);
  dlcp_pathset_sent(&conn->paths, conn->ctl_path);
  return conn->ctl_path;
}

static int poll_actions(dlcp_mlt_conn *conn, dlcp_mlt_action *act,
                        uint8_t *buf, size_t buflen, bool data,
                        dlcp_tstamp now) {
  memset(act, 0, sizeof(*act));
  if (buflen < DLCP_MLT_MIN_BUF) {
    return DLCP_ERR_BUFFER_TOO_SMALL;
  }
  run_timers(conn, now);
  if (conn->notes_head) {
    mlt_note *k = conn->notes_head;
    conn->notes_head = k->next;
    if (!conn->notes_head) {
      conn->notes_tail = NULL;
    }
    memcpy(buf, k->bytes, sizeof(k->bytes));
    act->type = DLCP_MLT_ACT_NOTE;
    act->len = sizeof(k->bytes);
    conn->mem->free(k, conn->mem->user);
    return 0;
  }
  /* A control message is at most what one CDATA datagram could carry, or
   * an eager transfer's EAGER when that is longer (the channel sends
   * either in pieces of a frame); |buf| must hold a CDATA of it. */
  size_t ctl_buflen = buflen;
  if (conn->ctl_on) {
    size_t most = conn->cfg.datagram_max - DLCP_WIRE_CDATA_HDR_LEN;
    size_t eager = (size_t)conn->cfg.eager_max_bytes + DLCP_WIRE_EAGER_HDR_LEN;
    most = eager > most ? eager : most;
    ctl_buflen = buflen - DLCP_WIRE_CDATA_HDR_LEN;
    ctl_buflen = ctl_buflen > most ? most : ctl_buflen;
  }
  while (conn->pend_head) {
    mlt_xfer *x = conn->pend_head;
    int rv = emit_pending(conn, x, act, buf, ctl_buflen, now);
    if (x->pend == 0) {
      conn->pend_head = x->pend_next;
      if (!conn->pend_head) {
        conn->pend_tail = NULL;
      }
      x->in_pending = false;
      if (x->state == X_DONE) {
        xfer_free(conn, x);
      }
    }
    if (rv != 0) {
      return rv;
    }
    if (act->type == DLCP_MLT_ACT_CONTROL && conn->ctl_on) {
      /* Into the datagram control channel; it goes out below. */
      rv = dlcp_ctlchan_send(&conn->ctl, buf, act->len,
                             control_prompt(buf, act->len), now);
      if (rv != 0) {
        return rv;
      }
      memset(act, 0, sizeof(*act));
      continue;
    }
    if (act->type != DLCP_MLT_ACT_NONE) {
      return 0;
    }
  }
  if (conn->ctl_on) {
    /* The channel adds the peer's ack delay where it applies. */
    dlcp_ssize n = dlcp_ctlchan_poll(&conn->ctl, buf, buflen,
                                     net_drain_interval(conn),
                                     conn->cfg.max_probe_timeout_ns, now);
    if (n < 0) {
      return (int)n;
    }
    if (n > 0) {
      act->type = DLCP_MLT_ACT_DATAGRAM;
      act->len = (size_t)n;
      act->priority = 0; /* control: the most urgent class */
      act->path = (uint8_t)control_path(conn, now);
      act->ect = true;
      return 0;
    }
  }
  if (conn->resched) {
    choose_sending(conn);
  }
  if (data && conn->sending && now >= conn->next_send_ns &&
      window_admits(conn, now)) {
    return emit_data(conn, act, buf, buflen, now);
  }
  return 0;
}

/* poll_actions, with a datagram's route: its path's at the time. */
static int poll_routed(dlcp_mlt_conn *conn, dlcp_mlt_action *act, uint8_t *buf,
                       size_t buflen, bool data, dlcp_tstamp now) {
  int rv = poll_actions(conn, act, buf, buflen, data, now);
  if (rv == 0 && act->type == DLCP_MLT_ACT_DATAGRAM) {
    act->route = dlcp_pathset_route(&conn->paths, act->path);
  }
  return rv;
}

int dlcp_mlt_poll(dlcp_mlt_conn *conn, dlcp_mlt_action *act, uint8_t *buf,
                  size_t buflen, dlcp_tstamp now) {
  return poll_routed(conn, act, buf, buflen, true, now);
}

int dlcp_mlt_poll_control(dlcp_mlt_conn *conn, dlcp_mlt_action *act,
                          uint8_t *buf, size_t buflen, dlcp_tstamp now) {
  return poll_routed(conn, act, buf, buflen, false, now);
}

dlcp_tstamp dlcp_mlt_next_control_deadline(const dlcp_mlt_conn *conn) {
  if (conn->pend_head || conn->notes_head) {
    return 0;
  }
  dlcp_tstamp t = conn->timer_ns;
  if (conn->ctl_on) {
    dlcp_tstamp c = dlcp_ctlchan_deadline(&conn->ctl);
    t = c < t ? c : t;
  }
  return t;
}

uint64_t dlcp_mlt_inputs(const dlcp_mlt_conn *conn) {
  return conn->inputs;
}

dlcp_tstamp dlcp_mlt_next_deadline(const dlcp_mlt_conn *conn) {
  dlcp_tstamp t = dlcp_mlt_next_control_deadline(conn);
  if (t == 0) {
    return 0;
  }
  bool can_send = conn->resched ? false : conn->sending != NULL;
  if (conn->resched) {
    for (const mlt_xfer *x = conn->sends; x; x = x->next) {
      if (x->state == X_ACTIVE) {
        can_send = true;
        break;
      }
    }
  }
  if (can_send) {
    dlcp_tstamp at = conn->next_send_ns;
    if (window_full(conn)) {
      /* Window full: an ACK wakes us, or else its timeout. */
      dlcp_tstamp w = conn->window_since_ns + window_timeout(conn);
      at = w > at ? w : at;
    }
    if (at < t) {
      t = at;
    }
  }
  return t;
}

void dlcp_mlt_get_stats(const dlcp_mlt_conn *conn, dlcp_mlt_stats *st) {
  *st = conn->stats;
  st->rate_bps = conn->rate.rate_bps;
  st->window_bytes = dlcp_rate_window_bytes(&conn->rate);
  st->srtt_ns = conn->srtt_ns;
  st->base_rtt_ns = conn->rate.base_rtt_ns;
  st->rttvar_ns = conn->rttvar_ns;
  window_rtt(conn, &st->window_srtt_ns, &st->window_rttvar_ns);
  st->control_retx = conn->ctl.retransmissions;
  st->control_needless = conn->ctl.needless;
  st->control_duplicates = conn->ctl.duplicates;
  st->paths_left_out = conn->paths.spells;
  st->paths_rerouted = conn->paths.reroutes;
}

int dlcp_mlt_send_note(dlcp_mlt_conn *conn, const uint8_t *note, size_t len,
                       dlcp_tstamp now) {
  conn->inputs++;
  dlcp_wire_note n;
  if (!conn->ctl_on || dlcp_wire_note_decode(&n, note, len) != 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  int rv = dlcp_ctlchan_send(&conn->ctl, note, len, false, now);
  if (rv == 0) {
    conn->stats.control_sent++;
  }
  return rv;
}

uint32_t dlcp_mlt_control_unacked(const dlcp_mlt_conn *conn) {
  return conn->ctl_on ? dlcp_ctlchan_unacked(&conn->ctl) : 0;
}

bool dlcp_mlt_control_settled(const dlcp_mlt_conn *conn) {
  return !conn->ctl_on || (dlcp_ctlchan_unacked(&conn->ctl) == 0 &&
                           !dlcp_ctlchan_owes_ack(&conn->ctl));
}

void dlcp_mlt_stats_add(dlcp_mlt_stats *sum, const dlcp_mlt_stats *st) {
  sum->data_sent += st->data_sent;
  sum->data_retx += st->data_retx;
  sum->data_received += st->data_received;
  sum->data_duplicate += st->data_duplicate;
  sum->data_reordered += st->data_reordered;
  sum->data_overtaken_in_host += st->data_overtaken_in_host;
  sum->acks_sent += st->acks_sent;
  sum->acks_received += st->acks_received;
  sum->acks_quiet += st->acks_quiet;
  sum->control_sent += st->control_sent;
  sum->control_received += st->control_received;
  sum->control_retx += st->control_retx;
  sum->control_needless += st->control_needless;
  sum->control_duplicates += st->control_duplicates;
  sum->dropped_malformed += st->dropped_malformed;
  sum->dropped_foreign += st->dropped_foreign;
  sum->dropped_stale += st->dropped_stale;
  sum->dropped_invalid += st->dropped_invalid;
  sum->ce_received += st->ce_received;
  sum->ce_echoed += st->ce_echoed;
  sum->cuts_ecn += st->cuts_ecn;
  sum->cuts_delay += st->cuts_delay;
  sum->retx_in_flight_skipped += st->retx_in_flight_skipped;
  sum->bitmaps_early += st->bitmaps_early;
  sum->bitmaps_unprompted += st->bitmaps_unprompted;
  sum->stops_deferred += st->stops_deferred;
  sum->window_timeouts += st->window_timeouts;
  sum->paths_left_out += st->paths_left_out;
  sum->paths_rerouted += st->paths_rerouted;
  sum->ack_hold_ns += st->ack_hold_ns;
  if (st->ack_hold_max_ns > sum->ack_hold_max_ns) {
    sum->ack_hold_max_ns = st->ack_hold_max_ns;
  }
}

uint64_t dlcp_mlt_window_timeouts(const dlcp_mlt_conn *conn) {
  return conn->stats.window_timeouts;
}

size_t dlcp_mlt_outstanding(const dlcp_mlt_conn *conn) {
  size_t n = 0;
  for (const mlt_xfer *x = conn->sends; x; x = x->next) {
    n += x->state != X_UNMATCHED;
  }
  n += conn->nrecvs - conn->ntombs;
  for (const mlt_xfer *x = conn->pend_head; x; x = x->pend_next) {
    n += x->state == X_DONE;
  }
  return n;
}
