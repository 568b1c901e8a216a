// Entry of the editor bundle: CodeMirror 6 with Python, exposed as one small global, window.CourseEditor.
// The page keeps a plain <textarea> (readable and usable without JavaScript); create() hides it, shows the editor
// in its place and keeps the textarea's value in sync so a plain form post still sends the code.
import { basicSetup } from "codemirror";
import { EditorView, keymap } from "@codemirror/view";
import { EditorState, EditorSelection, Prec } from "@codemirror/state";
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
        }),
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
  };
}

window.CourseEditor = { create, version: "6.0.2" };
