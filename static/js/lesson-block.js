// Run a lesson's code block in the page (templates/lessons/_block_run.html): on the "Run on" machine of its picker
// (run-on.js), as written or as the learner edited it (Edit turns the block into the editor), its output streamed
// into the exercise panels' output box by the same reader as an exercise run's (exercise-output.js, followRun).
// Nothing is stored: a reload shows the lesson's code.
// Server contract (app/web/routes/blocks.py, docs/api.md):
//   POST /api/lessons/{slug}/blocks/{n}/runs {"machine"?, "code"?} -> 202 {"id", "events", "machine"} | 400 | 404 |
//        413 | 422 | 429 | 503
//   GET  /api/runs/{id}/events -> SSE: `output` {"lines": [{"stream","line"}], "skipped"?, "capped"?} ..., then one
//        `done` {"status", "exit_code", "duration_ms", "limit_hit", "message", "machine", "machine_id", "devices"}
(function () {
  "use strict";
  const ns = (window.CourseExercise = window.CourseExercise || {});
  if (ns.blocks) return;

  function meta(name) {
    const node = document.querySelector(`meta[name="${name}"]`);
    return node ? (name === "csp-nonce" ? node.nonce : node.content) : "";
  }

  const ENDED = {
    ok: () => "Finished",
    failed: (d) => `Stopped with an error (exit status ${d.exit_code})`,
    limit: (d) => d.message || `Stopped at the sandbox's ${d.limit_hit} limit`,
    error: (d) => d.message || "The sandbox failed; run it again",
    cancelled: () => "Stopped",
  };

  class Block {
    constructor(root) {
      this.root = root;
      this.url = `/api/lessons/${root.dataset.lesson}/blocks/${root.dataset.block}/runs`;
      this.code = document.getElementById(`block-${root.dataset.block}`);
      this.original = this.code.querySelector("pre").textContent;
      this.editor = null;
      this.running = false;
      this.button = root.querySelector(".block-run-button");
      this.status = root.querySelector(".block-run-status");
      this.machineLine = root.querySelector(".run-machine");
      this.box = root.querySelector(".block-output");
      this.output = new ns.OutputBox(this.box);
      root.querySelector(".block-run-actions").hidden = false;
      const formRun = root.querySelector(".block-run-nojs");  // the Run of a page without JavaScript
      if (formRun) formRun.hidden = true;
      this.button.addEventListener("click", () => this.run());
      this.editButton = root.querySelector(".block-edit");
      this.resetButton = root.querySelector(".block-reset");
      this.editButton.addEventListener("click", () => this.edit());
      this.resetButton.addEventListener("click", () => this.reset());
    }

    /** The learner edits the block: the editor takes the highlighted code's place until they go back to it. */
    edit() {
      const highlight = this.code.querySelector(".highlight");
      const holder = document.createElement("div");
      holder.className = "block-editor";
      const textarea = document.createElement("textarea");
      textarea.value = this.original;
      textarea.rows = Math.min(30, this.original.split("\n").length + 1);
      textarea.className = "exercise-code";
      textarea.spellcheck = false;
      textarea.setAttribute("aria-label", `Code of block ${this.root.dataset.block}, editable`);
      holder.append(textarea);
      highlight.hidden = true;
      highlight.after(holder);
      this.editor = window.CourseEditor
        ? window.CourseEditor.create(textarea, { nonce: meta("csp-nonce") })
        : { getValue: () => textarea.value, focus: () => textarea.focus(), onRunShortcut() {} };
      this.editor.onRunShortcut(() => this.run());
      this.holder = holder;
      this.editButton.hidden = true;
      this.resetButton.hidden = false;
      this.editor.focus();
    }

    reset() {
      if (this.holder) this.holder.remove();
      this.holder = this.editor = null;
      this.code.querySelector(".highlight").hidden = false;
      this.editButton.hidden = false;
      this.resetButton.hidden = true;
      this.editButton.focus();
    }

    /** The session's CSRF token: the page's, or the one in this block's "Run on" form (every page has that). */
    csrf() {
      const field = this.root.querySelector('input[name="csrf_token"]');
      return meta("csrf-token") || (field && field.value) || "";
    }

    setStatus(text, kind) {
      this.status.textContent = text;
      this.status.dataset.kind = kind || "";
    }

    async run() {
      if (this.running) return;
      this.running = true;
      this.button.setAttribute("aria-disabled", "true");  // not disabled: the focus stays on Run
      this.box.hidden = false;
      this.output.start();
      this.setStatus("Starting…", "pending");
      const body = {};
      const machine = window.CourseRunOn ? window.CourseRunOn.value(this.root) : null;
      if (machine) body.machine = machine;
      if (this.editor) body.code = this.editor.getValue();
      let resp;
      try {
        resp = await fetch(this.url, {
          method: "POST", credentials: "same-origin",
          headers: { "Content-Type": "application/json", "X-CSRF-Token": this.csrf() },
          body: JSON.stringify(body),
        });
      } catch (e) {
        return this.finish("Could not reach the course server; check your connection and run again.", "error");
      }
      const answer = await resp.json().catch(() => ({}));
      if (resp.status !== 202) {
        return this.finish(typeof answer.detail === "string" ? answer.detail : `The server answered ${resp.status}.`,
                           "error");
      }
      this.machineLine.textContent = `Running on ${answer.machine.label}…`;
      this.follow(answer.events);
    }

    follow(url) {
      this.setStatus("Running…", "pending");
      ns.followRun(url, this.output, {
        last: "done",
        on: {
          done: (data) => {
            this.output.finish();
            this.machineLine.textContent = `Ran on ${data.machine}`;
            const words = (ENDED[data.status] || ENDED.error)(data);
            this.finish(`${words} in ${data.duration_ms} ms on ${data.machine}.`,
                        data.status === "ok" ? "passed" : "failed");
          },
        },
        lost: () => this.finish("Lost the run's output (the connection broke); run it again.", "error"),
      });
    }

    finish(text, kind) {
      this.setStatus(text, kind);
      this.running = false;
      this.button.removeAttribute("aria-disabled");
    }
  }

  ns.blocks = [];

  function start() {
    if (!ns.OutputBox || !ns.followRun) return;
    document.querySelectorAll(".block-run[data-block]").forEach((root) => {
      if (!root.courseBlock) {
        root.courseBlock = new Block(root);
        ns.blocks.push(root.courseBlock);
      }
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
