"""Where a test run's time went, per test file: the summed durations (setup, call and teardown) of
each file's tests, from the JUnit XML that `pytest --junitxml=FILE` writes. The sum over all files
is the work two pytest-xdist workers share; the wall time is at least half of it.

    python -m pytest -q --durations=30 --junitxml=/tmp/suite.xml
    python scripts/suite_durations.py /tmp/suite.xml [--top 15]
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ElementTree
from collections import defaultdict


def file_totals(junit_xml: str) -> dict[str, tuple[int, float]]:
    """test file -> (tests, summed seconds), longest first."""
    totals: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for case in ElementTree.parse(junit_xml).iter("testcase"):
        module = case.get("classname", "")  # tests.test_x or tests.test_x.TestClass
        parts = module.split(".")
        name = "/".join(parts[:2]) + ".py" if len(parts) >= 2 else module
        totals[name][0] += 1
        totals[name][1] += float(case.get("time", 0.0))
    return {name: (n, seconds) for name, (n, seconds) in sorted(totals.items(), key=lambda item: -item[1][1])}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("junit_xml")
    parser.add_argument("--top", type=int, default=15, help="files listed (default 15)")
    args = parser.parse_args(argv)
    totals = file_totals(args.junit_xml)
    work = sum(t for _, t in totals.values())
    print(f"{'seconds':>8}  {'tests':>5}  file")
    for name, (n, seconds) in list(totals.items())[: args.top]:
        print(f"{seconds:8.1f}  {n:5d}  {name}")
    rest = list(totals.values())[args.top :]
    print(f"{sum(t for _, t in rest):8.1f}  {sum(n for n, _ in rest):5d}  the other {len(rest)} files")
    print(f"{work:8.1f}  {sum(n for n, _ in totals.values()):5d}  in all (work the workers share)")


if __name__ == "__main__":
    main()
