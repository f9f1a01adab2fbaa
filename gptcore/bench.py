"""Benchmarks (python -m gptcore bench)."""


def add_bench_parser(sub):
    sub.add_parser("bench", help="benchmarks")


def run_bench(args) -> int:
    raise SystemExit("bench: not built yet")
