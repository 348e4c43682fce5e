/*
 * ctlchan_test: MLT's datagram control channel (src/proto/ctlchan.c) on
 * its own: exactly-once in-order delivery through loss, duplication and
 * reordering, the RTO and its doubling, the in-flight window, selective
 * acknowledgement, the count of unacknowledged messages, acknowledgements
 * delayed for a reply to carry them, prompt messages acknowledged at once
 * and timed by the channel's own RTT, copies the peer reports needless
 * raising the timeout, long messages in pieces, the echoed send time that
 * times a message sent twice, and the timing of a message alone in
 * flight (RACK).  Time is an argument; nothing sleeps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/ctlchan.h"
#include "proto/rng.h"
#include "wire/wire.h"

#define RTO 1000u
#define MAX_RTO 8000u
#define NMSG 100u

typedef struct log {
  uint32_t got[4 * NMSG];
  size_t n;
  bool prompt; /* what the receiver says of every message */
} log;

/* Messages are NOTEs whose value is their index. */
static size_t make_msg(uint8_t *buf, uint32_t i) {
  dlcp_wire_note n = {.job = 7, .op = 1, .value = i};
  return (size_t)dlcp_wire_note_encode(buf, DLCP_WIRE_NOTE_LEN, &n);
}

static bool deliver(void *user, const uint8_t *msg, size_t len) {
  log *l = user;
  dlcp_wire_note n;
  assert_int_equal(dlcp_wire_note_decode(&n, msg, len), 0);
  l->got[l->n++] = (uint32_t)n.value;
  return l->prompt;
}

/* Pieces of long messages in the tests below. */
#define PIECE 64u

/* One datagram in flight between the two ends. */
typedef struct dgram {
  uint8_t b[DLCP_WIRE_CDATA_HDR_LEN + PIECE];
  size_t len;
  int to; /* 0: to the sender, 1: to the receiver */
} dgram;

/* One exchange through a bad network: what |a| and |b| have due at |now|,
 * 30 % lost, 20 % twice, delivered in reverse order. */
static void exchange_badly(dlcp_ctlchan *a, dlcp_ctlchan *b, dlcp_rng *rng,
                           dlcp_tstamp now, dlcp_ctlchan_deliver_fn to_app,
                           void *user) {
  static dgram net[256];
  size_t nnet = 0;
  dlcp_ssize len;
  while (nnet < 128 && (len = dlcp_ctlchan_poll(a, net[nnet].b,
                                                sizeof(net[0].b), RTO,
                                                MAX_RTO, now)) > 0) {
    net[nnet].len = (size_t)len;
    net[nnet++].to = 1;
  }
  while (nnet < 256 && (len = dlcp_ctlchan_poll(b, net[nnet].b,
                                                sizeof(net[0].b), RTO,
                                                MAX_RTO, now)) > 0) {
    net[nnet].len = (size_t)len;
    net[nnet++].to = 0;
  }
  for (size_t k = nnet; k-- > 0;) {
    if (dlcp_rng_unit(rng) < 0.3) {
      continue;
    }
    int copies = dlcp_rng_unit(rng) < 0.2 ? 2 : 1;
    for (int c = 0; c < copies; c++) {
      dlcp_ctlchan *to = net[k].to ? b : a;
      assert_int_equal(dlcp_ctlchan_on_datagram(to, net[k].b, net[k].len,
                                                to_app, user, now),
                       0);
    }
  }
}

static void test_exactly_once_in_order_through_a_bad_network(void **state) {
  (void)state;
  dlcp_ctlchan a, b;
  dlcp_ctlchan_init(&a, dlcp_mem_default(), 7, 0, 0, 0);
  dlcp_ctlchan_init(&b, dlcp_mem_default(), 7, 0, 0, 0);
  uint8_t m[DLCP_WIRE_NOTE_LEN];
  for (uint32_t i = 0; i < NMSG; i++) {
    assert_int_equal(dlcp_ctlchan_send(&a, m, make_msg(m, i), false, 0), 0);
  }
  log rx = {.n = 0};
  dlcp_rng rng;
  dlcp_rng_seed(&rng, 3);
  dlcp_tstamp now = 0;
  for (int step = 0; step < 10000 && rx.n < NMSG; step++) {
    exchange_badly(&a, &b, &rng, now, deliver, &rx);
    now += RTO / 4;
  }
  assert_int_equal(rx.n, NMSG);
  for (uint32_t i = 0; i < NMSG; i++) {
    assert_int_equal(rx.got[i], i);
  }
  assert_true(a.retransmissions > 0);
  assert_true(b.duplicates > 0);
  dlcp_ctlchan_fini(&a);
  dlcp_ctlchan_fini(&b);
}

static void test_rto_doubles_to_the_cap(void **state) {
  (void)state;
  dlcp_ctlchan a;
  dlcp_ctlchan_init(&a, dlcp_mem_default(), 7, 0, 0, 0);
  uint8_t m[DLCP_WIRE_NOTE_LEN], buf[64];
  assert_int_equal(dlcp_ctlchan_send(&a, m, make_msg(m, 0), false, 100), 0);
  assert_int_equal(dlcp_ctlchan_deadline(&a), 100);
  assert_int_equal(dlcp_ctlchan_poll(&a, buf, 64, RTO, MAX_RTO, 100),
                   DLCP_WIRE_CDATA_HDR_LEN + DLCP_WIRE_NOTE_LEN);
  /* Resent at 100 + 1000, + 2000, + 4000, then every 8000. */
  dlcp_tstamp due = 100 + RTO;
  const dlcp_duration next_rto[] = {2000, 4000, 8000, 8000, 8000};
  for (size_t i = 0; i < 5; i++) {
    assert_int_equal(dlcp_ctlchan_deadline(&a), due);
    assert_int_equal(dlcp_ctlchan_poll(&a, buf, 64, RTO, MAX_RTO, due - 1), 0);
    assert_true(dlcp_ctlchan_poll(&a, buf, 64, RTO, MAX_RTO, due) > 0);
    assert_int_equal(a.retransmissions, i + 1);
    due += next_rto[i];
  }
  dlcp_ctlchan_fini(&a);
}

static void test_window_and_selective_ack(void **state) {
  (void)state;
  dlcp_ctlchan a, b;
  dlcp_ctlchan_init(&a, dlcp_mem_default(), 7, 0, 0, 0);
  dlcp_ctlchan_init(&b, dlcp_mem_default(), 7, 0, 0, 0);
  uint8_t m[DLCP_WIRE_NOTE_LEN], d[DLCP_CTLCHAN_WINDOW + 8][64], c[64];
  for (uint32_t i = 0; i < DLCP_CTLCHAN_WINDOW + 8; i++) {
    assert_int_equal(dlcp_ctlchan_send(&a, m, make_msg(m, i), false, 0), 0);
  }
  size_t sent = 0;
  while (dlcp_ctlchan_poll(&a, d[sent], 64, RTO, MAX_RTO, 0) > 0) {
    sent++;
  }
  assert_int_equal(sent, DLCP_CTLCHAN_WINDOW); /* the rest wait */
  assert_int_equal(dlcp_ctlchan_unacked(&a), DLCP_CTLCHAN_WINDOW + 8);
  /* Message 0 is lost; the rest of the window arrives and waits for it. */
  log rx = {.n = 0};
  size_t dl = DLCP_WIRE_CDATA_HDR_LEN + DLCP_WIRE_NOTE_LEN;
  for (size_t i = 1; i < sent; i++) {
    assert_int_equal(dlcp_ctlchan_on_datagram(&b, d[i], dl, deliver, &rx, 0), 0);
  }
  assert_int_equal(rx.n, 0);
  dlcp_ssize cl = dlcp_ctlchan_poll(&b, c, 64, RTO, MAX_RTO, 0);
  assert_int_equal(cl, DLCP_WIRE_CACK_LEN);
  dlcp_wire_cack ck;
  assert_int_equal(dlcp_wire_cack_decode(&ck, c, (size_t)cl), 0);
  assert_int_equal(ck.next, 0);
  assert_int_equal(ck.sack, 0xFFFFFFFFu); /* 1..32 */
  assert_int_equal(dlcp_ctlchan_on_datagram(&a, c, (size_t)cl, deliver, &rx, 10),
                   0);
  /* Selectively acknowledged messages still count until 0 is: the
   * window (and what a driver must keep resending) starts at 0. */
  assert_int_equal(dlcp_ctlchan_unacked(&a), DLCP_CTLCHAN_WINDOW + 8);
  /* 32 later messages arrived: 0 is lost, and goes again at once, not at
   * its timeout; the others are acknowledged or still within theirs. */
  assert_int_equal(dlcp_ctlchan_deadline(&a), 0);
  uint8_t r[64];
  dlcp_ssize rl = dlcp_ctlchan_poll(&a, r, 64, RTO, MAX_RTO, 10);
  assert_int_equal(rl, (dlcp_ssize)dl);
  assert_int_equal(a.retransmissions, 1);
  assert_int_equal(dlcp_ctlchan_poll(&a, r, 64, RTO, MAX_RTO, 10), 0);
  /* The same selective bits again (the resent message still on its way)
   * send nothing more before the copy's timeout: alone in flight, it is
   * due the latest round trip (the CACK at 10 echoed 0) and a quarter
   * after its sending, 10 + 10 + 2 (RACK), not its RTO. */
  assert_int_equal(dlcp_ctlchan_on_datagram(&a, c, (size_t)cl, deliver, &rx, 20),
                   0);
  assert_int_equal(dlcp_ctlchan_poll(&a, r, 64, RTO, MAX_RTO, 20), 0);
  assert_int_equal(dlcp_ctlchan_deadline(&a), 22);
  assert_int_equal(dlcp_ctlchan_on_datagram(&b, r, (size_t)rl, deliver, &rx, 30),
                   0);
  assert_int_equal(rx.n, DLCP_CTLCHAN_WINDOW);
  for (uint32_t i = 0; i < rx.n; i++) {
    assert_int_equal(rx.got[i], i);
  }
  /* The CACK for the whole window opens it for the last 8. */
  cl = dlcp_ctlchan_poll(&b, c, 64, RTO, MAX_RTO, RTO);
  assert_int_equal(dlcp_ctlchan_on_datagram(&a, c, (size_t)cl, deliver, &rx, 0),
                   0);
  sent = 0;
  while (dlcp_ctlchan_poll(&a, d[sent], 64, RTO, MAX_RTO, RTO) > 0) {
    sent++;
  }
  assert_int_equal(sent, 8);
  assert_int_equal(dlcp_ctlchan_unacked(&a), 8);
  for (size_t i = 0; i < sent; i++) {
    assert_int_equal(dlcp_ctlchan_on_datagram(&b, d[i], dl, deliver, &rx, 0), 0);
  }
  cl = dlcp_ctlchan_poll(&b, c, 64, RTO, MAX_RTO, RTO);
  assert_int_equal(dlcp_ctlchan_on_datagram(&a, c, (size_t)cl, deliver, &rx, 0),
                   0);
  assert_int_equal(dlcp_ctlchan_unacked(&a), 0);
  dlcp_ctlchan_fini(&a);
  dlcp_ctlchan_fini(&b);
}

/* Sends |n| messages from |a| and returns them in |d|. */
static size_t send_n(dlcp_ctlchan *a, uint8_t (*d)[64], uint32_t n) {
  uint8_t m[DLCP_WIRE_NOTE_LEN];
  for (uint32_t i = 0; i < n; i++) {
    assert_int_equal(dlcp_ctlchan_send(a, m, make_msg(m, i), false, 0), 0);
  }
  size_t sent = 0;
  while (dlcp_ctlchan_poll(a, d[sent], 64, RTO, MAX_RTO, 0) > 0) {
    sent++;
  }
  return sent;
}

/* Whether |a| resends message 0 before its timeout once |b| has received
 * messages |from|..|to| of the ones sent. */
static bool resent_early(dlcp_ctlchan *a, dlcp_ctlchan *b, uint8_t (*d)[64],
                         size_t from, size_t to) {
  log rx = {.n = 0};
  size_t dl = DLCP_WIRE_CDATA_HDR_LEN + DLCP_WIRE_NOTE_LEN;
  for (size_t i = from; i <= to; i++) {
    assert_int_equal(dlcp_ctlchan_on_datagram(b, d[i], dl, deliver, &rx, 0),
                     0);
  }
  uint8_t c[64];
  dlcp_ssize cl = dlcp_ctlchan_poll(b, c, 64, RTO, MAX_RTO, 0);
  assert_int_equal(cl, DLCP_WIRE_CACK_LEN);
  assert_int_equal(dlcp_ctlchan_on_datagram(a, c, (size_t)cl, deliver, &rx, 0),
                   0);
  return dlcp_ctlchan_deadline(a) < RTO;
}

/* A skipped message is lost once three later ones arrived, or every later
 * one if fewer were sent; fewer is reordering, left to the timeout. */
static void test_skipped_message_resent_at_once(void **state) {
  (void)state;
  const struct {
    uint32_t sent;
    size_t last_arrived;
    bool resent;
  } cases[] = {{8, 2, false}, {8, 3, true}, {2, 1, true}, {3, 1, false},
               {3, 2, true}};
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
    dlcp_ctlchan a, b;
    dlcp_ctlchan_init(&a, dlcp_mem_default(), 7, 0, 0, 0);
    dlcp_ctlchan_init(&b, dlcp_mem_default(), 7, 0, 0, 0);
    uint8_t d[8][64];
    assert_int_equal(send_n(&a, d, cases[k].sent), cases[k].sent);
    assert_int_equal(resent_early(&a, &b, d, 1, cases[k].last_arrived),
                     cases[k].resent);
    dlcp_ctlchan_fini(&a);
    dlcp_ctlchan_fini(&b);
  }
}

static void test_rejects_bad_messages(void **state) {
  (void)state;
  dlcp_ctlchan a;
  dlcp_ctlchan_init(&a, dlcp_mem_default(), 7, 0, 0, 0);
  uint8_t m[DLCP_WIRE_NOTE_LEN] = {0};
  assert_int_equal(dlcp_ctlchan_send(&a, m, 15, false, 0),
                   DLCP_ERR_INVALID_ARGUMENT);
  log rx = {.n = 0};
  assert_true(dlcp_ctlchan_on_datagram(&a, m, 16, deliver, &rx, 0) < 0);
  /* A CACK acknowledging what was never sent changes nothing. */
  uint8_t c[DLCP_WIRE_CACK_LEN];
  dlcp_wire_cack ck = {.job = 7, .next = 1000, .sack = 0};
  assert_int_equal(dlcp_wire_cack_encode(c, sizeof(c), &ck),
                   DLCP_WIRE_CACK_LEN);
  assert_int_equal(dlcp_ctlchan_send(&a, m, make_msg(m, 0), false, 0), 0);
  assert_int_equal(dlcp_ctlchan_on_datagram(&a, c, sizeof(c), deliver, &rx, 0),
                   0);
  assert_int_equal(a.count, 1);
  dlcp_ctlchan_fini(&a);
}

/* Sends message |i| from |from| at |now| and returns its CDATA datagram's
 * length in |d|. */
static size_t one_cdata(dlcp_ctlchan *from, uint8_t *d, uint32_t i,
                        dlcp_tstamp now) {
  uint8_t m[DLCP_WIRE_NOTE_LEN];
  assert_int_equal(dlcp_ctlchan_send(from, m, make_msg(m, i), false, now), 0);
  dlcp_ssize n = dlcp_ctlchan_poll(from, d, 64, RTO, MAX_RTO, now);
  assert_int_equal(n, DLCP_WIRE_CDATA_HDR_LEN + DLCP_WIRE_NOTE_LEN);
  return (size_t)n;
}

/* A lone message's acknowledgement waits for the ack delay; a reply
 * inside it carries the acknowledgement and no CACK goes at all. */
static void test_reply_carries_the_ack(void **state) {
  (void)state;
  dlcp_ctlchan a, b;
  dlcp_ctlchan_init(&a, dlcp_mem_default(), 7, 500, 0, 0);
  dlcp_ctlchan_init(&b, dlcp_mem_default(), 7, 500, 0, 0);
  uint8_t d[64], c[64];
  log rx = {.n = 0};
  size_t dl = one_cdata(&a, d, 0, 100);
  assert_int_equal(dlcp_ctlchan_on_datagram(&b, d, dl, deliver, &rx, 100), 0);
  assert_int_equal(rx.n, 1);
  assert_true(dlcp_ctlchan_owes_ack(&b));
  assert_int_equal(dlcp_ctlchan_deadline(&b), 600);
  assert_int_equal(dlcp_ctlchan_poll(&b, c, 64, RTO, MAX_RTO, 599), 0);
  /* The reply at 300 acknowledges message 0. */
  dl = one_cdata(&b, d, 1, 300);
  assert_false(dlcp_ctlchan_owes_ack(&b));
  assert_int_equal(dlcp_ctlchan_poll(&b, c, 64, RTO, MAX_RTO, 600), 0);
  assert_int_equal(dlcp_ctlchan_unacked(&a), 1);
  assert_int_equal(dlcp_ctlchan_on_datagram(&a, d, dl, deliver, &rx, 300), 0);
  assert_int_equal(dlcp_ctlchan_unacked(&a), 0);
  assert_int_equal(rx.n, 2);
  /* Now |a| owes one, and nothing goes back: a CACK at the delay. */
  assert_int_equal(dlcp_ctlchan_deadline(&a), 800);
  assert_int_equal(dlcp_ctlchan_poll(&a, c, 64, RTO, MAX_RTO, 799), 0);
  assert_int_equal(dlcp_ctlchan_poll(&a, c, 64, RTO, MAX_RTO, 800),
                   DLCP_WIRE_CACK_LEN);
  assert_false(dlcp_ctlchan_owes_ack(&a));
  assert_int_equal(dlcp_ctlchan_deadline(&a), DLCP_TSTAMP_NEVER);
  assert_int_equal(dlcp_ctlchan_on_datagram(&b, c, DLCP_WIRE_CACK_LEN,
                                            deliver, &rx, 800),
                   0);
  assert_int_equal(dlcp_ctlchan_unacked(&b), 0);
  assert_int_equal(a.retransmissions + b.retransmissions, 0);
  dlcp_ctlchan_fini(&a);
  dlcp_ctlchan_fini(&b);
}

/* What the sender's window and loss recovery wait on is acknowledged at
 * once: a quarter window of messages, a gap, a duplicate. */
static void test_acks_at_once_when_it_matters(void **state) {
  (void)state;
  dlcp_ctlchan a, b;
  dlcp_ctlchan_init(&a, dlcp_mem_default(), 7, 500, 0, 0);
  dlcp_ctlchan_init(&b, dlcp_mem_default(), 7, 500, 0, 0);
  uint8_t d[DLCP_CTLCHAN_WINDOW][64], c[64];
  log rx = {.n = 0};
  size_t dl = 0;
  for (uint32_t i = 0; i < DLCP_CTLCHAN_WINDOW / 4; i++) {
    dl = one_cdata(&a, d[i], i, 10);
    assert_int_equal(dlcp_ctlchan_on_datagram(&b, d[i], dl, deliver, &rx, 10),
                     0);
    assert_int_equal(dlcp_ctlchan_deadline(&b),
                     i + 1 < DLCP_CTLCHAN_WINDOW / 4 ? 510u : 10u);
  }
  assert_int_equal(dlcp_ctlchan_poll(&b, c, 64, RTO, MAX_RTO, 10),
                   DLCP_WIRE_CACK_LEN);
  /* A duplicate: our acknowledgement was lost. */
  assert_int_equal(dlcp_ctlchan_on_datagram(&b, d[0], dl, deliver, &rx, 20),
                   0);
  assert_int_equal(b.duplicates, 1);
  assert_int_equal(dlcp_ctlchan_deadline(&b), 20);
  assert_int_equal(dlcp_ctlchan_poll(&b, c, 64, RTO, MAX_RTO, 20),
                   DLCP_WIRE_CACK_LEN);
  /* A gap: the next message is lost, the one after arrives. */
  uint32_t next = DLCP_CTLCHAN_WINDOW / 4;
  (void)one_cdata(&a, d[0], next, 30);
  dl = one_cdata(&a, d[1], next + 1, 30);
  assert_int_equal(dlcp_ctlchan_on_datagram(&b, d[1], dl, deliver, &rx, 40),
                   0);
  assert_int_equal(dlcp_ctlchan_deadline(&b), 40);
  dlcp_ssize cl = dlcp_ctlchan_poll(&b, c, 64, RTO, MAX_RTO, 40);
  dlcp_wire_cack ck;
  assert_int_equal(dlcp_wire_cack_decode(&ck, c, (size_t)cl), 0);
  assert_int_equal(ck.next, next);
  assert_int_equal(ck.sack, 1u);
  assert_int_equal(rx.n, DLCP_CTLCHAN_WINDOW / 4);
  dlcp_ctlchan_fini(&a);
  dlcp_ctlchan_fini(&b);
}

/* Sends message |i| (prompt or not) from |from| at |now| into |d|. */
static size_t one_cdata_as(dlcp_ctlchan *from, uint8_t *d, uint32_t i,
                           bool prompt, dlcp_tstamp now) {
  uint8_t m[DLCP_WIRE_NOTE_LEN];
  assert_int_equal(dlcp_ctlchan_send(from, m, make_msg(m, i), prompt, now),
                   0);
  dlcp_ssize n = dlcp_ctlchan_poll(from, d, 64, RTO, MAX_RTO, now);
  assert_int_equal(n, DLCP_WIRE_CDATA_HDR_LEN + DLCP_WIRE_NOTE_LEN);
  return (size_t)n;
}

/* A prompt message (one no control message answers) is acknowledged at
 * once, so its timeout leaves out the ack delay; its acknowledgement times
 * the channel's RTT, which then sets every new message's timeout.  A
 * message sent twice is timed from the copy the acknowledgement echoes. */
static void test_prompt_messages_acked_at_once_and_timed(void **state) {
  (void)state;
  dlcp_ctlchan a, b;
  dlcp_ctlchan_init(&a, dlcp_mem_default(), 7, 500, 0, 0);
  dlcp_ctlchan_init(&b, dlcp_mem_default(), 7, 500, 0, 0);
  uint8_t d[4][64], c[64];
  log rx = {.n = 0, .prompt = true};
  /* Before any sample: the caller's RTO, plus the delay if not prompt. */
  size_t dl = one_cdata_as(&a, d[0], 0, true, 100);
  assert_int_equal(dlcp_ctlchan_deadline(&a), 100 + RTO);
  (void)one_cdata_as(&a, d[1], 1, false, 100);
  assert_int_equal(a.out[1].due, 100 + RTO + 500);
  /* The receiver acknowledges a prompt message at once. */
  assert_int_equal(dlcp_ctlchan_on_datagram(&b, d[0], dl, deliver, &rx, 160),
                   0);
  assert_int_equal(dlcp_ctlchan_deadline(&b), 160);
  dlcp_ssize cl = dlcp_ctlchan_poll(&b, c, 64, RTO, MAX_RTO, 160);
  assert_int_equal(cl, DLCP_WIRE_CACK_LEN);
  /* At 220: a 120 sample from the prompt message only. */
  assert_int_equal(dlcp_ctlchan_on_datagram(&a, c, (size_t)cl, deliver, &rx,
                                            220),
                   0);
  assert_int_equal(a.srtt, 120);
  assert_int_equal(a.rttvar, 60);
  /* Message 1 is acknowledged after the ack delay (it is not prompt):
   * the CACK's echo times it, less the hold it reports, 720 - 100 - 500. */
  rx.prompt = false;
  assert_int_equal(dlcp_ctlchan_on_datagram(&b, d[1], dl, deliver, &rx, 170),
                   0);
  assert_int_equal(dlcp_ctlchan_deadline(&b), 670);
  cl = dlcp_ctlchan_poll(&b, c, 64, RTO, MAX_RTO, 670);
  dlcp_wire_cack ck;
  assert_int_equal(dlcp_wire_cack_decode(&ck, c, (size_t)cl), 0);
  assert_int_equal(ck.echo_ts, 100);
  assert_int_equal(ck.hold_ns, 500);
  assert_int_equal(
      dlcp_ctlchan_on_datagram(&a, c, (size_t)cl, deliver, &rx, 720), 0);
  assert_int_equal(dlcp_ctlchan_unacked(&a), 0);
  assert_int_equal(a.srtt, 120);
  assert_int_equal(a.rttvar, 45);
  /* New messages: srtt + 4 rttvar = 300, plus the delay if not prompt. */
  (void)one_cdata_as(&a, d[2], 2, true, 2000);
  assert_int_equal(dlcp_ctlchan_deadline(&a), 2000 + 300);
  (void)one_cdata_as(&a, d[3], 3, false, 2000);
  assert_int_equal(a.out[(a.head + 1) & (a.cap - 1)].due, 2000 + 300 + 500);
  /* Message 2 is lost and resent at 2300; the CACK echoes the copy's
   * send time: a 90 sample, 7/8 of 120 and 1/8 of 90. */
  assert_true(dlcp_ctlchan_poll(&a, d[2], 64, RTO, MAX_RTO, 2300) > 0);
  assert_int_equal(a.retransmissions, 1);
  rx.prompt = true;
  assert_int_equal(dlcp_ctlchan_on_datagram(&b, d[2], dl, deliver, &rx, 2340),
                   0);
  cl = dlcp_ctlchan_poll(&b, c, 64, RTO, MAX_RTO, 2340);
  assert_int_equal(cl, DLCP_WIRE_CACK_LEN);
  assert_int_equal(
      dlcp_ctlchan_on_datagram(&a, c, (size_t)cl, deliver, &rx, 2390), 0);
  assert_int_equal(a.srtt, 116);
  assert_int_equal(dlcp_ctlchan_unacked(&a), 1);
  dlcp_ctlchan_fini(&a);
  dlcp_ctlchan_fini(&b);
}

/* Feeds |len| bytes of |d| to |to| at |now|, then returns |to|'s CACK. */
static dlcp_wire_cack arrive_and_ack(dlcp_ctlchan *to, const uint8_t *d,
                                     size_t len, log *rx, dlcp_tstamp now,
                                     uint8_t *c) {
  assert_int_equal(dlcp_ctlchan_on_datagram(to, d, len, deliver, rx, now), 0);
  assert_int_equal(dlcp_ctlchan_deadline(to), now);
  assert_int_equal(dlcp_ctlchan_poll(to, c, 64, RTO, MAX_RTO, now),
                   DLCP_WIRE_CACK_LEN);
  dlcp_wire_cack ck;
  assert_int_equal(dlcp_wire_cack_decode(&ck, c, DLCP_WIRE_CACK_LEN), 0);
  return ck;
}

/* Message |i| (not prompt) leaves |a| at |sent| and again at |copy|,
 * its timeout; |b|, asleep until |wake|, finds both then and
 * acknowledges them, and |a| takes that CACK 60 later.  Returns it. */
static dlcp_wire_cack needless_copy(dlcp_ctlchan *a, dlcp_ctlchan *b,
                                    uint32_t i, dlcp_tstamp sent,
                                    dlcp_tstamp copy, dlcp_tstamp wake,
                                    log *rx) {
  uint8_t d[2][64], c[64];
  size_t dl = one_cdata_as(a, d[0], i, false, sent);
  assert_int_equal(dlcp_ctlchan_deadline(a), copy);
  assert_int_equal(dlcp_ctlchan_poll(a, d[1], 64, RTO, MAX_RTO, copy),
                   (dlcp_ssize)dl);
  assert_int_equal(dlcp_ctlchan_on_datagram(b, d[0], dl, deliver, rx, wake), 0);
  dlcp_wire_cack ck = arrive_and_ack(b, d[1], dl, rx, wake, c);
  assert_int_equal(dlcp_ctlchan_on_datagram(a, c, DLCP_WIRE_CACK_LEN, deliver,
                                            rx, wake + 60),
                   0);
  return ck;
}

/* A peer that answers later than the timeout (asleep: its process waits
 * for a core) gets the message and its copy before it acknowledges
 * either; its CACK says so, and the sender's estimate then covers that
 * wait, so the next message is not sent twice.  A copy of a message the
 * peer had acknowledged (the acknowledgement lost) teaches nothing, nor
 * does a copy the network made of a message sent once.  Such a report is
 * never an estimate's first sample. */
static void test_needless_copy_raises_the_timeout(void **state) {
  (void)state;
  dlcp_ctlchan a, b;
  dlcp_ctlchan_init(&a, dlcp_mem_default(), 7, 500, 0, 0);
  dlcp_ctlchan_init(&b, dlcp_mem_default(), 7, 500, 0, 0);
  uint8_t d[3][64], c[64];
  log rx = {.n = 0, .prompt = false};
  /* Before any round trip, a needless copy's report is no sample. */
  dlcp_wire_cack ck = needless_copy(&a, &b, 0, 100, 100 + RTO + 500, 3000, &rx);
  assert_int_equal(ck.early, 1);
  assert_int_equal(a.needless, 1);
  assert_int_equal(a.srtt, 0);
  /* A prompt message: a round trip of 100 (srtt 100, rttvar 50). */
  rx.prompt = true;
  size_t dl = one_cdata_as(&a, d[0], 1, true, 4000);
  (void)arrive_and_ack(&b, d[0], dl, &rx, 4050, c);
  assert_int_equal(
      dlcp_ctlchan_on_datagram(&a, c, DLCP_WIRE_CACK_LEN, deliver, &rx, 4100),
      0);
  assert_int_equal(a.srtt, 100);
  assert_int_equal(a.rttvar, 50);
  /* The next message's timeout: 100 + 4 * 50 + 500.  The peer sleeps
   * past it and finds both copies at 7000. */
  rx.prompt = false;
  ck = needless_copy(&a, &b, 2, 5000, 5000 + 800, 7000, &rx);
  assert_int_equal(a.retransmissions, 2);
  assert_int_equal(rx.n, 3);
  assert_int_equal(b.duplicates, 0);
  assert_int_equal(ck.next, 3);
  assert_int_equal(ck.early, 1);
  assert_int_equal(ck.early_seq, 2);
  assert_true(ck.echo_ts == 5000); /* the first copy's, which was there */
  /* 7060 - 5000, less the ack delay: a 1560 sample.  srtt (7 100 +
   * 1560) / 8 = 282, rttvar (3 50 + 1460) / 4 = 402. */
  assert_int_equal(a.needless, 2);
  assert_int_equal(a.srtt, 282);
  assert_int_equal(a.rttvar, 402);
  assert_int_equal(dlcp_ctlchan_unacked(&a), 0);
  /* The next message waits 282 + 4 * 402 + 500 before going again. */
  (void)one_cdata_as(&a, d[0], 3, false, 10000);
  assert_int_equal(dlcp_ctlchan_deadline(&a), 10000 + 282 + 1608 + 500);
  /* Its acknowledgement is lost: the copy arrives at a peer that had
   * acknowledged it, which proves nothing. */
  assert_int_equal(dlcp_ctlchan_on_datagram(&b, d[0], dl, deliver, &rx, 10100),
                   0);
  assert_int_equal(dlcp_ctlchan_poll(&b, c, 64, RTO, MAX_RTO, 10600),
                   DLCP_WIRE_CACK_LEN);
  assert_int_equal(dlcp_ctlchan_poll(&a, d[1], 64, RTO, MAX_RTO, 12390),
                   (dlcp_ssize)dl);
  ck = arrive_and_ack(&b, d[1], dl, &rx, 12410, c);
  assert_int_equal(ck.early, 0);
  assert_true(ck.echo_ts == 12390); /* this CACK answers the copy */
  assert_int_equal(b.duplicates, 1);
  assert_int_equal(
      dlcp_ctlchan_on_datagram(&a, c, DLCP_WIRE_CACK_LEN, deliver, &rx, 12460),
      0);
  assert_int_equal(a.needless, 2);
  assert_int_equal(a.srtt, 282);
  /* A message sent once that the network delivers twice: reported, but
   * the sender sent no copy and learns nothing from the report; the echo
   * times the message itself, 100 (srtt (7 282 + 100) / 8 = 259, rttvar
   * (3 402 + 182) / 4 = 347). */
  (void)one_cdata_as(&a, d[2], 4, false, 20000);
  assert_int_equal(dlcp_ctlchan_on_datagram(&b, d[2], dl, deliver, &rx, 20050),
                   0);
  ck = arrive_and_ack(&b, d[2], dl, &rx, 20050, c);
  assert_int_equal(ck.early, 1);
  assert_int_equal(ck.early_seq, 4);
  assert_int_equal(
      dlcp_ctlchan_on_datagram(&a, c, DLCP_WIRE_CACK_LEN, deliver, &rx, 20100),
      0);
  assert_int_equal(a.needless, 2);
  assert_int_equal(a.srtt, 259);
  assert_int_equal(a.rttvar, 347);
  assert_int_equal(rx.n, 5);
  dlcp_ctlchan_fini(&a);
  dlcp_ctlchan_fini(&b);
}

/* Messages no control message answers at once (EAGERs, in a channel
 * that carries nothing else) are timed by the CACK that echoes them, less
 * the hold it reports up to the ack delay.  Here a needless copy's
 * report, a peer's stall of 2,560, follows a round trip of 100: the
 * estimate comes back to the round trip message by message, and the
 * timeout with it.  Without these samples it stayed where the stall put
 * it for good: at 1 % loss on the 4-host testbed, a 64 KiB all-reduce at
 * 10 Gbit/s then waited 12-52 ms for a lost EAGER. */
static void test_held_acknowledgements_are_samples(void **state) {
  (void)state;
  enum { DELAY = 500, RTT = 100, ROUNDS = 24 };
  dlcp_ctlchan a, b;
  dlcp_ctlchan_init(&a, dlcp_mem_default(), 7, DELAY, 0, 0);
  dlcp_ctlchan_init(&b, dlcp_mem_default(), 7, DELAY, 0, 0);
  uint8_t d[2][64], c[64];
  log rx = {.n = 0, .prompt = true};
  size_t dl = one_cdata_as(&a, d[0], 0, true, 0);
  (void)arrive_and_ack(&b, d[0], dl, &rx, RTT / 2, c);
  assert_int_equal(
      dlcp_ctlchan_on_datagram(&a, c, DLCP_WIRE_CACK_LEN, deliver, &rx, RTT),
      0);
  rx.prompt = false;
  (void)needless_copy(&a, &b, 1, 1000, 1000 + 800, 4000, &rx);
  assert_int_equal(a.needless, 1);
  assert_int_equal(a.srtt, 407);
  assert_int_equal(a.rttvar, 652);
  /* RFC 6298's estimate, kept beside the channel's. */
  dlcp_duration srtt = 407, rttvar = 652;
  dlcp_tstamp t = 10000;
  for (uint32_t i = 1; i <= ROUNDS; i++, t += 10000) {
    (void)one_cdata_as(&a, d[0], i + 1, false, t);
    dlcp_duration var = 4 * rttvar > srtt / 4 ? 4 * rttvar : srtt / 4;
    dlcp_duration rto = srtt + var + DELAY;
    assert_int_equal(dlcp_ctlchan_deadline(&a),
                     t + (rto < MAX_RTO ? rto : MAX_RTO));
    assert_int_equal(
        dlcp_ctlchan_on_datagram(&b, d[0], dl, deliver, &rx, t + RTT / 2), 0);
    assert_int_equal(dlcp_ctlchan_deadline(&b), t + RTT / 2 + DELAY);
    assert_int_equal(
        dlcp_ctlchan_poll(&b, c, 64, RTO, MAX_RTO, t + RTT / 2 + DELAY),
        DLCP_WIRE_CACK_LEN);
    dlcp_wire_cack ck;
    assert_int_equal(dlcp_wire_cack_decode(&ck, c, DLCP_WIRE_CACK_LEN), 0);
    assert_int_equal(ck.hold_ns, DELAY);
    assert_int_equal(dlcp_ctlchan_on_datagram(&a, c, DLCP_WIRE_CACK_LEN,
                                              deliver, &rx, t + RTT + DELAY),
                     0);
    assert_int_equal(dlcp_ctlchan_unacked(&a), 0);
    dlcp_duration err = srtt > RTT ? srtt - RTT : RTT - srtt;
    rttvar = (3 * rttvar + err) / 4;
    srtt = (7 * srtt + RTT) / 8;
    assert_int_equal(a.srtt, srtt);
    assert_int_equal(a.rttvar, rttvar);
    assert_int_equal(a.latest_rtt, RTT);
  }
  assert_true(a.srtt < 2 * RTT);
  assert_int_equal(a.retransmissions, 1);
  assert_int_equal(rx.n, ROUNDS + 2);
  dlcp_ctlchan_fini(&a);
  dlcp_ctlchan_fini(&b);
}

/* |n| prompt messages from |a| to |b|, each answered |rtt| after it left,
 * |gap| apart from |*t| on; |*t| ends after the last. */
static void steady_exchanges(dlcp_ctlchan *a, dlcp_ctlchan *b, uint32_t n,
                             dlcp_duration rtt, dlcp_duration gap,
                             dlcp_tstamp *t) {
  log rx = {.n = 0, .prompt = true};
  uint8_t d[64], c[64];
  for (uint32_t i = 0; i < n; i++) {
    size_t dl = one_cdata_as(a, d, i, true, *t);
    assert_int_equal(
        dlcp_ctlchan_on_datagram(b, d, dl, deliver, &rx, *t + rtt / 2), 0);
    dlcp_ssize cl = dlcp_ctlchan_poll(b, c, 64, RTO, MAX_RTO, *t + rtt / 2);
    assert_int_equal(cl, DLCP_WIRE_CACK_LEN);
    assert_int_equal(
        dlcp_ctlchan_on_datagram(a, c, (size_t)cl, deliver, &rx, *t + rtt), 0);
    *t += gap;
  }
  assert_int_equal(rx.n, n);
}

/* On a path whose round trip never varies (a simulated fabric) rttvar
 * decays to nothing: the timeout keeps a quarter of srtt as margin, so an
 * acknowledgement that meets a packet more in a queue is no loss, and it
 * is never shorter than the channel's min_rto. */
static void test_rto_margin_on_a_steady_path(void **state) {
  (void)state;
  dlcp_ctlchan a, b;
  dlcp_ctlchan_init(&a, dlcp_mem_default(), 7, 500, 0, 0);
  dlcp_ctlchan_init(&b, dlcp_mem_default(), 7, 500, 0, 0);
  dlcp_tstamp t = 0;
  steady_exchanges(&a, &b, 60, 120, 1000, &t);
  assert_int_equal(a.srtt, 120);
  assert_int_equal(a.rttvar, 0);
  uint8_t d[64];
  (void)one_cdata_as(&a, d, 60, true, t);
  assert_int_equal(dlcp_ctlchan_deadline(&a), t + 150);
  /* Answered 10 % late: not sent again. */
  assert_int_equal(dlcp_ctlchan_poll(&a, d, 64, RTO, MAX_RTO, t + 132), 0);
  assert_int_equal(a.retransmissions, 0);
  dlcp_ctlchan_fini(&a);
  dlcp_ctlchan_fini(&b);
  /* A floor above the estimate. */
  dlcp_ctlchan_init(&a, dlcp_mem_default(), 7, 500, 400, 0);
  dlcp_ctlchan_init(&b, dlcp_mem_default(), 7, 500, 0, 0);
  t = 0;
  steady_exchanges(&a, &b, 10, 120, 1000, &t);
  (void)one_cdata_as(&a, d, 10, true, t);
  assert_int_equal(dlcp_ctlchan_deadline(&a), t + 400);
  (void)one_cdata_as(&a, d, 11, false, t);
  assert_int_equal(a.out[(a.head + 1) & (a.cap - 1)].due, t + 400 + 500);
  dlcp_ctlchan_fini(&a);
  dlcp_ctlchan_fini(&b);
}

/* Messages of arbitrary bytes, recorded whole for comparison. */
#define NBIG 40u
typedef struct joined_log {
  uint8_t *got[NBIG];
  size_t len[NBIG];
  size_t n;
} joined_log;

static bool keep_whole(void *user, const uint8_t *msg, size_t len) {
  joined_log *l = user;
  assert_true(l->n < NBIG);
  l->got[l->n] = malloc(len);
  assert_non_null(l->got[l->n]);
  memcpy(l->got[l->n], msg, len);
  l->len[l->n++] = len;
  return false;
}

static size_t big_len(uint32_t i) {
  return 16 + (size_t)i * 37 % 1000; /* 16 .. 1015 bytes: 1 to 16 pieces */
}

static uint8_t big_byte(uint32_t i, size_t k) {
  return (uint8_t)(i * 131u + k * 7u);
}

/* Messages longer than the piece size go in pieces (no datagram over a
 * piece plus its header), each retransmitted on its own, and arrive
 * whole, in order, exactly once through loss, duplication and reversal;
 * only a message's last piece may be prompt. */
static void test_pieces_joined_through_a_bad_network(void **state) {
  (void)state;
  dlcp_ctlchan a, b;
  dlcp_ctlchan_init(&a, dlcp_mem_default(), 7, 0, 0, PIECE);
  dlcp_ctlchan_init(&b, dlcp_mem_default(), 7, 0, 0, PIECE);
  static uint8_t m[1024];
  uint32_t pieces = 0;
  for (uint32_t i = 0; i < NBIG; i++) {
    for (size_t k = 0; k < big_len(i); k++) {
      m[k] = big_byte(i, k);
    }
    uint32_t before = a.count;
    assert_int_equal(dlcp_ctlchan_send(&a, m, big_len(i), true, 0), 0);
    assert_int_equal(a.count - before, (big_len(i) + PIECE - 1) / PIECE);
    for (uint32_t j = before; j < a.count; j++) {
      const dlcp_ctlchan_out *o = &a.out[(a.head + j) & (a.cap - 1)];
      assert_int_equal(o->prompt, j + 1 == a.count);
    }
    pieces += a.count - before;
  }
  joined_log rx = {.n = 0};
  dlcp_rng rng;
  dlcp_rng_seed(&rng, 5);
  dlcp_tstamp now = 0;
  for (int step = 0; step < 10000 && rx.n < NBIG; step++) {
    exchange_badly(&a, &b, &rng, now, keep_whole, &rx);
    now += RTO / 4;
  }
  assert_int_equal(rx.n, NBIG);
  for (uint32_t i = 0; i < NBIG; i++) {
    assert_int_equal(rx.len[i], big_len(i));
    for (size_t k = 0; k < big_len(i); k++) {
      assert_int_equal(rx.got[i][k], big_byte(i, k));
    }
    free(rx.got[i]);
  }
  assert_true(pieces > 4 * NBIG);
  assert_true(a.retransmissions > 0);
  assert_null(b.joined);
  dlcp_ctlchan_fini(&a);
  dlcp_ctlchan_fini(&b);
}

/* An allocator that counts what it hands out. */
static size_t allocations;

static void *counted_malloc(size_t size, void *user) {
  (void)user;
  allocations++;
  return malloc(size);
}

static void *counted_calloc(size_t nmemb, size_t size, void *user) {
  (void)user;
  allocations++;
  return calloc(nmemb, size);
}

static void *counted_realloc(void *ptr, size_t size, void *user) {
  (void)user;
  allocations++;
  return realloc(ptr, size);
}

static void counted_free(void *ptr, void *user) {
  (void)user;
  free(ptr);
}

static bool count_whole(void *user, const uint8_t *msg, size_t len) {
  (void)msg;
  assert_int_equal(len, 1000);
  ++*(uint32_t *)user;
  return false;
}

/* Long messages sent one after another reuse their buffers: the
 * sender's full-size pieces and the receiver's join buffer are kept
 * (up to DLCP_CTLCHAN_KEEP_BYTES), so once the first messages have
 * warmed them nothing is allocated per message.  A new 64 KiB per EAGER
 * made glibc trim and fault in the top of its heap on every message. */
static void test_long_messages_reuse_buffers(void **state) {
  (void)state;
  const dlcp_mem counted = {.malloc = counted_malloc,
                            .calloc = counted_calloc,
                            .realloc = counted_realloc,
                            .free = counted_free};
  dlcp_ctlchan a, b;
  dlcp_ctlchan_init(&a, &counted, 7, 0, 0, PIECE);
  dlcp_ctlchan_init(&b, &counted, 7, 0, 0, PIECE);
  static uint8_t m[1000];
  dgram d;
  uint32_t got = 0;
  size_t warm = 0;
  for (uint32_t i = 0; i < 20; i++) {
    if (i == 2) {
      warm = allocations;
    }
    memset(m, (int)i, sizeof(m));
    assert_int_equal(dlcp_ctlchan_send(&a, m, sizeof(m), false, 0), 0);
    for (int round = 0; round < 4; round++) {
      dlcp_ssize len;
      while ((len = dlcp_ctlchan_poll(&a, d.b, sizeof(d.b), RTO, MAX_RTO, 0)) >
             0) {
        assert_int_equal(dlcp_ctlchan_on_datagram(&b, d.b, (size_t)len,
                                                  count_whole, &got, 0),
                         0);
      }
      while ((len = dlcp_ctlchan_poll(&b, d.b, sizeof(d.b), RTO, MAX_RTO, 0)) >
             0) {
        assert_int_equal(dlcp_ctlchan_on_datagram(&a, d.b, (size_t)len,
                                                  count_whole, &got, 0),
                         0);
      }
    }
    assert_int_equal(got, i + 1);
    assert_int_equal(a.count, 0);
  }
  assert_int_equal(allocations, warm);
  assert_int_equal(a.spare_bytes, 16 * PIECE); /* one message's pieces */
  assert_int_equal(b.join_cap, 1000);
  assert_int_equal(a.retransmissions, 0);
  dlcp_ctlchan_fini(&a);
  dlcp_ctlchan_fini(&b);
}

/* Hands |to| the datagrams d[*next..n) that arrive (at[]) by |now|. */
static void arrive_until(dlcp_ctlchan *to, const dgram *d,
                         const dlcp_tstamp *at, uint32_t n, uint32_t *next,
                         dlcp_tstamp now, joined_log *rx) {
  for (; *next < n && at[*next] <= now; ++*next) {
    assert_int_equal(dlcp_ctlchan_on_datagram(to, d[*next].b, d[*next].len,
                                              keep_whole, rx, now),
                     0);
  }
}

/* A burst of pieces leaves at once but reaches the peer at the
 * bottleneck's pace, one every PACE, so its tail arrives long after the
 * pieces' timeout (RTO plus the ack delay) counted from their sending.
 * The receiver acknowledges every DLCP_CTLCHAN_PIECE_ACKS pieces and the
 * whole message at once, and each acknowledgement restarts the timeouts
 * of what is still in flight: nothing is sent twice.  A message's first
 * piece is an RTT sample: its acknowledgement waits for a group of
 * pieces, not for those queued behind it. */
static void test_burst_of_pieces_at_the_bottleneck_pace(void **state) {
  (void)state;
  enum { NP = 40, PACE = 100, LAT = 50, ACK_DELAY = 1000, TICK = 10 };
  dlcp_ctlchan a, b;
  dlcp_ctlchan_init(&a, dlcp_mem_default(), 7, ACK_DELAY, 0, PIECE);
  dlcp_ctlchan_init(&b, dlcp_mem_default(), 7, ACK_DELAY, 0, PIECE);
  static uint8_t m[NP * PIECE];
  for (size_t k = 0; k < sizeof(m); k++) {
    m[k] = big_byte(1, k);
  }
  assert_int_equal(dlcp_ctlchan_send(&a, m, sizeof(m), false, 0), 0);
  static dgram to_b[NP];
  dlcp_tstamp arrives[NP];
  for (uint32_t k = 0; k < NP; k++) {
    dlcp_ssize n = dlcp_ctlchan_poll(&a, to_b[k].b, sizeof(to_b[k].b), RTO,
                                     MAX_RTO, 0);
    assert_int_equal(n, DLCP_WIRE_CDATA_HDR_LEN + PIECE);
    to_b[k].len = (size_t)n;
    arrives[k] = LAT + (dlcp_tstamp)k * PACE;
  }
  assert_true(arrives[NP - 1] > RTO + ACK_DELAY); /* the old timeout */
  dgram acks[NP];
  dlcp_tstamp ack_at[NP];
  uint32_t nacks = 0, next_piece = 0, next_ack = 0;
  joined_log rx = {.n = 0};
  uint8_t out[DLCP_WIRE_CDATA_HDR_LEN + PIECE];
  for (dlcp_tstamp now = 0; now <= 4 * NP * PACE; now += TICK) {
    arrive_until(&b, to_b, arrives, NP, &next_piece, now, &rx);
    dlcp_ssize n;
    while (nacks < NP &&
           (n = dlcp_ctlchan_poll(&b, acks[nacks].b, sizeof(acks[0].b), RTO,
                                  MAX_RTO, now)) > 0) {
      acks[nacks].len = (size_t)n;
      ack_at[nacks++] = now + LAT;
    }
    arrive_until(&a, acks, ack_at, nacks, &next_ack, now, &rx);
    assert_int_equal(dlcp_ctlchan_poll(&a, out, sizeof(out), RTO, MAX_RTO,
                                       now),
                     0);
  }
  assert_int_equal(a.retransmissions, 0);
  assert_int_equal(dlcp_ctlchan_unacked(&a), 0);
  assert_int_equal(rx.n, 1);
  assert_int_equal(rx.len[0], sizeof(m));
  assert_memory_equal(rx.got[0], m, sizeof(m));
  free(rx.got[0]);
  /* Acknowledged every 8 pieces, the one before the last (which times
   * the last), and the whole message. */
  assert_int_equal(nacks, NP / DLCP_CTLCHAN_PIECE_ACKS + 1);
  /* One RTT sample, the first piece's: acknowledged with the next 7. */
  dlcp_duration first_ack = 2 * LAT + (DLCP_CTLCHAN_PIECE_ACKS - 1) * PACE;
  assert_true(a.piece_srtt >= first_ack && a.piece_srtt <= first_ack + TICK);
  assert_int_equal(a.srtt, 0); /* single messages keep their own */
  dlcp_ctlchan_fini(&a);
  dlcp_ctlchan_fini(&b);
}

/* A path with a bottleneck one way: a datagram from the sender comes out
 * SLOW_PACE after the one before it, and no sooner than SLOW_LAT after it
 * left; acknowledgements take SLOW_LAT.  Time moves in steps of
 * SLOW_TICK.  Both ends delay their acknowledgements by SLOW_ACK_DELAY. */
enum {
  SLOW_PACE = 100,
  SLOW_LAT = 50,
  SLOW_TICK = 10,
  SLOW_ACK_DELAY = 1000,
  SLOW_NP = 16 /* pieces of the message sent */
};

typedef struct slow_path {
  dlcp_ctlchan a, b; /* sender, receiver */
  dgram d[2][64];
  dlcp_tstamp at[2][64];
  uint32_t n[2], next[2];
  dlcp_tstamp free_at; /* when the bottleneck takes the next datagram */
  uint32_t drop_cseq;  /* the first |drops| transmissions of this one */
  uint32_t drops;      /* are lost */
  joined_log rx;
  dlcp_tstamp now;
  uint8_t m[SLOW_NP * PIECE]; /* the message: its first |len| bytes */
  size_t len;
} slow_path;

static void slow_path_init(slow_path *p, uint8_t fill) {
  memset(p, 0, sizeof(*p));
  dlcp_ctlchan_init(&p->a, dlcp_mem_default(), 7, SLOW_ACK_DELAY, 0, PIECE);
  dlcp_ctlchan_init(&p->b, dlcp_mem_default(), 7, SLOW_ACK_DELAY, 0, PIECE);
  memset(p->m, fill, sizeof(p->m));
  p->len = sizeof(p->m);
}

/* Sends the message now. */
static void slow_path_send(slow_path *p) {
  assert_int_equal(dlcp_ctlchan_send(&p->a, p->m, p->len, false, p->now), 0);
}

/* Moves what the ends have due one step along the path. */
static void slow_path_step(slow_path *p) {
  dlcp_ctlchan *from[2] = {&p->a, &p->b};
  for (int w = 0; w < 2; w++) {
    dlcp_ssize n;
    while ((n = dlcp_ctlchan_poll(from[w], p->d[w][p->n[w]].b,
                                  sizeof(p->d[w][0].b), RTO, MAX_RTO, p->now)) >
           0) {
      assert_true(p->n[w] + 1 < 64);
      dlcp_wire_cdata h;
      if (w == 0 && p->drops > 0 &&
          dlcp_wire_cdata_decode(&h, p->d[w][p->n[w]].b, (size_t)n) == 0 &&
          h.cseq == p->drop_cseq) {
        p->drops--;
        continue;
      }
      p->d[w][p->n[w]].len = (size_t)n;
      dlcp_tstamp at = p->now + SLOW_LAT;
      if (w == 0) {
        at = at > p->free_at + SLOW_PACE ? at : p->free_at + SLOW_PACE;
        p->free_at = at;
      }
      p->at[w][p->n[w]++] = at;
    }
  }
  arrive_until(&p->b, p->d[0], p->at[0], p->n[0], &p->next[0], p->now, &p->rx);
  arrive_until(&p->a, p->d[1], p->at[1], p->n[1], &p->next[1], p->now, &p->rx);
  p->now += SLOW_TICK;
}

/* Steps until |t| (exclusive). */
static void slow_path_run_until(slow_path *p, dlcp_tstamp t) {
  while (p->now < t) {
    slow_path_step(p);
  }
}

/* Every message sent arrived whole and is acknowledged, with
 * |retransmissions| copies sent in all. */
static void slow_path_finish(slow_path *p, uint32_t messages,
                             uint64_t retransmissions) {
  assert_int_equal(p->rx.n, messages);
  for (uint32_t i = 0; i < p->rx.n; i++) {
    assert_int_equal(p->rx.len[i], p->len);
    assert_memory_equal(p->rx.got[i], p->m, p->len);
    free(p->rx.got[i]);
  }
  assert_int_equal(dlcp_ctlchan_unacked(&p->a), 0);
  assert_int_equal(p->a.retransmissions, retransmissions);
  dlcp_ctlchan_fini(&p->a);
  dlcp_ctlchan_fini(&p->b);
}

/* The next copy of the one message sent goes at |t| (within a step), not
 * before; then the message gets through with no other copy. */
static void slow_path_expect_copy_at(slow_path *p, dlcp_tstamp t) {
  uint64_t before = p->a.retransmissions;
  slow_path_run_until(p, t);
  assert_int_equal(p->a.retransmissions, before);
  slow_path_run_until(p, t + 2 * SLOW_TICK);
  assert_int_equal(p->a.retransmissions, before + 1);
  slow_path_run_until(p, p->now + 2000);
  slow_path_finish(p, 1, before + 1);
}

/* A long message's first timeout shorter than its round trip sends all
 * of it again: here another burst fills the bottleneck ahead of each
 * message.  The acknowledgement of the first transmission, coming after
 * the copies left, echoes that transmission's time, so it is an RTT
 * sample, and the next long message is timed by it: nothing of it is
 * sent twice.  Under Karn's rule alone (no sample from an acknowledgement
 * that may answer either copy) the estimator never got a sample and
 * every long message went twice (3 simulated ranks, PS all-reduce of 96
 * KiB at 1 Gbit/s: 1,392 needless copies in three iterations). */
static void test_late_first_acknowledgement_is_timed(void **state) {
  (void)state;
  enum { QUEUE = 2000 };
  static slow_path p;
  slow_path_init(&p, 0x3C);
  /* The first group's acknowledgement comes after the pieces' first
   * timeout (the caller's RTO plus the ack delay). */
  dlcp_duration first_ack =
      QUEUE + DLCP_CTLCHAN_PIECE_ACKS * SLOW_PACE + SLOW_LAT;
  assert_true(first_ack > RTO + SLOW_ACK_DELAY);
  for (uint32_t k = 0; k < 2; k++) {
    p.free_at = p.now + QUEUE;
    slow_path_send(&p);
    slow_path_run_until(&p, p.now + 20000);
    assert_int_equal(p.rx.n, k + 1);
    assert_int_equal(dlcp_ctlchan_unacked(&p.a), 0);
    /* All of the first message once; none of the second. */
    assert_int_equal(p.a.retransmissions, SLOW_NP);
    assert_true(p.a.piece_srtt >= first_ack &&
                p.a.piece_srtt <= first_ack + SLOW_TICK);
  }
  slow_path_finish(&p, 2, SLOW_NP);
}

/* A long message's last piece is lost.  The peer acknowledges the piece
 * before it at once, and the sender, its own message no longer ahead of
 * the last piece, expects that one's acknowledgement the latest round
 * trip and a quarter after its sending (RACK): it goes again then, not a
 * timeout of the pieces' estimator (whose samples count the burst) after
 * an acknowledgement the ack delay held. */
static void test_lost_last_piece_sent_again_soon(void **state) {
  (void)state;
  static slow_path p;
  slow_path_init(&p, 0x5B);
  p.drops = 1;
  p.drop_cseq = SLOW_NP - 1;
  slow_path_send(&p);
  /* The piece before the last arrives at (SLOW_NP - 1) SLOW_PACE, its
   * acknowledgement leaves on the next step (a hold of SLOW_TICK, which
   * the CACK reports and the sender takes out) and takes SLOW_LAT: that
   * round trip less the hold, and a quarter. */
  dlcp_tstamp penultimate_ack =
      (SLOW_NP - 1) * SLOW_PACE + SLOW_TICK + SLOW_LAT;
  dlcp_duration rtt = penultimate_ack - SLOW_TICK;
  assert_int_equal(p.a.latest_rtt, 0);
  slow_path_run_until(&p, penultimate_ack + SLOW_TICK);
  assert_int_equal(p.a.latest_rtt, rtt);
  slow_path_expect_copy_at(&p, rtt + rtt / 4);
}

/* A short message (no more than DLCP_CTLCHAN_PIECE_ACKS pieces: the peer
 * holds its acknowledgement for a reply) loses its last piece.  Its next
 * piece not come within a quarter of the ack delay (the peer has timed no
 * round trip yet), the peer reports the pieces it has; the sender expects
 * the last one the latest round trip and a quarter after its sending, a
 * time long past, and sends it again at once instead of after its timeout
 * and the ack delay.  Acknowledged in part, the message is acknowledged at
 * once when whole. */
static void test_short_message_lost_last_piece_reported(void **state) {
  (void)state;
  enum { NP = 4 };
  static slow_path p;
  slow_path_init(&p, 0x7D);
  p.len = NP * PIECE;
  p.drops = 1;
  p.drop_cseq = NP - 1;
  slow_path_send(&p);
  /* The piece before the last arrives at (NP - 1) SLOW_PACE, the report
   * leaves a quarter of the ack delay later and takes SLOW_LAT. */
  dlcp_tstamp reported = (NP - 1) * SLOW_PACE + SLOW_ACK_DELAY / 4 + SLOW_LAT;
  assert_true(reported + 2 * SLOW_TICK < RTO + SLOW_ACK_DELAY);
  slow_path_run_until(&p, reported);
  assert_int_equal(p.a.retransmissions, 0);
  slow_path_run_until(&p, reported + 2 * SLOW_TICK);
  assert_int_equal(p.a.retransmissions, 1);
  /* The copy arrives SLOW_LAT later, the CACK leaves on the next step
   * and takes SLOW_LAT: well before the ack delay. */
  slow_path_run_until(&p, p.now + 2 * SLOW_LAT + 3 * SLOW_TICK);
  assert_int_equal(dlcp_ctlchan_unacked(&p.a), 0);
  assert_int_equal(p.n[1], 2); /* the report and the whole's CACK */
  slow_path_finish(&p, 1, 1);
}

/* All the pieces of a short message arrive, one every SLOW_PACE (less
 * than the wait for a next piece): no report, and one CACK, the ack delay
 * after the first piece came, as for pieces of any message. */
static void test_short_message_whole_not_reported(void **state) {
  (void)state;
  enum { NP = 4 };
  static slow_path p;
  slow_path_init(&p, 0x8E);
  p.len = NP * PIECE;
  slow_path_send(&p);
  dlcp_tstamp first = SLOW_PACE;
  slow_path_run_until(&p, first + SLOW_ACK_DELAY);
  assert_int_equal(p.n[1], 0);
  slow_path_run_until(&p, first + SLOW_ACK_DELAY + 2 * SLOW_TICK);
  assert_int_equal(p.n[1], 1);
  slow_path_run_until(&p, p.now + 2000);
  slow_path_finish(&p, 1, 0);
}

/* A piece the peer's selective bits show lost goes again at once, and
 * that copy is lost too.  The copy is timed from its own sending (the
 * latest round trip and a quarter): the acknowledgements of the pieces
 * behind it, which restart the timeouts of pieces of the burst, do not
 * push its timeout on. */
static void test_lost_copy_timed_from_its_sending(void **state) {
  (void)state;
  static slow_path p;
  slow_path_init(&p, 0x6C);
  p.drops = 2;
  p.drop_cseq = 4;
  slow_path_send(&p);
  while (p.a.retransmissions == 0) {
    slow_path_step(&p);
  }
  dlcp_tstamp copied = p.now - SLOW_TICK;
  /* Three pieces after it arrived (8 SLOW_PACE), the CACK came SLOW_LAT
   * later. */
  assert_true(copied <= 8 * SLOW_PACE + SLOW_TICK + SLOW_LAT);
  dlcp_duration rtt = p.a.latest_rtt;
  slow_path_expect_copy_at(&p, copied + rtt + rtt / 4);
}

/* Hand-made CDATA |cseq| of |len| bytes with |rest| to come. */
static size_t piece(uint8_t *d, uint32_t cseq, uint32_t rest, size_t len) {
  dlcp_wire_cdata h = {
      .job = 7, .cseq = cseq, .ack = 0, .rest = rest, .inner_len = len};
  dlcp_ssize n =
      dlcp_wire_cdata_encode_header(d, DLCP_WIRE_CDATA_HDR_LEN + len, &h);
  assert_int_equal(n, DLCP_WIRE_CDATA_HDR_LEN);
  memset(d + n, (int)cseq, len);
  return DLCP_WIRE_CDATA_HDR_LEN + len;
}

/* Pieces that disagree on their message's length drop it, say so, and
 * leave the channel working; the pieces are acknowledged all the same
 * (they did arrive), so the sender does not repeat them forever. */
static void test_pieces_that_disagree_dropped(void **state) {
  (void)state;
  dlcp_ctlchan b;
  dlcp_ctlchan_init(&b, dlcp_mem_default(), 7, 0, 0, PIECE);
  joined_log rx = {.n = 0};
  uint8_t d[DLCP_WIRE_CDATA_HDR_LEN + 64];
  /* 10 bytes of 110, then a last piece of 20: 30 is not 110. */
  assert_int_equal(dlcp_ctlchan_on_datagram(&b, d, piece(d, 0, 100, 10),
                                            keep_whole, &rx, 0),
                   0);
  assert_non_null(b.joined);
  assert_int_equal(dlcp_ctlchan_on_datagram(&b, d, piece(d, 1, 0, 20),
                                            keep_whole, &rx, 0),
                   DLCP_ERR_BAD_LENGTH);
  assert_null(b.joined);
  assert_int_equal(rx.n, 0);
  assert_int_equal(b.next, 2);
  /* A whole message, then one of two pieces that agree: delivered. */
  assert_int_equal(dlcp_ctlchan_on_datagram(&b, d, piece(d, 2, 0, 16),
                                            keep_whole, &rx, 0),
                   0);
  assert_int_equal(dlcp_ctlchan_on_datagram(&b, d, piece(d, 3, 30, 40),
                                            keep_whole, &rx, 0),
                   0);
  assert_int_equal(dlcp_ctlchan_on_datagram(&b, d, piece(d, 4, 0, 30),
                                            keep_whole, &rx, 0),
                   0);
  assert_int_equal(rx.n, 2);
  assert_int_equal(rx.len[0], 16);
  assert_int_equal(rx.len[1], 70);
  assert_int_equal(rx.got[1][0], 3);
  assert_int_equal(rx.got[1][69], 4);
  free(rx.got[0]);
  free(rx.got[1]);
  dlcp_ctlchan_fini(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exactly_once_in_order_through_a_bad_network),
      cmocka_unit_test(test_rto_doubles_to_the_cap),
      cmocka_unit_test(test_window_and_selective_ack),
      cmocka_unit_test(test_skipped_message_resent_at_once),
      cmocka_unit_test(test_rejects_bad_messages),
      cmocka_unit_test(test_reply_carries_the_ack),
      cmocka_unit_test(test_acks_at_once_when_it_matters),
      cmocka_unit_test(test_prompt_messages_acked_at_once_and_timed),
      cmocka_unit_test(test_rto_margin_on_a_steady_path),
      cmocka_unit_test(test_needless_copy_raises_the_timeout),
      cmocka_unit_test(test_held_acknowledgements_are_samples),
      cmocka_unit_test(test_pieces_joined_through_a_bad_network),
      cmocka_unit_test(test_pieces_that_disagree_dropped),
      cmocka_unit_test(test_long_messages_reuse_buffers),
      cmocka_unit_test(test_burst_of_pieces_at_the_bottleneck_pace),
      cmocka_unit_test(test_late_first_acknowledgement_is_timed),
      cmocka_unit_test(test_lost_last_piece_sent_again_soon),
      cmocka_unit_test(test_short_message_lost_last_piece_reported),
      cmocka_unit_test(test_short_message_whole_not_reported),
      cmocka_unit_test(test_lost_copy_timed_from_its_sending),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
