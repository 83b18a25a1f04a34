"""The ``sparkcdc`` command line.

Exit codes: 0 success; 2 bad configuration or usage; 3 source problem
(unreachable, misconfigured, purged position); 1 anything else.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from sparkcdc.errors import ConfigError, SourceError, SparkCdcError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_CONFIG = 2
EXIT_SOURCE = 3


def _demo(args: argparse.Namespace) -> int:
    from sparkcdc.cli.demo import run_demo

    run_demo(seconds=args.seconds)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sparkcdc", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="start a private MariaDB with sample data and stream its changes to the console",
    )
    demo.add_argument("--seconds", type=float, default=20.0, help="how long to write changes")
    demo.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        code: int = args.func(args)
        return code
    except ConfigError as exc:
        print(f"sparkcdc: configuration error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except SourceError as exc:
        print(f"sparkcdc: source error: {exc}", file=sys.stderr)
        return EXIT_SOURCE
    except SparkCdcError as exc:
        print(f"sparkcdc: {exc}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
