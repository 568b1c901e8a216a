// "Run on": the machine pickers of a page (templates/exercises/_run_on.html), beside each exercise and each runnable
// lesson block. Without JavaScript each is a form posting to /machine; here a change is remembered at once through
// POST /api/machine {"machine", "exercise"?} (CSRF header), and every other picker on the page that offers the same
// machine follows it. CourseRunOn.value(root) is the machine a panel or a block runs on.
(function () {
  "use strict";
  if (window.CourseRunOn) return;

  function csrf() {
    const meta = document.querySelector('meta[name="csrf-token"]');
    const field = document.querySelector('form.run-on input[name="csrf_token"]');
    return (meta && meta.content) || (field && field.value) || "";
  }

  function note(form, text) {
    let status = form.querySelector(".run-on-note");
    if (!status) {
      status = document.createElement("span");
      status.className = "run-on-note";
      status.setAttribute("role", "status");
      form.append(status);
    }
    status.textContent = text;
  }

  async function remember(form, select) {
    const exercise = form.querySelector('input[name="exercise"]');
    const body = { machine: select.value };
    if (exercise) body.exercise = exercise.value;
    try {
      const resp = await fetch("/api/machine", {
        method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf() }, body: JSON.stringify(body),
      });
      const data = await resp.json().catch(() => ({}));
      note(form, resp.ok ? "" : (typeof data.detail === "string" ? data.detail : `Not saved (${resp.status}).`));
    } catch (e) {
      note(form, "Not saved: the course server could not be reached.");
    }
  }

  function wire(form) {
    const select = form.querySelector("select.run-on-select");
    const use = form.querySelector(".run-on-use");
    if (use) use.hidden = true;
    form.addEventListener("submit", (e) => {
      // a lesson block's Run without JavaScript (lesson-block.js hides it once it runs blocks in the page) posts on
      if (e.submitter && e.submitter.classList.contains("block-run-nojs")) return;
      e.preventDefault();
      remember(form, select);
    });
    select.addEventListener("change", () => {
      document.querySelectorAll("select.run-on-select").forEach((other) => {
        if (other !== select && !other.disabled && other.querySelector(`option[value="${select.value}"]`)) {
          other.value = select.value;
        }
      });
      remember(form, select);
    });
  }

  function start() { document.querySelectorAll("form.run-on").forEach(wire); }

  window.CourseRunOn = {
    value(root) {
      const select = root.querySelector("select.run-on-select");
      return select ? select.value : null;
    },
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
