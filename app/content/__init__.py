"""Course content: lessons (Markdown + front matter) and exercises, loaded, rendered and checked."""
