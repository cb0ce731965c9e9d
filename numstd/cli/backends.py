"""``python -m numstd backends``: every backend, whether it runs here and why not.

Text output: one block per backend (name, ``available`` or ``unavailable``, the reason, library
versions, device, flags).  ``--json``: a JSON array of the same records
(:meth:`numstd.backends.base.Backend.describe`).  Exit code 0 (listing never fails).
"""

from __future__ import annotations

import argparse
import json

__all__ = ["configure", "run"]


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="a JSON array (name, available, reason, version, device, flags, ops)")
    p.add_argument("names", nargs="*", metavar="NAME", help="only these backends (default: all)")


def run(args: argparse.Namespace) -> int:
    from ..backends import all_backends, get

    backends = [get(n) for n in args.names] if args.names else all_backends()
    infos = [b.describe() for b in backends]
    if args.json:
        print(json.dumps(infos, indent=1, default=str))
        return 0
    for info in infos:
        state = "available" if info["available"] else "unavailable"
        print(f"{info['name']:<14} {state}" + ("" if info["available"] else f": {info['reason']}"))
        if info.get("version"):
            print(f"{'':<14} versions: {info['version']}")
        if info["available"]:
            print(f"{'':<14} device:   {info.get('device', '')}")
            flags = info.get("flags") or {}
            if flags:
                print(f"{'':<14} flags:    " + ", ".join(f"{k}={v}" for k, v in flags.items()))
            print(f"{'':<14} ops:      {len(info['ops'])} ({', '.join(info['ops'])}); formats: {', '.join(info['formats'])}")
    n_ok = sum(1 for i in infos if i["available"])
    print(f"{n_ok} of {len(infos)} backend(s) available")
    return 0
