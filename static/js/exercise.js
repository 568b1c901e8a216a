// The live exercise panel: editor, Run, streamed output, the verdict with line links, the placement map, hints,
// attempts, solution. Progressive enhancement: the page works without these scripts (prompt, hints, a plain
// textarea and the last verdict are in the HTML). This file wires one panel; its parts are in
// exercise-store.js (drafts and hints kept per learner), exercise-output.js (the output box),
// exercise-verdict.js (the checks), exercise-placement.js (the gutter and the table) and exercise-timeline.js (the
// modeled timeline of a run on a simulated GPU).
// Server contract (app/web/exercises.py, docs/api.md):
//   POST /api/exercises/{slug}/submissions {"code", "machine"?} -> 202 {"id", "url", "events", "machine"} | 413 |
//        400 | 404 | 422 (a machine the exercise does not offer) | 429 | 503
//   GET  /api/submissions/{id}/events -> SSE: `output` {"lines": [{"stream","line"}], "skipped"?, "capped"?} ...,
//        then one `verdict` (Verdict JSON); on the worker tier a `restart` {"attempt","message"}
//   GET  /api/submissions/{id} -> Verdict JSON (status "queued"/"running" while not done)
//   GET  /api/exercises/{slug}/submissions -> {"attempts", "latest_code", "solution_unlocked", "solution_html",
//        "learner_key", "signed_in", ...}
(function () {
  "use strict";
  const ns = (window.CourseExercise = window.CourseExercise || {});
  if (ns.panels) return;  // each page runs this once
  const { Store, OutputBox, Verdict, Placement, Timeline, followRun } = ns;
  const { el, STATUS_TEXT } = Verdict;

  // This response's CSP nonce (base.html): the editor's one <style> element must carry it to be applied.
  function cspNonce() {
    const meta = document.querySelector('meta[name="csp-nonce"]');
    return meta ? meta.nonce : "";
  }

  function csrfToken(panel) {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return panel.dataset.csrf || (meta && meta.content) || "";
  }

  /** A plain-textarea stand-in with the editor's API, for when the bundle did not load. */
  function textareaEditor(textarea) {
    textarea.setAttribute("aria-describedby", textarea.id.replace(/-code$/, "-keys"));
    return {
      dom: textarea,
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
      this.keys = root.querySelector(".exercise-keys");
      this.store = null;  // this learner's drafts and hints, once the server said who the learner is
      this.pendingDraft = null;
      this.editor = window.CourseEditor
        ? window.CourseEditor.create(textarea, { onChange: (code) => this.saveDraft(code), nonce: cspNonce(),
                                                 describedBy: this.keys ? this.keys.id : undefined })
        : textareaEditor(textarea);
      if (!window.CourseEditor) textarea.addEventListener("input", () => this.saveDraft(textarea.value));
      this.output = new OutputBox(root.querySelector(".exercise-output"));
      this.status = root.querySelector(".exercise-status");
      this.checks = root.querySelector(".exercise-checks");
      this.attempts = root.querySelector(".exercise-attempts");
      this.solution = root.querySelector(".exercise-solution");
      this.runButton = root.querySelector(".exercise-run");
      this.running = false;
      this.retryTimer = null;
      this.root.querySelectorAll(".line-link").forEach((a) => this.wireLineLink(a));
      this.wireKeyboardNote();
      this.wireButtons();
      this.showStoredPlacement();
      if (Timeline) Timeline.showStored(this);
      this.loadHistory(true);
    }

    /** While the editor has focus, say how to leave it: Tab indents there (read out through aria-describedby).
     *  The note keeps its room when hidden: were the Run button below it to move up as the editor loses focus
     *  on the press, the release would land beside the button and the click would be lost. */
    wireKeyboardNote() {
      const box = (this.editor.view && this.editor.view.dom) || this.editor.dom;
      if (!this.keys || !box) return;
      this.keys.hidden = false;
      box.addEventListener("focusin", () => this.keys.classList.add("is-shown"));
      box.addEventListener("focusout", (e) => {
        if (!box.contains(e.relatedTarget)) this.keys.classList.remove("is-shown");
      });
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
      if (!items.length || !button || button.dataset.wired) return;
      button.dataset.wired = "true";
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
      const before = Math.max(Number((this.store && this.store.get("hints")) || 0), Number(this.hintsSeen || 0));
      show(Math.min(items.length, before));
      button.addEventListener("click", () => {
        show(shown + 1);
        if (this.store) this.store.set("hints", shown);
        this.post(`${this.api}/exercises/${this.slug}/hints/${shown}`);  // recorded on the server, with its time
        items[shown - 1].querySelector("summary, p, div")?.focus?.();
      });
    }

    /** A link that puts the editor's cursor on line n. */
    lineLink(n, text) {
      const link = el("a", { class: "line-link", href: `#exercise-${this.slug}-code`, "data-line": String(n) },
        text || `line ${n}`);
      this.wireLineLink(link);
      return link;
    }

    wireLineLink(link) {
      link.addEventListener("click", (e) => {
        e.preventDefault();
        this.editor.gotoLine(parseInt(link.dataset.line, 10));
      });
    }

    saveDraft(code) {
      if (this.store) this.store.set("draft", { code, at: Date.now() });
      else this.pendingDraft = code;  // the learner is not known yet: kept until the history says who it is
    }

    async loadHistory(restore) {
      let data;
      try {
        const resp = await fetch(`${this.api}/exercises/${this.slug}/submissions`, { credentials: "same-origin" });
        if (!resp.ok) return;
        data = await resp.json();
      } catch (e) { return; }
      if (data.learner_key && !this.store) {
        Store.adopt(data.learner_key, data.signed_in);
        this.store = Store.forLearner(data.learner_key, this.slug);
        if (this.pendingDraft != null) this.saveDraft(this.pendingDraft);
      }
      if (restore) {
        this.restoreCode(data);
        this.hintsSeen = data.hints_seen;
        this.wireHints();
      }
      this.renderAttempts(data.attempts || []);
      this.renderSolution(data);
    }

    /** Put back the newest of: this learner's unsent draft, the last code the server graded. */
    restoreCode(data) {
      if (this.pendingDraft != null) return;  // typed while the history loaded: that is the newest
      const draft = this.store && this.store.get("draft");
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
        const mark = a.status === "passed" ? "✓" : (a.status === "queued" || a.status === "running") ? "…" : "✗";
        const load = el("button", { type: "button", class: "link-button", title: "Load this attempt's code" },
          "load code");
        load.addEventListener("click", () => this.loadAttempt(a.id));
        this.attempts.append(el("li", { class: `attempt attempt-${a.status}` },
          el("span", { class: "mark", "aria-hidden": "true" }, mark), " ",
          el("time", { datetime: a.created_at }, new Date(a.created_at).toLocaleString()), ` — ${a.status}`,
          a.checks_total ? ` (${a.checks_passed}/${a.checks_total} checks)` : "", " ", load));
      }
    }

    async loadAttempt(id) {
      const resp = await fetch(`${this.api}/submissions/${id}`, { credentials: "same-origin" });
      if (!resp.ok) return;
      const data = await resp.json();
      if (data.code != null) { this.editor.setValue(data.code); this.editor.focus(); }
    }

    /** POST to the course's API with the session's CSRF token; resolve to the JSON answer, or null. */
    async post(url) {
      try {
        const resp = await fetch(url, { method: "POST", credentials: "same-origin",
                                        headers: { "X-CSRF-Token": csrfToken(this.root) } });
        return resp.ok ? await resp.json() : null;
      } catch (e) {
        return null;
      }
    }

    /** The solution, once open, is fetched only when the learner opens it: the server records that look. */
    renderSolution(data) {
      const lock = this.root.querySelector(".exercise-solution-lock");
      if (!this.solution) return;
      if (!data.solution_unlocked) {
        if (lock) { lock.hidden = false; lock.textContent = data.solution_lock || ""; }
        return;
      }
      this.solution.hidden = false;
      const code = this.solution.querySelector(".exercise-solution-code");
      const why = this.solution.querySelector(".exercise-solution-why");
      const fill = (shown) => {
        // the course's own solution, highlighted by the server's Pygments (app/content/markdown.py)
        if (code && shown.solution_html && !code.querySelector(".highlight")) code.innerHTML = shown.solution_html;
        if (why) why.textContent = shown.solution_reason || "";
      };
      if (lock) lock.hidden = true;
      if (data.solution_html) { fill(data); return; }
      if (why) why.textContent = "Open this to see the reference solution (the course records when you do).";
      const form = this.solution.querySelector("form.exercise-solution-form");
      if (form) form.hidden = true;
      if (this.solution.dataset.wired) return;
      this.solution.dataset.wired = "true";
      this.solution.addEventListener("toggle", async () => {
        if (!this.solution.open || (code && code.querySelector(".highlight"))) return;
        const shown = await this.post(`${this.api}/exercises/${this.slug}/solution`);
        if (shown) fill(shown);
      });
    }

    /** The last run's placement map, which the server put in the page, in the editor's gutter. */
    showStoredPlacement() {
      const stored = this.root.querySelector("script.exercise-last-placement");
      if (stored) Placement.show(this, JSON.parse(stored.textContent));
    }

    /** The "Run on" choice of this panel (run-on.js); null without a picker. */
    machine() {
      return window.CourseRunOn ? window.CourseRunOn.value(this.root) : null;
    }

    /** The line above the output that says which machine the run is on, or was on. */
    setMachine(text) {
      const line = this.root.querySelector(".run-machine");
      if (line) line.textContent = text;
    }

    setStatus(text, kind) {
      this.status.textContent = text;
      this.status.dataset.kind = kind || "";
    }

    async run() {
      if (this.running) return;
      clearTimeout(this.retryTimer);
      this.running = true;
      // aria-disabled, not disabled: a disabled button loses the keyboard focus, which then falls back to the
      // page, and a learner who pressed Enter on Run would have to find the panel again (this.running guards)
      this.runButton.setAttribute("aria-disabled", "true");
      this.output.start();
      this.checks.replaceChildren();
      Placement.clear(this);
      if (Timeline) Timeline.clear(this);
      this.setStatus(STATUS_TEXT.queued, "pending");
      const code = this.editor.getValue();
      this.saveDraft(code);
      let resp;
      try {
        resp = await fetch(`${this.api}/exercises/${this.slug}/submissions`, {
          method: "POST",
          credentials: "same-origin",
          headers: { "Content-Type": "application/json", "X-CSRF-Token": csrfToken(this.root) },
          body: JSON.stringify(this.machine() ? { code, machine: this.machine() } : { code }),
        });
      } catch (e) {
        return this.finish("Could not reach the course server; check your connection and run again.", "error");
      }
      if (resp.status === 202) {
        const started = await resp.json();
        if (started.machine) this.setMachine(`Running on ${started.machine.label}…`);
        return this.follow(started.id);
      }
      const body = await resp.json().catch(() => ({}));
      const detail = typeof body.detail === "string" ? body.detail : `The server answered ${resp.status}.`;
      if (resp.status === 429 && body.reason === "busy") {
        return this.retryLater(Math.max(1, parseInt(resp.headers.get("Retry-After") || "2", 10)));
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
      followRun(`${this.api}/submissions/${id}/events`, this.output, {
        last: "verdict",
        on: {
          // the worker tier started the run over on another machine: its output starts over too
          restart: (data) => {
            this.output.start();
            this.setStatus(data.message, "pending");
          },
          verdict: (verdict) => this.showVerdict(verdict),
        },
        lost: () => this.poll(id),  // the stream broke (proxy, sleep): ask for the stored verdict instead
      });
    }

    async poll(id) {
      for (let i = 0; i < 60; i++) {
        try {
          const resp = await fetch(`${this.api}/submissions/${id}`, { credentials: "same-origin" });
          const data = await resp.json();
          if (resp.ok && data.status !== "queued" && data.status !== "running") {
            if (this.output.empty) this.output.addStored(data.stdout, data.stderr);
            return this.showVerdict(data);
          }
        } catch (e) { /* keep trying */ }
        await new Promise((r) => setTimeout(r, 1000));
      }
      this.finish("Lost track of this run; reload the page to see its result.", "error");
    }

    showVerdict(verdict) {
      this.output.finish();
      if (verdict.machine) this.setMachine(`Ran on ${verdict.machine}`);
      Verdict.renderChecks(this.checks, verdict, this.root, (n) => this.lineLink(n));
      const advice = this.root.querySelector(".exercise-advice");
      if (advice) Verdict.renderAdvice(advice, verdict);
      Placement.show(this, verdict);
      if (Timeline) Timeline.show(this, verdict);
      const simulated = this.root.querySelector(".exercise-simulated");
      if (simulated) simulated.hidden = !/simulated/.test(verdict.device || "");
      this.finish(Verdict.statusText(verdict), verdict.status);
      if (verdict.status === "passed") this.markPassed();
      this.loadHistory(false);
    }

    /** Show the pass in the panel's title and tell the rest of the page (the progress line) about it. */
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
      this.runButton.removeAttribute("aria-disabled");
    }
  }

  ns.panels = [];

  function start() {
    document.querySelectorAll(".exercise-panel[data-exercise]").forEach((root) => {
      if (!root.courseExercise) {
        root.courseExercise = new Panel(root);
        ns.panels.push(root.courseExercise);
      }
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
