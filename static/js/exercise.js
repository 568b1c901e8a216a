// The live exercise panel: editor, Run, streamed output, the verdict with line links, hints, attempts, solution.
// Progressive enhancement: the page works without this file (prompt, hints and a plain textarea are in the HTML).
// Server contract (app/web/exercises.py):
//   POST /api/exercises/{slug}/submissions {"code"} -> 202 {"id"} | 413 | 400 | 404 | 429 | 503 (Retry-After)
//   GET  /api/submissions/{id}/events -> SSE: `output` {"stream","line"} ..., then one `verdict` (Verdict JSON);
//        on the worker tier a `restart` {"attempt","message"} when the run started over on another worker
//   GET  /api/submissions/{id} -> Verdict JSON (status "queued"/"running" while not done)
//   GET  /api/exercises/{slug}/submissions -> {"attempts", "latest_code", "solution_unlocked", "solution"}
(function () {
  "use strict";
  // Each panel includes this script; run it once per page.
  if (window.CourseExercise) return;

  // lines of output kept in the page per run
  const MAX_OUTPUT_LINES = 2000;

  const STATUS_TEXT = {
    passed: "Passed: every check holds.",
    failed: "Not yet: some checks fail.",
    error: "The grader broke (not your fault). Please run again.",
    timeout: "Your program ran out of time.",
    rejected: "The code was refused before it ran.",
    queued: "Waiting for a free sandbox…",
    running: "Running…",
  };

  // This response's CSP nonce (base.html): the editor's one <style> element must carry it to be applied.
  function cspNonce() {
    const meta = document.querySelector('meta[name="csp-nonce"]');
    return meta ? meta.nonce : "";
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v);
    }
    for (const child of children) if (child != null) node.append(child);
    return node;
  }

  /** Text with `backtick` spans (the grader's messages quote code that way) as text and <code> nodes. */
  function codeSpans(text) {
    const span = el("span", { class: "message" });
    String(text).split("`").forEach((part, i) => span.append(i % 2 ? el("code", {}, part) : part));
    return span;
  }

  function csrfToken(panel) {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return panel.dataset.csrf || (meta && meta.content) || "";
  }

  /** A plain-textarea stand-in with the editor's API, for when the bundle did not load. */
  function textareaEditor(textarea) {
    return {
      getValue: () => textarea.value,
      setValue: (text) => { textarea.value = text; },
      gotoLine(n) {
        const lines = textarea.value.split("\n");
        const pos = lines.slice(0, Math.max(0, n - 1)).reduce((sum, l) => sum + l.length + 1, 0);
        textarea.focus();
        textarea.setSelectionRange(pos, pos);
      },
      cursorLine: () => textarea.value.slice(0, textarea.selectionStart).split("\n").length,
      focus: () => textarea.focus(),
      onRunShortcut(fn) {
        textarea.addEventListener("keydown", (e) => {
          if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); fn(); }
        });
      },
    };
  }

  class Panel {
    constructor(root) {
      this.root = root;
      this.slug = root.dataset.exercise;
      this.api = root.dataset.api || "/api";
      const textarea = root.querySelector("textarea.exercise-code");
      const starter = root.querySelector("script.exercise-starter");
      this.starter = starter ? JSON.parse(starter.textContent) : textarea.defaultValue;
      this.draftKey = `course:draft:${this.slug}`;
      this.editor = window.CourseEditor
        ? window.CourseEditor.create(textarea, { onChange: (code) => this.saveDraft(code), nonce: cspNonce() })
        : textareaEditor(textarea);
      if (!window.CourseEditor) textarea.addEventListener("input", () => this.saveDraft(textarea.value));
      this.output = root.querySelector(".exercise-output");
      this.status = root.querySelector(".exercise-status");
      this.checks = root.querySelector(".exercise-checks");
      this.attempts = root.querySelector(".exercise-attempts");
      this.solution = root.querySelector(".exercise-solution");
      this.runButton = root.querySelector(".exercise-run");
      this.running = false;
      this.retryTimer = null;
      this.source = null;
      this.root.querySelectorAll(".exercise-checks .line-link").forEach((a) => this.wireLineLink(a));
      this.wireButtons();
      this.wireHints();
      this.loadHistory(true);
    }

    wireButtons() {
      // The no-JS form posts to the server; with JS the same button runs in place.
      const form = this.root.querySelector("form.exercise-form");
      if (form) form.addEventListener("submit", (e) => { e.preventDefault(); this.run(); });
      this.runButton.type = "button";
      this.runButton.addEventListener("click", () => this.run());
      this.editor.onRunShortcut(() => this.run());
      const reset = this.root.querySelector(".exercise-reset");
      reset.hidden = false;
      reset.addEventListener("click", () => {
        this.editor.setValue(this.starter);
        this.saveDraft(this.starter);
        this.editor.focus();
      });
    }

    /** Turn the hints (open <details> without JS) into one button that reveals them in order. */
    wireHints() {
      const items = Array.from(this.root.querySelectorAll(".exercise-hints > li"));
      const button = this.root.querySelector(".exercise-hint-next");
      if (!items.length || !button) return;
      const shownKey = `course:hints:${this.slug}`;
      let shown = 0;
      const show = (n) => {
        items.forEach((li, i) => {
          li.hidden = i >= n;
          const details = li.querySelector("details");
          if (details) details.open = true;
        });
        shown = n;
        button.hidden = n >= items.length;
        button.textContent = `Show hint ${n + 1} of ${items.length}`;
      };
      show(Math.min(items.length, Number(localStorage.getItem(shownKey) || 0)));
      button.addEventListener("click", () => {
        show(shown + 1);
        localStorage.setItem(shownKey, String(shown));
        items[shown - 1].querySelector("summary, p, div")?.focus?.();
      });
    }

    wireLineLink(link) {
      link.addEventListener("click", (e) => {
        e.preventDefault();
        this.editor.gotoLine(parseInt(link.dataset.line, 10));
      });
    }

    saveDraft(code) {
      try {
        localStorage.setItem(this.draftKey, JSON.stringify({ code, at: Date.now() }));
      } catch (e) { /* storage full or disabled: the server still keeps submitted code */ }
    }

    readDraft() {
      try { return JSON.parse(localStorage.getItem(this.draftKey) || "null"); } catch (e) { return null; }
    }

    async loadHistory(restore) {
      let data;
      try {
        const resp = await fetch(`${this.api}/exercises/${this.slug}/submissions`, { credentials: "same-origin" });
        if (!resp.ok) return;
        data = await resp.json();
      } catch (e) { return; }
      if (restore) this.restoreCode(data);
      this.renderAttempts(data.attempts || []);
      this.renderSolution(data);
    }

    /** Put back the newest of: this browser's unsent draft, the last code the server graded. */
    restoreCode(data) {
      const draft = this.readDraft();
      const latest = data.attempts && data.attempts[0];
      const serverAt = latest ? Date.parse(latest.created_at) : 0;
      let code = null;
      if (draft && (!latest || draft.at >= serverAt)) code = draft.code;
      else if (data.latest_code != null) code = data.latest_code;
      if (code != null && code !== this.editor.getValue()) this.editor.setValue(code);
    }

    renderAttempts(attempts) {
      this.attempts.replaceChildren();
      const summary = this.root.querySelector(".exercise-attempts-count");
      if (summary) summary.textContent = attempts.length ? `Attempts (${attempts.length})` : "Attempts (none yet)";
      for (const a of attempts) {
        const when = new Date(a.created_at);
        const mark = a.status === "passed" ? "✓" : (a.status === "queued" || a.status === "running") ? "…" : "✗";
        const load = el("button", { type: "button", class: "link-button",
          title: "Load this attempt's code into the editor",
          onclick: () => this.loadAttempt(a.id) }, "load code");
        this.attempts.append(el("li", { class: `attempt attempt-${a.status}` },
          el("span", { class: "mark", "aria-hidden": "true" }, mark), " ",
          el("time", { datetime: a.created_at }, when.toLocaleString()), ` — ${a.status}`,
          a.checks_total ? ` (${a.checks_passed}/${a.checks_total} checks)` : "", " ", load));
      }
    }

    async loadAttempt(id) {
      const resp = await fetch(`${this.api}/submissions/${id}`, { credentials: "same-origin" });
      if (!resp.ok) return;
      const data = await resp.json();
      if (data.code != null) { this.editor.setValue(data.code); this.editor.focus(); }
    }

    renderSolution(data) {
      const lock = this.root.querySelector(".exercise-solution-lock");
      if (!this.solution) return;
      if (!data.solution_unlocked || data.solution == null) {
        if (lock) lock.textContent = "The reference solution appears after a pass or after " +
          `${data.failures_to_unlock} more failed attempt${data.failures_to_unlock === 1 ? "" : "s"}.`;
        return;
      }
      this.solution.hidden = false;
      this.solution.querySelector("code").textContent = data.solution;
      const why = this.solution.querySelector(".exercise-solution-why");
      if (why) why.textContent = data.solution_reason || "";
      if (lock) lock.hidden = true;
    }

    setStatus(text, kind) {
      this.status.textContent = text;
      this.status.dataset.kind = kind || "";
    }

    appendOutput(line, stream) {
      // a page with a hundred thousand spans stops responding; the rest is counted, not shown
      if (this.output.childElementCount >= MAX_OUTPUT_LINES) {
        this.hiddenLines = (this.hiddenLines || 0) + 1;
        const note = this.output.querySelector(".truncated") ||
          this.output.appendChild(el("span", { class: "line truncated" }));
        note.textContent = `… ${this.hiddenLines} more line${this.hiddenLines === 1 ? "" : "s"} not shown\n`;
        return;
      }
      this.output.append(el("span", { class: `line ${stream}` }, line + "\n"));
      this.output.scrollTop = this.output.scrollHeight;
    }

    async run() {
      if (this.running) return;
      clearTimeout(this.retryTimer);
      this.running = true;
      this.runButton.disabled = true;
      this.output.replaceChildren();
      this.hiddenLines = 0;
      this.checks.replaceChildren();
      this.setStatus(STATUS_TEXT.queued, "pending");
      const code = this.editor.getValue();
      this.saveDraft(code);
      let resp;
      try {
        resp = await fetch(`${this.api}/exercises/${this.slug}/submissions`, {
          method: "POST",
          credentials: "same-origin",
          headers: { "Content-Type": "application/json", "X-CSRF-Token": csrfToken(this.root) },
          body: JSON.stringify({ code }),
        });
      } catch (e) {
        return this.finish("Could not reach the course server; check your connection and run again.", "error");
      }
      if (resp.status === 202) return this.follow((await resp.json()).id);
      const body = await resp.json().catch(() => ({}));
      const detail = typeof body.detail === "string" ? body.detail : `The server answered ${resp.status}.`;
      if (resp.status === 429 || resp.status === 503) {
        const wait = Math.max(1, parseInt(resp.headers.get("Retry-After") || "2", 10));
        if (body.reason === "busy") return this.retryLater(wait);
        if (body.reason === "unavailable") return this.finish(detail, "error");
        return this.finish(detail, "error");
      }
      this.finish(detail, "error");
    }

    /** The sandbox queue is full: say so, count down, then run again by itself. */
    retryLater(seconds) {
      this.running = false;
      let left = seconds;
      const tick = () => {
        if (left <= 0) { this.run(); return; }
        this.setStatus(`The course is busy, retrying in ${left} s…`, "busy");
        left -= 1;
        this.retryTimer = setTimeout(tick, 1000);
      };
      tick();
    }

    follow(id) {
      this.setStatus(STATUS_TEXT.running, "pending");
      const source = new EventSource(`${this.api}/submissions/${id}/events`);
      this.source = source;
      let done = false;
      source.addEventListener("output", (e) => {
        const data = JSON.parse(e.data);
        this.appendOutput(data.line, data.stream);
      });
      // the worker tier started the run over on another machine: its output starts over too
      source.addEventListener("restart", (e) => {
        this.output.replaceChildren();
        this.hiddenLines = 0;
        this.setStatus(JSON.parse(e.data).message, "pending");
      });
      source.addEventListener("verdict", (e) => {
        done = true;
        source.close();
        this.showVerdict(JSON.parse(e.data));
      });
      source.onerror = () => {
        if (done) return;
        source.close();
        this.poll(id);  // the stream broke (proxy, sleep): ask for the stored verdict instead
      };
    }

    async poll(id) {
      for (let i = 0; i < 60; i++) {
        try {
          const resp = await fetch(`${this.api}/submissions/${id}`, { credentials: "same-origin" });
          const data = await resp.json();
          if (resp.ok && data.status !== "queued" && data.status !== "running") {
            if (!this.output.childNodes.length) {
              for (const l of (data.stdout || "").split("\n").filter(Boolean)) this.appendOutput(l, "stdout");
              for (const l of (data.stderr || "").split("\n").filter(Boolean)) this.appendOutput(l, "stderr");
            }
            return this.showVerdict(data);
          }
        } catch (e) { /* keep trying */ }
        await new Promise((r) => setTimeout(r, 1000));
      }
      this.finish("Lost track of this run; reload the page to see its result.", "error");
    }

    showVerdict(verdict) {
      this.checks.replaceChildren();
      for (const check of verdict.checks || []) {
        const item = el("li", { class: check.passed ? "check passed" : "check failed", "data-check": check.id },
          el("span", { class: "mark", "aria-label": check.passed ? "passed" : "failed" }, check.passed ? "✓" : "✗"),
          " ", codeSpans(check.message));
        if (check.line) {
          const link = el("a", { class: "line-link", href: `#exercise-${this.slug}-code`,
            "data-line": String(check.line) }, `line ${check.line}`);
          this.wireLineLink(link);
          item.append(" ", link);
        }
        this.checks.append(item);
      }
      const ms = verdict.duration_ms != null ? ` (${verdict.duration_ms} ms on ${verdict.device || "cpu"})` : "";
      this.finish((STATUS_TEXT[verdict.status] || verdict.status) + ms, verdict.status);
      if (verdict.status === "passed") this.markPassed();
      this.loadHistory(false);
    }

    /** Show the pass in the panel's title and tell the rest of the page (progress widgets) about it. */
    markPassed() {
      const title = this.root.querySelector("h2");
      if (title && !title.querySelector(".exercise-passed-badge")) {
        title.append(" ", el("span", { class: "exercise-passed-badge" }, "✓ passed"));
      }
      this.root.dispatchEvent(new CustomEvent("course:exercise-passed",
        { bubbles: true, detail: { exercise: this.slug } }));
    }

    finish(text, kind) {
      this.setStatus(text, kind);
      this.running = false;
      this.runButton.disabled = false;
    }
  }

  window.CourseExercise = { panels: [] };

  function start() {
    document.querySelectorAll(".exercise-panel[data-exercise]").forEach((root) => {
      if (!root.courseExercise) {
        root.courseExercise = new Panel(root);
        window.CourseExercise.panels.push(root.courseExercise);
      }
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
