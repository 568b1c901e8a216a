// The modeled timeline after a run on a simulated GPU: one row for the host, one per GPU stream and copy engine,
// drawn as an SVG across the panel's width. Kernels are solid, copies hatched, the host's waiting for the GPU
// dotted, NCCL's collectives striped, and each sync a ▼ above the host's row, so the drawing reads without colour;
// every row is named in text. The same figures are in the tables under it (rows, then the modeled time of each
// learner line), which the server also renders for the page without JavaScript (templates/exercises/_timeline.html);
// the SVG's accessible name says what it shows and points at them. "Download trace (Chrome JSON)" is the same run
// from GET /api/submissions/{id}/trace. Data: the Verdict JSON's `timeline` (its `rows`, `events`: [row, start us,
// duration us, kind, name, line], `lines`, and the server's words `label` and `summary`).
(function () {
  "use strict";
  const ns = (window.CourseExercise = window.CourseExercise || {});
  if (ns.Timeline) return;

  const SVG = "http://www.w3.org/2000/svg";
  const LABEL_H = 16;  // a row's name, above its track
  const TRACK_H = 16;
  const MARK_H = 7;  // the ▼ of a sync, above the host's track
  const ROW_GAP = 8;
  const AXIS_H = 26;
  const MIN_WIDTH = 1;  // px: a span shorter than a pixel still shows
  const KIND_CLASS = { kernel: "tl-kernel", copy: "tl-copy", sync: "tl-wait", collective: "tl-comm" };
  const SPAN_KINDS = ["kernel", "copy", "collective", "sync"];

  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (text != null) node.textContent = text;
    return node;
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    node.append(...children);
    return node;
  }

  /** Milliseconds as the server words them (app/grading/timeline.py: ms). */
  function ms(value) {
    const v = value || 0;
    if (v === 0) return "0 ms";
    if (v >= 100) return `${Math.round(v).toLocaleString("en-US")} ms`;
    if (v >= 10) return `${v.toFixed(1)} ms`;
    if (v >= 0.1) return `${v.toFixed(2)} ms`;
    return `${v.toFixed(3)} ms`;
  }

  /** Spans of one row and kind as pixel runs: those closer than half a pixel are drawn as one rect. */
  function runs(spans, scale) {
    const out = [];
    spans.sort((a, b) => a[1] - b[1]);
    for (const e of spans) {
      const x0 = e[1] * scale;
      const x1 = Math.max(x0 + MIN_WIDTH, (e[1] + e[2]) * scale);
      const last = out[out.length - 1];
      if (last && x0 <= last[1] + 0.5) last[1] = Math.max(last[1], x1);
      else out.push([x0, x1]);
    }
    return out;
  }

  /** Instants of one row at pixel positions, those within 3 px of the previous one drawn once. */
  function points(instants, scale) {
    const out = [];
    instants.sort((a, b) => a[1] - b[1]);
    for (const e of instants) {
      const x = e[1] * scale;
      if (!out.length || x - out[out.length - 1] >= 3) out.push(x);
    }
    return out;
  }

  function patterns(id) {
    const defs = svg("defs");
    const hatch = svg("pattern", { id: `${id}-hatch`, width: 6, height: 6, patternUnits: "userSpaceOnUse",
                                   patternTransform: "rotate(45)" });
    hatch.append(svg("rect", { width: 6, height: 6, class: "tl-copy-bg" }),
                 svg("line", { x1: 0, y1: 0, x2: 0, y2: 6, class: "tl-copy-line" }));
    const dots = svg("pattern", { id: `${id}-dots`, width: 4, height: 4, patternUnits: "userSpaceOnUse" });
    dots.append(svg("rect", { width: 4, height: 4, class: "tl-wait-bg" }),
                svg("circle", { cx: 2, cy: 2, r: 1, class: "tl-wait-dot" }));
    const stripes = svg("pattern", { id: `${id}-stripes`, width: 5, height: 5, patternUnits: "userSpaceOnUse" });
    stripes.append(svg("rect", { width: 5, height: 5, class: "tl-comm-bg" }),
                   svg("line", { x1: 1, y1: 0, x2: 1, y2: 5, class: "tl-comm-line" }));
    defs.append(hatch, dots, stripes);
    return defs;
  }

  /** The SVG of a timeline, `width` px wide. */
  function drawing(timeline, width, id) {
    const rows = timeline.rows || [];
    const events = timeline.events || [];
    let end = 0;
    for (const e of events) end = Math.max(end, e[1] + e[2]);
    // every event drawn: the axis runs to the modeled run's end (the host may go on after the GPU's last work)
    if ((timeline.events_total || 0) <= events.length) end = Math.max(end, (timeline.modeled_ms || 0) * 1000);
    end = end || 1;
    const scale = width / end;
    const rowH = LABEL_H + MARK_H + TRACK_H + ROW_GAP;
    const height = rows.length * rowH + AXIS_H;
    const syncs = events.filter((e) => e[3] === "sync_mark").length;
    const root = svg("svg", {
      class: "timeline-svg", width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
      "aria-label": `Timeline drawing over ${ms(end / 1000)}, one row each for ${rows.map((r) => r.name).join(", ")}; `
        + `${syncs} sync${syncs === 1 ? "" : "s"} marked on the host's row. The tables below give the same figures.`,
    });
    root.append(patterns(id));
    rows.forEach((row, i) => {
      const top = i * rowH;
      const trackY = top + LABEL_H + MARK_H;
      const g = svg("g", { class: "tl-row", "data-row": row.name });
      g.append(svg("text", { x: 0, y: top + LABEL_H - 4, class: "tl-row-name" }, row.name),
               svg("rect", { x: 0, y: trackY, width, height: TRACK_H, class: "tl-track" }));
      const mine = events.filter((e) => e[0] === i);
      for (const kind of SPAN_KINDS) {
        const fill = { copy: `url(#${id}-hatch)`, sync: `url(#${id}-dots)`, collective: `url(#${id}-stripes)` }[kind];
        for (const [x0, x1] of runs(mine.filter((e) => e[3] === kind), scale)) {
          const attrs = { x: x0.toFixed(2), y: trackY + 1, width: (x1 - x0).toFixed(2), height: TRACK_H - 2,
                          class: `tl-span ${KIND_CLASS[kind]}`, "data-kind": kind };
          if (fill) attrs.fill = fill;
          g.append(svg("rect", attrs));
        }
      }
      for (const x of points(mine.filter((e) => e[3] === "sync_mark"), scale)) {
        const cx = Math.min(Math.max(x, 4), width - 4);
        g.append(svg("path", { d: `M${(cx - 4).toFixed(2)} ${trackY - MARK_H} h8 l-4 ${MARK_H - 1} z`,
                               class: "tl-sync-mark", "data-kind": "sync_mark" }),
                 svg("line", { x1: cx.toFixed(2), y1: trackY, x2: cx.toFixed(2), y2: trackY + TRACK_H,
                               class: "tl-sync-line" }));
      }
      for (const x of points(mine.filter((e) => e[3] === "mark"), scale)) {
        g.append(svg("line", { x1: x.toFixed(2), y1: trackY - 3, x2: x.toFixed(2), y2: trackY + TRACK_H + 2,
                               class: "tl-event-mark", "data-kind": "mark" }));
      }
      root.append(g);
    });
    const axisY = rows.length * rowH + 2;
    const axis = svg("g", { class: "tl-axis" });
    axis.append(svg("line", { x1: 0, y1: axisY, x2: width, y2: axisY, class: "tl-axis-line" }));
    const ticks = width < 480 ? 2 : 4;
    for (let t = 0; t <= ticks; t++) {
      const x = (width * t) / ticks;
      const anchor = t === 0 ? "start" : t === ticks ? "end" : "middle";
      axis.append(svg("line", { x1: x, y1: axisY, x2: x, y2: axisY + 4, class: "tl-axis-line" }),
                  svg("text", { x, y: axisY + 16, "text-anchor": anchor, class: "tl-axis-text" },
                      ms((end * t) / ticks / 1000)));
    }
    root.append(axis);
    return root;
  }

  function fillTables(section, timeline, lineLink) {
    const rowsBody = section.querySelector(".timeline-rows tbody");
    rowsBody.replaceChildren(...(timeline.rows || []).map((r) => el("tr", {},
      el("th", { scope: "row" }, r.name), el("td", {}, r.ms.toFixed(3)), el("td", {}, String(r.spans)),
      el("td", {}, String(r.marks)))));
    const linesBody = section.querySelector(".timeline-lines tbody");
    linesBody.replaceChildren(...(timeline.lines || []).map((e) => el("tr", {},
      el("td", {}, lineLink(e.line, String(e.line))), el("td", {}, e.ms.toFixed(3)),
      el("td", {}, e.wait_ms.toFixed(3)))));
  }

  /** Draw into the section's drawing box at its current width. */
  function redraw(section) {
    const box = section.querySelector(".timeline-drawing");
    if (!box || !section.courseTimeline || section.hidden) return;
    const width = Math.floor(box.clientWidth);
    if (width <= 0 || width === section.courseTimelineWidth) return;
    section.courseTimelineWidth = width;
    box.replaceChildren(drawing(section.courseTimeline, width, box.dataset.id || "timeline"));
  }

  /** Show a verdict's timeline ({id, timeline, ...}); hide the section when the run put nothing on it. */
  function show(panel, verdict) {
    const section = panel.root.querySelector(".exercise-timeline");
    if (!section) return;
    const timeline = verdict.timeline;
    if (!timeline || !(timeline.events || []).length) {
      clear(panel);
      return;
    }
    section.querySelector(".timeline-label").textContent = timeline.label || "";
    section.querySelector(".timeline-totals").textContent = timeline.summary || "";
    const collectives = section.querySelector(".timeline-legend-collective");
    if (collectives) collectives.hidden = !timeline.collectives;
    fillTables(section, timeline, (n, text) => panel.lineLink(n, text));
    const link = section.querySelector(".timeline-download");
    if (link && verdict.id) link.setAttribute("href", `/api/submissions/${encodeURIComponent(verdict.id)}/trace`);
    section.courseTimeline = timeline;
    section.courseTimelineWidth = 0;
    section.hidden = false;
    redraw(section);
    if (!section.courseTimelineResize) {
      section.courseTimelineResize = true;
      let pending = 0;
      window.addEventListener("resize", () => {
        cancelAnimationFrame(pending);
        pending = requestAnimationFrame(() => redraw(section));
      });
    }
  }

  /** Take the timeline away (a new run started). */
  function clear(panel) {
    const section = panel.root.querySelector(".exercise-timeline");
    if (!section) return;
    section.hidden = true;
    section.courseTimeline = null;
    const box = section.querySelector(".timeline-drawing");
    if (box) box.replaceChildren();
  }

  /** The last run's timeline, which the server put in the page. */
  function showStored(panel) {
    const stored = panel.root.querySelector("script.exercise-last-timeline");
    if (stored) show(panel, JSON.parse(stored.textContent));
  }

  ns.Timeline = { show, clear, showStored, ms };
})();
