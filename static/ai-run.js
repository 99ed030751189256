// The assistant: ask an agent, stream its run's journal into the page, and pick a live run up again
// after a reload. Every `.ai-run` element is one component (the /ai page, or the compact panel
// of a KB or viewer page). The server provides the words (`data-labels`, in the page's
// language) and renders the final answer (`/ai/runs/{id}/result`); everything this script
// writes itself is text.
//
// Resume: the run being shown is remembered as `{hostRunId, sessionId, lastSeq, scope}` in
// localStorage. On load and whenever the page becomes visible again the component asks the
// session's active run; a live one is rendered from its journal (the JSON pages from seq 0,
// then an EventSource after the last seq), and no event is rendered twice: every event with a
// seq at or below the highest rendered one is ignored.
(function () {
  "use strict";
  if (!window.fetch || !window.EventSource || window.mnoteAiRun) return;
  window.mnoteAiRun = true; // the script may be included by more than one component

  var SNAPSHOT = "mnote.page_ai_active_run_snapshot.v1";
  var SESSIONS = "mnote.page_ai_sessions.v1";
  var PAGE = 500;
  var KINDS = ["run.created", "message.delta", "tool.started", "tool.completed", "plan.updated", "changed_files",
    "run.completed", "run.failed", "run.cancelled", "run.interrupted"];
  var ENDINGS = { "run.completed": "completed", "run.failed": "failed", "run.cancelled": "cancelled", "run.interrupted": "interrupted" };
  var meta = document.querySelector('meta[name="csrf-token"]');
  var CSRF = meta ? meta.getAttribute("content") : "";
  // A question typed when the session had ended, kept (this tab only) across the sign-in.
  var DRAFT = "mnote.page_ai_draft.v1";

  function uuid() {
    var b = new Uint8Array(16);
    crypto.getRandomValues(b);
    b[6] = (b[6] & 15) | 64;
    b[8] = (b[8] & 63) | 128;
    var h = Array.prototype.map.call(b, function (x) { return (x + 256).toString(16).slice(1); }).join("");
    return h.slice(0, 8) + "-" + h.slice(8, 12) + "-" + h.slice(12, 16) + "-" + h.slice(16, 20) + "-" + h.slice(20);
  }

  function load(key) {
    try { return JSON.parse(localStorage.getItem(key) || "null"); } catch (e) { return null; }
  }

  function save(key, value) {
    try {
      if (value === null) localStorage.removeItem(key); else localStorage.setItem(key, JSON.stringify(value));
    } catch (e) { /* private mode: no resume after reload */ }
  }

  function short(s, max) {
    var chars = Array.from(String(s || "").trim());
    return chars.length <= max ? chars.join("") : chars.slice(0, max).join("") + "…";
  }

  // The same one-line summary the server renders (keys sorted).
  // Arguments that name ids (sourceId, kbIds, block_id) stay off the card (as on the server).
  function isIdArg(k) {
    return k === "id" || k === "ids" || /(Id|Ids|_id|_ids)$/.test(k);
  }

  function argsSummary(v) {
    function one(x) {
      if (typeof x === "string") return "\"" + short(x, 80) + "\"";
      if (Array.isArray(x)) return "[" + x.length + "]";
      if (x && typeof x === "object") return "{…}";
      return JSON.stringify(x);
    }
    var s;
    if (v === null || v === undefined) s = "";
    else if (typeof v === "object" && !Array.isArray(v)) s = Object.keys(v).filter(function (k) { return !isIdArg(k); }).sort().map(function (k) { return k + ": " + one(v[k]); }).join(", ");
    else s = one(v);
    return short(s, 200);
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }

  function when(iso) {
    var d = new Date(iso);
    if (isNaN(d)) return "";
    function p(n) { return (n < 10 ? "0" : "") + n; }
    return p(d.getMonth() + 1) + "-" + p(d.getDate()) + " " + p(d.getHours()) + ":" + p(d.getMinutes());
  }

  // fetch → {ok, status, json}; status 0 when the server could not be reached.
  function api(method, url, body) {
    var opts = { method: method, credentials: "same-origin", headers: { accept: "application/json" } };
    if (method !== "GET") opts.headers["x-csrf-token"] = CSRF;
    if (body !== undefined) {
      opts.headers["content-type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    return fetch(url, opts).then(function (r) {
      return r.json().catch(function () { return null; }).then(function (j) { return { ok: r.ok, status: r.status, json: j }; });
    }, function () { return { ok: false, status: 0, json: null }; });
  }

  function AiRun(root) {
    this.root = root;
    this.scope = root.getAttribute("data-scope") || "ai";
    try { this.L = JSON.parse(root.getAttribute("data-labels") || "{}"); } catch (e) { this.L = {}; }
    this.form = root.querySelector("form.ai-ask");
    this.view = root.querySelector(".ai-view");
    this.historyList = root.querySelector(".ai-history");
    this.historyEmpty = root.querySelector(".ai-history-empty");
    this.agentSelect = root.querySelector("select.ai-agent");
    this.agentNote = root.querySelector(".ai-agent-note");
    this.formError = root.querySelector(".ai-form-error");
    // /ai shows the whole conversation: its earlier turns, the shown one, later ones.
    this.thread = root.querySelector(".ai-thread");
    this.later = root.querySelector(".ai-later");
    this.convList = root.querySelector(".ai-convs");
    this.runId = null;
    this.turn = null;
    this.seq = 0;          // the highest seq rendered
    this.ended = true;
    this.es = null;
    this.gen = 0;          // bumped whenever another run is shown: stale callbacks stop
    this.timer = null;
    this.checking = false;
    this.pickSession();
    this.bind();
  }

  AiRun.prototype.t = function (key) {
    return this.L[key] || key;
  };

  AiRun.prototype.pickSession = function () {
    var id = null;
    if (this.root.getAttribute("data-session-fixed") === "true") {
      id = this.root.getAttribute("data-session-id");
    } else if (this.root.getAttribute("data-session-fresh") === "true") {
      // A question brought from elsewhere (`ask=`) starts a conversation of its own: not a
      // follow-up of the one this tab had open, whose run is not resumed here.
      var open = load(SNAPSHOT);
      if (open && open.scope === this.scope) save(SNAPSHOT, null);
      id = this.root.getAttribute("data-session-id");
    } else {
      var snap = load(SNAPSHOT);
      var sessions = load(SESSIONS) || {};
      if (snap && snap.scope === this.scope && snap.sessionId) id = snap.sessionId;
      else id = sessions[this.scope] || this.root.getAttribute("data-session-id") || uuid();
    }
    this.setSession(id);
  };

  AiRun.prototype.setSession = function (id) {
    this.sessionId = id;
    var sessions = load(SESSIONS) || {};
    delete sessions[this.scope];
    sessions[this.scope] = id;
    var keys = Object.keys(sessions);
    keys.slice(0, Math.max(0, keys.length - 50)).forEach(function (k) { delete sessions[k]; });
    save(SESSIONS, sessions);
    var input = this.form && this.form.querySelector('input[name="session_id"]');
    if (input) input.value = id;
  };

  AiRun.prototype.saveSnapshot = function () {
    if (!this.runId) return;
    save(SNAPSHOT, { hostRunId: this.runId, sessionId: this.sessionId, lastSeq: this.seq, scope: this.scope });
  };

  AiRun.prototype.bind = function () {
    var self = this;
    this.root.addEventListener("submit", function (ev) {
      var f = ev.target;
      if (f.classList.contains("ai-ask")) { ev.preventDefault(); self.ask(); }
      else if (f.classList.contains("ai-cancel-form")) { ev.preventDefault(); self.cancel(f); }
      else if (f.classList.contains("ai-resume-form")) { ev.preventDefault(); self.resume(f); }
      else if (f.classList.contains("ai-retry-form")) { ev.preventDefault(); self.retry(f); }
      else if (f.classList.contains("ai-new-session-form")) { ev.preventDefault(); self.newSession(); }
    });
    this.root.addEventListener("click", function (ev) {
      var a = ev.target.closest(".ai-history a[data-run-id]");
      // On /ai a run opens with its whole conversation (a page of its own).
      if (a && self.thread) return;
      if (a && ev.button === 0 && !ev.metaKey && !ev.ctrlKey && !ev.shiftKey && !ev.altKey) {
        ev.preventDefault();
        self.show(a.getAttribute("data-run-id"));
        return;
      }
      var b = ev.target.closest("button.ai-new-session");
      if (b && b.type === "button") { ev.preventDefault(); self.newSession(); }
    });
    if (this.agentSelect) this.agentSelect.addEventListener("change", function () { self.agentTouched = true; self.noteAgent(); });
    var prompt = this.form && this.form.querySelector('textarea[name="prompt"]');
    if (prompt) {
      prompt.addEventListener("keydown", function (ev) {
        if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); self.ask(); }
      });
    }
  };

  AiRun.prototype.start = function () {
    var self = this;
    var box = this.root.querySelector(".ai-convs-box");
    if (box && window.matchMedia && window.matchMedia("(max-width: 759px)").matches && !/[?&]q=/.test(location.search)) box.open = false;
    this.restoreDraft();
    this.loadAgents();
    if (this.form && this.root.getAttribute("data-source-id") && !this.form.querySelector('input[name="kb_id"]')) this.loadSourceKb();
    var runId = this.root.getAttribute("data-run-id");
    if (runId) {
      this.runId = runId;
      this.root.setAttribute("data-checked", "true");
      if (this.root.getAttribute("data-live") === "true") {
        this.show(runId);
      } else {
        // An ended run the server rendered: keep it, wire its forms.
        this.turn = this.view.querySelector(".ai-turn");
        if (this.turn) this.turn.setAttribute("data-ended", this.turn.querySelector(".ai-final") ? this.turn.querySelector(".ai-final").getAttribute("data-status") : "");
      }
    } else {
      this.check();
    }
    this.loadHistory();
    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState === "visible") self.check();
    });
  };

  // ---- agents and context ----

  AiRun.prototype.runsOn = function (a) {
    var s;
    if (a.provider === "builtin") s = this.t(a.providerNote === "not_configured" ? "runs_on.builtin_not_configured" : "runs_on.builtin");
    else if (a.provider === "openai") s = this.t("runs_on.openai").replace("{model}", a.model || "");
    else s = this.t("runs_on.acp");
    if (!a.usesTools) s += " · " + this.t("no_tools");
    return s;
  };

  // The agents as the server's descriptors describe them (mnote.ai_agent_descriptors.v1):
  // what each runs on and, in the compact panel, the user's default agent.
  AiRun.prototype.loadAgents = function () {
    var self = this;
    if (!this.agentSelect) return;
    api("GET", "/api/page-ai/agents/descriptors").then(function (r) {
      if (!r.ok || !r.json || !r.json.items) return;
      var defaultAgent = null;
      ((r.json.common && r.json.common.fields) || []).forEach(function (f) {
        if (f.key === "ai.common.default_agent") defaultAgent = f.value;
      });
      r.json.items.forEach(function (d) {
        var o = self.agentSelect.querySelector('option[value="' + CSS.escape(d.agentId) + '"]');
        if (!o) return;
        var model = "";
        (d.fields || []).forEach(function (f) { if (/\.model$/.test(f.key) && typeof f.value === "string") model = f.value; });
        var note = self.runsOn({ provider: d.runtimeProvider, providerNote: d.runtimeConfigured ? null : "not_configured",
          model: model, usesTools: (d.tools || []).length > 0 });
        var about = self.t("about." + d.agentId);
        if (about === "about." + d.agentId) about = "";
        var panel = self.root.classList.contains("ai-panel");
        // Each option says what the agent is, the note line below what it runs on (the
        // compact panel names the agent only and says both in its note line).
        o.setAttribute("data-note", panel && about ? about + " · " + note : note);
        o.setAttribute("data-capabilities", (d.capabilities || []).join(" "));
        // The name in the page's language (`agent.<id>` of the labels), else the API's.
        var name = self.t("agent." + d.agentId);
        if (name === "agent." + d.agentId) name = d.displayName;
        o.textContent = panel || !about ? name : name + " — " + about;
      });
      if (defaultAgent && self.root.classList.contains("ai-panel") && !self.agentTouched &&
          self.agentSelect.querySelector('option[value="' + CSS.escape(defaultAgent) + '"]')) {
        self.agentSelect.value = defaultAgent;
      }
      self.noteAgent();
    });
  };

  AiRun.prototype.noteAgent = function () {
    if (!this.agentSelect) return;
    var o = this.agentSelect.selectedOptions[0];
    if (this.agentNote) this.agentNote.textContent = o ? (o.getAttribute("data-note") || "") : "";
    var caps = this.root.querySelector(".ai-agent-caps");
    if (caps && o && o.hasAttribute("data-caps")) caps.textContent = o.getAttribute("data-caps");
  };

  AiRun.prototype.loadSourceKb = function () {
    var self = this;
    api("GET", "/api/sources/" + encodeURIComponent(this.root.getAttribute("data-source-id"))).then(function (r) {
      if (!r.ok || !r.json || !r.json.kbId || self.form.querySelector('input[name="kb_id"]')) return;
      var i = document.createElement("input");
      i.type = "hidden";
      i.name = "kb_id";
      i.value = r.json.kbId;
      self.form.appendChild(i);
    });
  };

  AiRun.prototype.contextRefs = function () {
    function values(sel) {
      return Array.prototype.filter.call(this.form.querySelectorAll(sel), function (i) { return i.type !== "checkbox" || i.checked; })
        .map(function (i) { return i.value; });
    }
    var boxes = this.form.querySelectorAll('input[type="checkbox"][name="kb_id"]');
    var kbIds = values.call(this, 'input[name="kb_id"]');
    // Every box ticked: every KB the user can read (sent as none; the API takes at most 50).
    if (boxes.length && kbIds.length === boxes.length) kbIds = [];
    return { kbIds: kbIds, sourceIds: values.call(this, 'input[name="source_id"]') };
  };

  // A refused request because the session ended (idle expiry, signed out elsewhere: 401, or
  // the session's CSRF token gone: 403 csrf_failed) is not an error to show. Still signed in
  // (the token changed, e.g. a sign-in in another tab): take the new token and `retry` once.
  // Otherwise keep the question for this page and go to the sign-in page, which comes back here.
  AiRun.prototype.sessionEnded = function (r, prompt, retry) {
    var code = r.json && r.json.error ? r.json.error.code : "";
    if (!(r.status === 401 || (r.status === 403 && code === "csrf_failed"))) return false;
    var scope = this.scope;
    var here = location.pathname + location.search;
    api("GET", "/api/session").then(function (s) {
      if (s.ok && s.json && s.json.csrfToken && retry && !retry.again) {
        CSRF = s.json.csrfToken;
        retry.again = true;
        retry();
        return;
      }
      try { sessionStorage.setItem(DRAFT, JSON.stringify({ path: here, scope: scope, prompt: prompt || "" })); } catch (e) { /* not kept */ }
      location.assign("/login?next=" + encodeURIComponent(here) + "&expired=1");
    });
    return true;
  };

  // The question kept by `sessionEnded`, back in its box after the sign-in.
  AiRun.prototype.restoreDraft = function () {
    var d = null;
    try { d = JSON.parse(sessionStorage.getItem(DRAFT) || "null"); } catch (e) { d = null; }
    if (!d || d.path !== location.pathname + location.search || d.scope !== this.scope || !this.form) return;
    try { sessionStorage.removeItem(DRAFT); } catch (e) { /* ignore */ }
    var box = this.form.querySelector('textarea[name="prompt"]');
    if (box && !box.value && d.prompt) {
      box.value = d.prompt;
      box.focus();
    }
  };

  AiRun.prototype.problem = function (msg) {
    if (!this.formError) return;
    this.formError.textContent = msg || "";
    this.formError.hidden = !msg;
  };

  // ---- asking, cancelling, resuming ----

  AiRun.prototype.ask = function () {
    var self = this;
    var f = this.form;
    var promptEl = f.querySelector('textarea[name="prompt"]');
    var prompt = promptEl.value.trim();
    if (!prompt) { promptEl.focus(); return; }
    var button = f.querySelector('button[type="submit"]');
    if (button.disabled) return;
    button.disabled = true;
    this.problem(null);
    var requestId = f.querySelector('input[name="request_id"]');
    var body = {
      requestId: requestId.value, sessionId: this.sessionId, agentId: this.agentSelect ? this.agentSelect.value : "hermes",
      prompt: prompt, contextRefs: this.contextRefs(),
    };
    api("POST", "/api/page-ai/runs", body).then(function (r) {
      button.disabled = false;
      if (self.sessionEnded(r, prompt, function () { self.ask(); })) return;
      if (!r.ok || !r.json || !r.json.hostRunId) {
        // The request id stays: a retry gets the run this request created, if it did.
        var why = r.status === 0 ? self.t("network") : self.t("start_failed") + (r.json && r.json.error ? ": " + r.json.error.message : "");
        self.problem(why);
        return;
      }
      requestId.value = uuid();
      promptEl.value = "";
      self.show(r.json.hostRunId);
      self.loadHistory();
      self.listed(prompt);
    });
  };

  AiRun.prototype.cancel = function (form) {
    var self = this;
    var b = form.querySelector("button");
    var turn = form.closest(".ai-turn");
    var id = turn ? turn.getAttribute("data-run-id") : this.runId;
    b.disabled = true;
    b.textContent = this.t("cancelling");
    api("POST", "/api/page-ai/runs/" + id + "/cancel").then(function (r) {
      if (self.sessionEnded(r, "", function () { self.cancel(form); })) return;
      if (!r.ok) {
        b.disabled = false;
        b.textContent = self.t("cancel");
        self.problem(r.status === 0 ? self.t("network") : (r.json && r.json.error ? r.json.error.message : ""));
        return;
      }
      // The journal brings `run.cancelled`; without a live stream, catch up now.
      if (id === self.runId && !self.ended && !self.es) self.follow(self.gen);
    });
  };

  AiRun.prototype.resume = function (form) {
    var self = this;
    var turn = form.closest(".ai-turn");
    var parentId = turn ? turn.getAttribute("data-run-id") : this.runId;
    var b = form.querySelector("button");
    b.disabled = true;
    api("GET", "/api/page-ai/runs/" + parentId).then(function (p) {
      if (!p.ok || !p.json) {
        b.disabled = false;
        if (!self.sessionEnded(p, "")) self.problem(self.t("start_failed"));
        return null;
      }
      var run = p.json;
      return api("POST", "/api/page-ai/runs", {
        requestId: uuid(), sessionId: run.sessionId, agentId: run.agentId, prompt: run.prompt,
        contextRefs: run.contextRefs || { kbIds: [] }, parentRunId: parentId,
        resumeRequestId: form.querySelector('input[name="resume_request_id"]').value,
      });
    }).then(function (r) {
      if (!r) return;
      b.disabled = false;
      if (self.sessionEnded(r, "", function () { self.resume(form); })) return;
      if (!r.ok || !r.json || !r.json.hostRunId) {
        self.problem(self.t("start_failed") + (r.json && r.json.error ? ": " + r.json.error.message : ""));
        return;
      }
      self.show(r.json.hostRunId);
      self.loadHistory();
    });
  };

  // Retry (after a cancel or a failure) or regenerate: the same question again in the same
  // conversation, as a new run (without JavaScript the form posts to /ai/runs/{id}/retry).
  AiRun.prototype.retry = function (form) {
    var self = this;
    var id = form.getAttribute("data-run-id");
    var b = form.querySelector("button");
    b.disabled = true;
    api("GET", "/api/page-ai/runs/" + id).then(function (p) {
      if (!p.ok || !p.json) {
        b.disabled = false;
        if (!self.sessionEnded(p, "")) self.problem(self.t("start_failed"));
        return null;
      }
      var run = p.json;
      return api("POST", "/api/page-ai/runs", {
        requestId: form.querySelector('input[name="request_id"]').value, sessionId: run.sessionId, agentId: run.agentId,
        prompt: run.prompt, contextRefs: run.contextRefs || { kbIds: [] },
      });
    }).then(function (r) {
      if (!r) return;
      b.disabled = false;
      if (self.sessionEnded(r, "", function () { self.retry(form); })) return;
      if (!r.ok || !r.json || !r.json.hostRunId) {
        self.problem(self.t("start_failed") + (r.json && r.json.error ? ": " + r.json.error.message : ""));
        return;
      }
      if (r.json.sessionId && r.json.sessionId !== self.sessionId) self.setSession(r.json.sessionId);
      self.show(r.json.hostRunId);
      self.loadHistory();
    });
  };

  // The conversation is in the list (its first question names it) and in the address.
  AiRun.prototype.listed = function (prompt) {
    if (!this.thread) return;
    var sid = this.sessionId;
    var url = "/ai?session=" + encodeURIComponent(sid);
    if (location.pathname + location.search !== url) history.replaceState(null, "", url);
    if (!this.convList) return;
    var items = this.convList.querySelectorAll("li.ai-conv");
    var mine = Array.prototype.find.call(items, function (li) { return li.getAttribute("data-id") === sid; });
    Array.prototype.forEach.call(items, function (li) { li.classList.toggle("current", li === mine); });
    if (mine) return;
    var li = el("li", "ai-conv current");
    li.setAttribute("data-id", sid);
    var a = el("a", "ai-conv-link");
    a.href = url;
    a.append(el("span", "ai-conv-name", short(prompt.replace(/\s+/g, " "), 120)));
    li.append(a);
    this.convList.prepend(li);
    var empty = this.root.querySelector(".ai-convs-empty");
    if (empty) empty.hidden = true;
  };

  AiRun.prototype.newSession = function () {
    this.gen++;
    this.closeStream();
    this.runId = null;
    this.turn = null;
    this.ended = true;
    this.seq = 0;
    this.view.replaceChildren();
    if (this.thread) {
      this.thread.replaceChildren();
      if (this.later) this.later.replaceChildren();
      var heading = this.root.querySelector(".ai-conv-heading");
      if (heading) heading.remove();
      Array.prototype.forEach.call(this.root.querySelectorAll(".ai-convs li.current"), function (li) { li.classList.remove("current"); });
    }
    var snap = load(SNAPSHOT);
    if (snap && snap.scope === this.scope) save(SNAPSHOT, null);
    this.root.setAttribute("data-session-fixed", "false");
    this.setSession(uuid());
    this.loadHistory();
    if (this.scope === "ai" && location.pathname !== "/ai") history.replaceState(null, "", "/ai");
  };

  // ---- resume after a reload ----

  AiRun.prototype.check = function () {
    var self = this;
    if (this.checking) return;
    // Live and connected: nothing to pick up.
    if (this.runId && !this.ended && this.es && this.es.readyState !== EventSource.CLOSED) return;
    this.checking = true;
    var snap = load(SNAPSHOT);
    var mine = snap && snap.scope === this.scope && snap.sessionId && snap.hostRunId ? snap : null;
    var sessionId = mine ? mine.sessionId : this.sessionId;
    var gen = this.gen;
    api("GET", "/api/page-ai/sessions/" + encodeURIComponent(sessionId) + "/active-run").then(function (a) {
      if (gen !== self.gen || !a.ok || !a.json) return null;
      var live = a.json.run;
      if (live) {
        if (live.hostRunId === self.runId && self.turn) { if (!self.ended) self.follow(gen); }
        else self.show(live.hostRunId);
        return null;
      }
      if (!mine) return null;
      if (mine.hostRunId === self.runId && self.turn) { if (!self.ended) self.follow(gen); return null; }
      // Not live any more: it ended meanwhile (show its final state), or it is gone.
      return api("GET", "/api/page-ai/runs/" + mine.hostRunId).then(function (r) {
        if (gen !== self.gen) return;
        if (r.status === 404) save(SNAPSHOT, null);
        else if (r.ok) self.show(mine.hostRunId);
      });
    }).then(done, done);
    function done() {
      self.checking = false;
      self.root.setAttribute("data-checked", "true"); // the first check is over (tests wait for it)
    }
  };

  // ---- one run ----

  AiRun.prototype.closeStream = function () {
    if (this.es) { this.es.close(); this.es = null; }
    clearTimeout(this.timer);
  };

  AiRun.prototype.show = function (id) {
    var gen = ++this.gen;
    this.closeStream();
    this.runId = id;
    this.seq = 0;
    this.ended = false;
    // /ai: the turn shown so far joins the conversation's earlier turns (and the later ones
    // follow it), so the page keeps every turn in order.
    if (this.thread && this.turn && this.view.contains(this.turn) && this.turn.getAttribute("data-run-id") !== id) {
      var past = this.turn;
      past.classList.remove("ai-turn");
      past.classList.add("ai-past");
      // Like the server's earlier turns: the question and its result (the live parts go).
      Array.prototype.forEach.call(past.querySelectorAll(".ai-turn-actions, .ai-work, .ai-plan-box, .ai-tools-box, .ai-changed"), function (x) { x.remove(); });
      var streamed = past.querySelector(".ai-stream");
      if (streamed && (streamed.hidden || past.querySelector(".ai-answer"))) streamed.remove();
      else if (streamed) streamed.className = "ai-past-stream";
      this.thread.append(past);
      if (this.later) while (this.later.firstChild) this.thread.append(this.later.firstChild);
    }
    this.turn = this.buildTurn(id);
    this.view.replaceChildren(this.turn);
    this.markHistory();
    this.saveSnapshot();
    this.follow(gen);
  };

  // Catch up from the JSON pages after the last rendered seq, then stream the rest live.
  AiRun.prototype.follow = function (gen) {
    var self = this;
    clearTimeout(this.timer);
    api("GET", "/api/page-ai/runs/" + this.runId + "/events?afterSeq=" + this.seq).then(function (r) {
      if (gen !== self.gen || self.ended) return;
      if (r.status === 404) { self.gone(); return; }
      if (!r.ok || !r.json) { self.retryLater(gen); return; }
      var items = r.json.items || [];
      items.forEach(function (e) { self.apply(e); });
      if (self.ended) return;
      if (r.json.ended) { self.finish(r.json.status, null); return; }
      if (items.length >= PAGE) { self.follow(gen); return; }
      self.stream(gen);
    });
  };

  AiRun.prototype.stream = function (gen) {
    var self = this;
    if (gen !== this.gen || this.ended) return;
    if (this.es) this.es.close();
    var es = new EventSource("/api/page-ai/runs/" + this.runId + "/events?afterSeq=" + this.seq);
    this.es = es;
    function onEvent(m) {
      if (gen !== self.gen) return;
      var e;
      try { e = JSON.parse(m.data); } catch (x) { return; }
      self.apply(e);
    }
    KINDS.forEach(function (k) { es.addEventListener(k, onEvent); });
    es.onmessage = onEvent;
    es.onerror = function () {
      // CONNECTING: the browser reconnects by itself (Last-Event-ID). CLOSED: it gave up.
      if (gen !== self.gen || es.readyState !== EventSource.CLOSED) return;
      if (self.es === es) self.es = null;
      if (!self.ended) self.retryLater(gen);
    };
  };

  AiRun.prototype.retryLater = function (gen) {
    var self = this;
    clearTimeout(this.timer);
    this.timer = setTimeout(function () { if (gen === self.gen && !self.ended) self.follow(gen); }, 2000);
  };

  AiRun.prototype.gone = function () {
    this.closeStream();
    this.ended = true;
    var snap = load(SNAPSHOT);
    if (snap && snap.hostRunId === this.runId) save(SNAPSHOT, null);
    if (this.turn) {
      this.part(".ai-result").replaceChildren(el("p", "notice warn", this.t("run_gone")));
      this.turn.setAttribute("data-ended", "gone");
    }
  };

  AiRun.prototype.buildTurn = function (id) {
    var turn = el("article", "ai-turn");
    turn.setAttribute("data-run-id", id);
    var head = el("header", "ai-turn-head");
    var metaLine = el("p", "ai-meta");
    metaLine.append(el("span", "status ai-status pending", this.t("status.pending")), " ", el("span", "muted small ai-provider"));
    head.append(el("p", "ai-prompt"), metaLine);
    var work = el("details", "ai-work");
    work.open = true;
    work.hidden = true;
    work.append(el("summary", null, this.t("how_made")));
    var plan = el("section", "ai-plan-box");
    plan.hidden = true;
    plan.append(el("h3", null, this.t("plan")), el("ol", "ai-plan"));
    var tools = el("section", "ai-tools-box");
    tools.hidden = true;
    tools.append(el("h3", null, this.t("tools")), el("ul", "ai-tools"));
    var changed = el("p", "muted small ai-changed");
    changed.hidden = true;
    var stream = el("div", "ai-stream");
    stream.hidden = true;
    var actions = el("div", "ai-turn-actions");
    var cancel = el("form", "inline ai-cancel-form");
    cancel.method = "post";
    cancel.action = "/ai/runs/" + id + "/cancel";
    var b = el("button", "danger ai-cancel", this.t("cancel"));
    b.type = "submit";
    cancel.append(b);
    actions.append(cancel);
    work.append(plan, tools, changed);
    turn.append(head, stream, el("div", "ai-result"), work, actions);
    return turn;
  };

  AiRun.prototype.part = function (sel) {
    return this.turn.querySelector(sel);
  };

  AiRun.prototype.setStatus = function (status) {
    var s = this.part(".ai-status");
    s.className = "status ai-status " + status;
    s.textContent = this.t("status." + status);
  };

  AiRun.prototype.toolCard = function (callId, name) {
    var list = this.part(".ai-tools");
    var card = Array.prototype.find.call(list.children, function (c) { return c.getAttribute("data-call-id") === callId; });
    if (!card) {
      card = el("li", "ai-tool running");
      card.setAttribute("data-call-id", callId);
      var label = el("span", "ai-tool-name", this.L["tool_label." + name] || name || "");
      label.setAttribute("data-tool", name || "");
      card.append(label, " ", el("span", "ai-tool-args"), " ",
        el("span", "ai-tool-state", this.t("tool.running")), " ", el("span", "ai-tool-summary"));
      list.append(card);
      this.part(".ai-tools-box").hidden = false;
      this.part(".ai-work").hidden = false;
    }
    return card;
  };

  // Render one journal event (once: a seq at or below the last rendered one is ignored).
  AiRun.prototype.apply = function (e) {
    if (!e || typeof e.seq !== "number" || e.seq <= this.seq || this.ended || !this.turn) return;
    if (e.hostRunId && e.hostRunId !== this.runId) return;
    this.seq = e.seq;
    this.turn.setAttribute("data-rendered-seq", String(e.seq));
    var p = e.payload || {};
    switch (e.kind) {
      case "run.created": {
        this.part(".ai-prompt").textContent = p.prompt || "";
        var runsOn = p.provider === "openai" ? this.t("runs_on.openai_run") : this.runsOn({ provider: p.provider, providerNote: p.providerNote, usesTools: true });
        this.part(".ai-provider").textContent = this.t("agent." + p.agentId) + " · " + runsOn;
        break;
      }
      case "message.delta": {
        var s = this.part(".ai-stream");
        s.append(document.createTextNode(p.text || ""));
        s.hidden = false;
        this.setStatus("running");
        break;
      }
      case "tool.started": {
        var c = this.toolCard(p.callId, p.name);
        c.querySelector(".ai-tool-args").textContent = argsSummary(p.arguments);
        this.setStatus("running");
        break;
      }
      case "tool.completed": {
        var card = this.toolCard(p.callId, p.name);
        card.className = "ai-tool " + (p.ok ? "ok" : "failed");
        card.querySelector(".ai-tool-state").textContent = this.t(p.ok ? "tool.ok" : "tool.failed");
        var summary = p.error ? (this.L["tool_error." + p.error.code] || this.t("tool_error.other"))
          : (typeof p.count === "number" ? (p.count === 1 ? this.t("results_one") : this.t("results").replace("{n}", p.count)) : (p.summary || ""));
        card.querySelector(".ai-tool-summary").textContent = summary;
        break;
      }
      case "plan.updated": {
        var ol = this.part(".ai-plan");
        ol.replaceChildren.apply(ol, (p.entries || []).map(function (x) { return el("li", "ai-plan-" + x.status, x.content); }));
        this.part(".ai-plan-box").hidden = !ol.children.length;
        if (ol.children.length) this.part(".ai-work").hidden = false;
        this.setStatus("running");
        break;
      }
      case "changed_files": {
        var ch = this.part(".ai-changed");
        ch.textContent = this.t("changed_files") + ": " + (p.files || []).join(", ");
        ch.hidden = false;
        this.part(".ai-work").hidden = false;
        break;
      }
      default:
        if (ENDINGS[e.kind]) {
          this.saveSnapshot();
          this.finish(ENDINGS[e.kind], p);
          return;
        }
    }
    this.saveSnapshot();
  };

  // The run ended: swap in the server's rendering of its result.
  AiRun.prototype.finish = function (status, payload) {
    var self = this;
    if (this.ended) return;
    this.ended = true;
    this.closeStream();
    this.setStatus(status);
    this.turn.classList.add("ended");
    // The answer stays first; how it was made folds away once it is there.
    var work = this.part(".ai-work");
    if (work) work.open = false;
    var actions = this.part(".ai-turn-actions");
    if (actions) actions.remove();
    var gen = this.gen;
    var turn = this.turn;
    fetch("/ai/runs/" + this.runId + "/result", { credentials: "same-origin", headers: { accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; }, function () { return null; })
      .then(function (html) {
        if (gen !== self.gen) return;
        var result = turn.querySelector(".ai-result");
        if (html !== null) {
          result.innerHTML = html;
          var fin = result.querySelector(".ai-final");
          if (fin && fin.getAttribute("data-has-answer") === "true") turn.querySelector(".ai-stream").hidden = true;
        } else if (payload && payload.code) {
          var a = el("div", "alert ai-error");
          a.append(el("strong", null, self.t("run_error.other")), " ", el("code", "ai-error-code", payload.code));
          result.replaceChildren(a);
        }
        turn.setAttribute("data-ended", status);
        self.loadHistory();
      });
  };

  // ---- the session's runs ----

  AiRun.prototype.loadHistory = function () {
    var self = this;
    if (!this.historyList) return;
    var sid = this.sessionId;
    api("GET", "/api/page-ai/sessions/" + encodeURIComponent(sid) + "/runs").then(function (r) {
      if (sid !== self.sessionId || !r.ok || !r.json) return;
      var items = r.json.items || [];
      self.historyList.replaceChildren.apply(self.historyList, items.map(function (it) { return self.historyItem(it); }));
      if (self.historyEmpty) self.historyEmpty.hidden = items.length > 0;
      self.markHistory();
    });
  };

  AiRun.prototype.historyItem = function (it) {
    var li = el("li", "ai-history-item");
    var a = el("a");
    a.href = "/ai/runs/" + it.hostRunId;
    a.setAttribute("data-run-id", it.hostRunId);
    var m = el("span", "ai-history-meta");
    m.append(el("span", "status " + it.status, this.t("status." + it.status)), " ", el("span", "muted small", when(it.createdAt)));
    a.append(el("span", "ai-history-prompt", short(it.prompt, 90)), " ", m);
    li.append(a);
    return li;
  };

  AiRun.prototype.markHistory = function () {
    var id = this.runId;
    if (!this.historyList) return;
    Array.prototype.forEach.call(this.historyList.querySelectorAll("li"), function (li) {
      var a = li.querySelector("a[data-run-id]");
      li.classList.toggle("current", !!a && a.getAttribute("data-run-id") === id);
    });
  };

  Array.prototype.forEach.call(document.querySelectorAll(".ai-run"), function (root) {
    new AiRun(root).start();
  });
})();

// Agent settings (/settings/agents, rendered from the descriptors): the tabs switch without a
// reload, and every settings form saves inline — the same fields the plain form posts, sent as
// one tri-state PATCH (a value, or null to reset) to the API; each error appears next to its
// field. Without this script the forms post and the server answers with the page.
(function () {
  "use strict";
  var root = document.querySelector(".ai-settings");
  if (!root || !window.fetch) return;
  var meta = document.querySelector('meta[name="csrf-token"]');
  var CSRF = meta ? meta.getAttribute("content") : "";

  function showTab(id) {
    Array.prototype.forEach.call(root.querySelectorAll("[data-tab]"), function (t) {
      var on = t.getAttribute("data-tab") === id;
      t.classList.toggle("active", on);
      t.setAttribute("aria-selected", on ? "true" : "false");
    });
    Array.prototype.forEach.call(root.querySelectorAll(".settings-panel"), function (p) {
      p.hidden = p.getAttribute("data-panel") !== id;
    });
  }

  Array.prototype.forEach.call(root.querySelectorAll("[data-tab]"), function (t) {
    t.addEventListener("click", function (ev) {
      if (ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
      ev.preventDefault();
      var id = t.getAttribute("data-tab");
      showTab(id);
      try { history.replaceState(null, "", "/settings/agents?tab=" + encodeURIComponent(id)); } catch (e) { /* ignore */ }
    });
  });

  // The patch a form's fields make (`reset`: every non-secret field back to its default).
  function patchOf(form, reset) {
    var body = {};
    var reload = false;
    var secret = false;
    Array.prototype.forEach.call(form.querySelectorAll(".settings-field[data-key]"), function (f) {
      var key = f.getAttribute("data-key");
      var kind = f.getAttribute("data-kind");
      if (kind === "capability") {
        body[key] = f.querySelector("input[type=checkbox]").checked;
        return;
      }
      if (reset) {
        if (kind !== "secret") body[key] = null;
        return;
      }
      if (kind === "boolean") body[key] = f.querySelector("input[type=checkbox]").checked;
      else if (kind === "multiselect") {
        body[key] = Array.prototype.filter.call(f.querySelectorAll("input[type=checkbox]"), function (i) { return i.checked; })
          .map(function (i) { return i.value; });
      } else if (kind === "select") body[key] = f.querySelector("select").value;
      else if (kind === "number") {
        var n = f.querySelector("input").value.trim();
        body[key] = n === "" ? null : Number(n);
      } else if (kind === "secret") {
        var v = f.querySelector("input[type=password]").value.trim();
        var rm = f.querySelector('input[type=checkbox][name$=".remove"]');
        if (v !== "") body[key] = v; else if (rm && rm.checked) body[key] = null;
        if (key in body) { reload = true; secret = v !== ""; }
      } else body[key] = f.querySelector("input").value;
      // A new UI language re-renders the page in it.
      if (/\.ui_language$/.test(key)) {
        var sel = f.querySelector("select");
        if (sel && sel.value !== sel.getAttribute("data-initial")) reload = true;
      }
    });
    return { body: body, reload: reload, secret: secret };
  }

  var SAVED = "mnote-settings-saved";
  function formIndex(form) {
    return Array.prototype.indexOf.call(root.querySelectorAll("form.settings-form"), form);
  }
  function showSaved(form, key) {
    var status = form.querySelector(".settings-status");
    form.setAttribute("data-saved", "true");
    if (!status) return;
    status.textContent = (key && root.getAttribute("data-saved-key")) || root.getAttribute("data-saved") || "Saved";
    status.classList.add("ok");
  }
  (function savedBeforeReload() {
    var raw = null;
    try { raw = sessionStorage.getItem(SAVED); sessionStorage.removeItem(SAVED); } catch (e) { return; }
    if (!raw) return;
    try {
      var s = JSON.parse(raw);
      var form = root.querySelectorAll("form.settings-form")[s.form];
      if (form) showSaved(form, !!s.key);
    } catch (e) { /* ignore */ }
  })();

  function clearErrors(form) {
    Array.prototype.forEach.call(form.querySelectorAll(".field-error"), function (e) { e.hidden = true; e.textContent = ""; });
  }

  Array.prototype.forEach.call(root.querySelectorAll(".settings-field select"), function (sel) {
    sel.setAttribute("data-initial", sel.value);
  });

  Array.prototype.forEach.call(root.querySelectorAll("form.settings-form"), function (form) {
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var reset = !!(ev.submitter && ev.submitter.name === "reset");
      var caps = form.getAttribute("data-section") === "capabilities";
      var p = patchOf(form, reset);
      var status = form.querySelector(".settings-status");
      clearErrors(form);
      if (status) { status.textContent = ""; status.classList.remove("ok"); }
      fetch(caps ? "/api/page-ai/capabilities" : "/api/page-ai/preferences", {
        method: "PATCH",
        credentials: "same-origin",
        headers: { accept: "application/json", "content-type": "application/json", "x-csrf-token": CSRF },
        body: JSON.stringify(p.body)
      }).then(function (r) {
        return r.json().catch(function () { return null; }).then(function (j) { return { ok: r.ok, json: j }; });
      }, function () { return { ok: false, json: null }; }).then(function (r) {
        if (r.ok) {
          // A reset, a secret or the language changes what the page shows: show it as saved.
          if (reset || caps || p.reload) {
            // The reloaded page says it was saved, in the same form.
            try { sessionStorage.setItem(SAVED, JSON.stringify({ form: formIndex(form), key: p.secret })); } catch (e) { /* ignore */ }
            location.reload();
            return;
          }
          showSaved(form, false);
          return;
        }
        var err = r.json && r.json.error;
        var fields = (err && err.fields) || {};
        Object.keys(fields).forEach(function (k) {
          var e = form.querySelector('.field-error[data-error-for="' + CSS.escape(k) + '"]');
          if (e) { e.textContent = fields[k]; e.hidden = false; }
        });
        if (status) status.textContent = (root.getAttribute("data-failed") || "Not saved") + (err && err.message ? ": " + err.message : "");
      });
    });
  });
})();
