#!/usr/bin/python3
"""scripts/dlcp-ina-model against values computed by hand from the seed's
closed forms (docs/ina.md, "Cost models"), and its input checks."""
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import unittest

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                    "scripts", "dlcp-ina-model")


def load_tool():
    loader = importlib.machinery.SourceFileLoader("ina_model", TOOL)
    spec = importlib.util.spec_from_loader("ina_model", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


M = load_tool()


class ClosedForms(unittest.TestCase):
    # n = 4 GPUs per host, 2 hosts per rack, L = 4 racks: N = 32 GPUs.
    # K = 125 MB = 1 Gbit, k = 10 chunks, S = 2 trees.  Every link
    # 100 Gbit/s with 1 us, intra-host 1000 Gbit/s with no latency,
    # a_min = 4 us.  So K/B = 10 ms, K/(kB) = 1 ms, K/(k B_dtd) = 0.1 ms.
    def setUp(self):
        self.c = M.Config(n=4, h=2, racks=4, bytes_=125e6, chunks=10,
                          trees=2, dtd_bps=1000e9, dtd_s=0.0,
                          htl_bps=100e9, htl_s=1e-6, lts_bps=100e9,
                          lts_s=1e-6, min_s=4e-6)
        self.r = M.predict(self.c)

    def near(self, got, want):
        self.assertAlmostEqual(got, want, delta=want * 1e-12)

    def test_intra_host(self):
        # (n+k-2) = 12 steps of 0.1 ms; the bound (n-1)(1 ms + 1 us) =
        # 3.003 ms is larger, so the whole 1.2 ms is exposed.
        self.near(self.r["intra_ring_reduce"], 1.2e-3)
        self.near(self.r["intra_exposed"], 1.2e-3)

    def test_ring(self):
        # 2 (N-1) (K/(N B) + a) = 62 (0.3125 ms + 4 us) = 19.623 ms
        self.near(self.r["ring"], 19.623e-3)

    def test_ps(self):
        # (k+1) K/(kB) + 2a = 11 ms + 8 us
        self.near(self.r["ps"], 11.008e-3)

    def test_hina(self):
        # 1.2 + 10 + 0.001 + 2 (1 + 0.001) + 1 + 0.004 ms
        self.near(self.r["hina"], 14.207e-3)

    def test_mtina(self):
        # (k+1)(S+1) K/(k S B) + (S+1) a = 33 * 0.5 ms + 12 us
        self.near(self.r["mtina"], 16.512e-3)

    def test_cina(self):
        # 1.2 + 10 + 0.001 + (L-1) 1 + 1 + 0.004 ms
        self.near(self.r["cina"], 15.205e-3)

    def test_overlap_bounds_the_exposed_part(self):
        # An intra-host link as slow as the NIC (100 Gbit/s: 1 ms per chunk,
        # 12 ms in all)
        # exposes only the (n-1) first steps the seed's bound allows:
        # 3 (1 ms + 1 us) = 3.003 ms.
        c = M.Config(n=4, h=2, racks=4, bytes_=125e6, chunks=10,
                     dtd_bps=100e9, htl_bps=100e9, htl_s=1e-6)
        self.near(M.intra_ring_reduce(c), 12e-3)
        self.near(M.intra_exposed(c), 3.003e-3)

    def test_cina_chain_grows_by_one_chunk_per_rack(self):
        c8 = M.Config(racks=8, bytes_=125e6, chunks=10)
        c9 = M.Config(racks=9, bytes_=125e6, chunks=10)
        self.near(M.t_cina(c9) - M.t_cina(c8), 1e-3)


class Scale(unittest.TestCase):
    def test_fat_tree_counts(self):
        # radix 32 everywhere: 32^3/4 = 8192 hosts; commodity radix 64
        # above programmable edges of radix 32: 64 * 32 * 16 = 32768.
        r = M.scale_limits(32, 64, 1)
        self.assertEqual(r["hina_hosts"], 8192)
        self.assertEqual(r["cina_hosts"], 32768)
        r = M.scale_limits(16, 16, 4)
        self.assertEqual(r["hina_gpus"], 4096)
        self.assertEqual(r["cina_gpus"], 4096)


class Cli(unittest.TestCase):
    def run_tool(self, *args):
        return subprocess.run([sys.executable, TOOL] + list(args),
                              capture_output=True, text=True)

    def test_prints_every_scheme(self):
        p = self.run_tool("time", "--gpus-per-host", "4", "--hosts-per-rack",
                          "2", "--racks", "4", "--bytes", "125MB",
                          "--chunks", "10", "--dtd-gbps", "1000",
                          "--min-us", "4")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("cina      15.205000 ms", p.stdout)
        self.assertIn("ring      19.623000 ms", p.stdout)

    def test_rejects_bad_input(self):
        for args, want in ((("time", "--bytes", "3XB"), "--bytes"),
                           (("time", "--chunks", "0"), "--chunks"),
                           (("scale", "--prog-radix", "31"), "--prog-radix"),
                           (("scale", "--prog-radix", "64",
                             "--commodity-radix", "32"),
                            "--commodity-radix")):
            p = self.run_tool(*args)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn(want, p.stderr)


if __name__ == "__main__":
    unittest.main()
