#!/usr/bin/env python3
"""A small deterministic OpenAI-compatible server (stdlib only) for LightRAG without a model.

LightRAG needs an LLM (entity extraction, query keywords, the answer) and an embedding model.
Neither can run on these machines, so tests, `./dev lightrag start --mock` and
`mnote bench rag` point LightRAG at this server. It is shaped like the real API:

  POST /v1/embeddings        {input: [..], model, encoding_format?: "base64"|"float"}
                             -> hashed bag-of-words unit vectors (dim = --dim), similarity is
                                meaningful: texts sharing words/CJK characters are close.
  POST /v1/chat/completions  {messages, stream?, response_format?}
                             -> extraction rows, query keywords (JSON), or an answer citing [1];
                                `stream: true` answers as SSE chunks ending with `data: [DONE]`.
  GET  /v1/models, /health   -> {"object": "list", "data": [{"id", "object": "model", "created",
                                "owned_by"}, ...]}: mock-llm, mock-embed and scripted

A model whose name starts with `scripted` gets the scripted agent instead (the agent runtime
tests): streamed tool calls and cited answers, with directives in the last user message:
  [[slow]]       answer deltas every 150 ms, at least 40 of them
  [[trickle]]    answer deltas every 150 ms for about two minutes (until the client goes away):
                 a run that is surely still answering when a test acts on it, however loaded
  [[hang]]       a few deltas, then the connection stays open and silent
  [[error]]      a few deltas, then `data: {"error": ...}` and the connection closes without [DONE]
  [[fabricate]]  the answer cites a random evidence id and a real one beside an unrelated sentence
  [[loop]]       calls the search tool again every time tools are offered
  [[hugeline]]   after the first chunk, one `data:` line that never ends (64 KB writes, fast,
                 up to 256 MB or until the client goes away)
  [[huge]]       an answer of 4 MB, streamed in 8 KB deltas as fast as possible
  [[needchoice]] tools are ignored unless the request says `tool_choice` (as llama-cpp-python's
                 server does): without it, the answer without tools
  [[namerepeat]] every tool-call delta repeats `id`, `type` and `function.name` beside its piece
                 of `arguments` (as llama-cpp-python's and some vLLM versions' streams do)
  [[textcall]]   the tool call written as plain text in `content` (a Hermes/Qwen-style
                 `<tool_call>{"name": …, "arguments": …}</tool_call>` block) instead of
                 `tool_calls`, finish reason `stop` (a model the server does not parse calls for)
  [[read]] / [[open]] / [[outline]]  the one tool call is `mnote_evidence_read` / `_open`
                 (`{"evidenceId": <the question>}`) / `_outline` (`{"sourceId": <the question>}`);
                 after its tool message the answer is "<function>: <the error code, or ok>"
  [[notfound]]   after the search, the answer says the evidence does not answer, starting with the
                 marker the system prompt tells the model to start such an answer with (the first
                 `[...]` token after "start your answer with"), on its own line, as instructed;
                 no marker in the system prompt: the plain sentence
  [[partial]]    after the search, the answer starts with the marker the system prompt gives for an
                 answer to part of the question (the first `[...]` token after "If it answers only
                 part of the question, start with"), then quotes the results and says what is missing
  [[misquote]]   after the search, every line cites a real result beside a sentence its passage
                 does not hold (citations whose quotes do not check)
  [[history]]    no tool call: the answer lists the earlier user/assistant messages the request
                 carried before the last user message (role and text, oldest first), so a test
                 sees what a follow-up sent
With `tools` and no `role: tool` message yet: one `mnote_evidence_search` call (arguments split
over 3 chunks); after a tool message: one line per top result (<= 3), "<first sentence of its
quote> [evidence:<evidenceId>]"; without tools: a plain answer. The key `sk-wrong` gets 401 on
every route.

Tokens: lowercase ASCII words, and every CJK character plus every pair of adjacent CJK
characters (so a Chinese query matches a chunk). Usage: mock_openai.py --port N [--dim 64].
"""

import argparse
import base64
import hashlib
import json
import math
import re
import struct
import sys
import select
import socket
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIM = 64
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
WORD = re.compile(r"[A-Za-z0-9]+|[\u3400-\u9fff\uf900-\ufaff]+")
STOP = set("the a an of to in is are was were and or for on with by at as be it this that what which who how where when does do".split())


def tokens(text):
    out = []
    for m in WORD.finditer(text):
        w = m.group(0)
        if CJK.match(w):
            out.extend(w)
            out.extend(w[i : i + 2] for i in range(len(w) - 1))
        else:
            w = w.lower()
            if w not in STOP:
                out.append(w)
    return out


def embed(text):
    v = [0.0] * DIM
    for t in tokens(text):
        h = hashlib.md5(t.encode()).digest()
        i = int.from_bytes(h[:4], "little") % DIM
        v[i] += 1.0 if h[4] & 1 else -1.0
    n = math.sqrt(sum(x * x for x in v))
    if n == 0:
        v[0], n = 1.0, 1.0
    return [x / n for x in v]


def salient(text, limit):
    """The most frequent content tokens (ASCII words of 4+ letters, CJK pairs), stable order."""
    counts = {}
    for t in tokens(text):
        if (CJK.match(t) and len(t) == 2) or (not CJK.match(t) and len(t) >= 4 and not t.isdigit()):
            counts[t] = counts.get(t, 0) + 1
    return [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]]


def fenced_input(prompt):
    m = re.search(r"---Input Text---\s*```\s*(.*?)```", prompt, re.S)
    return m.group(1) if m else prompt


def reply_for(messages, body):
    system = "\n".join(m.get("content") or "" for m in messages if m.get("role") == "system")
    user = [m.get("content") or "" for m in messages if m.get("role") == "user"]
    last = user[-1] if user else ""
    if isinstance(last, list):  # content parts
        last = " ".join(p.get("text", "") for p in last if isinstance(p, dict))
    if last.lstrip().startswith("---Task---\nBased on the last extraction") or "Based on the last extraction" in last[:200]:
        return "<|COMPLETE|>"
    if "---Input Text---" in last:
        names = salient(fenced_input(last), 4)
        rows = [f"entity<|#|>{n}<|#|>concept<|#|>{n} is a topic of the text." for n in names]
        if len(names) >= 2:
            rows.append(f"relation<|#|>{names[0]}<|#|>{names[1]}<|#|>related<|#|>{names[0]} relates to {names[1]}.")
        return "\n".join(rows + ["<|COMPLETE|>"])
    if "high_level_keywords" in (system + last):
        m = re.search(r"User Query:\s*(.*?)\n\s*---Output---", system + "\n" + last, re.S)
        query = m.group(1).strip() if m else last
        words = salient(query, 6) or [t for t in tokens(query) if len(t) > 1][:6]
        return json.dumps({"high_level_keywords": words[:2], "low_level_keywords": words}, ensure_ascii=False)
    if "Description List" in (system + last):
        return "A summary of the descriptions."
    query = last.strip().splitlines()[-1] if last.strip() else ""
    return f"MOCK ANSWER: the documents answer this [1]. (query: {query})"


# ---- the scripted agent (models named scripted*) -------------------------------------------

DIRECTIVE = re.compile(r"\[\[(slow|trickle|hang|error|fabricate|loop|hugeline|huge|needchoice|namerepeat|textcall|history|read|open|outline|notfound|partial|misquote)\]\]")

# `[[read]]`, `[[open]]`, `[[outline]]`: the function called instead of the search, and its argument.
BY_ID = {"read": ("mnote_evidence_read", "evidenceId"), "open": ("mnote_evidence_open", "evidenceId"),
         "outline": ("mnote_evidence_outline", "sourceId")}


def tool_name(flags):
    return next((BY_ID[f][0] for f in BY_ID if f in flags), "mnote_evidence_search")
NOTHING = "I found nothing relevant in the knowledge bases."


def text_of(content):
    if isinstance(content, list):  # content parts
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def first_sentence(quote):
    quote = " ".join(str(quote).split())
    m = re.search(r"^(.+?(?:[.!?](?=\s|$)|[\u3002\uff01\uff1f]))", quote)
    s = m.group(1) if m else quote
    return s if len(s) <= 200 else s[:200].rstrip() + "\u2026"


def script_for(body):
    """What the scripted agent answers: ("tool", arguments) or ("text", answer), and directives."""
    messages = body.get("messages") or []
    users = [text_of(m.get("content")) for m in messages if m.get("role") == "user"]
    last = users[-1] if users else ""
    flags = set(DIRECTIVE.findall(last))
    question = " ".join(DIRECTIVE.sub(" ", last).split())
    tool_msgs = [m for m in messages if m.get("role") == "tool"]
    tools = body.get("tools") and not ("needchoice" in flags and not body.get("tool_choice"))
    if "history" in flags:
        last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
        prior = [m for m in messages[:last_user] if m.get("role") in ("user", "assistant")]
        if not prior:
            return ("text", "I received no earlier turns."), flags
        said = "; ".join(f"{m['role']}: \u201c{' '.join(text_of(m.get('content')).split())[:120]}\u201d" for m in prior)
        return ("text", f"Earlier turns I received ({len(prior)}): {said}."), flags
    if tools and "textcall" in flags:
        call = json.dumps({"name": "mnote_evidence_search", "arguments": {"query": question}}, ensure_ascii=False)
        return ("text", f"<tool_call>\n{call}\n</tool_call>"), flags
    if tools and "loop" in flags:  # a model that never stops searching
        return ("tool", json.dumps({"query": question}, ensure_ascii=False)), flags
    by_id = next((BY_ID[f] for f in BY_ID if f in flags), None)
    if tools and by_id and not tool_msgs:
        return ("tool", json.dumps({by_id[1]: question})), flags
    if by_id and tool_msgs:
        try:
            data = json.loads(text_of(tool_msgs[-1].get("content")) or "{}")
        except ValueError:
            data = {}
        error = data.get("error") if isinstance(data, dict) else None
        return ("text", f"{by_id[0]}: {error.get('code') if isinstance(error, dict) else 'ok'}"), flags
    if tool_msgs:
        try:
            data = json.loads(text_of(tool_msgs[-1].get("content")) or "{}")
        except ValueError:
            data = {}
        results = [r for r in (data.get("results") or []) if isinstance(r, dict) and r.get("evidenceId")] \
            if isinstance(data, dict) else []
        lines = [f"{first_sentence(r.get('quote', ''))} [evidence:{r['evidenceId']}]" for r in results[:3]]
        if "notfound" in flags:
            system = " ".join(text_of(m.get("content")) for m in messages if m.get("role") == "system")
            m = re.search(r"start your answer with (\[[^\]\s]+\])", system)
            said = "The knowledge bases do not answer this question: the passages found are about other things."
            return ("text", f"{m.group(1)}\n\n{said}" if m else said), flags
        if "partial" in flags:
            system = " ".join(text_of(m.get("content")) for m in messages if m.get("role") == "system")
            m = re.search(r"part of the question, start with (\[[^\]\s]+\])", system)
            body = "\n".join(lines + ["The passages do not say how long a charge takes."])
            return ("text", f"{m.group(1)}\n\n{body}" if m else body), flags
        if "misquote" in flags:
            lines = [f"Penguins supervise the night shift in sector {i + 1}. [evidence:{r['evidenceId']}]"
                     for i, r in enumerate(results[:2])]
        if "fabricate" in flags:
            lines = lines[:1]
            if results:
                lines.append(f"The fleet was founded on the Moon in 1802. [evidence:{results[0]['evidenceId']}]")
            lines.append(f"Penguins supervise the night shift. [evidence:{uuid.uuid4()}]")
        return ("text", "\n".join(lines) if lines else NOTHING), flags
    if tools:
        return ("tool", json.dumps({"query": question}, ensure_ascii=False)), flags
    return ("text", f"This is a scripted answer without tools. You asked: \u201c{question}\u201d. "
                    "I cannot search your knowledge bases in this conversation. "
                    "Ask again with an agent that has the MNote tools for cited evidence."), flags


def pieces_of(text, at_least):
    """`text` as streamed deltas: about two words each, and at least `at_least` of them."""
    words = re.findall(r"\S+\s*", text) or [text]
    pieces = ["".join(words[i : i + 2]) for i in range(0, len(words), 2)]
    if len(pieces) < at_least and len(text) >= at_least:  # cut into exactly `at_least` pieces
        n = len(text)
        pieces = [text[i * n // at_least : (i + 1) * n // at_least] for i in range(at_least)]
    while len(pieces) < at_least:  # a very short text: pad at the front
        pieces.insert(0, "\u2026 ")
    return pieces


def client_gone(sock):
    try:
        r, _, _ = select.select([sock], [], [], 0)
        return bool(r) and sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def serve_scripted(handler, body):
    (kind, payload), flags = script_for(body)
    model = body.get("model", "scripted")
    cid = f"chatcmpl-scripted-{uuid.uuid4().hex[:16]}"
    call_id = f"call_{uuid.uuid4().hex[:12]}"
    created = int(time.time())

    def chunk(delta=None, finish=None, **extra):
        c = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
             "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}
        c.update(extra)
        return c

    if not body.get("stream"):
        msg = {"role": "assistant", "content": payload if kind == "text" else None}
        if kind == "tool":
            msg["tool_calls"] = [{"id": call_id, "type": "function",
                                  "function": {"name": tool_name(flags), "arguments": payload}}]
        return handler.send_json(200, {"id": cid, "object": "chat.completion", "created": created, "model": model,
                                       "choices": [{"index": 0, "message": msg,
                                                    "finish_reason": "tool_calls" if kind == "tool" else "stop"}],
                                       "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}})

    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.end_headers()
    handler.close_connection = True

    def send(obj):
        handler.wfile.write(f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode())
        handler.wfile.flush()

    try:
        send(chunk({"role": "assistant", "content": ""}))
        if "hugeline" in flags:
            handler.wfile.write(b"data: ")
            block = b"x" * 65536
            for _ in range(4096):
                handler.wfile.write(block)
            return None
        if "huge" in flags:
            piece = "y" * 8192
            for _ in range(512):
                send(chunk({"content": piece}))
            send(chunk(finish="stop"))
            handler.wfile.write(b"data: [DONE]\n\n")
            handler.wfile.flush()
            return None
        if kind == "tool":
            n = len(payload)
            parts = [payload[: n // 3], payload[n // 3 : 2 * n // 3], payload[2 * n // 3 :]]
            send(chunk({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                        "function": {"name": tool_name(flags), "arguments": parts[0]}}]}))
            for p in parts[1:]:
                time.sleep(0.02)
                if "namerepeat" in flags:
                    send(chunk({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                                "function": {"name": tool_name(flags), "arguments": p}}]}))
                else:
                    send(chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}))
            send(chunk(finish="tool_calls"))
        else:
            slow = "slow" in flags
            pieces = pieces_of(payload, 40 if slow else 1)
            if "hang" in flags or "error" in flags:
                for p in pieces[:3]:
                    send(chunk({"content": p}))
                    time.sleep(0.03)
                if "error" in flags:
                    send({"error": {"message": "the scripted model failed on purpose", "type": "server_error"}})
                    return None
                # Hang: silent until the client goes away (at most 10 minutes).
                for _ in range(6000):
                    if client_gone(handler.connection):
                        return None
                    time.sleep(0.1)
                return None
            if "trickle" in flags:
                pieces = pieces_of(payload, 800)
            for p in pieces:
                if "trickle" in flags and client_gone(handler.connection):
                    return None
                send(chunk({"content": p}))
                time.sleep(0.15 if slow or "trickle" in flags else 0.025)
            send(chunk(finish="stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            send({"id": cid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [],
                  "usage": {"prompt_tokens": 12, "completion_tokens": 34, "total_tokens": 46}})
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client cancelled
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet; errors still go to stderr
        pass

    def send_json(self, code, obj):
        data = json.dumps(obj, ensure_ascii=False).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def wrong_key(self):
        """`Bearer sk-wrong` is refused everywhere (and quoted back, as OpenAI does)."""
        if (self.headers.get("Authorization") or "").strip() == "Bearer sk-wrong":
            self.send_json(401, {"error": {"message": "Incorrect API key provided: sk-wrong.",
                                           "type": "invalid_request_error", "code": "invalid_api_key"}})
            return True
        return False

    def do_GET(self):
        if self.wrong_key():
            return None
        if self.path.rstrip("/") in ("/health", "/v1/models"):
            self.send_json(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 1700000000, "owned_by": "mnote-mock"}
                for m in ("mock-llm", "mock-embed", "scripted")]})
        else:
            self.send_json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(n) or b"{}")
        except ValueError:
            return self.send_json(400, {"error": {"message": "invalid JSON", "type": "invalid_request_error"}})
        if self.wrong_key():
            return None
        if self.path.endswith("/chat/completions") and str(body.get("model", "")).startswith("scripted"):
            return serve_scripted(self, body)
        if self.path.endswith("/embeddings"):
            inputs = body.get("input")
            inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
            as_b64 = body.get("encoding_format") == "base64"
            data = []
            for i, text in enumerate(inputs):
                v = embed(str(text))
                e = base64.b64encode(struct.pack(f"<{DIM}f", *v)).decode() if as_b64 else v
                data.append({"object": "embedding", "index": i, "embedding": e})
            return self.send_json(200, {"object": "list", "data": data, "model": body.get("model", "mock-embed"),
                                        "usage": {"prompt_tokens": 0, "total_tokens": 0}})
        if self.path.endswith("/chat/completions"):
            text = reply_for(body.get("messages") or [], body)
            model = body.get("model", "mock-llm")
            created = int(time.time())
            if not body.get("stream"):
                return self.send_json(200, {
                    "id": "chatcmpl-mock", "object": "chat.completion", "created": created, "model": model,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}})
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            pieces = [text[i : i + 24] for i in range(0, len(text), 24)] or [""]
            for p in pieces:
                chunk = {"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": created, "model": model,
                         "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode())
            end = {"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": created, "model": model,
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
            self.wfile.flush()
            self.close_connection = True
            return None
        return self.send_json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})


def main():
    global DIM
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--dim", type=int, default=64)
    a = ap.parse_args()
    DIM = a.dim
    srv = ThreadingHTTPServer((a.host, a.port), Handler)
    # The chosen port on the first line of stdout: callers that pass --port 0 read it.
    print(f"listening {srv.server_address[0]}:{srv.server_address[1]}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
