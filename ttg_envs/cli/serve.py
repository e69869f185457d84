"""``ttg serve ENV_ID``: serve an env stack per session over OpenEnv (see :mod:`ttg_envs.serve`)."""

from __future__ import annotations

import argparse
import json
import os

from ..cli_args import positive_int


def _serve(args: argparse.Namespace) -> int:
    from ..serve.server import ServeConfig, ServeError, serve

    env_kwargs = json.loads(args.env_kwargs)
    if not isinstance(env_kwargs, dict):
        raise ValueError("--env-kwargs must be a JSON object")
    config = ServeConfig(
        args.env_id,
        env_kwargs,
        meter=args.meter,
        failure_cost=args.failure_cost,
        host=args.host,
        port=args.port,
        token=args.token or os.environ.get("TTG_SERVE_TOKEN") or None,
        max_sessions=args.max_sessions,
        idle_timeout=args.idle_timeout if args.idle_timeout > 0 else None,
    )
    try:
        config.check()
    except ServeError as exc:
        raise ValueError(str(exc)) from None

    def ready(url: str) -> None:
        meter = f", meter {args.meter}" if args.meter else ""
        print(f"ttg serve: {args.env_id} on {url} (OpenEnv /ws, /schema; up to {args.max_sessions} sessions{meter})", flush=True)

    serve(config, ready)
    return 0


def add_serve(sub) -> None:
    """The ``serve`` subcommand."""
    p = sub.add_parser("serve", help="serve an env over OpenEnv (HTTP + WebSocket sessions), one env stack per session")
    p.add_argument("env_id", help="registered env id, e.g. ttg/ALFWorld-v0")
    p.add_argument("--env-kwargs", default="{}", help="JSON dict of gym.make kwargs for every session's env")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s; any other needs --token)")
    p.add_argument("--port", type=int, default=8000, help="port (0: a free one; default: %(default)s)")
    p.add_argument("--token", default=None, help="bearer token clients must send (default: $TTG_SERVE_TOKEN; required off loopback)")
    p.add_argument("--max-sessions", type=positive_int, default=32, help="sessions at once, forks included (default: %(default)s)")
    p.add_argument(
        "--idle-timeout", type=float, default=600.0, help="close a session idle this many seconds (0: never; default: %(default)s)"
    )
    p.add_argument("--meter", default=None, help="a load_meter spec: add ttg, ttg_delta, ... server-side (e.g. ttg/ALFWorld-v0)")
    p.add_argument("--failure-cost", type=float, default=None, help="C of eq. 7 for --meter (default: the env's table 4 value)")
    p.set_defaults(func=_serve)
