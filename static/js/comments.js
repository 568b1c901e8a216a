// Comment thread enhancements: post, reply, edit, delete, hide and report through the JSON API with the CSRF
// header, showing refusals (too long, signed out, ...) in place without losing what was typed. Without this file the
// forms in templates/comments/_thread.html post the same actions and the server redirects back.
(function () {
  "use strict";
  const section = document.getElementById("comments");
  if (!section || !window.fetch) return;
  const lesson = section.dataset.lesson;
  const csrf = section.dataset.csrf;
  const errorBox = section.querySelector(".js-error");

  function showError(message) {
    errorBox.textContent = message;  // text, never HTML
    errorBox.hidden = false;
    errorBox.scrollIntoView({ block: "nearest" });
  }

  async function api(method, url, body) {
    const response = await fetch(url, {
      method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf, Accept: "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (response.status === 204) return null;
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (!response.ok) {
      let detail = data && data.detail;
      if (Array.isArray(detail)) detail = detail.map((d) => d.msg).join("; ");
      if (response.status === 429) {
        detail = detail || `Too many requests; try again in ${response.headers.get("Retry-After")} s.`;
      }
      throw new Error(detail || `The server said ${response.status}.`);
    }
    return data;
  }

  function reloadAt(anchor) {
    const url = new URL(window.location.href);
    url.searchParams.delete("comment_error");
    url.hash = anchor;
    window.history.replaceState(null, "", url.href);  // no navigation; the reload below is the only one
    window.location.reload();
  }

  section.addEventListener("submit", async (event) => {
    const form = event.target;
    const action = form.dataset.action;
    if (!action) return;
    event.preventDefault();
    const button = form.querySelector("button[type=submit]");
    if (button) button.disabled = true;
    errorBox.hidden = true;
    try {
      const article = form.closest("article");
      if (action === "post") {
        const parent = form.querySelector("input[name=parent_id]");
        const created = await api("POST", `/api/lessons/${encodeURIComponent(lesson)}/comments`, {
          body: form.querySelector("textarea").value,
          parent_id: parent ? Number(parent.value) : null,
        });
        reloadAt(`comment-${created.id}`);
      } else if (action === "delete") {
        if (!window.confirm("Delete this comment?")) return;
        await api("DELETE", `/api/comments/${article.dataset.id}`);
        reloadAt("comments");
      } else if (action === "report") {
        await api("POST", `/api/comments/${article.dataset.id}/report`, {
          reason: form.querySelector("textarea").value,
        });
        reloadAt(`comment-${article.dataset.id}`);
      } else if (action === "hide") {
        const hidden = form.querySelector("input[name=hidden]").value === "1";
        await api("POST", `/api/comments/${article.dataset.id}/hide`, { hidden });
        reloadAt(`comment-${article.dataset.id}`);
      }
    } catch (error) {
      showError(error.message);
    } finally {
      if (button) button.disabled = false;
    }
  });

  function startEdit(article) {
    const source = article.querySelector(".comment-source");
    const body = article.querySelector(".comment-body");
    if (!source || article.querySelector(".comment-edit-form")) return;
    const form = document.createElement("form");
    form.className = "comment-edit-form";
    const area = document.createElement("textarea");
    area.rows = 4;
    area.value = source.value;
    area.setAttribute("aria-label", "Edit your comment");
    const save = document.createElement("button");
    save.type = "submit";
    save.className = "button";
    save.textContent = "Save";
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.className = "link-button";
    cancel.textContent = "Cancel";
    form.append(area, save, cancel);
    body.after(form);
    body.hidden = true;
    area.focus();
    cancel.addEventListener("click", () => { form.remove(); body.hidden = false; });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      event.stopPropagation();
      save.disabled = true;
      try {
        const updated = await api("PATCH", `/api/comments/${article.dataset.id}`, { body: area.value });
        body.innerHTML = updated.html;  // rendered and sanitised by the server (markdown-it + nh3)
        source.value = updated.body;
        if (!article.querySelector(".comment-edited")) {
          const mark = document.createElement("span");
          mark.className = "comment-edited";
          mark.textContent = "(edited)";
          article.querySelector(".comment-meta").append(" ", mark);
        }
        form.remove();
        body.hidden = false;
        errorBox.hidden = true;
      } catch (error) {
        showError(error.message);
      } finally {
        save.disabled = false;
      }
    });
  }

  section.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (!button) return;
    const article = button.closest("article");
    if (button.dataset.action === "edit") startEdit(article);
  });

  for (const button of section.querySelectorAll(".js-only")) button.hidden = false;
  for (const details of section.querySelectorAll(".comment-edit-nojs")) details.hidden = true;  // the Edit button replaces it
})();
