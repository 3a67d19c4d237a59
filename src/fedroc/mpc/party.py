"""``python -m fedroc.mpc.party --cluster FILE --id N``: run one party of a cluster.

(``fedroc mpc party`` does the same; this entry point avoids loading the command line.)
"""

from __future__ import annotations

import argparse
import sys

from fedroc.exceptions import FedrocError
from fedroc.mpc.net import ClusterConfig, PartyServer


def main(argv: list[str] | None = None) -> int:
    """Run one party of a cluster until it is shut down; return the exit status.

    Returns 2 (with a one-line error on stderr) when the cluster file or the party's keys are
    not usable.
    """
    parser = argparse.ArgumentParser(prog="python -m fedroc.mpc.party", description=__doc__)
    parser.add_argument("--cluster", required=True, help="cluster file (TOML)")
    parser.add_argument("--id", type=int, required=True, choices=(0, 1, 2), help="party id")
    parser.add_argument("--startup-timeout", type=float, default=60.0)
    parser.add_argument("--die-after-rounds", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--fail-first-job-after", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        server = PartyServer(
            ClusterConfig.load(args.cluster),
            args.id,
            startup_timeout=args.startup_timeout,
            die_after_rounds=args.die_after_rounds,
            fail_first_job_after_rounds=args.fail_first_job_after,
        )
    except FedrocError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    return server.serve()


if __name__ == "__main__":
    sys.exit(main())
