/*
 * pcap.c: capturing chosen cables into classic pcap files.
 *
 * Model.  A simulated packet is a record, not bytes, so a capture
 * synthesises the headers a real wire would carry: Ethernet II (MACs
 * 02:00:00:00:hh:hh from the host indices), IPv4 (10.x.y.z from the host
 * index plus one, total length = the packet's size on the wire, DSCP and ECN from
 * the packet's priority and codepoint) and then TCP for DCTCP and MLT's
 * control channel, or UDP for MLT datagrams followed by the MLT header the
 * core encoded.  Payloads are not stored, so frames are cut after the
 * headers: the caplen is what was synthesised, the original length is the
 * full frame, and Wireshark shows "packet size limited during capture".
 * DSCP is the class selector CS(7 - queue): queue 0, the most urgent, is
 * CS7.  A cable's file holds both directions, stamped with the time the
 * last bit left the transmitter, in nanoseconds (the nanosecond variant of
 * the classic format, magic a1b23c4d).  Packets lost on the link (random
 * loss) are not captured: the tap sits at the far end of the wire.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sim/sim.h"

/* Ports used for the synthesised transport headers. */
#define PCAP_TCP_DATA_PORT 5001u /* DCTCP receivers listen here */
#define PCAP_MLT_UDP_PORT 49152u /* MLT datagrams (path id added at src) */
#define PCAP_MLT_CTRL_PORT 49153u /* collective notes (a TCP stream) */

struct dlcp_sim_pcap {
  FILE *f;
  char path[600];
  uint32_t mss; /* turns DCTCP's segment numbers into byte numbers */
  uint64_t frames;
};

int dlcp_sim_config_add_pcap(dlcp_sim_config *cfg, const char *a,
                             const char *b) {
  dlcp_sim_pcap_spec *p =
      realloc(cfg->pcaps, (cfg->npcaps + 1) * sizeof(*cfg->pcaps));
  if (!p) {
    return DLCP_ERR_NOMEM;
  }
  cfg->pcaps = p;
  dlcp_sim_pcap_spec *s = &p[cfg->npcaps++];
  memset(s, 0, sizeof(*s));
  snprintf(s->a, sizeof(s->a), "%s", a);
  snprintf(s->b, sizeof(s->b), "%s", b);
  snprintf(s->where, sizeof(s->where), "outputs.pcap[%u]", cfg->npcaps - 1);
  snprintf(s->field, sizeof(s->field), "outputs.pcap[%u]", cfg->npcaps - 1);
  return 0;
}

static void put16(uint8_t *p, uint32_t v) { /* network order */
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint64_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

static void le32(uint8_t *p, uint32_t v) { /* pcap's own headers */
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

static void mac(uint8_t *p, uint32_t host) {
  p[0] = 0x02; /* locally administered, unicast */
  p[1] = 0;
  p[2] = (uint8_t)(host >> 24);
  p[3] = (uint8_t)(host >> 16);
  p[4] = (uint8_t)(host >> 8);
  p[5] = (uint8_t)host;
}

/* Host h is 10.0.0.0 + h + 1, so no host has a network address. */
static void ip_addr(uint8_t *p, uint32_t host) {
  host += 1;
  p[0] = 10;
  p[1] = (uint8_t)(host >> 16);
  p[2] = (uint8_t)(host >> 8);
  p[3] = (uint8_t)host;
}

static uint16_t ip_checksum(const uint8_t *h, size_t len) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < len; i += 2) {
    sum += (uint32_t)h[i] << 8 | h[i + 1];
  }
  while (sum >> 16) {
    sum = (sum & 0xFFFF) + (sum >> 16);
  }
  return (uint16_t)~sum;
}

/* Builds the frame's headers into |buf|; returns their length. */
static size_t synthesise(const dlcp_sim_packet *pkt, uint32_t mss,
                         uint8_t *buf) {
  uint8_t *eth = buf, *ip = buf + 14, *l4 = buf + 34;
  mac(eth, pkt->dst);
  mac(eth + 6, pkt->src);
  put16(eth + 12, 0x0800);

  /* Collective notes ride TCP; MLT's control messages are datagrams
   * (src/proto/ctlchan.c) like its data. */
  bool ctrl = pkt->kind == DLCP_SIM_PKT_NOTE;
  bool udp = pkt->hdr_len > 0 && !ctrl;
  uint32_t prio = pkt->prio < 7 ? pkt->prio : 7;
  ip[0] = 0x45;
  ip[1] = (uint8_t)(((7u - prio) << 5) | (pkt->ecn & 3u));
  put16(ip + 2, pkt->size_bytes > 0xFFFF ? 0xFFFF : pkt->size_bytes);
  put16(ip + 4, 0);
  put16(ip + 6, 0x4000); /* DF */
  ip[8] = 64;
  ip[9] = udp ? 17 : 6;
  put16(ip + 10, 0);
  ip_addr(ip + 12, pkt->src);
  ip_addr(ip + 16, pkt->dst);
  put16(ip + 10, ip_checksum(ip, 20));

  size_t len = 34;
  if (udp) {
    put16(l4, PCAP_MLT_UDP_PORT + (pkt->path & 0xFF));
    put16(l4 + 2, PCAP_MLT_UDP_PORT);
    uint32_t ulen = pkt->size_bytes >= 20 ? pkt->size_bytes - 20 : 8;
    put16(l4 + 4, ulen > 0xFFFF ? 0xFFFF : ulen);
    put16(l4 + 6, 0); /* no checksum: allowed over IPv4 */
    memcpy(l4 + 8, pkt->hdr, pkt->hdr_len);
    return len + 8 + pkt->hdr_len;
  }
  uint8_t flags = 0x10; /* ACK */
  uint32_t sport, dport;
  uint64_t seq = 0, ack = 0;
  if (ctrl) {
    sport = dport = PCAP_MLT_CTRL_PORT;
    flags |= 0x08; /* PSH */
  } else {
    /* DCTCP: one connection per flow; sequence numbers count segments in
     * the simulator and bytes on the wire. */
    bool data = pkt->kind == DLCP_SIM_PKT_DATA;
    uint32_t fport = 10000u + (pkt->flow % 50000u);
    sport = data ? fport : PCAP_TCP_DATA_PORT;
    dport = data ? PCAP_TCP_DATA_PORT : fport;
    seq = data ? pkt->seq * mss + 1 : 1;
    ack = data ? 1 : pkt->ack * mss + 1;
    if (pkt->flags & DLCP_SIM_PKT_F_ECE) {
      flags |= 0x40;
    }
  }
  put16(l4, sport);
  put16(l4 + 2, dport);
  put32(l4 + 4, seq);
  put32(l4 + 8, ack);
  l4[12] = 5 << 4; /* 20-byte header */
  l4[13] = flags;
  put16(l4 + 14, 0xFFFF);
  put16(l4 + 16, 0);
  put16(l4 + 18, 0);
  len += 20;
  if (ctrl && pkt->hdr_len) {
    memcpy(l4 + 20, pkt->hdr, pkt->hdr_len);
    len += pkt->hdr_len;
  }
  return len;
}

void dlcp_sim_pcap_record(struct dlcp_sim_pcap *cap, const dlcp_sim_port *port,
                          const dlcp_sim_packet *pkt, dlcp_sim_ps now) {
  (void)port;
  if (!cap->f) {
    return;
  }
  uint8_t rec[16 + 14 + 20 + 20 + DLCP_SIM_PKT_HDR_MAX];
  size_t caplen = synthesise(pkt, cap->mss, rec + 16);
  uint64_t ns = now / DLCP_SIM_PS_PER_NS;
  uint64_t orig = 14u + (uint64_t)pkt->size_bytes;
  le32(rec, (uint32_t)(ns / 1000000000u));
  le32(rec + 4, (uint32_t)(ns % 1000000000u));
  le32(rec + 8, (uint32_t)caplen);
  le32(rec + 12, (uint32_t)(orig > caplen ? orig : caplen));
  fwrite(rec, 1, 16 + caplen, cap->f);
  cap->frames++;
}

int dlcp_sim_pcap_close(dlcp_sim *sim) {
  int rv = 0;
  for (uint32_t i = 0; i < sim->npcaps; i++) {
    struct dlcp_sim_pcap *c = &sim->pcaps[i];
    if (c->f && (ferror(c->f) || fclose(c->f) != 0)) {
      rv = DLCP_ERR_SYSTEM;
    }
    c->f = NULL;
  }
  for (uint32_t p = 0; p < sim->net.nports; p++) {
    sim->net.ports[p].pcap = NULL;
  }
  free(sim->pcaps);
  sim->pcaps = NULL;
  sim->npcaps = 0;
  return rv;
}

int dlcp_sim_pcap_open(dlcp_sim *sim, const char *dir, char *err,
                       size_t errlen) {
  uint32_t n = sim->cfg.npcaps;
  if (n == 0) {
    return 0;
  }
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    snprintf(err, errlen, "%s: cannot create directory: %s", dir,
             strerror(errno));
    return DLCP_ERR_SYSTEM;
  }
  sim->pcaps = calloc(n, sizeof(*sim->pcaps));
  if (!sim->pcaps) {
    return DLCP_ERR_NOMEM;
  }
  sim->npcaps = n;
  /* Nanosecond-resolution classic pcap, Ethernet link type. */
  uint8_t hdr[24];
  le32(hdr, 0xA1B23C4Du);
  hdr[4] = 2;
  hdr[5] = 0;
  hdr[6] = 4;
  hdr[7] = 0;
  memset(hdr + 8, 0, 8);
  le32(hdr + 16, 65535);
  le32(hdr + 20, 1);
  for (uint32_t i = 0; i < n; i++) {
    struct dlcp_sim_pcap *c = &sim->pcaps[i];
    const dlcp_sim_port *ab = &sim->net.ports[sim->pcap_ports[i]];
    c->mss = sim->cfg.transport.mss_bytes;
    snprintf(c->path, sizeof(c->path), "%s/%s-%s.pcap", dir,
             sim->net.nodes[ab->node].name, sim->net.nodes[ab->peer].name);
    c->f = fopen(c->path, "wb");
    if (!c->f || fwrite(hdr, 1, sizeof(hdr), c->f) != sizeof(hdr)) {
      snprintf(err, errlen, "%s: cannot create: %s", c->path,
               strerror(errno));
      dlcp_sim_pcap_close(sim);
      return DLCP_ERR_SYSTEM;
    }
    sim->net.ports[sim->pcap_ports[i]].pcap = c;
    sim->net.ports[ab->reverse].pcap = c;
  }
  return 0;
}
