"""The Python BM25 reference of bench/search.exs: the same corpus and queries, timed here.

argv: corpus.json (list of [name, text]), queries.json (list of strings), k [, --serve].
Prints one JSON object: per library, build seconds and the median over queries of each
query's best time (µs). Times are this thread's CPU time (`time.thread_time`), as on the Rust
side: on a shared machine wall time mostly measures the wait for a core.

With --serve, bm25s is then kept and timed on request, so that each query is timed here right
after (or before) the Rust side times it, under the same load: each line read, `I ROUNDS`,
answers with query I's best of ROUNDS runs in µs; an empty line or `exit` ends.
"""

import json
import re
import sys
import time

WORD = re.compile(r"[a-z0-9]+")


def tokens(text):
    # Names split on _ . - and case like ours; lower-cased words.
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    return WORD.findall(text.lower())


def median_query_us(run, queries, rounds):
    per = []
    for q in queries:
        best = float("inf")
        for _ in range(rounds):
            t = time.thread_time()
            run(q)
            best = min(best, time.thread_time() - t)
        per.append(best)
    per.sort()
    return per[len(per) // 2] * 1e6


def main():
    corpus = json.load(open(sys.argv[1]))
    queries = json.load(open(sys.argv[2]))
    k = int(sys.argv[3])
    docs = [tokens(name + " " + text) for name, text in corpus]
    qs = [tokens(q) for q in queries]
    out = {}

    from rank_bm25 import BM25Okapi

    t = time.thread_time()
    bm = BM25Okapi(docs)
    build = time.thread_time() - t
    # rank_bm25 scores every document per query: a sample at large sizes.
    sample = qs if len(docs) <= 10_000 else qs[:20]
    per = median_query_us(lambda q: bm.get_top_n(q, corpus, n=k), sample, 1 if len(docs) > 10_000 else 3)
    out["rank_bm25"] = {"build_s": build, "query_us": per}

    try:
        import bm25s

        t = time.thread_time()
        retriever = bm25s.BM25()
        retriever.index(docs, show_progress=False)
        build = time.thread_time() - t
        kk = min(k, len(docs))
        run = lambda q: retriever.retrieve([q], k=kk, show_progress=False)
        per = median_query_us(run, [q for q in qs if q], 3)
        out["bm25s"] = {"build_s": build, "query_us": per}
    except Exception as e:  # the figure is then missing, with the reason
        out["bm25s"] = {"error": str(e)[:300]}
        run = None
    print(json.dumps(out), flush=True)
    if "--serve" in sys.argv and run is not None:
        serve(run, qs)


def serve(run, qs):
    for line in sys.stdin:
        parts = line.split()
        if len(parts) != 2:
            return
        i, rounds = int(parts[0]), int(parts[1])
        if not qs[i]:  # no word bm25s knows: not timed
            print(-1, flush=True)
            continue
        best = float("inf")
        for _ in range(rounds):
            t = time.thread_time()
            run(qs[i])
            best = min(best, time.thread_time() - t)
        print(best * 1e6, flush=True)


main()
