// Lesson-read beacon: when the reader scrolls the end of the lesson into view, tell the server once
// (POST /api/lessons/<slug>/read with the CSRF header). Anonymous readers count too.
(function () {
  "use strict";
  const box = document.getElementById("lesson-progress");
  if (!box || box.dataset.read === "true" || !window.fetch) return;
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
})();
