#!/usr/bin/python3
"""Every scenario shipped in scenarios/ runs as a user would run it:
`dlcp-sim scenarios/NAME.yaml` from a directory of its own (so an
`outputs.dir` is created where the user stands), exit status 0, and a
summary whose every flow finished.  A shipped example that fails or
leaves flows unfinished is a broken promise the unit tests, which load
the files without running them through the CLI, would not see.

usage: sim_examples_test.py DLCP_SIM"""

import glob
import os
import re
import subprocess
import sys
import tempfile

SCENARIOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                         "scenarios")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sim = os.path.abspath(sys.argv[1])
    files = sorted(glob.glob(os.path.join(SCENARIOS, "*.yaml")))
    if not files:
        sys.exit(f"no scenarios in {SCENARIOS}")
    failed = []
    for path in files:
        name = os.path.basename(path)
        with tempfile.TemporaryDirectory(prefix="dlcp-sim-example.") as cwd:
            p = subprocess.run([sim, path], cwd=cwd, capture_output=True,
                               text=True, timeout=240)
        m = re.search(r"^flows\s+(\d+) finished of (\d+)", p.stdout, re.M)
        if p.returncode != 0 or not m or m.group(1) != m.group(2):
            failed.append(f"{name}: exit {p.returncode}\n{p.stdout[-800:]}"
                          f"{p.stderr[-800:]}")
        else:
            print(f"{name}: {m.group(1)} flows finished")
    if failed:
        sys.exit("scenarios that did not run clean:\n" + "\n".join(failed))
    print(f"{len(files)} scenarios ran clean")


if __name__ == "__main__":
    main()
