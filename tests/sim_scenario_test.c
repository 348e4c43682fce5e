/*
 * sim_scenario_test.c: scenario files and reproducibility: one-line
 * "file:line: field 'x': expected ..." errors for malformed files, bad
 * fields and bad overrides; --set overrides; the shipped scenarios load;
 * the same seed gives byte-identical CSV, a different seed a different
 * flow order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sim/scenario.h"
#include "sim/sim.h"

static int load(dlcp_sim_config *cfg, const char *text, const char *const *sets,
                size_t nsets, char *err, size_t errlen) {
  return dlcp_sim_scenario_load(cfg, text, strlen(text), "test.yaml", sets,
                                nsets, err, errlen);
}

/* Loads |text| expecting failure with exactly |want| as the message. */
static void expect_error(const char *text, const char *const *sets,
                         size_t nsets, const char *want) {
  dlcp_sim_config cfg;
  char err[512];
  int rv = load(&cfg, text, sets, nsets, err, sizeof(err));
  if (rv == 0) {
    /* Some problems surface only when the world is built. */
    dlcp_sim *sim = NULL;
    rv = dlcp_sim_new(&sim, &cfg, NULL, err, sizeof(err));
    dlcp_sim_del(sim);
    dlcp_sim_config_free(&cfg);
  }
  assert_int_equal(rv, DLCP_ERR_CONFIG);
  if (strcmp(err, want) != 0) {
    print_error("got:  %s\nwant: %s\n", err, want);
  }
  assert_string_equal(err, want);
  assert_null(strchr(err, '\n'));
}

static void test_errors(void **state) {
  (void)state;
  expect_error("topology:\n  kind: leaf_spine\n  spines: [1\n", NULL, 0,
               "test.yaml:4: YAML syntax error: did not find expected ',' or "
               "']' while parsing a flow sequence");
  expect_error("topology:\n  kind: leaf_spine\n  spines: many\n", NULL, 0,
               "test.yaml:3: field 'topology.spines': expected an integer in "
               "[1, 1024], got 'many'");
  expect_error("topology:\n  kind: ring\n", NULL, 0,
               "test.yaml:2: field 'topology.kind': expected one of "
               "leaf_spine, fat_tree, explicit, got 'ring'");
  expect_error("seed: 1\ntopolgy: {}\n", NULL, 0,
               "test.yaml:2: field 'topolgy': unknown field; expected one of: "
               "name, seed, stop_at, topology, switch, host, transport, "
               "workload, faults, outputs, aggregation");
  expect_error("topology:\n  base_rtt: 24\n", NULL, 0,
               "test.yaml:2: field 'topology.base_rtt': expected a duration "
               "below 1000000 s with a unit ps, ns, us, ms or s (e.g. 24us), "
               "got '24'");
  expect_error("switch:\n  port_buffer: 512 kb\n", NULL, 0,
               "test.yaml:2: field 'switch.port_buffer': expected a whole "
               "number of bytes in [1500, 1099511627776], optionally with a "
               "unit B, KB, MB, GB, KiB, MiB, GiB or pkts, got '512 kb'");
  expect_error("workload:\n  flows:\n    - {src: h0, dst: h1, size: 1MB}\n"
               "    - {src: h0, dst: h99, size: 1MB}\n",
               NULL, 0,
               "test.yaml:4: field 'workload.flows[1].dst': expected a host "
               "name or an index in 0..3 (the topology has 4 hosts), got "
               "'h99'");
  expect_error("workload:\n  flows:\n    - {src: h0, dst: h1}\n", NULL, 0,
               "test.yaml:3: field 'workload.flows[0].size': expected this "
               "field to be present");
  expect_error("faults:\n  - {link: [tor0, tor1], down_at: 1ms}\n", NULL, 0,
               "test.yaml:2: field 'faults[0].link': expected two adjacent nodes, "
               "got "
               "'tor0' - 'tor1'");
  expect_error("transport:\n  load_balancing: random\n", NULL, 0,
               "test.yaml:2: field 'transport.load_balancing': expected one "
               "of ecmp, spray, source, got 'random'");
  const char *sets[] = {"seed=3", "topology.tors=0"};
  expect_error("seed: 1\n", sets, 2,
               "--set:2: field 'topology.tors': expected an integer in [1, "
               "4096], got '0'");
  expect_error("switch:\n  ecn_port_threshold: none\n", NULL, 0,
               "test.yaml:2: field 'switch.ecn_port_threshold': expected a "
               "whole number of bytes in [1, 1099511627776], optionally with "
               "a unit B, KB, MB, GB, KiB, MiB, GiB or pkts, got 'none'");
  expect_error("switch:\n  scheduling: pfabric\n  ecn_port_threshold: "
               "65pkts\n",
               NULL, 0,
               "test.yaml:3: field 'switch.ecn_port_threshold': expected off "
               "with switch.scheduling: pfabric");
  /* A baseline over a switch that is not its own: at transport.kind
   * when the switch's field is not set, else at that field. */
  expect_error("transport:\n  kind: ndp\n", NULL, 0,
               "test.yaml:2: field 'switch.trimming': expected true with "
               "transport.kind: ndp (NDP's switches trim packets to headers; "
               "see scenarios/ndp-incast.yaml)");
  const char *no_trim[] = {"switch.trimming=false"};
  expect_error("switch:\n  trimming: true\ntransport:\n  kind: ndp\n", no_trim,
               1,
               "--set:1: field 'switch.trimming': expected true with "
               "transport.kind: ndp (NDP's switches trim packets to headers; "
               "see scenarios/ndp-incast.yaml)");
  expect_error("switch:\n  scheduling: strict\ntransport:\n  kind: "
               "pfabric\n",
               NULL, 0,
               "test.yaml:2: field 'switch.scheduling': expected pfabric with "
               "transport.kind: pfabric (pFabric's switches serve and drop by "
               "remaining size; see scenarios/pfabric-incast.yaml)");
  const char *bad[] = {"topology"};
  expect_error("seed: 1\n", bad, 1,
               "--set:1: field 'topology': expected KEY=VALUE");
}

/* Overrides replace values, add missing fields, and index lists. */
static void test_overrides(void **state) {
  (void)state;
  const char *text = "topology:\n  kind: leaf_spine\n  spines: 2\n"
                     "workload:\n  flows:\n    - {src: h0, dst: h3, size: "
                     "1MB}\n";
  const char *sets[] = {"topology.spines=8", "switch.ecn_threshold=20pkts",
                        "workload.flows.0.size=2MB",
                        "faults=[{link: \"*\", loss: 0.001}]", "seed=99",
                        "transport.queue_pkts=4",
                        "switch.ecn_port_threshold=65pkts"};
  dlcp_sim_config cfg;
  char err[512];
  assert_int_equal(load(&cfg, text, NULL, 0, err, sizeof(err)), 0);
  assert_int_equal(cfg.transport.mlt.queue_pkts, 16);
  assert_int_equal(cfg.sw.ecn_port_threshold_bytes, 0);
  dlcp_sim_config_free(&cfg);
  assert_int_equal(load(&cfg, text, sets, 7, err, sizeof(err)), 0);
  assert_int_equal(cfg.sw.ecn_port_threshold_bytes, 65ull * 1500);
  assert_int_equal(cfg.transport.mlt.queue_pkts, 4);
  assert_int_equal(cfg.topo.spines, 8);
  assert_int_equal(cfg.sw.ecn_threshold_bytes[0], 20ull * 1500);
  assert_int_equal(cfg.sw.ecn_threshold_bytes[7], 20ull * 1500);
  assert_int_equal(cfg.flows[0].size_bytes, 2000000);
  assert_int_equal(cfg.nfaults, 1);
  assert_true(cfg.faults[0].loss == 0.001);
  assert_int_equal(cfg.seed, 99);
  dlcp_sim_config_free(&cfg);
}

/* The embedded default and every file under scenarios/ load and build. */
static void test_shipped_scenarios(void **state) {
  (void)state;
  dlcp_sim_config cfg;
  char err[512];
  assert_int_equal(dlcp_sim_scenario_load(&cfg, dlcp_sim_default_scenario,
                                          strlen(dlcp_sim_default_scenario),
                                          "<default>", NULL, 0, err,
                                          sizeof(err)),
                   0);
  assert_int_equal(cfg.topo.tors * cfg.topo.hosts_per_tor, 144);
  assert_int_equal(cfg.topo.spines, 4);
  assert_int_equal(cfg.ps[0].workers, 3 * cfg.ps[0].servers);
  dlcp_sim *sim;
  assert_int_equal(dlcp_sim_new(&sim, &cfg, NULL, err, sizeof(err)), 0);
  /* 24 us base RTT over the 4-hop inter-rack path: 3 us per link. */
  assert_int_equal(sim->net.ports[0].delay_ps, dlcp_sim_time_from_us(3));
  dlcp_sim_del(sim);
  dlcp_sim_config_free(&cfg);

  const char *dir = getenv("DLCP_SOURCE_DIR");
  if (!dir) {
    dir = ".";
  }
  const char *files[] = {"mlt-leaf-spine-ps.yaml", "incast.yaml",
                         "fat-tree-failure.yaml", "explicit-dumbbell.yaml",
                         "ps-oversubscribed.yaml", "mlt-lossy-fabric.yaml"};
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/scenarios/%s", dir, files[i]);
    int rv = dlcp_sim_scenario_load_file(&cfg, path, NULL, 0, err,
                                         sizeof(err));
    if (rv != 0) {
      print_error("%s\n", err);
    }
    assert_int_equal(rv, 0);
    rv = dlcp_sim_new(&sim, &cfg, NULL, err, sizeof(err));
    if (rv != 0) {
      print_error("%s\n", err);
    }
    assert_int_equal(rv, 0);
    dlcp_sim_del(sim);
    dlcp_sim_config_free(&cfg);
  }
}

/* A small but busy scenario: an incast with seeded sender choice plus
 * cross-rack flows under flow ECMP (seeded hash salt) and random loss. */
static const char det_scenario[] =
    "topology: {kind: leaf_spine, tors: 4, hosts_per_tor: 4, spines: 2}\n"
    "transport: {rto_min: 200us}\n"
    "workload:\n"
    "  incast: {receiver: h0, senders: 6, size: 300KB}\n"
    "  flows:\n"
    "    - {src: h1, dst: h9, size: 1MB}\n"
    "    - {src: h2, dst: h10, size: 1MB}\n"
    "    - {src: h3, dst: h11, size: 1MB}\n"
    "    - {src: h5, dst: h13, size: 1MB}\n"
    "    - {src: h6, dst: h14, size: 1MB}\n"
    "faults:\n"
    "  - {link: \"*\", loss: 0.001}\n";

static char *run_csv(uint64_t seed, size_t *len) {
  char setbuf[64];
  snprintf(setbuf, sizeof(setbuf), "seed=%llu", (unsigned long long)seed);
  const char *sets[] = {setbuf};
  dlcp_sim_config cfg;
  char err[512];
  assert_int_equal(load(&cfg, det_scenario, sets, 1, err, sizeof(err)), 0);
  dlcp_sim *sim;
  assert_int_equal(dlcp_sim_new(&sim, &cfg, NULL, err, sizeof(err)), 0);
  dlcp_sim_config_free(&cfg);
  assert_int_equal(dlcp_sim_run(sim, DLCP_SIM_PS_NEVER), 1);
  assert_int_equal(sim->flows_done, sim->nflows);
  char *buf = NULL;
  FILE *f = open_memstream(&buf, len);
  assert_non_null(f);
  assert_int_equal(dlcp_sim_write_flows_csv(sim, f), 0);
  fclose(f);
  dlcp_sim_del(sim);
  return buf;
}

/* The flow ids in completion order, as one string. */
static void id_order(const char *csv, char *out, size_t outlen) {
  size_t off = 0;
  const char *line = strchr(csv, '\n');
  while (line && line[1] && off + 8 < outlen) {
    line++;
    off += (size_t)snprintf(out + off, outlen - off, "%d ", atoi(line));
    line = strchr(line, '\n');
  }
}

static void test_determinism(void **state) {
  (void)state;
  size_t la, lb, lc;
  char *a = run_csv(1, &la);
  char *b = run_csv(1, &lb);
  char *c = run_csv(2, &lc);
  assert_int_equal(la, lb);
  assert_memory_equal(a, b, la);
  char oa[1024], oc[1024];
  id_order(a, oa, sizeof(oa));
  id_order(c, oc, sizeof(oc));
  print_message("seed 1 order: %s\nseed 2 order: %s\n", oa, oc);
  assert_string_not_equal(oa, oc);
  free(a);
  free(b);
  free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_overrides),
      cmocka_unit_test(test_shipped_scenarios),
      cmocka_unit_test(test_determinism),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
