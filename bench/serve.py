#!/usr/bin/env python3
"""Aggregate decode tokens/s of `serve` at several numbers of concurrent streams.

    bench/serve.py build/bin/demo -w models/demo                 # 1, 4 and 16 streams
    bench/serve.py build/bin/demo -w models/demo --streams 1,4 --tokens 64 --parallel 4

Starts `<model> serve` on a free loopback port with --parallel = the most
streams (unless given), warms it up, then for each number of streams N runs N
clients at once, each streaming --requests completions of --tokens new tokens
(greedy) from its own prompt. Aggregate tok/s = completion tokens of every
request (usage) / wall time from the first request to the last token. The
time to the first token of each request is reported too. Loopback only; the
server is stopped at the end, however the run ends.
"""
import argparse
import http.client
import json
import re
import subprocess
import sys
import threading
import time

PROMPTS = ["In the beginning", "And God said", "And the LORD spake unto Moses", "Blessed is the man",
           "The LORD is my shepherd", "And it came to pass", "Now these are the generations", "Hear, O Israel"]


def stream_completion(port, prompt, tokens):
    """One streamed completion; (completion tokens, seconds to the first token)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = json.dumps({"prompt": prompt, "max_tokens": tokens, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}})
    start = time.monotonic()
    conn.request("POST", "/v1/completions", body, {"content-type": "application/json"})
    res = conn.getresponse()
    if res.status != 200:
        raise RuntimeError(f"HTTP {res.status}: {res.read()[:200]!r}")
    first = None
    usage = None
    for line in res:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if first is None and chunk.get("choices") and chunk["choices"][0].get("text"):
            first = time.monotonic() - start
        if chunk.get("usage"):
            usage = chunk["usage"]
    conn.close()
    return usage["completion_tokens"], first or 0.0


def run(port, streams, requests, tokens):
    results, errors = [], []

    def client(c):
        try:
            for r in range(requests):
                results.append(stream_completion(port, PROMPTS[(c + r) % len(PROMPTS)] + " " * c, tokens))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(streams)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.monotonic() - start
    if errors:
        raise errors[0]
    total = sum(n for n, _ in results)
    ttft = sorted(f for _, f in results)[len(results) // 2]
    return total, seconds, ttft


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a model executable (build/bin/demo)")
    ap.add_argument("-w", "--weights", required=True)
    ap.add_argument("--streams", default="1,4,16")
    ap.add_argument("--tokens", type=int, default=64, help="new tokens per request")
    ap.add_argument("--requests", type=int, default=2, help="requests per client")
    ap.add_argument("--parallel", type=int, default=0, help="server sequences (default: the most streams)")
    ap.add_argument("-c", "--context", type=int, default=256)
    args = ap.parse_args()
    streams = [int(s) for s in args.streams.split(",")]
    parallel = args.parallel or max(streams)
    cmd = [args.model, "serve", "-w", args.weights, "--port", "0", "--parallel", str(parallel),
           "-c", str(args.context), "--queue", str(4 * max(streams))]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        port = None
        for line in server.stdout:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+) \((\d+) sequences", line)
            if m:
                port, sequences = int(m.group(1)), int(m.group(2))
                print(line.strip())
                break
        if port is None:
            sys.exit("the server did not start")
        for _ in range(2):  # the first requests after start-up run slower (first dispatches at new positions)
            stream_completion(port, PROMPTS[0], args.tokens)
        print(f"\n| streams | sequences | requests | tokens | seconds | aggregate tok/s | per stream tok/s | median TTFT s |")
        print("|---|---|---|---|---|---|---|---|")
        for n in streams:
            total, seconds, ttft = run(port, n, args.requests, args.tokens)
            print(f"| {n} | {sequences} | {n * args.requests} | {total} | {seconds:.1f} | {total / seconds:.1f} | "
                  f"{total / seconds / n:.1f} | {ttft:.2f} |", flush=True)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
