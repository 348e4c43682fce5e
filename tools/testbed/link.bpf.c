/*
 * link.bpf.c: the switch side of one emulated link direction, attached by
 * dlcp-testbed as a tc clsact filter (direct action) on a switch port.
 *
 * Per packet, in this order:
 *   1. count it (packets, bytes);
 *   2. drop it with probability cfg.drop_thresh / 2^32 (random loss: this
 *      kernel has no netem);
 *   3. if cfg.ecn_rate_Bps != 0, account it in a phantom queue that drains
 *      at the link rate and set CE on an ECT packet while that queue holds
 *      more than cfg.ecn_k_bytes (ECN marking: this kernel has neither RED
 *      nor fq's ce_threshold).  The phantom queue tracks the rate limiter's
 *      real backlog as long as every packet that passes here is queued
 *      there; it is shared by all CPUs under a spin lock.
 * dlcp-testbed writes the configuration with bpftool and reads the
 * per-CPU counters back; each attachment has its own maps.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

struct dlcptb_cfg {
  __u64 drop_thresh;  /* drop when a uniform 32-bit draw is below; 2^32: all */
  __u64 ecn_rate_Bps; /* phantom queue drain rate, bytes/s; 0: no marking */
  __u64 ecn_k_bytes;  /* mark above this backlog */
};

struct dlcptb_stats {
  __u64 packets;
  __u64 bytes;
  __u64 lost; /* dropped by the random loss */
  __u64 lost_bytes;
  __u64 marked; /* CE set */
};

struct dlcptb_queue {
  struct bpf_spin_lock lock;
  __u64 t_ns;
  __u64 backlog;
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct dlcptb_cfg);
} dlcptb_cfg SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct dlcptb_stats);
} dlcptb_stats SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct dlcptb_queue);
} dlcptb_queue SEC(".maps");

#define NSEC_PER_SEC 1000000000ull

/* Returns 1 when the phantom queue holds more than k bytes after this
 * packet joined it. */
static __always_inline int phantom_over(struct dlcptb_queue *q, __u64 rate,
                                        __u64 k, __u32 len) {
  __u64 now = bpf_ktime_get_ns();
  int over;
  bpf_spin_lock(&q->lock);
  __u64 dt = now - q->t_ns;
  if (dt >= NSEC_PER_SEC) {
    q->backlog = 0; /* idle for a second (or first packet): empty */
  } else {
    __u64 drained = dt * rate / NSEC_PER_SEC; /* < 2^64: rate < 2^34 */
    q->backlog = q->backlog > drained ? q->backlog - drained : 0;
  }
  q->backlog += len;
  q->t_ns = now;
  over = q->backlog > k;
  bpf_spin_unlock(&q->lock);
  return over;
}

SEC("tc")
int dlcptb_link(struct __sk_buff *skb) {
  __u32 key = 0;
  struct dlcptb_cfg *cfg = bpf_map_lookup_elem(&dlcptb_cfg, &key);
  struct dlcptb_stats *st = bpf_map_lookup_elem(&dlcptb_stats, &key);
  if (!cfg || !st) {
    return TC_ACT_OK;
  }
  st->packets++;
  st->bytes += skb->len;
  if (cfg->drop_thresh != 0 &&
      (__u64)bpf_get_prandom_u32() < cfg->drop_thresh) {
    st->lost++;
    st->lost_bytes += skb->len;
    return TC_ACT_SHOT;
  }
  if (cfg->ecn_rate_Bps != 0) {
    struct dlcptb_queue *q = bpf_map_lookup_elem(&dlcptb_queue, &key);
    if (q && phantom_over(q, cfg->ecn_rate_Bps, cfg->ecn_k_bytes, skb->len) &&
        bpf_skb_ecn_set_ce(skb)) {
      st->marked++;
    }
  }
  return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
