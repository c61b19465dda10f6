"""How long the replayed-log check takes to report a change near the end of a long log.

Builds a session log of N events (default 10,000: text deltas, tool calls and results),
copies it with one value changed near the end, and times ``diff_logs`` plus
``describe_difference`` (normalization of both sides included), best of R runs.
Prints one JSON line.

    python3 benchmarks/bench_compare.py [--events 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import uuid
from typing import Any

from pytest_dsh_replay._check.normalize import Normalizer, describe_difference, diff_logs
from pytest_dsh_replay._format.events import SessionHeader


def build(n: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for i in range(n):
        if i % 10 == 9:
            data: dict[str, Any] = {
                "turn": i // 100,
                "step": 1,
                "message": {
                    "id": str(uuid.UUID(int=i)),
                    "content": [
                        {
                            "type": "tool-result",
                            "content": [{"type": "text", "text": f"result {i}\n" * 5}],
                        }
                    ],
                },
            }
            events.append({"type": "tool/result", "seq": i, "time": i, "data": data})
        else:
            chunk = {"type": "text-delta", "index": 0, "text": f"token {i} "}
            events.append(
                {
                    "type": "assistant/chunk",
                    "seq": i,
                    "time": i,
                    "data": {"turn": i // 100, "step": 1, "chunk": chunk},
                }
            )
    return events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    expected = build(args.events)
    actual = build(args.events)
    at = args.events - 11  # a tool result near the end
    actual[at]["data"]["message"]["content"][0]["content"][0]["text"] = "changed\n" * 5
    header = SessionHeader(id=str(uuid.UUID(int=7)))
    best = float("inf")
    report = ""
    for _ in range(args.repeat):
        start = time.perf_counter()
        diff = diff_logs(
            "session.jsonl",
            (header, expected),
            (header, actual),
            expected_normalizer=Normalizer(),
            actual_normalizer=Normalizer(),
        )
        assert diff is not None
        assert diff.index == at
        report = describe_difference(diff)
        best = min(best, time.perf_counter() - start)
    print(
        json.dumps(
            {
                "benchmark": "compare_logs",
                "events": args.events,
                "difference_at": at,
                "seconds_best": round(best, 4),
                "report_chars": len(report),
                "repeat": args.repeat,
                "python": platform.python_version(),
            }
        )
    )


if __name__ == "__main__":
    main()
