// Log-out forgets what the course kept in this browser (drafts, hint progress), so the next person at a shared
// computer finds none of it. The server's answer says the same with `Clear-Site-Data: "storage"`; this covers
// browsers that ignore that header (it needs a secure context). On every page: the log-out button is in the header.
(function () {
  "use strict";
  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || new URL(form.action, location.href).pathname !== "/logout") return;
    try {
      const store = window.localStorage;
      const names = [];
      for (let i = 0; i < store.length; i++) names.push(store.key(i));
      for (const name of names) if (name.startsWith("course:")) store.removeItem(name);
    } catch (e) { /* storage disabled: nothing was kept */ }
  }, true);
})();
