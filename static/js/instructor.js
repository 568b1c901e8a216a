// Instructor pages: follow a running regrade's progress bar, and ask before deleting a comment from the queue.
// Without this file the pages still work: reload to see a regrade's progress; a delete happens without asking.
(function () {
  "use strict";
  // milliseconds between two looks at a running regrade; a job takes tens of milliseconds, a regrade seconds
  const POLL_MS = 500;

  function follow(bar) {
    const label = document.querySelector(`label[for="${bar.id}"] .js-done`);
    async function look() {
      let regrade = null;
      try {
        const response = await fetch(bar.dataset.regradeUrl, { credentials: "same-origin", headers: { Accept: "application/json" } });
        if (response.ok) regrade = await response.json();
      } catch (error) {
        regrade = null;  // a network blip: look again
      }
      if (regrade) {
        bar.max = Math.max(regrade.total, 1);
        bar.value = regrade.done;
        bar.textContent = `${regrade.done} of ${regrade.total}`;
        if (label) label.textContent = String(regrade.done);
        if (regrade.status !== "running") {
          window.location.reload();  // the finished regrade's figures and verdicts are rendered by the server
          return;
        }
      }
      window.setTimeout(look, POLL_MS);
    }
    window.setTimeout(look, POLL_MS);
  }

  for (const bar of document.querySelectorAll("progress[data-regrade-url]")) follow(bar);

  document.addEventListener("submit", (event) => {
    const question = event.target.dataset && event.target.dataset.confirm;
    if (question && !window.confirm(question)) event.preventDefault();
  });
})();
