#!/usr/bin/env python3
"""Turn the public CMRC 2018 reading-comprehension data into a BEIR-style retrieval set.

CMRC 2018 (https://github.com/ymcui/cmrc2018, CC BY-SA 4.0) is a span-extraction data set:
Chinese Wikipedia passages, each with a few questions. As a retrieval set, every distinct
passage is a document and every question is a query whose one relevant document is its own
passage. `mnote eval` reads the result (docs/BENCHMARKS.md):

  OUT/corpus.jsonl      {"_id": sha256 of the passage, "title": "", "text": passage,
                         "metadata": {"article": the Wikipedia title}}, one per distinct passage
  OUT/queries.jsonl     {"_id": question id, "text": question}
  OUT/qrels/dev.tsv     query-id <TAB> corpus-id <TAB> score (1), after a header line

Input: one JSON file in any of the three public shapes of the same data:
  * SQuAD style (the repository's squad-style-data/cmrc2018_dev.json):
    {"data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question"}]}]}]}
  * the original release (the repository's data/cmrc2018_dev.json):
    [{"title", "context_text", "qas": [{"query_id", "query_text"}]}]
  * Hugging Face `hfl/cmrc2018` rows saved as JSON lines or a JSON list:
    {"id", "context", "question", ...} (no article title: "metadata.article" is "")

Documents, queries and judgements keep the file's order. Identical passages become one
document. A question id that occurs twice (the dev set has one) keeps its first text and is
judged against both passages. Standard library only:

  python3 scripts/eval/convert_cmrc.py cmrc2018_dev.json OUT_DIR
"""

import hashlib
import json
import os
import sys


def records(data):
    """(article title, passage, question id, question) in file order; a passage without
    questions yields one record with question id None."""
    if isinstance(data, dict) and "data" in data:
        for article in data["data"]:
            for p in article.get("paragraphs", []):
                qas = p.get("qas") or [None]
                for qa in qas:
                    yield (article.get("title", ""), p["context"],
                           qa and qa["id"], qa and qa["question"])
    elif isinstance(data, list) and data and "context_text" in data[0]:
        for p in data:
            for qa in p.get("qas") or [None]:
                yield (p.get("title", ""), p["context_text"],
                       qa and qa["query_id"], qa and qa["query_text"])
    elif isinstance(data, list) and data and "context" in data[0]:
        for row in data:
            yield (row.get("title", ""), row["context"], row["id"], row["question"])
    else:
        raise SystemExit("not a CMRC 2018 file: expected SQuAD style ({\"data\": ...}), the "
                         "original list (context_text/qas) or Hugging Face rows (id/context/question)")


def load(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        # JSON lines (a Hugging Face split saved with to_json)
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def convert(data):
    corpus = {}   # doc id -> document, first occurrence wins (dicts keep insertion order)
    queries = {}  # query id -> text, first occurrence wins
    qrels = {}    # query id -> {doc id: 1}, grouped by query in first-occurrence order
    for title, context, qid, question in records(data):
        doc = hashlib.sha256(context.encode("utf-8")).hexdigest()
        corpus.setdefault(doc, {"_id": doc, "title": "", "text": context, "metadata": {"article": title}})
        if qid is None:
            continue
        queries.setdefault(qid, {"_id": qid, "text": question})
        qrels.setdefault(qid, {})[doc] = 1
    return corpus, queries, qrels


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def main(argv):
    if len(argv) != 3:
        raise SystemExit("usage: " + __doc__.strip().splitlines()[-1].strip())
    src, out = argv[1], argv[2]
    corpus, queries, qrels = convert(load(src))
    os.makedirs(os.path.join(out, "qrels"), exist_ok=True)
    write_jsonl(os.path.join(out, "corpus.jsonl"), corpus.values())
    write_jsonl(os.path.join(out, "queries.jsonl"), queries.values())
    with open(os.path.join(out, "qrels", "dev.tsv"), "w", encoding="utf-8", newline="\n") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for qid, docs in qrels.items():
            for doc, score in docs.items():
                f.write(f"{qid}\t{doc}\t{score}\n")
    n_rels = sum(len(d) for d in qrels.values())
    print(f"{len(corpus)} documents, {len(queries)} queries, {n_rels} judgements -> {out}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
