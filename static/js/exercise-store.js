// What an exercise panel keeps in this browser between visits: the unsent draft and how many hints were shown.
// Keyed by learner (`course:<learner key>:draft:<slug>`), never by browser alone: on a shared computer the next
// person must not find someone else's code. The key comes from GET /api/exercises/{slug}/submissions
// (`learner_key`, a digest of the learner id). Log-out clears it all twice over: the server's
// `Clear-Site-Data: "storage"` and static/js/logout.js. When a different learner opens a panel here, the other
// learner's copies are dropped, except after an anonymous learner signs in: their drafts are still theirs
// (their progress moved into the account too), so they move to the account's key.
(function () {
  "use strict";
  const ns = (window.CourseExercise = window.CourseExercise || {});
  if (ns.Store) return;

  const PREFIX = "course:";
  const OWNER = "course:owner";  // {"key", "signedIn"}: the learner whose copies this browser holds

  function storage() {
    try { return window.localStorage; } catch (e) { return null; }  // disabled: nothing is kept, nothing leaks
  }

  function names(store) {
    const out = [];
    for (let i = 0; i < store.length; i++) out.push(store.key(i));
    return out;
  }

  function read(store, name) {
    try { return JSON.parse(store.getItem(name) || "null"); } catch (e) { return null; }
  }

  /** Make `key` the learner whose copies this browser holds; drop or carry over another learner's. */
  function adopt(key, signedIn) {
    const store = storage();
    if (!store || !key) return;
    const owner = read(store, OWNER);
    if (!owner || owner.key !== key) {
      const from = owner ? `${PREFIX}${owner.key}:` : null;
      const carry = owner && !owner.signedIn && signedIn;
      for (const name of names(store)) {
        if (!name.startsWith(PREFIX) || name === OWNER || name.startsWith(`${PREFIX}${key}:`)) continue;
        if (carry && name.startsWith(from) && store.getItem(`${PREFIX}${key}:${name.slice(from.length)}`) == null) {
          store.setItem(`${PREFIX}${key}:${name.slice(from.length)}`, store.getItem(name));
        }
        store.removeItem(name);  // another learner's, or from before copies were keyed by learner
      }
    }
    store.setItem(OWNER, JSON.stringify({ key, signedIn: Boolean(signedIn) }));
  }

  /** One learner's copies for one exercise. */
  class LearnerStore {
    constructor(key, slug) {
      this.key = key;
      this.slug = slug;
    }

    get(kind) {
      const store = storage();
      return store ? read(store, `${PREFIX}${this.key}:${kind}:${this.slug}`) : null;
    }

    set(kind, value) {
      const store = storage();
      try {
        if (store) store.setItem(`${PREFIX}${this.key}:${kind}:${this.slug}`, JSON.stringify(value));
      } catch (e) { /* storage full: the server still keeps every submitted code */ }
    }
  }

  /** Forget every copy kept by the course in this browser (log-out). */
  function clearAll() {
    const store = storage();
    if (!store) return;
    for (const name of names(store)) if (name.startsWith(PREFIX)) store.removeItem(name);
  }

  ns.Store = { adopt, clearAll, forLearner: (key, slug) => new LearnerStore(key, slug) };
})();
