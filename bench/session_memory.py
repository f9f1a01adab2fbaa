"""Server memory over a lesson's worth of sessions: open and close 100, print the resident set every 10.

    python -m bench.session_memory                       100 sessions, each opens Inspect and disconnects
    python -m bench.session_memory --page trace --sessions 200

One `streamlit run app.py` (headless, a private copy of the shipped checkpoint); each session is a websocket
client of bench.classroom_load that opens the start page, then the page, reads its run to the end and
disconnects. Streamlit keeps a disconnected session for server.disconnectedSessionTTL (120 s by default) in case
its tab reconnects, so the resident set is printed again once that time has passed: what stays then is what the
sessions left behind.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time

from .classroom_load import Learner, app_server, private_checkpoints, rss_mb
from .common import load_summary


async def one_session(url: str, page: str) -> None:
    learner = Learner(url)
    await learner.connect()
    await learner.open(page)
    await learner.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.session_memory", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--page", default="inspector", help="the page each session opens (its URL path)")
    parser.add_argument("--ttl", type=int, default=120, help="server.disconnectedSessionTTL, seconds")
    args = parser.parse_args(argv)
    print(load_summary())
    with private_checkpoints() as folder, app_server(folder, flags=("--server.disconnectedSessionTTL",
                                                                     str(args.ttl))) as (url, pid):
        asyncio.run(one_session(url, args.page))  # the model and the page's shared caches, loaded once
        print(f"after one session: {rss_mb(pid):.0f} MB")
        start = time.perf_counter()
        for n in range(1, args.sessions + 1):
            asyncio.run(one_session(url, args.page))
            if n % 10 == 0:
                print(f"{n:4d} sessions opened and closed: {rss_mb(pid):.0f} MB ({time.perf_counter() - start:.0f} s)",
                      flush=True)
        time.sleep(args.ttl + 10)  # the disconnected sessions expire
        print(f"{args.ttl + 10} s later (past the sessions' TTL): {rss_mb(pid):.0f} MB; {load_summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
