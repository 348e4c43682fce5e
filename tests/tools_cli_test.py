#!/usr/bin/env python3
"""The command-line tools as a user first meets them: -h and --help print
the usage on standard output and exit 0; an unknown option exits 2 with a
message naming it on standard error and nothing on standard output.
dlcp-soak also refuses --ina other than 0 or 1, and --ina 1 without a
switch in DLCP_SWITCH (exit 2, naming what is wrong).

usage: tools_cli_test.py TOOL...   (paths of the built dlcp-* programs)
"""
import os
import subprocess
import sys


def run(tool, *args):
    # The ranks' tools read the job from the environment: without one they
    # must still answer --help (and refuse a bad option) before looking.
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    return subprocess.run([tool, *args], capture_output=True, text=True,
                          timeout=30, env=env, stdin=subprocess.DEVNULL)


def check(tool):
    name = os.path.basename(tool)
    failures = []
    for flag in ("-h", "--help"):
        r = run(tool, flag)
        if r.returncode != 0:
            failures.append(f"{name} {flag}: exit {r.returncode}, "
                            f"stderr {r.stderr.strip()!r}")
        if not r.stdout.startswith(f"usage: {name}"):
            failures.append(f"{name} {flag}: stdout does not start with "
                            f"'usage: {name}': {r.stdout[:80]!r}")
        if "-h, --help" not in r.stdout:
            failures.append(f"{name} {flag}: the help does not list -h, --help")
        if r.stderr:
            failures.append(f"{name} {flag}: wrote to stderr: {r.stderr!r}")
    r = run(tool, "--no-such-option", "1")
    if r.returncode != 2:
        failures.append(f"{name} --no-such-option: exit {r.returncode}, "
                        "expected 2")
    if "'--no-such-option'" not in r.stderr:
        failures.append(f"{name} --no-such-option: stderr does not name it: "
                        f"{r.stderr.strip()!r}")
    if r.stdout:
        failures.append(f"{name} --no-such-option: wrote to stdout: "
                        f"{r.stdout!r}")
    return failures


def check_soak(tool):
    """dlcp-soak's --ina: 0 or 1, and 1 only with a switch to aggregate."""
    failures = []
    env = {k: v for k, v in os.environ.items() if k != "DLCP_SWITCH"}
    for args, word in ((["--ina", "2"], "--ina"),
                       (["--ina", "1"], "DLCP_SWITCH")):
        r = subprocess.run([tool, *args], capture_output=True, text=True,
                           timeout=30, env=env, stdin=subprocess.DEVNULL)
        if r.returncode != 2 or word not in r.stderr:
            failures.append(f"dlcp-soak {' '.join(args)}: exit "
                            f"{r.returncode}, expected 2 naming {word}: "
                            f"{r.stderr.strip()!r}")
    return failures


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    failures = [f for tool in sys.argv[1:] for f in check(tool)]
    failures += [f for tool in sys.argv[1:]
                 if os.path.basename(tool) == "dlcp-soak"
                 for f in check_soak(tool)]
    for f in failures:
        print("FAIL:", f)
    print(f"{len(sys.argv) - 1} tools, {len(failures)} failures")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
