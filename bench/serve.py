#!/usr/bin/env python3
"""Aggregate decode tokens/s of an OpenAI-compatible server at several numbers of concurrent streams.

    bench/serve.py build/bin/demo -w models/demo                   # lathe's demo build, 1, 4 and 16 streams
    bench/serve.py --gguf demo-f16.gguf                            # lathe run FILE --serve
    bench/serve.py --gguf demo-f16.gguf --llama-server ../llama.cpp-peer/build/bin/llama-server
                                                                   # the same file by lathe, then by llama-server

Each server is started on a free loopback port with --parallel = the most
streams (unless given) and warmed up; then for each number of streams N, N
clients at once each stream --requests completions of --tokens new tokens
(greedy) from prompts of their own. Aggregate tok/s = the completion tokens
of every request (the usage a server reports; llama-server's timings, or its
chunks, otherwise) / the wall time of the round; per-stream tok/s is that /
N; TTFT is the median time to a request's first text. With --llama-server
the same rounds run against llama.cpp's server on the same GGUF file, and
both land in one table. Loopback only; every server is stopped at the end,
however the run ends.

    bench/serve.py build/bench-demo-2k/demo -w models/demo --reuse 1000 -c 2048
                                                                   # time to the first token, prompt reuse off and on

--reuse N measures prompt reuse instead: requests one after another whose
prompts share an N-token prefix (a system prompt) and then differ, each
for one token (its time is the time to the first token), against a server
with --no-prompt-reuse and then one with reuse, in one run; the table has
each one's median time to the first token over the requests after the
first, the tokens reuse spared (usage.prompt_tokens_details.cached_tokens)
and the speed-up.
"""
import argparse
import http.client
import json
import math
import os
import re
import socket
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
    counted = None
    chunks = 0
    for line in res:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if chunk.get("choices") and chunk["choices"][0].get("text"):
            chunks += 1
            if first is None:
                first = time.monotonic() - start
        if chunk.get("usage"):
            counted = chunk["usage"]["completion_tokens"]
        elif counted is None and chunk.get("timings", {}).get("predicted_n") is not None:
            counted = chunk["timings"]["predicted_n"]
    conn.close()
    return (counted if counted is not None else chunks), first or 0.0


def completion(port, prompt, tokens):
    """One whole completion; (seconds, usage)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = json.dumps({"prompt": prompt, "max_tokens": tokens, "temperature": 0})
    start = time.monotonic()
    conn.request("POST", "/v1/completions", body, {"content-type": "application/json"})
    res = conn.getresponse()
    data = res.read()
    seconds = time.monotonic() - start
    conn.close()
    if res.status != 200:
        raise RuntimeError(f"HTTP {res.status}: {data[:200]!r}")
    return seconds, json.loads(data)["usage"]


SHARED = ("And God said, Let there be light: and there was light. And God saw the light, that it was good: "
          "and God divided the light from the darkness. ")


def shared_prefix(port, tokens):
    """Text of about `tokens` prompt tokens: SHARED repeated, sized by the server's own count."""
    one = completion(port, SHARED * 4, 1)[1]["prompt_tokens"]
    two = completion(port, SHARED * 8, 1)[1]["prompt_tokens"]
    per = (two - one) / 4
    return SHARED * max(1, math.ceil((tokens - (one - 4 * per)) / per))


def stop(server):
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()


def measure_reuse(name, server, port, args, rows, prefix):
    """Requests sharing `prefix`, one after another; a table row."""
    try:
        for p in PROMPTS[:2]:  # the first requests after start-up run slower (first dispatches)
            completion(port, p, 1)
        times, cached, prompt = [], [], 0
        for r in range(args.requests):
            seconds, usage = completion(port, prefix + PROMPTS[r % len(PROMPTS)] + " " * (r // len(PROMPTS)), 1)
            times.append(seconds)
            cached.append(usage.get("prompt_tokens_details", {}).get("cached_tokens", 0))
            prompt = usage["prompt_tokens"]
        rest = sorted(times[1:])
        median = rest[len(rest) // 2]
        rows.append((name, prompt, times[0], median, sorted(cached[1:])[len(rest) // 2]))
        print(f"{name}: prompt {prompt} tokens, first {times[0]:.3f} s, median of the rest {median:.3f} s, "
              f"cached {cached}", flush=True)
    finally:
        stop(server)


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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_lathe(cmd):
    """A lathe server command (it prints the port it listens on); (process, port)."""
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    for line in server.stdout:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+) \((\d+) sequences", line)
        if m:
            print(line.strip(), flush=True)
            return server, int(m.group(1))
    server.wait()
    sys.exit(f"{' '.join(cmd)}: the server did not start")


def start_llama_server(binary, gguf, parallel, context, threads):
    """llama.cpp's server on the same file: every sequence its own `context` positions."""
    port = free_port()
    cmd = [binary, "-m", gguf, "--host", "127.0.0.1", "--port", str(port), "-np", str(parallel),
           "-c", str(parallel * context), "-t", str(threads), "-tb", str(threads), "--no-webui"]
    log = open(os.devnull, "w")
    server = subprocess.Popen(cmd, stdout=log, stderr=log)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"{' '.join(cmd)}: exited with {server.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                print(f"llama-server: listening on http://127.0.0.1:{port} ({parallel} sequences of {context} positions)",
                      flush=True)
                return server, port
        except OSError:
            pass
        time.sleep(0.5)
    server.kill()
    sys.exit(f"{' '.join(cmd)}: not answering after 300 s")


def measure(name, server, port, args, streams, rows):
    try:
        for _ in range(2):  # the first requests after start-up run slower (first dispatches at new positions)
            stream_completion(port, PROMPTS[0], args.tokens)
        single = None
        for n in streams:
            total, seconds, ttft = run(port, n, args.requests, args.tokens)
            tps = total / seconds
            single = tps if n == 1 else single
            rows.append(f"| {name} | {n} | {n * args.requests} | {total} | {seconds:.1f} | {tps:.1f} | "
                        f"{tps / n:.1f} | {f'{tps / single:.2f}×' if single else '–'} | {ttft:.2f} |")
            print(rows[-1], flush=True)
    finally:
        stop(server)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", help="a model executable (build/bin/demo), with -w")
    ap.add_argument("-w", "--weights", help="the model executable's checkpoint")
    ap.add_argument("--gguf", help="a GGUF file, served by `lathe run FILE --serve` (and by --llama-server)")
    ap.add_argument("--lathe", default="build/generator/lathe", help="the lathe command for --gguf")
    ap.add_argument("--llama-server", help="llama.cpp's llama-server: the same rounds on --gguf")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="llama-server's CPU threads")
    ap.add_argument("--streams", default="1,4,16")
    ap.add_argument("--tokens", type=int, default=64, help="new tokens per request")
    ap.add_argument("--requests", type=int, default=2, help="requests per client")
    ap.add_argument("--parallel", type=int, default=0, help="server sequences (default: the most streams)")
    ap.add_argument("-c", "--context", type=int, default=256, help="positions of each sequence")
    ap.add_argument("--reuse", type=int, default=0,
                    help="prompt reuse: TTFT of --requests requests sharing a prefix of this many tokens, reuse off and on")
    args = ap.parse_args()
    if bool(args.model) == bool(args.gguf) or bool(args.model) != bool(args.weights):
        ap.error("give a model executable with -w, or --gguf")
    if args.llama_server and not args.gguf:
        ap.error("--llama-server runs on --gguf")
    streams = [int(s) for s in args.streams.split(",")]
    parallel = args.parallel or max(streams)
    options = ["--port", "0", "--parallel", str(parallel), "-c", str(args.context), "--queue", str(4 * max(streams))]
    if args.model:
        name = os.path.basename(args.model)
        cmd = [args.model, "serve", "-w", args.weights] + options
    else:
        name = "lathe"
        cmd = [args.lathe, "run", args.gguf, "--serve"] + options
    rows = []
    if args.reuse:
        if args.llama_server:
            ap.error("--reuse measures lathe alone")
        args.requests = max(args.requests, 5)
        prefix = None
        for label, extra in (("reuse off", ["--no-prompt-reuse"]), ("reuse on", [])):
            server, port = start_lathe(cmd + extra)
            prefix = prefix or shared_prefix(port, args.reuse)
            measure_reuse(f"{name}, {label}", server, port, args, rows, prefix)
        off = rows[0][3]
        print("\n| server | prompt tokens | first request s | median TTFT s, the rest | cached tokens (median) | "
              "vs reuse off |\n|---|---:|---:|---:|---:|---:|")
        for label, prompt, first, median, cached in rows:
            print(f"| {label} | {prompt} | {first:.3f} | {median:.3f} | {cached} | {off / median:.2f}× |")
        return
    print("| server | streams | requests | tokens | seconds | aggregate tok/s | per stream tok/s | vs 1 stream | "
          "median TTFT s |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    server, port = start_lathe(cmd)
    measure(name, server, port, args, streams, rows)
    if args.llama_server:
        server, port = start_llama_server(args.llama_server, args.gguf, parallel, args.context, args.threads)
        measure("llama-server", server, port, args, streams, rows)
    print("\n| server | streams | requests | tokens | seconds | aggregate tok/s | per stream tok/s | vs 1 stream | "
          "median TTFT s |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
