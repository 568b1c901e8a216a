// The verdict of a run as the panel shows it, check by check: a passed check says what it checks (its
// description, from the panel's "What the grader checks" list), a failed one its message and a link to the line
// that needs the change, a check the program never reached says so without a cross. The server renders a stored
// verdict the same way (templates/exercises/_check.html).
(function () {
  "use strict";
  const ns = (window.CourseExercise = window.CourseExercise || {});
  if (ns.Verdict) return;

  const STATUS_TEXT = {
    passed: "Passed: every check holds.",
    failed: "Not yet: some checks fail.",
    error: "The grader broke (not your fault). Please run again.",
    timeout: "Your program ran out of time.",
    rejected: "The code was refused before it ran.",
    queued: "Waiting for a free sandbox…",
    running: "Running…",
  };
  const MARKS = { passed: ["✓", "passed"], failed: ["✗", "failed"], unreached: ["–", "not reached"] };

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    for (const child of children) if (child != null) node.append(child);
    return node;
  }

  /** Text with `backtick` spans (the grader quotes code that way) as text and <code> nodes. */
  function codeSpans(text) {
    const message = el("span", { class: "message" });
    String(text).split("`").forEach((part, i) => message.append(i % 2 ? el("code", {}, part) : part));
    return message;
  }

  function kindOf(check) {
    if (check.passed) return "passed";
    return check.reached === false ? "unreached" : "failed";
  }

  /** Render the checks into the list; `lineLink(n)` makes the link that puts the editor's cursor on line n.
   *  Each row starts with the check's id; a failed message's leading "line N: " becomes the link itself. */
  function renderChecks(list, verdict, root, lineLink) {
    list.replaceChildren();
    for (const check of verdict.checks || []) {
      const kind = kindOf(check);
      const [symbol, label] = MARKS[kind];
      let message;
      let linked = false;
      const description = kind !== "failed" &&
        root.querySelector(`.exercise-spec li[data-check="${CSS.escape(check.id)}"] .check-description`);
      const text = check.message || "";
      const prefix = `line ${check.line}: `;
      if (description) {
        message = el("span", { class: "message" });
        message.append(...Array.from(description.childNodes, (n) => n.cloneNode(true)));
        if (kind === "unreached") message.append(" ", el("span", { class: "unreached-note" }, `(${text})`));
      } else if (kind === "failed" && check.line && text.indexOf(prefix) >= 0 && text.indexOf(prefix) <= 16) {
        // the message's own "line N: " (after a "rank 1: " where there is one) becomes the link, said once
        const at = text.indexOf(prefix);
        message = codeSpans(text.slice(at + prefix.length));
        message.prepend(text.slice(0, at), lineLink(check.line), ": ");
        linked = true;
      } else {
        message = codeSpans(text);
      }
      const item = el("li", { class: `check ${kind}`, "data-check": check.id },
        el("span", { class: "mark", role: "img", "aria-label": label }, symbol), " ",
        el("code", { class: "check-id" }, check.id), " ", message);
      if (check.line && !check.passed && !linked) item.append(" ", lineLink(check.line));
      list.append(item);
    }
  }

  /** The advice under the checks (a sync on every step ...): one item per line of advice. */
  function renderAdvice(list, verdict) {
    list.replaceChildren();
    for (const a of verdict.advice || []) list.append(el("li", {}, codeSpans(a.message)));
    list.hidden = !(verdict.advice || []).length;
  }

  /** The status line: what happened, how long it took and on which device. */
  function statusText(verdict) {
    // one level of brackets: "(61 ms on cuda:0, simulated on CPU)", "(… on cuda:0, cuda:1, 2 ranks, simulated on
    // CPU)"; no device when the verdict names none (app/web/templating.py's status_where says the same)
    const device = (verdict.device || "").replace(/ \(([^()]*)\)/g, ", $1");
    const ms = verdict.duration_ms != null ? ` (${verdict.duration_ms} ms${device ? ` on ${device}` : ""})` : "";
    return (STATUS_TEXT[verdict.status] || verdict.status) + ms + (verdict.machine ? `, on ${verdict.machine}` : "");
  }

  ns.Verdict = { renderChecks, renderAdvice, statusText, STATUS_TEXT, el };
})();
