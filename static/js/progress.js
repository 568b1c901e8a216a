// Progress on the page, kept current:
// * the lesson-read beacon: when the reader scrolls the end of the lesson into view, tell the server once
//   (POST /api/lessons/<slug>/read with the CSRF header; anonymous readers count too);
// * the lesson's "Exercises passed: N of M" follows a pass in the panel above it (the `course:exercise-passed`
//   event of static/js/exercise.js), without a reload;
// * the index's badges are read again from GET /api/progress when the browser shows the page from its
//   back/forward cache, where it would otherwise show the state of before the pass.
(function () {
  "use strict";
  if (!window.fetch) return;

  // --- the lesson page ---------------------------------------------------------------------------------------
  const box = document.getElementById("lesson-progress");
  const passedLine = box && box.querySelector(".exercises-passed");

  function words(list) {
    return new Set((list || "").split(" ").filter(Boolean));
  }

  function showPassed(slugs) {
    if (!passedLine) return;
    const all = words(passedLine.dataset.exercises);
    const passed = new Set([...words(passedLine.dataset.passed), ...slugs].filter((s) => all.has(s)));
    passedLine.dataset.passed = Array.from(passed).join(" ");
    passedLine.textContent = `Exercises passed: ${passed.size} of ${all.size}.`;
  }

  document.addEventListener("course:exercise-passed", (event) => showPassed([event.detail.exercise]));

  let sent = false;
  async function markRead() {
    if (sent) return;
    sent = true;
    try {
      const response = await fetch(`/api/lessons/${encodeURIComponent(box.dataset.lesson)}/read`, {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-CSRF-Token": box.dataset.csrf, Accept: "application/json" },
        keepalive: true,
      });
      if (!response.ok) { sent = false; return; }
      box.dataset.read = "true";
      const state = box.querySelector(".read-state");
      const tick = document.createElement("span");
      tick.className = "tick";
      tick.setAttribute("aria-hidden", "true");
      tick.textContent = "✓";
      state.replaceChildren(tick, " You have read this lesson.");
    } catch (e) {
      sent = false;
    }
  }

  if (box && box.dataset.read !== "true") {
    if ("IntersectionObserver" in window) {
      const observer = new IntersectionObserver((entries) => {
        if (entries.some((e) => e.isIntersecting)) { observer.disconnect(); markRead(); }
      });
      observer.observe(box);
    } else {
      window.addEventListener("scroll", function onScroll() {
        if (window.innerHeight + window.scrollY >= document.body.scrollHeight - 40) {
          window.removeEventListener("scroll", onScroll);
          markRead();
        }
      }, { passive: true });
    }
  }

  // --- pages shown again from the back/forward cache ----------------------------------------------------------
  async function refresh() {
    let progress;
    try {
      const response = await fetch("/api/progress", { credentials: "same-origin" });
      if (!response.ok) return;
      progress = await response.json();
    } catch (e) { return; }
    const passed = Object.keys(progress.exercises || {}).filter((s) => progress.exercises[s].passed);
    showPassed(passed);
    document.querySelectorAll(".progress-badge[data-lesson]").forEach((badge) => {
      const all = words(badge.dataset.exercises);
      const count = badge.querySelector(".badge-passed");
      if (count && all.size) {
        const n = passed.filter((s) => all.has(s)).length;
        count.textContent = `${n}/${all.size} exercise${all.size > 1 ? "s" : ""} passed`;
      }
    });
  }

  window.addEventListener("pageshow", (event) => { if (event.persisted) refresh(); });
})();
