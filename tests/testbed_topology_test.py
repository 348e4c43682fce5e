#!/usr/bin/python3
"""dlcp-testbed's plan and option parsing, without touching the system (no
root needed): addresses, racks, ECMP routes, where limiters and loss
filters sit, which directions a loss spec selects, and the validation of
rates, probabilities and shapes."""

import argparse
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "tools"))

from testbed import cli, flows, launch, topology  # noqa: E402


class Topology(unittest.TestCase):
    def test_one_rack_is_one_router(self):
        t = topology.build("p-", 4, 1, 0)
        self.assertEqual(t.namespaces, ["p-h0", "p-h1", "p-h2", "p-h3",
                                        "p-r0"])
        self.assertEqual([h.addr for h in t.hosts],
                         ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"])
        self.assertEqual(t.addrs["p-h1"], [("eth0", "10.0.0.2/32")])
        self.assertEqual(t.routes["p-h1"], ["10.0.0.254 dev eth0 scope link",
                                            "default via 10.0.0.254 dev eth0"])
        self.assertEqual(t.addrs["p-r0"],
                         [(f"h{i}", "10.0.0.254/32") for i in range(4)])
        self.assertEqual(t.routes["p-r0"][1], "10.0.0.2 dev h1 scope link")
        self.assertEqual(t.routers, ["p-r0"])

    def test_racks_are_consecutive_hosts(self):
        t = topology.build("p-", 5, 2, 2)
        self.assertEqual([h.rack for h in t.hosts], [0, 0, 0, 1, 1])
        self.assertEqual([h.addr for h in t.hosts],
                         ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.1.1",
                          "10.0.1.2"])

    def test_rack_switch_reaches_other_racks_through_every_spine(self):
        t = topology.build("p-", 4, 2, 2)
        self.assertEqual(t.routes["p-r0"][-1],
                         "10.0.1.0/24 nexthop via 10.1.0.1 dev s0 "
                         "nexthop via 10.1.1.1 dev s1")
        self.assertEqual(t.routes["p-s1"], [
            "10.0.0.0/24 via 10.1.1.0 dev r0",
            "10.0.1.0/24 via 10.1.1.2 dev r1"])
        self.assertEqual(t.routes["p-h2"][-1], "default via 10.0.1.254 dev eth0")
        self.assertEqual(sorted(t.routers),
                         ["p-r0", "p-r1", "p-s0", "p-s1"])

    def test_ipv6_twins_every_address_and_route(self):
        t = topology.build("p-", 20, 2, 2, ipv6=True)
        self.assertEqual([h.addr6 for h in t.hosts[9:12]],
                         ["fd00::a", "fd00::1:1", "fd00::1:2"])
        self.assertEqual(t.addrs["p-h10"], [("eth0", "10.0.1.1/32"),
                                            ("eth0", "fd00::1:1/128")])
        self.assertEqual(t.routes6["p-h10"],
                         ["fd00::1:fe dev eth0",
                          "default via fd00::1:fe dev eth0"])
        self.assertEqual(t.routes6["p-r0"][-1],
                         "fd00::1:0/112 nexthop via fd01::1 dev s0 "
                         "nexthop via fd01::1:1 dev s1")
        self.assertEqual(t.routes6["p-s1"], [
            "fd00::/112 via fd01::1:0 dev r0",
            "fd00::1:0/112 via fd01::1:2 dev r1"])
        self.assertIn(("s1", "fd01::1:2/127"), t.addrs["p-r1"])
        self.assertEqual(topology.build("p-", 4, 2, 2).routes6, {})
        env = launch.rank_env(t.hosts, 3, 29500, {})
        self.assertEqual(env["MASTER_ADDR"], "fd00::1")
        env = launch.rank_env(topology.build("p-", 4, 1, 0).hosts, 3, 29500,
                              {})
        self.assertEqual(env["MASTER_ADDR"], "10.0.0.1")

    def test_loss_sits_on_the_switch_side(self):
        t = topology.build("p-", 2, 1, 0)
        up, down = t.direction("h1:up"), t.direction("h1:down")
        self.assertEqual((up.limiter.ns, up.limiter.dev), ("p-h1", "eth0"))
        self.assertEqual((up.filter.ns, up.filter.dev, up.hook),
                         ("p-r0", "h1", "ingress"))
        self.assertEqual((down.filter.ns, down.filter.dev, down.hook),
                         ("p-r0", "h1", "egress"))
        self.assertFalse(up.marks)  # a host NIC's queue marks nothing
        self.assertTrue(down.marks)

    def test_select(self):
        t = topology.build("p-", 4, 2, 2)
        keys = lambda spec: [d.key for d in topology.select(t, spec)]
        self.assertEqual(keys("h3"), ["h3:up", "h3:down"])
        self.assertEqual(keys("r1-s0:down"), ["r1-s0:down"])
        self.assertEqual(len(keys("hosts:down")), 4)
        self.assertEqual(len(keys("fabric")), 8)
        self.assertEqual(len(keys("all:up")), 8)
        with self.assertRaisesRegex(ValueError, "no link 'h9'"):
            keys("h9")
        with self.assertRaisesRegex(ValueError, "direction"):
            keys("h0:sideways")

    def test_bad_shapes(self):
        with self.assertRaisesRegex(ValueError, "spines"):
            topology.build("p-", 4, 1, 2)
        with self.assertRaisesRegex(ValueError, "spines"):
            topology.build("p-", 4, 2, 0)
        with self.assertRaisesRegex(ValueError, "racks"):
            topology.build("p-", 2, 3, 1)


class Options(unittest.TestCase):
    def test_rates(self):
        self.assertEqual(cli.parse_rate("1gbit"), 10**9)
        self.assertEqual(cli.parse_rate("10G"), 10**10)
        self.assertEqual(cli.parse_rate("100mbit"), 10**8)
        self.assertEqual(cli.parse_rate("125mbps"), 10**9)  # tc: bytes/s
        for bad in ("fast", "0gbit", "-1g", "5tbit"):
            with self.assertRaises(argparse.ArgumentTypeError):
                cli.parse_rate(bad)

    def test_probabilities(self):
        self.assertEqual(cli.parse_prob("1%"), 0.01)
        self.assertEqual(cli.parse_prob("0.001"), 0.001)
        for bad in ("2", "-0.1", "x", "101%"):
            with self.assertRaises(argparse.ArgumentTypeError):
                cli.parse_prob(bad)
        self.assertEqual(cli.parse_link_loss("r0-s1:up=0.5%"),
                         ("r0-s1:up", 0.005))

    def test_loss_defaults_to_the_last_switch_port(self):
        t = topology.build("p-", 2, 2, 1)
        rec = {"rate_bps": 10**9, "fabric_rate_bps": 10**10}
        a = types.SimpleNamespace(loss=0.01, link_loss=[("r0-s0:up", 0.5)],
                                  ecn_k=30000)
        s = cli.loss_settings(t, rec, a)
        self.assertEqual(s["h0:down"], (0.01, 10**9 // 8, 30000))
        self.assertEqual(s["h0:up"], (0.0, 0, 0))
        self.assertEqual(s["r0-s0:up"], (0.5, 10**10 // 8, 30000))
        self.assertEqual(s["r0-s0:down"], (0.0, 10**10 // 8, 30000))

    def test_host_lists(self):
        self.assertEqual(cli.parse_host_list("0-3"), [0, 1, 2, 3])
        self.assertEqual(cli.parse_host_list("4,6-7"), [4, 6, 7])
        self.assertEqual(cli.parse_host_list("5,2"), [5, 2])
        for bad in ("", "a", "3-1", "-1", "1,,2", "0-2,2"):
            with self.assertRaises(argparse.ArgumentTypeError):
                cli.parse_host_list(bad)


class Ranks(unittest.TestCase):
    def test_a_job_on_some_hosts(self):
        t = topology.build("p-", 6, 2, 1)
        jobs = launch.rank_jobs(t, ["prog"], 29600, "10.0.0.254:9555",
                                on=[4, 1])
        self.assertEqual([(p, ns) for p, ns, _, _ in jobs],
                         [("[rank 0] ", "p-h4"), ("[rank 1] ", "p-h1")])
        env = jobs[0][3]
        self.assertEqual((env["RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"],
                          env["MASTER_PORT"], env["DLCP_TOPO"]),
                         ("0", "2", "10.0.1.2", "29600", "rack1"))
        self.assertEqual(env["TESTBED_ADDRS"], "10.0.1.2,10.0.0.2")
        self.assertEqual(env["DLCP_SWITCH"], "10.0.0.254:9555")
        self.assertEqual(jobs[1][3]["RANK"], "1")

    def test_trees_name_the_leaves(self):
        t = topology.build("p-", 4, 2, 2)
        leaves = "10.0.0.254:9555,10.0.1.254:9555"
        env = launch.rank_jobs(t, ["prog"], 29600, leaves, None, 2)[3][3]
        self.assertEqual((env["DLCP_SWITCH"], env["DLCP_INA_LEAVES"],
                          env["DLCP_INA_TREES"]),
                         ("10.0.1.254:9555", leaves, "2"))
        self.assertNotIn("DLCP_INA_CHAIN", env)
        self.assertEqual(launch.spine_agg_address(t, 1, 0), "10.1.0.3:9555")

    def test_ipv6_switches_speak_ipv6(self):
        t = topology.build("p-", 4, 2, 2, ipv6=True)
        self.assertEqual(launch.agg_address(1, t.ipv6), "[fd00::1:fe]:9555")
        self.assertEqual(launch.spine_agg_address(t, 1, 1),
                         "[fd01::1:3]:9555")
        self.assertEqual(launch.host_of("[fd00::1:fe]:9555"), "fd00::1:fe")
        self.assertEqual(launch.host_of("10.0.1.254:9555"), "10.0.1.254")
        leaves = "[fd00::fe]:9555,[fd00::1:fe]:9555"
        env = launch.rank_jobs(t, ["prog"], 29600, leaves, None, 2)[3][3]
        self.assertEqual(env["DLCP_SWITCH"], "[fd00::1:fe]:9555")

    def test_every_host_by_default(self):
        t = topology.build("p-", 3, 1, 0)
        jobs = launch.rank_jobs(t, ["prog"], 29500)
        self.assertEqual([j[3]["RANK"] for j in jobs], ["0", "1", "2"])
        self.assertEqual(jobs[2][3]["TESTBED_ADDRS"],
                         "10.0.0.1,10.0.0.2,10.0.0.3")


class FlowSizes(unittest.TestCase):
    """tools/testbed/flows.py's draws: the simulator's CDFs (src/sim/
    workload.c), linearly interpolated."""

    def test_websearch(self):
        c = flows.CDFS["websearch"]
        # the trapezoids of the CDF: sum of (p1 - p0)(b0 + b1) / 2
        self.assertAlmostEqual(flows.cdf_mean(c), 1711250.0)
        self.assertEqual(flows.cdf_draw(c, 0.0), 1)
        self.assertEqual(flows.cdf_draw(c, 0.15), 10000)
        self.assertEqual(flows.cdf_draw(c, 0.175), 15000)
        self.assertEqual(flows.cdf_draw(c, 1.0), 30000000)

    def test_datamining(self):
        c = flows.CDFS["datamining"]
        self.assertEqual(flows.cdf_draw(c, 0.5), 1100)
        self.assertEqual(flows.cdf_draw(c, 0.99), 550000000)


if __name__ == "__main__":
    unittest.main()
