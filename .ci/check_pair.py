"""Usage: check_pair.py pyspark VERSION delta-spark VERSION — exits 1 unless exactly those are installed
(the README's first command must not have replaced the pair CI installed)."""

from __future__ import annotations

import sys
from importlib.metadata import version


def main(argv: list[str]) -> int:
    wanted = dict(zip(argv[0::2], argv[1::2], strict=True))
    found = {package: version(package) for package in wanted}
    print("installed: " + ", ".join(f"{p} {v}" for p, v in found.items()))
    if found != wanted:
        print(f"expected {wanted}, found {found}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
