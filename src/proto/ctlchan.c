/*
 * The control channel keeps its unacknowledged messages in a ring that
 * grows by doubling (control messages are few: a handful per transfer);
 * only the first DLCP_CTLCHAN_WINDOW of them may be in flight, so the
 * receiver's fixed table of early messages always has room for what it
 * can be sent.  Sequence numbers wrap; comparisons use differences.
 */
#include "proto/ctlchan.h"

#include <string.h>

#include "proto/rtt.h"
#include "wire/wire.h"

void dlcp_ctlchan_init(dlcp_ctlchan *ch, const dlcp_mem *mem, uint32_t job,
                       dlcp_duration ack_delay, dlcp_duration min_rto,
                       uint32_t max_piece) {
  memset(ch, 0, sizeof(*ch));
  ch->mem = mem;
  ch->job = job;
  ch->ack_delay = ack_delay;
  ch->min_rto = min_rto;
  ch->cack_at = ch->tail_at = DLCP_TSTAMP_NEVER;
  const uint32_t most = DLCP_WIRE_DGRAM_MAX - DLCP_WIRE_CDATA_HDR_LEN;
  ch->max_piece = max_piece == 0 || max_piece > most ? most
                  : max_piece < DLCP_CTLCHAN_MIN_PIECE ? DLCP_CTLCHAN_MIN_PIECE
                                                      : max_piece;
}

void dlcp_ctlchan_fini(dlcp_ctlchan *ch) {
  const dlcp_mem *m = ch->mem;
  for (uint32_t i = 0; i < ch->count; i++) {
    m->free(ch->out[(ch->head + i) & (ch->cap - 1)].bytes, m->user);
  }
  m->free(ch->out, m->user);
  while (ch->spare) {
    uint8_t *next;
    memcpy(&next, ch->spare, sizeof(next));
    m->free(ch->spare, m->user);
    ch->spare = next;
  }
  for (uint32_t i = 0; i < DLCP_CTLCHAN_WINDOW; i++) {
    m->free(ch->early[i], m->user);
  }
  m->free(ch->join_buf, m->user);
  memset(ch, 0, sizeof(*ch));
}

/* A buffer for a piece of |plen| bytes: for a piece of a long message
 * (|full_size|) a kept one of max_piece bytes or a new one as large, so
 * that any piece fits it later; else one of exactly |plen|. */
static uint8_t *piece_alloc(dlcp_ctlchan *ch, size_t plen, bool full_size) {
  if (!full_size) {
    return ch->mem->malloc(plen, ch->mem->user);
  }
  uint8_t *p = ch->spare;
  if (!p) {
    return ch->mem->malloc(ch->max_piece, ch->mem->user);
  }
  memcpy(&ch->spare, p, sizeof(ch->spare));
  ch->spare_bytes -= ch->max_piece;
  return p;
}

/* Frees |o|'s buffer, or keeps it for the next long message. */
static void piece_free(dlcp_ctlchan *ch, dlcp_ctlchan_out *o) {
  if (o->full_size &&
      ch->spare_bytes + ch->max_piece <= DLCP_CTLCHAN_KEEP_BYTES) {
    memcpy(o->bytes, &ch->spare, sizeof(ch->spare));
    ch->spare = o->bytes;
    ch->spare_bytes += ch->max_piece;
  } else {
    ch->mem->free(o->bytes, ch->mem->user);
  }
  o->bytes = NULL;
}

static int grow(dlcp_ctlchan *ch) {
  const dlcp_mem *m = ch->mem;
  uint32_t ncap = ch->cap ? ch->cap * 2 : 16;
  dlcp_ctlchan_out *n = m->calloc(ncap, sizeof(*n), m->user);
  if (!n) {
    return DLCP_ERR_NOMEM;
  }
  for (uint32_t i = 0; i < ch->count; i++) {
    n[i] = ch->out[(ch->head + i) & (ch->cap - 1)];
  }
  m->free(ch->out, m->user);
  ch->out = n;
  ch->cap = ncap;
  ch->head = 0;
  return 0;
}

int dlcp_ctlchan_send(dlcp_ctlchan *ch, const uint8_t *msg, size_t len,
                      bool prompt, dlcp_tstamp now) {
  if (len < DLCP_WIRE_PREAMBLE_LEN || len > DLCP_WIRE_CTRL_MAX) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  uint32_t npieces = (uint32_t)((len + ch->max_piece - 1) / ch->max_piece);
  while (ch->cap - ch->count < npieces) {
    if (grow(ch) != 0) {
      return DLCP_ERR_NOMEM;
    }
  }
  for (uint32_t k = 0; k < npieces; k++) {
    size_t off = (size_t)k * ch->max_piece;
    size_t plen = len - off < ch->max_piece ? len - off : ch->max_piece;
    uint8_t *copy = piece_alloc(ch, plen, npieces > 1);
    if (!copy) {
      /* Take back the pieces queued: all of the message or none. */
      for (uint32_t j = 0; j < k; j++) {
        ch->count--;
        piece_free(ch, &ch->out[(ch->head + ch->count) & (ch->cap - 1)]);
      }
      return DLCP_ERR_NOMEM;
    }
    memcpy(copy, msg + off, plen);
    dlcp_ctlchan_out *o = &ch->out[(ch->head + ch->count) & (ch->cap - 1)];
    memset(o, 0, sizeof(*o));
    o->bytes = copy;
    o->len = (uint32_t)plen;
    o->full_size = npieces > 1;
    o->rest = (uint32_t)(len - off - plen);
    o->prompt = prompt && o->rest == 0;
    o->grouped = npieces > DLCP_CTLCHAN_PIECE_ACKS;
    o->sample = o->grouped ? k == 0 : o->prompt;
    o->due = now;
    ch->count++;
  }
  return 0;
}

/* When a CACK is owed: after the ack delay, or at once, or to report a
 * message whose next piece is late (NEVER: none). */
static dlcp_tstamp ack_due(const dlcp_ctlchan *ch) {
  return ch->cack_at < ch->tail_at ? ch->cack_at : ch->tail_at;
}

/* Our acknowledgement went out: nothing is owed. */
static void acked_all(dlcp_ctlchan *ch) {
  ch->cack_at = ch->tail_at = DLCP_TSTAMP_NEVER;
  ch->unacked_rx = 0;
}

/* Whether messages beyond a gap wait here (only a CACK's selective bits
 * can say so). */
static bool holds_early(const dlcp_ctlchan *ch) {
  return ch->nearly > 0;
}

static uint32_t in_window(const dlcp_ctlchan *ch) {
  return ch->count < DLCP_CTLCHAN_WINDOW ? ch->count : DLCP_CTLCHAN_WINDOW;
}

/* An estimate's timeout: srtt + 4 rttvar, the variation counted as at
 * least a quarter of srtt (RFC 6298's clock granularity, relative), and at
 * least min_rto.  Where the round trip hardly varies (a simulated fabric)
 * rttvar decays to nothing and an acknowledgement that met one packet
 * more in a queue was taken for a loss: 25,925 control datagrams were
 * sent again in a lossless 2.4 ms ring of 128 simulated ranks, none with
 * the quarter (docs/protocol.md). */
static dlcp_duration estimate_rto(const dlcp_ctlchan *ch, dlcp_duration srtt,
                                  dlcp_duration rttvar) {
  dlcp_duration var = 4 * rttvar > srtt / 4 ? 4 * rttvar : srtt / 4;
  dlcp_duration t = srtt + var;
  return t > ch->min_rto ? t : ch->min_rto;
}

/* A new message's timeout: the channel's own RTO once it has a sample
 * (control messages may be served ahead of the data whose RTT the caller
 * knows, or behind it), and the peer's ack delay unless the message is
 * acknowledged at once.  Both ends are configured with the same delay. */
static dlcp_duration first_rto(const dlcp_ctlchan *ch,
                               const dlcp_ctlchan_out *o, dlcp_duration rto) {
  dlcp_duration t = rto;
  if (o->grouped && ch->piece_srtt) {
    t = estimate_rto(ch, ch->piece_srtt, ch->piece_rttvar);
  } else if (ch->srtt) {
    t = estimate_rto(ch, ch->srtt, ch->rttvar);
  }
  return o->prompt ? t : t + ch->ack_delay;
}

/* When a transmission at |sent_at| alone in flight should have been
 * acknowledged: the latest round trip and a quarter more (RACK's
 * reordering window, RFC 8985), and not before min_rto from |now|.  A
 * long message's last piece whose pieces before it are acknowledged, or a
 * message sent again on the peer's selective bits, has no queue of its
 * own message ahead of it; the pieces' estimator, whose samples include
 * such a queue (200-1,400 us a channel at 1 Gbit/s in the simulator),
 * made it wait 1.4-6 ms when it was lost. */
static dlcp_tstamp expected_ack(const dlcp_ctlchan *ch, dlcp_tstamp sent_at,
                                dlcp_tstamp now) {
  dlcp_tstamp t = sent_at + ch->latest_rtt + ch->latest_rtt / 4;
  return t > now + ch->min_rto ? t : now + ch->min_rto;
}

/* Remembers that message |seq| goes out again after its timeout, in case
 * the peer reports the copy needless (learn_needless).  A copy sent at
 * once on the peer's selective bits is not remembered: if it was
 * needless, the first was reordered, not slow to be answered. */
static void log_resent(dlcp_ctlchan *ch, uint32_t seq,
                       const dlcp_ctlchan_out *o) {
  dlcp_ctlchan_resent *r =
      &ch->resent_log[ch->resent_next++ % DLCP_CTLCHAN_RESENT_LOG];
  *r = (dlcp_ctlchan_resent){.seq = seq,
                             .valid = true,
                             .prompt = o->prompt,
                             .grouped = o->grouped,
                             .sent_at = o->sent_at};
}

dlcp_ssize dlcp_ctlchan_poll(dlcp_ctlchan *ch, uint8_t *buf, size_t buflen,
                             dlcp_duration rto, dlcp_duration max_rto,
                             dlcp_tstamp now) {
  if (ack_due(ch) <= now) {
    dlcp_wire_cack c = {.job = ch->job,
                        .next = ch->next,
                        .sack = 0,
                        .early = ch->early_copies,
                        .early_seq = ch->early_copy_seq,
                        .echo_ts = ch->ts_recent,
                        .hold_ns = dlcp_rtt_hold_ns(ch->ts_recent_at, now)};
    for (uint32_t i = 0; i < 32 && i + 1 < DLCP_CTLCHAN_WINDOW; i++) {
      if (ch->early[(ch->next + 1 + i) % DLCP_CTLCHAN_WINDOW]) {
        c.sack |= 1u << i;
      }
    }
    dlcp_ssize n = dlcp_wire_cack_encode(buf, buflen, &c);
    if (n > 0) {
      acked_all(ch);
      ch->acked_next = ch->next;
      ch->early_copies = ch->early_copy_seq = 0;
    }
    return n;
  }
  uint32_t w = in_window(ch);
  for (uint32_t i = 0; i < w; i++) {
    dlcp_ctlchan_out *o = &ch->out[(ch->head + i) & (ch->cap - 1)];
    if (o->acked || o->due > now) {
      continue;
    }
    if (buflen < DLCP_WIRE_CDATA_HDR_LEN + (size_t)o->len) {
      return DLCP_ERR_BUFFER_TOO_SMALL;
    }
    dlcp_wire_cdata h = {.job = ch->job,
                         .cseq = ch->una + i,
                         .ack = ch->next,
                         .rest = o->rest,
                         .tx_ts = now,
                         .inner_len = o->len};
    dlcp_ssize n = dlcp_wire_cdata_encode_header(buf, buflen, &h);
    if (n < 0) {
      return n;
    }
    if (!holds_early(ch)) {
      acked_all(ch); /* the cumulative ack says it all */
    }
    ch->acked_next = ch->next;
    memcpy(buf + n, o->bytes, o->len);
    if (o->sent) {
      ch->retransmissions++;
    }
    dlcp_tstamp due = DLCP_TSTAMP_NEVER;
    if (o->resend_now) {
      o->resend_now = false;
      o->resent = true;
      if (ch->latest_rtt) {
        due = expected_ack(ch, now, now);
      }
    } else if (o->sent) {
      if (!o->resent) {
        log_resent(ch, ch->una + i, o);
      }
      o->resent = true;
      o->rto = o->rto * 2 < max_rto ? o->rto * 2 : max_rto;
      o->resent_fast = false;
    } else {
      dlcp_duration first = first_rto(ch, o, rto);
      o->rto = first < max_rto ? first : max_rto;
      o->sent = true;
      o->sent_at = now;
    }
    o->due = due < now + o->rto ? due : now + o->rto;
    return n + (dlcp_ssize)o->len;
  }
  return 0;
}

/* Messages of the window sent so far: they go out in order, so a prefix. */
static uint32_t sent_prefix(const dlcp_ctlchan *ch) {
  uint32_t w = in_window(ch), n = 0;
  while (n < w && ch->out[(ch->head + n) & (ch->cap - 1)].sent) {
    n++;
  }
  return n;
}

/* Takes |sample| into the pieces' estimator or the messages' (ack_one). */
static void take_sample(dlcp_ctlchan *ch, bool grouped, dlcp_duration sample) {
  if (grouped) {
    dlcp_rtt_sample(&ch->piece_srtt, &ch->piece_rttvar, sample);
  } else {
    dlcp_rtt_sample(&ch->srtt, &ch->rttvar, sample);
  }
}

/* What a CACK's echo times (ack_one). */
typedef struct cack_echo {
  dlcp_tstamp ts;    /* the send time echoed (NEVER for a CDATA's ack) */
  dlcp_duration rtt; /* its round trip less the peer's hold, the part of
                        it up to the ack delay (0: none to take) */
  bool copy_timed;   /* a message sent more than once was timed by it */
  bool timed;        /* the message it echoes was timed by it */
} cack_echo;

/* Marks |seq| acknowledged if it is in flight; a sample's is an RTT
 * sample.  A prompt message is acknowledged at once.  A grouped message's
 * first piece is acknowledged with the next few, and its time includes
 * the queue in front of the peer's acknowledgement (often the peer's own
 * burst of pieces the other way), which the timeouts of such pieces must
 * cover but those of single messages need not: they have their own
 * estimator.  Later pieces are no samples: their time would count the
 * pieces queued ahead of them at the sender.
 * A message sent more than once is timed from the transmission the
 * CACK echoes, once per CACK (|e->copy_timed|).  Karn's rule alone,
 * which takes no sample from an acknowledgement that may answer either
 * copy, never corrected a first timeout shorter than every long
 * message's round trip (docs/protocol.md).  An echo from before the first
 * transmission or after now is not of this message, or forged.
 * Any other message or piece of a message not grouped, sent once, is a
 * sample when it is the transmission the CACK echoes, timed less the
 * peer's hold up to the ack delay (its acknowledgement may wait for that
 * delay, which its timeout adds): without, a channel carrying only EAGERs
 * (an all-reduce of 64 KiB at 10 Gbit/s) had no sample but those of
 * needless copies, a peer's stall of 1-8 ms that then set every later
 * timeout to three times its length (docs/protocol.md).
 * Returns whether it was in flight and not yet acknowledged. */
static bool ack_one(dlcp_ctlchan *ch, uint32_t seq, cack_echo *e,
                    dlcp_tstamp now) {
  uint32_t d = seq - ch->una;
  if (d >= in_window(ch)) {
    return false;
  }
  dlcp_ctlchan_out *o = &ch->out[(ch->head + d) & (ch->cap - 1)];
  if (o->acked || !o->sent) {
    return false;
  }
  o->acked = true;
  if (!o->sample) {
    if (!o->grouped && !o->resent && !e->timed && e->rtt > 0 &&
        o->sent_at == e->ts) {
      e->timed = true;
      take_sample(ch, false, e->rtt);
    }
    return true;
  }
  dlcp_tstamp from = o->sent_at;
  if (o->resent) {
    if (e->copy_timed || e->ts < o->sent_at || e->ts > now) {
      return true;
    }
    from = e->ts;
  }
  if (from > now) {
    return true;
  }
  e->copy_timed |= o->resent;
  take_sample(ch, o->grouped, now - from);
  return true;
}

/* The last piece of a message of several (whose pieces all have
 * full-size buffers). */
static bool last_of_several(const dlcp_ctlchan_out *o) {
  return o->full_size && o->rest == 0;
}

/* An acknowledgement of something new restarts the timeouts of the
 * grouped pieces still in flight (RFC 6298, 5.3): the pieces of a long
 * message leave together but reach the peer at the bottleneck's pace (a
 * 64 KiB EAGER takes 0.5 ms through 1 Gbit/s), so a timeout counted from
 * their sending sent the burst's tail again while it was still arriving
 * (docs/protocol.md, "Control channel without TCP").  The peer
 * acknowledges them without delay (a group, or the message once whole),
 * so their estimate alone times them from here, the ack delay left out.
 * A last piece whose pieces before it are all acknowledged (the peer
 * acknowledges the one before the last at once) has no piece of its own
 * message ahead of it any more: it is expected as expected_ack says, and
 * so is a shorter message's last piece when that comes sooner (the peer
 * acknowledges a message at once when whole once it has acknowledged a
 * part).  A copy sent on the peer's selective bits left alone, after the
 * burst: its timeout runs from its sending.  Other messages keep their
 * timeouts: a short message's last piece, lost, waited for the delay
 * twice when the acknowledgement of the pieces before it, itself
 * delayed, restarted its timeout. */
static void restart_timeouts(dlcp_ctlchan *ch, dlcp_tstamp now) {
  uint32_t w = sent_prefix(ch);
  for (uint32_t i = 0; i < w; i++) {
    dlcp_ctlchan_out *o = &ch->out[(ch->head + i) & (ch->cap - 1)];
    if (o->acked || o->resend_now || o->resent_fast) {
      continue;
    }
    bool alone = last_of_several(o) &&
                 (i == 0 || ch->out[(ch->head + i - 1) & (ch->cap - 1)].acked);
    if (alone && !o->resent && ch->latest_rtt) {
      dlcp_tstamp t = expected_ack(ch, o->sent_at, now);
      o->due = o->grouped || t < o->due ? t : o->due;
      continue;
    }
    if (!o->grouped) {
      continue;
    }
    dlcp_duration t = !o->resent && ch->piece_srtt
                          ? estimate_rto(ch, ch->piece_srtt, ch->piece_rttvar)
                          : o->rto;
    if (o->due < now + t) {
      o->due = now + t;
    }
  }
}

/* A message the peer's selective bits skip while later ones arrived is
 * lost, not late, once DLCP_CTLCHAN_REORDER of them did, or all that were
 * sent after it if fewer were (TCP's early retransmit): it is sent again
 * at once instead of after its timeout, which would hold every later
 * message for that long (delivery is in order), and with them every
 * transfer of the connection.  Once per timeout. */
static void resend_skipped(dlcp_ctlchan *ch, const dlcp_wire_cack *c) {
  if (c->sack == 0) {
    return;
  }
  uint32_t nsent = sent_prefix(ch);
  for (uint32_t k = 0; k < 32; k++) {
    if (k > 0 && (c->sack & (1u << (k - 1)))) {
      continue; /* arrived */
    }
    uint32_t above = (uint32_t)__builtin_popcount(c->sack >> k);
    uint32_t d = c->next + k - ch->una;
    if (above == 0 || d >= nsent) {
      return;
    }
    uint32_t later = nsent - d - 1;
    if (above < (later < DLCP_CTLCHAN_REORDER ? later
                                              : DLCP_CTLCHAN_REORDER)) {
      return;
    }
    dlcp_ctlchan_out *o = &ch->out[(ch->head + d) & (ch->cap - 1)];
    if (!o->acked && !o->resent_fast) {
      o->resend_now = true;
      o->resent_fast = true;
      o->due = 0;
    }
  }
}

/* The peer got a copy of |seq| before it had acknowledged the first: if
 * we sent it again after its timeout, the timeout was shorter than the
 * peer took to answer (its process waiting for a core, most often).  The
 * time since the first transmission, less the ack delay a message not
 * prompt has on top of its timeout, bounds that answer's round trip from
 * above; it goes into the estimate as a sample, unless the CACK's echo
 * has just |timed| a message: the peer echoes the transmission that
 * brought the message, not the copy (on_cdata), so that is the same
 * sample, taken once.  A lost message cannot be reported so: the peer
 * never had it.  Nor is it an estimate's first sample: a bound from one
 * stall (a peer's process waiting 1.5-17 ms for a core early in a run,
 * on the testbed) would set the timeout to three times that (rttvar
 * half the first sample) until a score of round trips wore it down; the
 * CACKs' echoes give the estimate its first samples. */
static void learn_needless(dlcp_ctlchan *ch, uint32_t seq, bool timed,
                           dlcp_tstamp now) {
  for (uint32_t i = 0; i < DLCP_CTLCHAN_RESENT_LOG; i++) {
    dlcp_ctlchan_resent *r = &ch->resent_log[i];
    if (!r->valid || r->seq != seq || now < r->sent_at) {
      continue;
    }
    r->valid = false;
    ch->needless++;
    if (timed) {
      return;
    }
    dlcp_duration rtt = now - r->sent_at;
    dlcp_duration held = r->prompt ? 0 : ch->ack_delay;
    if (rtt <= held) {
      return;
    }
    if ((r->grouped ? ch->piece_srtt : ch->srtt) != 0) {
      take_sample(ch, r->grouped, rtt - held);
    }
    return;
  }
}

static void on_cack(dlcp_ctlchan *ch, const dlcp_wire_cack *c,
                    dlcp_tstamp now) {
  /* A cumulative ack beyond what was sent is forged or stale: ignored. */
  uint32_t upto = c->next - ch->una;
  if (upto > in_window(ch)) {
    upto = 0;
  }
  cack_echo e = {.ts = c->echo_ts};
  if (c->echo_ts <= now) {
    dlcp_duration held =
        c->hold_ns < ch->ack_delay ? c->hold_ns : ch->ack_delay;
    e.rtt = now - c->echo_ts > held ? now - c->echo_ts - held : 0;
  }
  bool progress = false;
  for (uint32_t i = 0; i < upto; i++) {
    progress |= ack_one(ch, ch->una + i, &e, now);
  }
  for (uint32_t i = 0; i < 32; i++) {
    if (c->sack & (1u << i)) {
      progress |= ack_one(ch, c->next + 1 + i, &e, now);
    }
  }
  while (ch->count > 0 && ch->out[ch->head].acked) {
    piece_free(ch, &ch->out[ch->head]);
    ch->head = (ch->head + 1) & (ch->cap - 1);
    ch->count--;
    ch->una++;
  }
  if (progress) {
    if (e.rtt > 0) {
      ch->latest_rtt = e.rtt;
    }
    restart_timeouts(ch, now);
  }
  resend_skipped(ch, c);
  if (c->early > 0) {
    learn_needless(ch, c->early_seq, e.copy_timed, now);
  }
}

/* How long the message being joined may wait for its next piece before
 * a CACK reports the pieces it has: its pieces leave together, so the
 * next one follows within a piece's time at the bottleneck, and a quarter
 * of the latest round trip covers reordering as RACK's window does (a
 * quarter of the ack delay until this end has timed a round trip); never
 * less than min_rto. */
static dlcp_duration tail_wait(const dlcp_ctlchan *ch) {
  dlcp_duration w = (ch->latest_rtt ? ch->latest_rtt : ch->ack_delay) / 4;
  return w > ch->min_rto ? w : ch->min_rto;
}

/* Ends the message being joined; its buffer stays for the next one
 * unless it is longer than a channel keeps. */
static void drop_joined(dlcp_ctlchan *ch) {
  if (ch->join_cap > DLCP_CTLCHAN_KEEP_BYTES) {
    ch->mem->free(ch->join_buf, ch->mem->user);
    ch->join_buf = NULL;
    ch->join_cap = 0;
  }
  ch->joined = NULL;
  ch->joined_len = ch->joined_total = ch->joined_pieces = 0;
}

/* Takes the next piece in order, with |rest| bytes of its message after
 * it: a whole message goes to |deliver| as it is, pieces are joined until
 * the last.  Returns whether the acknowledgement is due at once: deliver
 * asked for it, or the message came in more pieces than are acknowledged
 * together (the sender times the last of them without the ack delay,
 * restart_timeouts); a shorter one waits for the reply to carry the
 * acknowledgement, as a whole message does, instead of costing a CACK.
 * Sets *err to DLCP_ERR_BAD_LENGTH if the pieces disagree on the
 * message's length, or to DLCP_ERR_NOMEM if there is no memory to join
 * them (the message's pieces are then passed over and it is lost). */
static bool take(dlcp_ctlchan *ch, const uint8_t *msg, size_t len,
                 uint32_t rest, dlcp_ctlchan_deliver_fn deliver, void *user,
                 int *err) {
  if (ch->joined_total == 0) {
    if (rest == 0) {
      return deliver(user, msg, len);
    }
    ch->joined_total = (uint32_t)len + rest; /* <= CTRL_MAX: decoder */
    /* The first piece is full-size: it tells how many there are. */
    ch->joined_grouped =
        ch->joined_total > DLCP_CTLCHAN_PIECE_ACKS * (uint32_t)len;
    if (ch->join_cap < ch->joined_total) {
      ch->mem->free(ch->join_buf, ch->mem->user);
      ch->join_buf = ch->mem->malloc(ch->joined_total, ch->mem->user);
      ch->join_cap = ch->join_buf ? ch->joined_total : 0;
    }
    ch->joined = ch->join_buf;
    if (!ch->joined) {
      *err = DLCP_ERR_NOMEM;
    }
  } else if (ch->joined_len + len + rest != ch->joined_total) {
    drop_joined(ch);
    *err = DLCP_ERR_BAD_LENGTH;
    return false;
  }
  if (ch->joined) {
    memcpy(ch->joined + ch->joined_len, msg, len);
  }
  ch->joined_len += (uint32_t)len;
  ch->joined_pieces++;
  if (rest > 0) {
    /* The next piece is the last (pieces are full but the last) of a
     * grouped message: acknowledged now, the sender times that last piece
     * from here (restart_timeouts). */
    return rest <= len && ch->joined_grouped;
  }
  bool prompt = ch->joined && deliver(user, ch->joined, ch->joined_total);
  prompt |= ch->joined_grouped;
  /* Acknowledged in part, the sender expects the rest within a round
   * trip (restart_timeouts). */
  prompt |= (int32_t)(ch->acked_next - (ch->next - ch->joined_pieces)) > 0;
  drop_joined(ch);
  return prompt;
}

/* Our next CACK echoes |tx_ts|, which arrived |now|. */
static void echo_next(dlcp_ctlchan *ch, dlcp_tstamp tx_ts, dlcp_tstamp now) {
  ch->ts_recent = tx_ts;
  ch->ts_recent_at = now;
}

/* Takes CDATA |h|.  Our next CACK echoes its send time unless it is a
 * copy of a message we hold but had not acknowledged: the echo then
 * stays that of the transmission that brought the message, whose
 * acknowledgement the sender's timeout did not wait for. */
static int on_cdata(dlcp_ctlchan *ch, const dlcp_wire_cdata *h,
                    dlcp_ctlchan_deliver_fn deliver, void *user,
                    dlcp_tstamp now) {
  uint32_t seq = h->cseq, rest = h->rest;
  const uint8_t *msg = h->inner;
  size_t len = h->inner_len;
  uint32_t d = seq - ch->next;
  if (d >= DLCP_CTLCHAN_WINDOW) {
    /* Already delivered (d wrapped) or beyond any window we granted: say
     * our acknowledgement again now.  If we had not sent one yet, the
     * sender's timeout was too short, and it learns so from this CACK;
     * otherwise our acknowledgement was lost or is late. */
    bool delivered = (int32_t)(seq - ch->next) < 0;
    if (delivered && (int32_t)(seq - ch->acked_next) >= 0) {
      if (ch->early_copies < UINT32_MAX) {
        ch->early_copies++;
      }
      ch->early_copy_seq = seq;
    } else {
      ch->duplicates++;
      echo_next(ch, h->tx_ts, now);
    }
    ch->cack_at = now;
    return 0;
  }
  if (d > 0) {
    /* A gap: the sender learns of it from the selective bits, now. */
    ch->cack_at = now;
    uint32_t slot = seq % DLCP_CTLCHAN_WINDOW;
    if (ch->early[slot]) {
      ch->duplicates++;
      return 0;
    }
    echo_next(ch, h->tx_ts, now);
    uint8_t *copy = ch->mem->malloc(len, ch->mem->user);
    if (!copy) {
      return 0; /* unacknowledged in effect: it will come again */
    }
    memcpy(copy, msg, len);
    ch->early[slot] = copy;
    ch->early_len[slot] = (uint32_t)len;
    ch->early_rest[slot] = rest;
    ch->nearly++;
    return 0;
  }
  /* In order: wait for a reply to carry the acknowledgement, but never
   * past the ack delay or a quarter window; filling a gap or a prompt
   * message says so now.  Pieces are acknowledged every
   * DLCP_CTLCHAN_PIECE_ACKS, and a message of more pieces at once when
   * whole: the sender has the rest of a burst in flight, whose timeouts
   * only an acknowledgement restarts. */
  echo_next(ch, h->tx_ts, now);
  int err = 0;
  bool in_pieces = rest > 0 || ch->joined_total > 0;
  uint32_t ack_every = in_pieces ? DLCP_CTLCHAN_PIECE_ACKS
                                 : DLCP_CTLCHAN_WINDOW / 4;
  bool now_due = ++ch->unacked_rx >= ack_every || holds_early(ch);
  ch->next++;
  now_due |= take(ch, msg, len, rest, deliver, user, &err);
  for (;;) {
    uint32_t slot = ch->next % DLCP_CTLCHAN_WINDOW;
    uint8_t *e = ch->early[slot];
    if (!e) {
      break;
    }
    ch->early[slot] = NULL;
    ch->nearly--;
    ch->next++;
    now_due |= take(ch, e, ch->early_len[slot], ch->early_rest[slot],
                    deliver, user, &err);
    ch->mem->free(e, ch->mem->user);
  }
  if (now_due) {
    ch->cack_at = now;
  } else if (ch->cack_at == DLCP_TSTAMP_NEVER) {
    ch->cack_at = now + ch->ack_delay;
  }
  ch->tail_at = ch->joined_total > 0 && !ch->joined_grouped
                    ? now + tail_wait(ch)
                    : DLCP_TSTAMP_NEVER;
  return err;
}

int dlcp_ctlchan_on_datagram(dlcp_ctlchan *ch, const uint8_t *buf,
                             size_t len, dlcp_ctlchan_deliver_fn deliver,
                             void *user, dlcp_tstamp now) {
  dlcp_wire_preamble pre;
  int rv = dlcp_wire_peek(&pre, buf, len);
  if (rv != 0) {
    return rv;
  }
  if (pre.type == DLCP_WIRE_CACK) {
    dlcp_wire_cack c;
    rv = dlcp_wire_cack_decode(&c, buf, len);
    if (rv == 0) {
      on_cack(ch, &c, now);
    }
    return rv;
  }
  dlcp_wire_cdata h;
  rv = dlcp_wire_cdata_decode(&h, buf, len);
  if (rv == 0) {
    dlcp_wire_cack piggy = {
        .job = ch->job, .next = h.ack, .echo_ts = DLCP_TSTAMP_NEVER};
    on_cack(ch, &piggy, now);
    rv = on_cdata(ch, &h, deliver, user, now);
  }
  return rv;
}

dlcp_tstamp dlcp_ctlchan_deadline(const dlcp_ctlchan *ch) {
  dlcp_tstamp t = ack_due(ch);
  uint32_t w = in_window(ch);
  for (uint32_t i = 0; i < w; i++) {
    const dlcp_ctlchan_out *o = &ch->out[(ch->head + i) & (ch->cap - 1)];
    if (!o->acked && o->due < t) {
      t = o->due;
    }
  }
  return t;
}

uint32_t dlcp_ctlchan_unacked(const dlcp_ctlchan *ch) {
  return ch->count;
}

bool dlcp_ctlchan_owes_ack(const dlcp_ctlchan *ch) {
  return ack_due(ch) != DLCP_TSTAMP_NEVER;
}
