// Entry of the editor bundle: CodeMirror 6 with Python, exposed as one small global, window.CourseEditor.
// The page keeps a plain <textarea> (readable and usable without JavaScript); create() hides it, shows the editor
// in its place and keeps the textarea's value in sync so a plain form post still sends the code.
import { basicSetup } from "codemirror";
import { Decoration, EditorView, GutterMarker, gutter, keymap, showTooltip } from "@codemirror/view";
import { EditorState, EditorSelection, Prec, RangeSet, StateEffect, StateField } from "@codemirror/state";
import { indentWithTab } from "@codemirror/commands";
import { indentUnit, syntaxHighlighting } from "@codemirror/language";
import { classHighlighter } from "@lezer/highlight";
import { python } from "@codemirror/lang-python";

const theme = EditorView.theme({
  "&": { fontSize: "0.95rem", border: "1px solid #b9c0c8", borderRadius: "4px" },
  "&.cm-focused": { outline: "2px solid #2864b4", outlineOffset: "1px" },
  ".cm-scroller": { fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace", minHeight: "10em" },
  ".cm-content": { padding: "6px 0" },
});

// --- the placement map: a gutter of markers (what happened to tensors on a line) with a tooltip on hover ------
// The page script (static/js/exercise-placement.js) decides each line's kind and words; this draws them.
const SYMBOLS = { to_device: "→", to_host: "←", sync: "⟳", mismatch: "✕", created_on_device: "✦" };

class PlacementMarker extends GutterMarker {
  constructor(kind, text) { super(); this.kind = kind; this.text = text; }
  eq(other) { return other.kind === this.kind && other.text === this.text; }
  toDOM() {
    const mark = document.createElement("span");
    mark.className = this.kind === "spacer" ? "cm-placement-spacer" : `cm-placement-mark placement-${this.kind}`;
    mark.textContent = SYMBOLS[this.kind] || "•";
    mark.dataset.kind = this.kind;
    mark.setAttribute("aria-hidden", "true");  // the same words are in the table under the output
    return mark;
  }
}

const setPlacement = StateEffect.define();
const showPlacementTip = StateEffect.define();

/** One marker per marked line, moved with the text as the learner edits after a run. */
const placementMarks = StateField.define({
  create: () => RangeSet.empty,
  update(marks, tr) {
    marks = marks.map(tr.changes);
    for (const effect of tr.effects) {
      if (!effect.is(setPlacement)) continue;
      const doc = tr.state.doc;
      marks = RangeSet.of(effect.value.filter((m) => m.line >= 1 && m.line <= doc.lines)
        .sort((a, b) => a.line - b.line)
        .map((m) => new PlacementMarker(m.kind, m.text).range(doc.line(m.line).from)));
    }
    return marks;
  },
});

/** Lines where two devices met get a red band across the text too. */
const mismatchLines = StateField.define({
  create: () => Decoration.none,
  update(lines, tr) {
    lines = lines.map(tr.changes);
    for (const effect of tr.effects) {
      if (!effect.is(setPlacement)) continue;
      const doc = tr.state.doc;
      lines = Decoration.set(effect.value.filter((m) => m.kind === "mismatch" && m.line >= 1 && m.line <= doc.lines)
        .sort((a, b) => a.line - b.line)
        .map((m) => Decoration.line({ class: "cm-placement-mismatch-line" }).range(doc.line(m.line).from)));
    }
    return lines;
  },
  provide: (field) => EditorView.decorations.from(field),
});

/** The tooltip of the marker under the pointer (or tapped), at the start of its line. */
const placementTip = StateField.define({
  create: () => null,
  update(tip, tr) {
    for (const effect of tr.effects) if (effect.is(showPlacementTip)) tip = effect.value;
    if (tip && tr.docChanged) tip = null;
    return tip;
  },
  provide: (field) => showTooltip.from(field, (tip) => tip && {
    pos: tip.pos, above: true, arrow: false,
    create() {
      const dom = document.createElement("div");
      dom.className = "cm-placement-tip";
      dom.setAttribute("role", "tooltip");
      dom.textContent = tip.text;
      return { dom };
    },
  }),
});

function markerAt(view, line) {
  let found = null;
  view.state.field(placementMarks).between(line.from, line.from, (from, _to, marker) => {
    if (from === line.from) found = marker;
  });
  return found;
}

function tipFor(view, line) {
  const marker = markerAt(view, line);
  const current = view.state.field(placementTip);
  if (!marker && !current) return false;
  const next = marker ? { pos: line.from, text: marker.text } : null;
  if (current && next && current.pos === next.pos && current.text === next.text) return false;
  view.dispatch({ effects: showPlacementTip.of(next) });
  return false;
}

const placementGutter = [
  placementMarks, mismatchLines, placementTip,
  gutter({
    class: "cm-placement-gutter",
    markers: (view) => view.state.field(placementMarks),
    initialSpacer: () => new PlacementMarker("spacer", ""),
    domEventHandlers: {
      mousemove: tipFor,
      click: tipFor,  // a tap on a phone
      mouseleave(view) {
        if (view.state.field(placementTip)) view.dispatch({ effects: showPlacementTip.of(null) });
        return false;
      },
    },
  }),
];

/** Replace a textarea with a Python editor; return a handle the page script uses.
 *  options.nonce: the page's CSP nonce; CodeMirror puts its styles in one <style> element, which a strict
 *  Content-Security-Policy blocks unless that element carries the nonce. */
function create(textarea, options = {}) {
  let runHandler = null;
  const runKeys = Prec.highest(keymap.of([
    { key: "Mod-Enter", preventDefault: true, run: () => { if (runHandler) runHandler(); return true; } },
  ]));
  const syncTextarea = EditorView.updateListener.of((update) => {
    if (update.docChanged) {
      textarea.value = update.state.doc.toString();
      if (options.onChange) options.onChange(textarea.value);
    }
  });
  const view = new EditorView({
    parent: textarea.parentNode,
    state: EditorState.create({
      doc: textarea.value,
      extensions: [
        // tokens get `tok-*` classes, coloured by the site's CSS in light and dark (the default style is light-only)
        runKeys, basicSetup, syntaxHighlighting(classHighlighter), keymap.of([indentWithTab]), python(),
        indentUnit.of("    "),
        EditorState.tabSize.of(4), theme, syncTextarea,
        ...(options.nonce ? [EditorView.cspNonce.of(options.nonce)] : []),
        // tabindex: the editable area is a keyboard stop even where the editor scrolls (axe: scrollable-region-focusable)
        EditorView.contentAttributes.of({
          "aria-label": textarea.getAttribute("aria-label") || "Code editor", tabindex: "0",
          // options.describedBy: the id of the keyboard note (how to leave the editor), read when focus arrives
          ...(options.describedBy ? { "aria-describedby": options.describedBy } : {}),
        }),
        placementGutter,
      ],
    }),
  });
  textarea.parentNode.insertBefore(view.dom, textarea.nextSibling);
  textarea.hidden = true;

  return {
    view,
    getValue: () => view.state.doc.toString(),
    setValue(text) {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
    },
    /** Put the cursor at the start of line n (1-based), scroll it into view and focus the editor. */
    gotoLine(n) {
      const doc = view.state.doc;
      const line = doc.line(Math.min(Math.max(1, n | 0), doc.lines));
      view.dispatch({
        selection: EditorSelection.cursor(line.from),
        effects: EditorView.scrollIntoView(line.from, { y: "center" }),
      });
      view.focus();
    },
    /** Return the 1-based line number of the cursor. */
    cursorLine: () => view.state.doc.lineAt(view.state.selection.main.head).number,
    focus: () => view.focus(),
    onRunShortcut(fn) { runHandler = fn; },
    /** Mark lines in the placement gutter: marks is [{line, kind, text}], kind one of SYMBOLS' keys; [] clears. */
    setPlacement(marks) {
      view.dispatch({ effects: [setPlacement.of(marks || []), showPlacementTip.of(null)] });
    },
  };
}

window.CourseEditor = { create, version: "6.0.2", placementSymbols: SYMBOLS };
