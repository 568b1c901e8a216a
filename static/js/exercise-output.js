// The output box of an exercise panel: streamed lines (in batches, app/runner/batches.py), tracebacks folded so
// the learner's own frames stand out, notes for lines the live stream left out, and a box that ends scrolled to
// the learner's last frame; and followRun, which reads a run's event stream into a box (an exercise run's in
// exercise.js, a lesson block's in lesson-block.js). The server renders stored output the same way (app/web/output_view.py: the rule
// is documented there; keep the two in step).
(function () {
  "use strict";
  const ns = (window.CourseExercise = window.CourseExercise || {});
  if (ns.OutputBox) return;

  // lines kept in the page per run; the live stream sends at most ~2100, a stored verdict may hold far more
  const MAX_LINES = 5000;
  // `  File "torch/nn/modules/module.py", line 1778, in _call_impl`, maybe after a rank prefix `[default0]:`
  const FRAME = /^(\[[^\]\s]+\]:)? {2}File "([^"]+)", line \d+/;
  const LEARNER_FILE = "main.py";

  /** Who a frame's file belongs to: null for the learner's (or an absolute path), else a library's name. */
  function frameOwner(path) {
    if (path === LEARNER_FILE || path.startsWith("/")) return null;
    if (path.startsWith("<frozen") || /^python\d/.test(path)) return "the standard library";
    return path.split("/")[0];
  }

  function span(stream, text, extra) {
    const node = document.createElement("span");
    node.className = `line ${stream}${extra ? ` ${extra}` : ""}`;
    node.textContent = `${text}\n`;
    return node;
  }

  class OutputBox {
    constructor(el) {
      this.el = el;
      this.clear();
    }

    /** Empty the box (a new run, or a run that started over elsewhere). */
    clear() {
      this.el.replaceChildren();
      this.lines = 0;
      this.fold = null;  // the library frames being folded
      this.under = null;  // where the source lines under the last frame go: {prefix, parent}
      this.note = null;  // "... lines not shown ..."
      this.follow = true;  // keep the newest line in view until the learner scrolls up
    }

    /** A run began: no placeholder from here on, even if it prints nothing. */
    start() {
      this.clear();
      this.el.classList.add("has-run");
    }

    /** Add one `output` event: {"lines": [{"stream", "line"}], "skipped"?: N, "capped"?: true}. */
    addBatch(data) {
      this.follow = this.el.scrollTop + this.el.clientHeight >= this.el.scrollHeight - 4;
      if (data.skipped) this.leftOut(`… ${data.skipped.toLocaleString()} more lines not shown here …`);
      for (const item of data.lines || []) this.add(item.stream, item.line);
      if (data.capped) this.leftOut("… more output than the page shows while it runs; its last lines follow when "
                                    + "the program ends …");
      if (this.follow) this.el.scrollTop = this.el.scrollHeight;
    }

    /** Show a finished run's stored output (stdout, then stderr), when the stream was not followed. */
    addStored(stdout, stderr) {
      for (const [stream, text] of [["stdout", stdout], ["stderr", stderr]]) {
        for (const line of (text || "").split("\n").slice(0, -1)) this.add(stream, line);
        if (text && !text.endsWith("\n")) this.add(stream, text.split("\n").pop());
      }
    }

    add(stream, text) {
      if (this.lines >= MAX_LINES) return;
      this.lines += 1;
      const frame = FRAME.exec(text);
      if (frame) return this.addFrame(stream, text, frame[1] || "", frame[2]);
      if (this.under && text.startsWith(`${this.under.prefix}    `)) {
        this.under.parent.append(span(stream, text));
        return;
      }
      this.fold = this.under = null;
      this.el.append(span(stream, text));
    }

    addFrame(stream, text, prefix, path) {
      const owner = frameOwner(path);
      if (owner === null) {
        this.fold = null;
        this.el.append(span(stream, text, path === LEARNER_FILE ? "learner-frame" : ""));
        this.under = { prefix, parent: this.el };
        return;
      }
      if (!this.fold || this.fold.prefix !== prefix || this.fold.stream !== stream) {
        const details = document.createElement("details");
        details.className = "frames";
        const summary = document.createElement("summary");
        summary.className = `line ${stream}`;
        details.append(summary);
        this.el.append(details);
        this.fold = { details, summary, prefix, stream, frames: 0, owners: [] };
      }
      const fold = this.fold;
      fold.frames += 1;
      if (!fold.owners.includes(owner)) fold.owners.push(owner);
      fold.summary.textContent = `${prefix}… ${fold.frames} frame${fold.frames === 1 ? "" : "s"} inside `
        + `${fold.owners.join(" and ")} …`;
      fold.details.append(span(stream, text));
      this.under = { prefix, parent: fold.details };
    }

    leftOut(text) {
      if (!this.note) this.note = this.el.appendChild(span("note", ""));
      this.note.textContent = `${text}\n`;
      this.fold = this.under = null;
    }

    /** The run ended: say so when it printed nothing, and bring the learner's last traceback frame into view. */
    finish() {
      if (!this.el.childElementCount) this.el.append(span("note", "The program printed nothing."));
      const frames = this.el.querySelectorAll(".learner-frame");
      const last = frames[frames.length - 1];
      if (last) this.el.scrollTop = Math.max(0, last.offsetTop - this.el.clientHeight / 3);
      else this.el.scrollTop = this.el.scrollHeight;
    }

    /** Whether the box shows anything of a run yet. */
    get empty() {
      return !this.el.childElementCount;
    }
  }

  /**
   * Follow a run's event stream (app/submissions/live.py, sse_events): `output` batches go into `box`, and each
   * other event named in `on` to its handler with its parsed data. The stream ends with event `last` ("verdict"
   * for an exercise run, "done" for a lesson block's), after which the server sends nothing; `lost()` is called
   * instead when the stream breaks before it.
   */
  function followRun(url, box, { last, on, lost }) {
    const source = new EventSource(url);
    let ended = false;
    source.addEventListener("output", (e) => box.addBatch(JSON.parse(e.data)));
    Object.entries(on).forEach(([name, handle]) => {
      source.addEventListener(name, (e) => {
        if (name === last) {
          ended = true;
          source.close();
        }
        handle(JSON.parse(e.data));
      });
    });
    source.onerror = () => {
      if (ended) return;
      source.close();
      lost();
    };
    return source;
  }

  ns.OutputBox = OutputBox;
  ns.followRun = followRun;
})();
