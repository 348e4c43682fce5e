/*
 * sim_queue_test.c: a switch port's queueing discipline in isolation:
 * strict priority, ECN marking thresholds (per queue and per port),
 * selective drop, buffer limits, shared buffer with dynamic thresholds,
 * trimming.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "sim/net.h"

#define PKT 1500u

static dlcp_sim_port_config base_cfg(void) {
  dlcp_sim_port_config c;
  memset(&c, 0, sizeof(c));
  c.nqueues = 8;
  c.buffer_bytes = 512000;
  for (uint32_t i = 0; i < DLCP_SIM_MAX_QUEUES; i++) {
    c.ecn_threshold_bytes[i] = UINT64_MAX;
  }
  c.trimming = false;
  c.trim_bytes = 64;
  return c;
}

static dlcp_sim_packet mkpkt(uint8_t prio, dlcp_sim_ecn ecn, uint32_t seq) {
  dlcp_sim_packet p;
  memset(&p, 0, sizeof(p));
  p.kind = DLCP_SIM_PKT_DATA;
  p.prio = prio;
  p.ecn = (uint8_t)ecn;
  p.size_bytes = PKT;
  p.payload_bytes = PKT - 40;
  p.seq = seq;
  return p;
}

/* Packets of priorities 7, 3, 0, 7, 0, 3 enqueued while the port is busy
 * leave as 0, 0, 3, 3, 7, 7, FIFO within a priority. */
static void test_strict_priority(void **state) {
  (void)state;
  dlcp_sim_port_config cfg = base_cfg();
  dlcp_sim_port port;
  memset(&port, 0, sizeof(port));
  dlcp_sim_port_init(&port, &cfg, NULL);
  uint8_t prios[] = {7, 3, 0, 7, 0, 3};
  dlcp_sim_packet pk[6];
  for (uint32_t i = 0; i < 6; i++) {
    pk[i] = mkpkt(prios[i], DLCP_SIM_ECN_ECT, i);
    assert_int_equal(dlcp_sim_port_enqueue(&port, &pk[i]), DLCP_SIM_ENQUEUED);
  }
  uint32_t want[] = {2, 4, 1, 5, 0, 3};
  for (uint32_t i = 0; i < 6; i++) {
    dlcp_sim_packet *p = dlcp_sim_port_dequeue(&port);
    assert_non_null(p);
    assert_int_equal(p->seq, want[i]);
    dlcp_sim_port_release(&port, p);
  }
  assert_null(dlcp_sim_port_dequeue(&port));
  assert_int_equal(port.bytes, 0);
}

/* With a threshold of K bytes, the packet that arrives to find exactly K
 * bytes queued is the first one marked; every earlier one is not.  K is
 * deliberately not a multiple of the packet size too. */
static void check_threshold(uint64_t k) {
  dlcp_sim_port_config cfg = base_cfg();
  cfg.ecn_threshold_bytes[2] = k;
  dlcp_sim_port port;
  memset(&port, 0, sizeof(port));
  dlcp_sim_port_init(&port, &cfg, NULL);
  static dlcp_sim_packet pk[200];
  uint32_t first_marked = UINT32_MAX;
  for (uint32_t i = 0; i < 200; i++) {
    pk[i] = mkpkt(2, DLCP_SIM_ECN_ECT, i);
    uint64_t before = port.q[2].bytes;
    dlcp_sim_verdict v = dlcp_sim_port_enqueue(&port, &pk[i]);
    if (before >= k) {
      assert_int_equal(v, DLCP_SIM_MARKED);
      assert_int_equal(pk[i].ecn, DLCP_SIM_ECN_CE);
      if (first_marked == UINT32_MAX) {
        first_marked = i;
      }
    } else {
      assert_int_equal(v, DLCP_SIM_ENQUEUED);
      assert_int_equal(pk[i].ecn, DLCP_SIM_ECN_ECT);
    }
  }
  /* ceil(k / PKT) packets fit below the threshold. */
  assert_int_equal(first_marked, (k + PKT - 1) / PKT);
  assert_int_equal(port.q[2].marks, 200 - first_marked);
}

static void test_ecn_threshold(void **state) {
  (void)state;
  check_threshold(65ull * PKT); /* the MLT/DCTCP default, 65 packets */
  check_threshold(20ull * PKT + 1);
  check_threshold(0); /* threshold 0 marks everything */
}

/* Above the threshold, ECT packets are marked and non-ECT packets are
 * dropped; below it both are queued untouched; other queues are not
 * affected by one queue's length. */
static void test_selective_drop(void **state) {
  (void)state;
  dlcp_sim_port_config cfg = base_cfg();
  cfg.ecn_threshold_bytes[1] = 10ull * PKT;
  dlcp_sim_port port;
  memset(&port, 0, sizeof(port));
  dlcp_sim_port_init(&port, &cfg, NULL);
  static dlcp_sim_packet pk[100];
  uint32_t ect_dropped = 0, nonect_dropped = 0, nonect_kept = 0;
  for (uint32_t i = 0; i < 100; i++) {
    bool ect = i % 2 == 0;
    pk[i] = mkpkt(1, ect ? DLCP_SIM_ECN_ECT : DLCP_SIM_ECN_NOT_ECT, i);
    bool above = port.q[1].bytes >= cfg.ecn_threshold_bytes[1];
    dlcp_sim_verdict v = dlcp_sim_port_enqueue(&port, &pk[i]);
    if (v == DLCP_SIM_DROP_SELECTIVE) {
      assert_true(above);
      assert_false(ect);
      nonect_dropped++;
    } else if (v == DLCP_SIM_DROP_BUFFER) {
      ect_dropped++;
    } else {
      assert_true(ect || !above);
      nonect_kept += !ect;
    }
  }
  assert_int_equal(ect_dropped, 0);
  assert_int_equal(nonect_kept, 5); /* the five before the queue hit 10 */
  assert_int_equal(nonect_dropped, 45);
  assert_int_equal(port.q[1].drops_selective, 45);
  assert_int_equal(port.q[1].marks, 45); /* every ECT packet from i = 10 */
  /* A non-ECT packet in another queue is still accepted. */
  dlcp_sim_packet other = mkpkt(4, DLCP_SIM_ECN_NOT_ECT, 999);
  assert_int_equal(dlcp_sim_port_enqueue(&port, &other), DLCP_SIM_ENQUEUED);
}

/* Fills queues 1-6 with 10 packets each, in turn, and returns how many
 * were marked; then offers a non-ECT packet to the empty queue 7. */
static uint32_t fill_six_queues(const dlcp_sim_port_config *cfg,
                                dlcp_sim_port *port,
                                dlcp_sim_verdict *nonect) {
  static dlcp_sim_packet pk[61];
  uint32_t marked = 0;
  memset(port, 0, sizeof(*port));
  dlcp_sim_port_init(port, cfg, NULL);
  for (uint32_t i = 0; i < 60; i++) {
    pk[i] = mkpkt((uint8_t)(1 + i % 6), DLCP_SIM_ECN_ECT, i);
    bool port_above = cfg->ecn_port_threshold_bytes &&
                      port->bytes >= cfg->ecn_port_threshold_bytes;
    dlcp_sim_verdict v = dlcp_sim_port_enqueue(port, &pk[i]);
    assert_int_equal(v, port_above ? DLCP_SIM_MARKED : DLCP_SIM_ENQUEUED);
    marked += v == DLCP_SIM_MARKED;
  }
  pk[60] = mkpkt(7, DLCP_SIM_ECN_NOT_ECT, 60);
  *nonect = dlcp_sim_port_enqueue(port, &pk[60]);
  return marked;
}

/* Per-queue thresholds of 10 packets never fire while six queues hold 10
 * packets each (each packet finds at most 9 in its queue, 59 on the
 * port); a port threshold of 12 packets marks every ECT packet that
 * finds 12 or more on the port and drops a non-ECT one in an empty
 * queue; once the port drains below it, nothing is marked. */
static void test_port_threshold(void **state) {
  (void)state;
  dlcp_sim_port_config cfg = base_cfg();
  for (uint32_t i = 0; i < DLCP_SIM_MAX_QUEUES; i++) {
    cfg.ecn_threshold_bytes[i] = 10ull * PKT;
  }
  dlcp_sim_port port;
  dlcp_sim_verdict nonect;
  assert_int_equal(fill_six_queues(&cfg, &port, &nonect), 0);
  assert_int_equal(nonect, DLCP_SIM_ENQUEUED);

  cfg.ecn_port_threshold_bytes = 12ull * PKT;
  assert_int_equal(fill_six_queues(&cfg, &port, &nonect), 48);
  assert_int_equal(nonect, DLCP_SIM_DROP_SELECTIVE);
  assert_int_equal(port.q[7].drops_selective, 1);
  for (uint32_t i = 0; i < 49; i++) {
    dlcp_sim_port_release(&port, dlcp_sim_port_dequeue(&port));
  }
  assert_int_equal(port.bytes, 11ull * PKT);
  dlcp_sim_packet late = mkpkt(7, DLCP_SIM_ECN_ECT, 61);
  assert_int_equal(dlcp_sim_port_enqueue(&port, &late), DLCP_SIM_ENQUEUED);
  dlcp_sim_packet over = mkpkt(7, DLCP_SIM_ECN_ECT, 62);
  assert_int_equal(dlcp_sim_port_enqueue(&port, &over), DLCP_SIM_MARKED);
}

/* Per-port buffer: exactly floor(buffer / size) packets fit. */
static void test_port_buffer(void **state) {
  (void)state;
  dlcp_sim_port_config cfg = base_cfg();
  cfg.buffer_bytes = 10ull * PKT + 100;
  dlcp_sim_port port;
  memset(&port, 0, sizeof(port));
  dlcp_sim_port_init(&port, &cfg, NULL);
  static dlcp_sim_packet pk[12];
  for (uint32_t i = 0; i < 12; i++) {
    pk[i] = mkpkt((uint8_t)(i % 3), DLCP_SIM_ECN_ECT, i);
    dlcp_sim_verdict v = dlcp_sim_port_enqueue(&port, &pk[i]);
    assert_int_equal(v, i < 10 ? DLCP_SIM_ENQUEUED : DLCP_SIM_DROP_BUFFER);
  }
  /* A departing packet frees its space only once released. */
  dlcp_sim_packet *p = dlcp_sim_port_dequeue(&port);
  dlcp_sim_packet extra = mkpkt(0, DLCP_SIM_ECN_ECT, 100);
  assert_int_equal(dlcp_sim_port_enqueue(&port, &extra), DLCP_SIM_DROP_BUFFER);
  dlcp_sim_port_release(&port, p);
  assert_int_equal(dlcp_sim_port_enqueue(&port, &extra), DLCP_SIM_ENQUEUED);
}

/* Shared buffer, dynamic threshold alpha = 1: a lone queue can take half
 * the pool (q <= alpha * (B - used) stops growing at B/2); a second queue
 * then gets alpha times what is left. */
static void test_shared_buffer_dt(void **state) {
  (void)state;
  dlcp_sim_port_config cfg = base_cfg();
  dlcp_sim_buffer_pool pool = {100ull * PKT, 0, 1.0};
  dlcp_sim_port a, b;
  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  dlcp_sim_port_init(&a, &cfg, &pool);
  dlcp_sim_port_init(&b, &cfg, &pool);
  static dlcp_sim_packet pk[200];
  uint32_t a_in = 0, b_in = 0;
  for (uint32_t i = 0; i < 100; i++) {
    pk[i] = mkpkt(0, DLCP_SIM_ECN_ECT, i);
    a_in += dlcp_sim_port_enqueue(&a, &pk[i]) == DLCP_SIM_ENQUEUED;
  }
  assert_int_equal(a_in, 50);
  for (uint32_t i = 100; i < 200; i++) {
    pk[i] = mkpkt(0, DLCP_SIM_ECN_ECT, i);
    b_in += dlcp_sim_port_enqueue(&b, &pk[i]) == DLCP_SIM_ENQUEUED;
  }
  assert_int_equal(b_in, 25); /* q <= 1 * (100 - 50 - q) -> q = 25 */
  assert_int_equal(pool.used_bytes, 75ull * PKT);
}

/* Trimming: instead of a drop, a data packet is cut to a header and jumps
 * to queue 0; ACKs and already-trimmed packets are not trimmed. */
static void test_trimming(void **state) {
  (void)state;
  dlcp_sim_port_config cfg = base_cfg();
  cfg.trimming = true;
  cfg.buffer_bytes = 4ull * PKT + 10ull * 64;
  dlcp_sim_port port;
  memset(&port, 0, sizeof(port));
  dlcp_sim_port_init(&port, &cfg, NULL);
  static dlcp_sim_packet pk[6];
  for (uint32_t i = 0; i < 6; i++) {
    pk[i] = mkpkt(5, DLCP_SIM_ECN_NOT_ECT, i);
    dlcp_sim_verdict v = dlcp_sim_port_enqueue(&port, &pk[i]);
    assert_int_equal(v, i < 4 ? DLCP_SIM_ENQUEUED : DLCP_SIM_TRIMMED);
  }
  assert_int_equal(pk[4].size_bytes, 64);
  assert_true(pk[4].flags & DLCP_SIM_PKT_F_TRIMMED);
  assert_int_equal(pk[4].qidx, 0);
  /* Headers leave first. */
  dlcp_sim_packet *p = dlcp_sim_port_dequeue(&port);
  assert_int_equal(p->seq, 4);
  dlcp_sim_packet ack = mkpkt(5, DLCP_SIM_ECN_NOT_ECT, 50);
  ack.kind = DLCP_SIM_PKT_ACK;
  assert_int_equal(dlcp_sim_port_enqueue(&port, &ack), DLCP_SIM_DROP_BUFFER);
  assert_int_equal(port.q[5].trims, 2);
}

/* A trimmed header keeps to queue 0 at the next hop (where its data
 * queue may be over the threshold too), and a data packet already no
 * larger than a header is trimmed, not dropped, at its own size. */
static void test_trimmed_next_hop(void **state) {
  (void)state;
  dlcp_sim_port_config cfg = base_cfg();
  cfg.trimming = true;
  cfg.ecn_threshold_bytes[5] = 2ull * PKT;
  dlcp_sim_port port;
  memset(&port, 0, sizeof(port));
  dlcp_sim_port_init(&port, &cfg, NULL);
  static dlcp_sim_packet pk[4];
  for (uint32_t i = 0; i < 3; i++) {
    pk[i] = mkpkt(5, DLCP_SIM_ECN_NOT_ECT, i);
    assert_int_equal(dlcp_sim_port_enqueue(&port, &pk[i]),
                     i < 2 ? DLCP_SIM_ENQUEUED : DLCP_SIM_TRIMMED);
  }
  assert_int_equal(pk[2].prio, 0);
  /* The next hop: the same header meets a full data queue 5. */
  dlcp_sim_port next;
  memset(&next, 0, sizeof(next));
  dlcp_sim_port_init(&next, &cfg, NULL);
  static dlcp_sim_packet full[2];
  for (uint32_t i = 0; i < 2; i++) {
    full[i] = mkpkt(5, DLCP_SIM_ECN_NOT_ECT, 10 + i);
    assert_int_equal(dlcp_sim_port_enqueue(&next, &full[i]),
                     DLCP_SIM_ENQUEUED);
  }
  dlcp_sim_packet hdr = pk[2];
  assert_int_equal(dlcp_sim_port_enqueue(&next, &hdr), DLCP_SIM_ENQUEUED);
  assert_int_equal(hdr.qidx, 0);
  /* A 50-byte data packet over the threshold: trimmed, 50 bytes. */
  pk[3] = mkpkt(5, DLCP_SIM_ECN_NOT_ECT, 3);
  pk[3].size_bytes = 50;
  assert_int_equal(dlcp_sim_port_enqueue(&next, &pk[3]), DLCP_SIM_TRIMMED);
  assert_int_equal(pk[3].size_bytes, 50);
  assert_int_equal(next.q[5].drops_selective, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_trimmed_next_hop),
      cmocka_unit_test(test_strict_priority),
      cmocka_unit_test(test_ecn_threshold),
      cmocka_unit_test(test_selective_drop),
      cmocka_unit_test(test_port_threshold),
      cmocka_unit_test(test_port_buffer),
      cmocka_unit_test(test_shared_buffer_dt),
      cmocka_unit_test(test_trimming),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
