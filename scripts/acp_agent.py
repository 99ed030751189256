#!/usr/bin/env python3
"""A small offline ACP agent (protocol v1, newline-delimited JSON-RPC 2.0 over stdio) for
MNote's tests and demo. Python standard library only.

It speaks to MNote's `acp` runtime the way a real agent would, using the `_mnote` extension:
the tools MNote offers arrive in `session/new` under `_meta.mnote.tools`, and are called with
the agent -> client request `_mnote/tools/call` `{name, arguments}` -> `{ok, content}`.

On `session/prompt` it
  1. sends a `plan` (3 entries),
  2. reports its own `tool_call`, calls `mnote.evidence.search` with the question (without
     directives), then reports the `tool_call_update` (completed / failed),
  3. streams the answer as `agent_message_chunk`s of a few words: for the top <= 3 results,
     "<first sentence of the quote> [evidence:<evidenceId>]", one per line; no results ->
     "I found nothing relevant in the knowledge bases.",
  4. answers `{stopReason: "end_turn"}`.
A prompt with earlier turns before the question (a resumed conversation) gets an answer that
begins "(Continuing our conversation.) ".

Directives anywhere in the question:
  [[slow]]   a chunk every 150 ms, at least 40 chunks
  [[hang]]   one chunk, then silence (until cancelled)
  [[crash]]  exit(3) mid-answer, after writing to stderr
  [[write]]  first asks the client for permission and to write a file, and reports both
             outcomes in the answer (MNote refuses both)
Hostile directives (the sandbox tests; each answers a JSON report instead of searching):
  [[env]]    the names and values of its environment
  [[steal]]  its uid, and whether it could read --key-file and /proc/<--server-pid>/environ
  [[daemon]] double-forks a `setsid` child that sleeps for a minute and writes its pid to
             --daemon-pid-file, then answers
  [[hugeline]] writes one line of 9 MiB (the transport's default cap is 8 MiB)
  [[confine]] tries to read each --probe PATH (a directory is listed, a file read) and to
             write and read back a file in its HOME; reports each outcome: "read", or the
             errno's name (e.g. "EACCES")
`session/cancel` stops the turn: the pending prompt is answered `{stopReason: "cancelled"}`.

With --mcp-http it also advertises `agentCapabilities.mcpCapabilities.http` and, like real
agents (codex-acp, Claude Code's and Gemini's ACP adapters), calls MNote's tools through the
HTTP MCP server it receives in `session/new` `mcpServers` ({type: "http", name, url,
headers}): plain JSON-RPC POSTs to the url with the given headers (`initialize`,
`notifications/initialized`, `tools/list`, then `tools/call` `evidence_search`), instead of
`_mnote/tools/call`. Directives for that path:
  [[open:<uuid>]]  also calls `evidence_open` with that evidence id and begins the answer with
                   "Open: <what came back>. "
  [[probe]]        begins the answer with "Tools: <tools/list names>. API: <HTTP status of GET
                   /api/kbs with the same headers>. "

Options: --pid-file PATH  write this process's pid there at start (tests check it is gone);
         --key-file PATH, --server-pid PID, --daemon-pid-file PATH, --probe PATH (repeatable)
                          for the hostile directives;
         --mcp-http       take MCP servers over HTTP (above);
         --mcp-dump PATH  write the `mcpServers` it received there as JSON (the tests use its
                          token after the run);
         --fail-auth      answer `session/new` with JSON-RPC error -32000 "Authentication
                          required" (an agent without its provider login, offline);
         --die-on-init    on `initialize`, write an error naming a key to stderr and exit(1)
                          (an agent that cannot reach its provider at start).
"""

import errno
import json
import os
import re
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

PROTOCOL_VERSION = 1
DIRECTIVE = re.compile(r"\[\[(slow|hang|crash|write|env|steal|daemon|hugeline|confine|probe|open:[0-9a-fA-F-]+)\]\]")
OPTIONS = {}
PROBES = []  # --probe PATH, repeatable ([[confine]])
SENTENCE_END = re.compile(r"(?<=[.!?\u3002\uff01\uff1f])\s")

_write_lock = threading.Lock()
_pending = {}  # our request id -> {"event": Event, "message": response}
_pending_lock = threading.Lock()
_next_id = [0]
_sessions = {}  # sessionId -> {"tools": [names], "mcp": http server entry or None, "cancel": Event}
FLAGS = set()


def send(message):
    message["jsonrpc"] = "2.0"
    line = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    with _write_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def respond(req_id, result):
    send({"id": req_id, "result": result})


def respond_error(req_id, code, message):
    send({"id": req_id, "error": {"code": code, "message": message}})


def notify_update(session_id, update):
    send({"method": "session/update", "params": {"sessionId": session_id, "update": update}})


def request(method, params):
    """Send a request to the client and wait for its response message."""
    with _pending_lock:
        _next_id[0] += 1
        req_id = "agent-%d" % _next_id[0]
        slot = {"event": threading.Event(), "message": None}
        _pending[req_id] = slot
    send({"id": req_id, "method": method, "params": params})
    slot["event"].wait()
    return slot["message"]


def plan(session_id, statuses):
    titles = ["Search the knowledge bases", "Pick the best evidence", "Answer with citations"]
    priorities = ["high", "medium", "medium"]
    entries = [
        {"content": t, "priority": p, "status": s} for t, p, s in zip(titles, priorities, statuses)
    ]
    notify_update(session_id, {"sessionUpdate": "plan", "entries": entries})


def first_sentence(text):
    text = " ".join(text.split())
    return SENTENCE_END.split(text, 1)[0].strip()


def answer_from(result):
    content = (result or {}).get("content") or {}
    results = content.get("results") if isinstance(content, dict) else None
    lines = []
    for r in (results or [])[:3]:
        sentence = first_sentence(r.get("quote") or "")
        if sentence and r.get("evidenceId"):
            lines.append("%s [evidence:%s]" % (sentence, r["evidenceId"]))
    return "\n".join(lines) if lines else "I found nothing relevant in the knowledge bases."


def chunks_of(text, slow):
    """A few words per chunk; with [[slow]] at least 40 chunks (split by characters)."""
    if slow:
        n = max(40, len(text.split()))
        size = max(1, len(text) // n)
        parts = [text[i:i + size] for i in range(0, len(text), size)]
        return parts if len(parts) >= 40 else list(text)
    words = re.findall(r"\S+\s*", text)
    return ["".join(words[i:i + 3]) for i in range(0, len(words), 3)]


def try_to_write(session_id):
    """Ask for permission and to write a file; report what the client said."""
    call = {"sessionId": session_id, "toolCall": {"toolCallId": "write-1", "title": "Write notes.md"},
            "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]}
    perm = request("session/request_permission", call)
    outcome = ((perm.get("result") or {}).get("outcome") or {}).get("outcome", "error")
    wrote = request("fs/write_text_file", {"sessionId": session_id, "path": "/tmp/mnote-acp-should-not-exist.md",
                                           "content": "x"})
    written = "error %s" % wrote["error"].get("code") if "error" in wrote else "written"
    return "Permission: %s. Write: %s. " % (outcome, written)


def try_read(path):
    try:
        with open(path, "rb") as f:
            f.read(64)
        return "read"
    except OSError as e:
        return "denied (%s)" % (e.strerror or e.errno)


def probe(path):
    """"read" when the directory could be listed or the file read, else the errno's name."""
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb") as f:
                f.read(64)
        return "read"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def home_round_trip():
    """Write a file in HOME and read it back: "ok", or the errno's name."""
    path = os.path.join(os.environ.get("HOME", "/nonexistent"), "confine-check.txt")
    try:
        with open(path, "w") as f:
            f.write("mine")
        with open(path) as f:
            return "ok" if f.read() == "mine" else "different"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def daemonize(pid_file):
    """Double-fork a setsid child that outlives its parents unless killed; wait for its pid."""
    r, w = os.pipe()
    first = os.fork()
    if first == 0:
        os.close(r)
        os.setsid()
        if os.fork() == 0:
            with open(pid_file, "w") as f:
                f.write(str(os.getpid()))
            os.write(w, b"x")
            os.close(w)
            time.sleep(60)
        os._exit(0)
    os.close(w)
    os.read(r, 1)
    os.close(r)
    os.waitpid(first, 0)


def hostile(directives):
    """The report of a hostile directive (a JSON text), or None."""
    if "env" in directives:
        return json.dumps({"env": dict(os.environ)})
    if "steal" in directives:
        report = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups()}
        if OPTIONS.get("key-file"):
            report["keyFile"] = try_read(OPTIONS["key-file"])
        if OPTIONS.get("server-pid"):
            report["serverEnviron"] = try_read("/proc/%s/environ" % OPTIONS["server-pid"])
        report["parentEnviron"] = try_read("/proc/%d/environ" % os.getppid())
        return json.dumps(report)
    if "confine" in directives:
        return json.dumps({"probes": {p: probe(p) for p in PROBES}, "home": home_round_trip()})
    if "daemon" in directives:
        daemonize(OPTIONS["daemon-pid-file"])
        return "Daemon started."
    if "hugeline" in directives:
        with _write_lock:
            sys.stdout.write('{"jsonrpc":"2.0","method":"session/update","params":{"x":"%s"}}\n' % ("a" * (9 << 20)))
            sys.stdout.flush()
        time.sleep(30)
        return "unreachable"
    return None


class Mcp:
    """A minimal MCP client over streamable HTTP (JSON responses), as the entry describes it."""

    def __init__(self, server):
        self.url = server["url"]
        self.headers = {h["name"]: h["value"] for h in server.get("headers") or []}
        self.next_id = 0

    def post(self, message):
        body = json.dumps(message).encode()
        headers = dict(self.headers)
        headers.update({"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
        req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                text = r.read().decode()
                return r.status, (json.loads(text) if text.strip() else None)
        except urllib.error.HTTPError as e:
            text = e.read().decode()
            try:
                return e.code, json.loads(text)
            except ValueError:
                return e.code, None

    def request(self, method, params):
        self.next_id += 1
        status, reply = self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        if status != 200 or not isinstance(reply, dict):
            raise RuntimeError("MCP %s: HTTP %s %s" % (method, status, reply))
        if "error" in reply:
            raise RuntimeError("MCP %s: %s" % (method, reply["error"].get("message")))
        return reply.get("result") or {}

    def start(self):
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "mnote-test-agent", "version": "1.0.0"}})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return [t.get("name") for t in self.request("tools/list", {}).get("tools") or []]

    def call(self, name, arguments):
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def api_status(self, path):
        base = self.url.rsplit("/mcp", 1)[0]
        req = urllib.request.Request(base + path, headers=self.headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code


def search_over_mcp(session, query, directives):
    """(prefix, result in the `_mnote/tools/call` shape, ok) through the session's MCP server."""
    mcp = Mcp(session["mcp"])
    prefix = ""
    tools = mcp.start()
    if "probe" in directives:
        prefix += "Tools: %s. API: %s. " % (", ".join(tools), mcp.api_status("/api/kbs"))
    for d in directives:
        if d.startswith("open:"):
            r = mcp.call("evidence_open", {"evidenceId": d[len("open:"):]})
            content = r.get("structuredContent") or {}
            if r.get("isError"):
                prefix += "Open: error %s. " % ((content.get("error") or {}).get("code"))
            else:
                prefix += "Open: %s. " % content.get("quote")
    if "evidence_search" not in tools:
        return prefix, {}, False
    r = mcp.call("evidence_search", {"query": query})
    ok = not r.get("isError")
    return prefix, {"ok": ok, "content": r.get("structuredContent") or {}}, ok


def prompt(req_id, params):
    session_id = params.get("sessionId")
    session = _sessions.get(session_id)
    if session is None:
        respond_error(req_id, -32602, "unknown session")
        return
    cancel = session["cancel"]
    cancel.clear()
    blocks = [b for b in params.get("prompt") or [] if b.get("type") == "text"]
    question = blocks[-1]["text"] if blocks else ""
    directives = set(DIRECTIVE.findall(question))
    query = " ".join(DIRECTIVE.sub(" ", question).split())

    report = hostile(directives)
    if report is not None:
        notify_update(session_id, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": report}})
        respond(req_id, {"stopReason": "end_turn"})
        return
    prefix = try_to_write(session_id) if "write" in directives else ""
    if len(blocks) > 1:  # earlier turns came first: a resumed conversation
        prefix = "(Continuing our conversation.) " + prefix
    plan(session_id, ["in_progress", "pending", "pending"])
    notify_update(session_id, {"sessionUpdate": "tool_call", "toolCallId": "search-1",
                               "title": "Search the knowledge bases", "kind": "search", "status": "in_progress"})
    if session.get("mcp"):
        try:
            found, result, ok = search_over_mcp(session, query, directives)
            prefix += found
        except Exception as e:  # reported in the answer: the tests read it
            prefix += "MCP failed: %s. " % e
            result, ok = {}, False
    elif "mnote.evidence.search" in session["tools"]:
        reply = request("_mnote/tools/call", {"name": "mnote.evidence.search", "arguments": {"query": query}})
        result = reply.get("result") or {}
        ok = bool(result.get("ok"))
    else:
        result, ok = {}, False
    notify_update(session_id, {"sessionUpdate": "tool_call_update", "toolCallId": "search-1",
                               "status": "completed" if ok else "failed"})
    if cancel.is_set():
        respond(req_id, {"stopReason": "cancelled"})
        return
    plan(session_id, ["completed", "completed", "in_progress"])

    chunks = chunks_of(prefix + answer_from(result), "slow" in directives)
    for i, chunk in enumerate(chunks):
        if cancel.is_set():
            respond(req_id, {"stopReason": "cancelled"})
            return
        notify_update(session_id, {"sessionUpdate": "agent_message_chunk",
                                   "content": {"type": "text", "text": chunk}})
        if "hang" in directives:
            cancel.wait()  # silence until cancelled (or killed)
            respond(req_id, {"stopReason": "cancelled"})
            return
        if "crash" in directives and i >= 1:
            sys.stderr.write("acp_agent: crashing on purpose ([[crash]])\n")
            sys.stderr.flush()
            os._exit(3)
        if "slow" in directives:
            cancel.wait(0.15)
    plan(session_id, ["completed", "completed", "completed"])
    respond(req_id, {"stopReason": "end_turn"})


def handle_request(message):
    req_id, method, params = message.get("id"), message.get("method"), message.get("params") or {}
    if method == "initialize":
        if "die-on-init" in FLAGS:
            sys.stderr.write("acp_agent: cannot reach the model provider with key "
                             "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c: connection refused\n")
            sys.stderr.flush()
            os._exit(1)
        capabilities = {"loadSession": False,
                        "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False}}
        if "mcp-http" in FLAGS:
            capabilities["mcpCapabilities"] = {"http": True, "sse": False}
        respond(req_id, {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": capabilities,
            "authMethods": [],
            "agentInfo": {"name": "mnote-test-agent", "version": "1.0.0"},
        })
    elif method == "session/new":
        if "fail-auth" in FLAGS:
            respond_error(req_id, -32000, "Authentication required")
            return
        offered = (((params.get("_meta") or {}).get("mnote") or {}).get("tools")) or []
        servers = params.get("mcpServers") or []
        if OPTIONS.get("mcp-dump"):
            with open(OPTIONS["mcp-dump"], "w") as f:
                json.dump(servers, f)
        http = [s for s in servers if s.get("type") == "http"] if "mcp-http" in FLAGS else []
        session_id = "sess-" + uuid.uuid4().hex
        _sessions[session_id] = {"tools": [t.get("name") for t in offered], "mcp": http[0] if http else None,
                                 "cancel": threading.Event()}
        respond(req_id, {"sessionId": session_id})
    elif method == "session/prompt":
        threading.Thread(target=prompt, args=(req_id, params), daemon=True).start()
    else:
        respond_error(req_id, -32601, "method not found: %s" % method)


def handle_notification(message):
    if message.get("method") == "session/cancel":
        session = _sessions.get((message.get("params") or {}).get("sessionId"))
        if session:
            session["cancel"].set()


def main():
    args = sys.argv[1:]
    for name in ("pid-file", "key-file", "server-pid", "daemon-pid-file", "mcp-dump"):
        if "--" + name in args:
            OPTIONS[name] = args[args.index("--" + name) + 1]
    PROBES.extend(args[i + 1] for i, a in enumerate(args[:-1]) if a == "--probe")
    for flag in ("mcp-http", "fail-auth", "die-on-init"):
        if "--" + flag in args:
            FLAGS.add(flag)
    if "pid-file" in OPTIONS:
        with open(OPTIONS["pid-file"], "w") as f:
            f.write(str(os.getpid()))
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            message = json.loads(line)
        except ValueError:
            send({"id": None, "error": {"code": -32700, "message": "parse error"}})
            continue
        if "method" in message and "id" in message:
            handle_request(message)
        elif "method" in message:
            handle_notification(message)
        elif "id" in message:
            with _pending_lock:
                slot = _pending.pop(message["id"], None)
            if slot:
                slot["message"] = message
                slot["event"].set()
    # The client closed our stdin: end.


if __name__ == "__main__":
    main()
