"""The Python BM25 reference of bench/search.exs: the same corpus and queries, timed here.

argv: corpus.json (list of [name, text]), queries.json (list of strings), k.
Prints one JSON object: per library, build seconds and µs per query (best of 3 rounds).
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


def best(f, rounds=3):
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    corpus = json.load(open(sys.argv[1]))
    queries = json.load(open(sys.argv[2]))
    k = int(sys.argv[3])
    docs = [tokens(name + " " + text) for name, text in corpus]
    qs = [tokens(q) for q in queries]
    out = {}

    from rank_bm25 import BM25Okapi

    t = time.perf_counter()
    bm = BM25Okapi(docs)
    build = time.perf_counter() - t
    # rank_bm25 scores every document per query: time a sample at large sizes.
    sample = qs if len(docs) <= 10_000 else qs[:20]
    per = best(lambda: [bm.get_top_n(q, corpus, n=k) for q in sample], 1) / len(sample)
    out["rank_bm25"] = {"build_s": build, "query_us": per * 1e6}

    try:
        import bm25s

        t = time.perf_counter()
        retriever = bm25s.BM25()
        retriever.index(docs, show_progress=False)
        build = time.perf_counter() - t
        kk = min(k, len(docs))
        per = best(lambda: [retriever.retrieve([q], k=kk, show_progress=False) for q in qs if q]) / len(qs)
        out["bm25s"] = {"build_s": build, "query_us": per * 1e6}
    except Exception as e:  # the figure is then missing, with the reason
        out["bm25s"] = {"error": str(e)[:300]}
    print(json.dumps(out))


main()
