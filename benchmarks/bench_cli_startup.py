"""Start-up time of ``robogen --help``, ``robogen list`` and ``robogen eval --help``: the CLI
as it is (heavy modules imported inside the commands) against the same CLI with the heavy
modules imported up front (as an eager ``cli.py`` did: MuJoCo, Gymnasium, matplotlib and
the env / axis / policy registries), side by side.

Each command runs ``--repeat`` times per way, interleaved, in a fresh interpreter; the
table gives the median wall time and the median CPU time of the child (user + sys; on a
shared machine wall time also measures the neighbours), and the ratio eager / lazy.
``python -c pass`` is the floor. Run it against another checkout with
``PYTHONPATH=/path/to/checkout python benchmarks/bench_cli_startup.py``.

The children run with bytecode caching on, as an installed package has it (pip writes
``.pyc`` files at install): ``PYTHONDONTWRITEBYTECODE`` is removed from their environment
and one untimed run per command writes the caches first. (Without caches, e.g. a checkout
under ``PYTHONDONTWRITEBYTECODE=1``, every start compiles robogen's modules from source:
``robogen list`` then took 0.63 s CPU instead of 0.48 s.)
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

COMMANDS = {"robogen --help": ["--help"], "robogen list": ["list"],
            "robogen eval --help": ["eval", "--help"]}
EAGER = ("import matplotlib.colors, mujoco, gymnasium\n"
         "import robogen.envs, robogen.perturbations, robogen.policies\n")


def _code(argv: list[str], eager: bool) -> str:
    return ((EAGER if eager else "") + "import sys\nfrom robogen.cli import main\n"
            f"sys.argv = ['robogen', *{argv!r}]\nmain()\n")


def _env(bytecode: bool) -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "100"}
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _time(code: str, bytecode: bool = True) -> tuple[float, float]:
    """(wall, child CPU) seconds of one ``python -c code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True, env=_env(bytecode))
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:  # noqa: D103
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    bytecode = True
    for argv in COMMANDS.values():  # writes the .pyc caches (untimed)
        for eager in (False, True):
            _time(_code(argv, eager), bytecode)
    floor = [_time("pass", bytecode) for _ in range(args.repeat)]
    print("bytecode caches: on (written by an untimed first run)")
    print(f"python -c pass: wall {statistics.median(w for w, _ in floor):.3f} s, "
          f"cpu {statistics.median(c for _, c in floor):.3f} s (median of {args.repeat})")
    print(f"{'command':<22}{'lazy wall':>11}{'eager wall':>12}{'lazy cpu':>10}"
          f"{'eager cpu':>11}{'eager/lazy (cpu)':>18}")
    for name, argv in COMMANDS.items():
        runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for _ in range(args.repeat):
            for eager in (False, True):
                runs[eager].append(_time(_code(argv, eager), bytecode))
        wall = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
        cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
        print(f"{name:<22}{wall[False]:>10.3f}s{wall[True]:>11.3f}s{cpu[False]:>9.3f}s"
              f"{cpu[True]:>10.3f}s{cpu[True] / cpu[False]:>17.2f}x")


if __name__ == "__main__":
    main()
