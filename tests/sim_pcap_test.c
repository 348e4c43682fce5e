/*
 * sim_pcap_test.c: outputs.pcap writes classic (nanosecond) pcap files
 * whose frames match what crossed the link: one record per packet that
 * left either end, in time order, Ethernet + IPv4 headers with the
 * packet's size, DSCP from its queue and ECN from its codepoint, then TCP
 * (DCTCP, collective notes) or UDP + the MLT header (MLT data and control
 * datagrams).  If tshark
 * is installed it must read the file and count the same frames.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "sim/scenario.h"
#include "sim/sim.h"

static const char yaml[] =
    "topology: {kind: leaf_spine, tors: 2, hosts_per_tor: 2, spines: 2,\n"
    "           link_delay: 2us}\n"
    "transport: {kind: mlt, loss_bound: 0, load_balancing: source}\n"
    "workload:\n"
    "  flows:\n"
    "    - {src: h0, dst: h2, size: 300KB, priority: 2}\n"
    "    - {src: h1, dst: h3, size: 200KB}\n"
    "outputs: {pcap: [h0-tor0, [tor0, spine0]]}\n";

typedef struct frame {
  uint64_t ns;
  uint32_t caplen, origlen;
  const uint8_t *bytes;
} frame;

static uint32_t rd32le(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static uint32_t rd16be(const uint8_t *p) {
  return (uint32_t)p[0] << 8 | p[1];
}

static uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return buf;
}

/* Walks the file; checks every record and returns the frame count. */
static uint64_t check_file(const char *path, uint64_t *udp, uint64_t *tcp,
                           uint64_t *tos_cs4_ect) {
  size_t len;
  uint8_t *d = slurp(path, &len);
  assert_true(len >= 24);
  assert_int_equal(rd32le(d), 0xA1B23C4Du); /* nanosecond pcap */
  assert_int_equal(d[4], 2);
  assert_int_equal(d[6], 4);
  assert_int_equal(rd32le(d + 20), 1); /* Ethernet */
  size_t off = 24;
  uint64_t n = 0, last = 0;
  while (off < len) {
    assert_true(off + 16 <= len);
    frame fr = {(uint64_t)rd32le(d + off) * 1000000000u + rd32le(d + off + 4),
                rd32le(d + off + 8), rd32le(d + off + 12), d + off + 16};
    assert_true(off + 16 + fr.caplen <= len);
    assert_true(fr.ns >= last);
    last = fr.ns;
    assert_true(fr.caplen >= 34 && fr.caplen <= fr.origlen);
    const uint8_t *ip = fr.bytes + 14;
    assert_int_equal(rd16be(fr.bytes + 12), 0x0800);
    assert_int_equal(ip[0], 0x45);
    assert_int_equal(rd16be(ip + 2), fr.origlen - 14);
    assert_int_equal(ip[12], 10);
    if (ip[9] == 17) {
      (*udp)++;
      /* MLT magic right after the UDP header (C9 D1, little-endian). */
      assert_int_equal(fr.bytes[42], 0xC9);
      assert_int_equal(fr.bytes[43], 0xD1);
    } else {
      assert_int_equal(ip[9], 6);
      (*tcp)++;
    }
    /* Priority 2 -> core priority 2 -> switch queue 3 -> CS4, ECT(0). */
    if (ip[1] == ((4u << 5) | 2u)) {
      (*tos_cs4_ect)++;
    }
    off += 16 + fr.caplen;
    n++;
  }
  assert_int_equal(off, len);
  free(d);
  return n;
}

static bool have_tshark(void) {
  return system("command -v tshark >/dev/null 2>&1") == 0;
}

static void test_pcap_capture(void **state) {
  (void)state;
  char dir[] = "/tmp/dlcp-pcap-test-XXXXXX";
  assert_non_null(mkdtemp(dir));
  dlcp_sim_config cfg;
  char err[512];
  int rv = dlcp_sim_scenario_load(&cfg, yaml, strlen(yaml), "pcap.yaml",
                                  NULL, 0, err, sizeof(err));
  if (rv != 0) {
    print_error("%s\n", err);
  }
  assert_int_equal(rv, 0);
  assert_int_equal(cfg.npcaps, 2);
  dlcp_sim *sim;
  assert_int_equal(dlcp_sim_new(&sim, &cfg, NULL, err, sizeof(err)), 0);
  dlcp_sim_config_free(&cfg);
  assert_int_equal(dlcp_sim_pcap_open(sim, dir, err, sizeof(err)), 0);
  assert_int_equal(dlcp_sim_run(sim, DLCP_SIM_PS_NEVER), 1);
  assert_int_equal(sim->flows_done, sim->nflows);
  assert_int_equal(dlcp_sim_pcap_close(sim), 0);

  const char *links[][2] = {{"h0", "tor0"}, {"tor0", "spine0"}};
  for (int i = 0; i < 2; i++) {
    uint32_t a = dlcp_sim_net_find_node(&sim->net, links[i][0]);
    uint32_t b = dlcp_sim_net_find_node(&sim->net, links[i][1]);
    uint32_t p = dlcp_sim_net_find_port(&sim->net, a, b);
    const dlcp_sim_port *ab = &sim->net.ports[p];
    const dlcp_sim_port *ba = &sim->net.ports[ab->reverse];
    char path[512];
    snprintf(path, sizeof(path), "%s/%s-%s.pcap", dir, links[i][0],
             links[i][1]);
    uint64_t udp = 0, tcp = 0, cs4 = 0;
    uint64_t n = check_file(path, &udp, &tcp, &cs4);
    print_message("%s: %llu frames (%llu UDP, %llu TCP), %llu CS4+ECT\n",
                  path, (unsigned long long)n, (unsigned long long)udp,
                  (unsigned long long)tcp, (unsigned long long)cs4);
    assert_int_equal(n, ab->tx_pkts + ba->tx_pkts);
    /* MLT sends everything as datagrams, control messages included. */
    assert_true(udp > 0 && tcp == 0);
    if (i == 0) {
      /* h0's only flow is the priority-2 one: every data packet. */
      assert_true(cs4 >= 300000 / 1428);
    }
    if (have_tshark()) {
      char cmd[700];
      snprintf(cmd, sizeof(cmd), "tshark -r '%s' -T fields -e frame.number "
               "2>/dev/null | wc -l", path);
      FILE *f = popen(cmd, "r");
      assert_non_null(f);
      unsigned long long count = 0;
      assert_int_equal(fscanf(f, "%llu", &count), 1);
      pclose(f);
      print_message("tshark read %llu frames\n", count);
      assert_int_equal(count, n);
    }
    unlink(path);
  }
  rmdir(dir);
  dlcp_sim_del(sim);
}

/* A link that does not exist is a one-line error naming the item. */
static void test_pcap_bad_link(void **state) {
  (void)state;
  const char *sets[] = {"outputs.pcap=[h0-spine1]"};
  dlcp_sim_config cfg;
  char err[512];
  assert_int_equal(dlcp_sim_scenario_load(&cfg, yaml, strlen(yaml),
                                          "pcap.yaml", sets, 1, err,
                                          sizeof(err)),
                   0);
  dlcp_sim *sim = NULL;
  assert_int_equal(dlcp_sim_new(&sim, &cfg, NULL, err, sizeof(err)),
                   DLCP_ERR_CONFIG);
  print_message("%s\n", err);
  assert_non_null(strstr(err, "--set:1: field 'outputs.pcap[0]'"));
  dlcp_sim_config_free(&cfg);
  const char *bad[] = {"outputs.pcap=h0"};
  assert_int_equal(dlcp_sim_scenario_load(&cfg, yaml, strlen(yaml),
                                          "pcap.yaml", bad, 1, err,
                                          sizeof(err)),
                   DLCP_ERR_CONFIG);
  assert_non_null(strstr(err, "outputs.pcap"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pcap_capture),
      cmocka_unit_test(test_pcap_bad_link),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
