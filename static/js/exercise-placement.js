// The placement map after a run: the editor's gutter marks, per line of the learner's code, what happened to
// tensors there (a copy to the device, back to the host, a sync, two devices meeting in red, a tensor made on
// the device); hovering a mark shows its words. Under the output: the totals and the same entries as a table,
// which the server also renders for the page without JavaScript (templates/exercises/_placement.html).
// Data: the Verdict JSON's `placement` and `placement_totals` (app/grading/placement.py).
(function () {
  "use strict";
  const ns = (window.CourseExercise = window.CourseExercise || {});
  if (ns.Placement) return;

  // the mark a line gets when several things happened there: the one a learner most needs to see
  const PRIORITY = ["mismatch", "to_device", "to_host", "sync", "created_on_device"];
  const EVENT_WORDS = { to_device: "to the device", to_host: "back to the host", sync: "host waits (sync)",
                        mismatch: "devices met", created_on_device: "made on the device" };

  /** One mark per line: [{line, kind, text}], the text every entry's summary on that line. */
  function marks(entries) {
    const byLine = new Map();
    for (const entry of entries) {
      const mark = byLine.get(entry.line) || { line: entry.line, kind: entry.event, texts: [] };
      if (PRIORITY.indexOf(entry.event) < PRIORITY.indexOf(mark.kind)) mark.kind = entry.event;
      const who = entry.rank_label ? `${entry.rank_label}: ` : "";  // several ranks: whose entry
      mark.texts.push(who + String(entry.summary || "").replace(/`/g, ""));  // a hover text shows no markup
      byLine.set(entry.line, mark);
    }
    return Array.from(byLine.values(), (m) => ({ line: m.line, kind: m.kind, text: m.texts.join("\n") }));
  }

  /** Text with `backtick` spans as <code> nodes, as the server's code_spans filter renders them. */
  function codeSpans(text) {
    const parts = String(text).split("`");
    if (parts.length % 2 === 0) return [String(text)];
    return parts.map((part, i) => {
      if (!(i % 2)) return part;
      const code = document.createElement("code");
      code.textContent = part;
      return code;
    });
  }

  function cell(...children) {
    const td = document.createElement("td");
    td.append(...children);
    return td;
  }

  /** Refill the section under the output from a verdict; `lineLink(n, text)` makes a link to line n. */
  function renderTable(section, verdict, lineLink) {
    const entries = verdict.placement || [];
    section.hidden = !entries.length;
    section.querySelector(".placement-totals").textContent =
      (verdict.placement_totals && verdict.placement_totals.summary) || "";
    // the machine's devices by name (the verdict's `devices`): which card cuda:0 was on the picked machine
    const devices = section.querySelector(".placement-devices");
    if (devices) {
      devices.replaceChildren();
      if (verdict.devices && verdict.devices.length) {
        devices.append(`On ${verdict.machine}: `);
        verdict.devices.forEach((d, i) => {
          devices.append(...codeSpans(`\`${d.device}\` is ${d.name}${i < verdict.devices.length - 1 ? "; " : "."}`));
        });
      }
    }
    const body = section.querySelector("tbody");
    body.replaceChildren();
    // a job of several ranks: a Rank column first, each rank's entries in turn (machine and local rank named)
    const byRank = entries.length > 0 && Boolean(entries[0].rank_label);
    const head = section.querySelector("thead tr");
    const rankHead = head && head.querySelector(".placement-rank-head");
    if (head && byRank && !rankHead) {
      const th = document.createElement("th");
      th.scope = "col";
      th.className = "placement-rank-head";
      th.textContent = "Rank";
      head.prepend(th);
    } else if (rankHead && !byRank) {
      rankHead.remove();
    }
    for (const e of entries) {
      const row = document.createElement("tr");
      row.className = `placement-${e.event}`;
      const mark = document.createElement("span");
      mark.className = "placement-mark";
      mark.setAttribute("aria-hidden", "true");
      const summary = e.summary || "";
      if (byRank) {
        const who = cell(String(e.rank_label || ""));
        who.className = "placement-rank";
        row.append(who);
      }
      row.append(cell(lineLink(e.line, String(e.line))), cell(mark, ` ${EVENT_WORDS[e.event] || e.event}`),
                 cell(...codeSpans(summary.slice(summary.indexOf(": ") + 2))));
      body.append(row);
    }
  }

  /** Show a verdict's placement map in the gutter and under the output. */
  function show(panel, verdict) {
    if (panel.editor.setPlacement) panel.editor.setPlacement(marks(verdict.placement || []));
    const section = panel.root.querySelector(".exercise-placement");
    if (section) renderTable(section, verdict, (n, text) => panel.lineLink(n, text));
  }

  /** Take the marks away (a new run started). */
  function clear(panel) {
    if (panel.editor.setPlacement) panel.editor.setPlacement([]);
    const section = panel.root.querySelector(".exercise-placement");
    if (section) section.hidden = true;
  }

  ns.Placement = { show, clear, marks };
})();
