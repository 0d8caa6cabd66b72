// ragsweep label: the page. Plain JavaScript, no framework, nothing fetched from elsewhere.
// Offsets are code points (Python's str indices), not UTF-16 units: every conversion goes
// through Array.from(), which splits a string into code points.
"use strict";

const $ = (id) => document.getElementById(id);
const app = {
  state: null,        // /api/state
  doc: null,          // {id, title, text, chars}
  spans: [],          // the form's evidence: {doc, start, end}
  editing: null,      // id of the case being edited (null: a new case)
  draft: null,        // id of the draft being reviewed
  keep: null,         // the record being edited, its other fields kept
  selection: null,    // the last selection inside the document: {doc, start, end}
  choices: [],        // quotes that occur several times: {doc, matches}
};

async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: body ? {"Content-Type": "application/json"} : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const data = await response.json();
  if (!response.ok) {
    const error = new Error(data.error || response.statusText);
    error.conflict = Boolean(data.conflict);
    throw error;
  }
  return data;
}

function codePoints(text) { return Array.from(text).length; }

function say(text) { $("message").textContent = text; }

function showError(error) {
  $("error").textContent = error ? error.message : "";
  $("reload").hidden = !(error && error.conflict);
}

// --- documents ------------------------------------------------------------------------

async function listDocs() {
  const hits = await api("GET", "/api/docs?q=" + encodeURIComponent($("search").value));
  const list = $("doc-list");
  list.replaceChildren();
  for (const hit of hits) {
    const item = document.createElement("li");
    item.dataset.doc = hit.id;
    item.textContent = (hit.title ? hit.title + " — " : "") + hit.id + ` (${hit.length} chars)`;
    if (hit.snippet) {
      const snippet = document.createElement("div");
      snippet.className = "snippet";
      snippet.textContent = `@${hit.offset}: …${hit.snippet}…`;
      item.append(snippet);
    }
    item.addEventListener("click", () => openDoc(hit.id, hit.offset));
    list.append(item);
  }
}

async function openDoc(docId, offset) {
  $("doc-title").textContent = `Loading ${docId}…`;
  app.selection = null;
  $("add-span").disabled = true;
  $("selection-info").textContent = "";
  const doc = await api("GET", "/api/doc/" + encodeURIComponent(docId));
  doc.chars = Array.from(doc.text);
  app.doc = doc;
  $("doc-title").textContent = (doc.title ? doc.title + " — " : "") + doc.id;
  for (const item of $("doc-list").children) {
    item.classList.toggle("current", item.dataset.doc === doc.id);
  }
  renderDoc();
  $("occurrences").replaceChildren();
  if (offset !== undefined && offset !== null) scrollToOffset(offset);
}

function renderDoc() {
  const pre = $("doc-text");
  pre.replaceChildren();
  if (!app.doc) return;
  const marks = app.spans.filter((s) => s.doc === app.doc.id).sort((a, b) => a.start - b.start);
  let at = 0;
  for (const span of marks) {
    if (span.start < at) continue;  // overlapping spans: the first one is shown
    pre.append(document.createTextNode(app.doc.chars.slice(at, span.start).join("")));
    const mark = document.createElement("mark");
    mark.className = "current-evidence";
    mark.dataset.start = span.start;
    mark.textContent = app.doc.chars.slice(span.start, span.end).join("");
    pre.append(mark);
    at = span.end;
  }
  pre.append(document.createTextNode(app.doc.chars.slice(at).join("")));
}

function scrollToOffset(offset) {
  const mark = document.querySelector(`#doc-text mark[data-start="${offset}"]`);
  if (mark) { mark.scrollIntoView({block: "center"}); return; }
  const pre = $("doc-text");
  const total = app.doc.chars.length || 1;
  pre.parentElement.scrollTop = pre.offsetTop + (pre.scrollHeight * offset) / total - 100;
}

// The selection as code-point offsets into the document's text: the length of the text
// from the start of the <pre> to each end of the selection.
function selectionOffsets() {
  const selection = window.getSelection();
  if (!app.doc || !selection.rangeCount || selection.isCollapsed) return null;
  const range = selection.getRangeAt(0);
  const pre = $("doc-text");
  if (!pre.contains(range.startContainer) || !pre.contains(range.endContainer)) return null;
  const before = document.createRange();
  before.setStart(pre, 0);
  before.setEnd(range.startContainer, range.startOffset);
  const start = codePoints(before.toString());
  const end = start + codePoints(range.toString());
  return end > start ? {doc: app.doc.id, start, end} : null;
}

function onSelectionChange() {
  const offsets = selectionOffsets();
  if (!offsets) return;  // keep the last selection when the button takes the focus
  app.selection = offsets;
  const text = app.doc.chars.slice(offsets.start, offsets.end).join("");
  $("selection-info").textContent = `[${offsets.start}, ${offsets.end}) “${text.slice(0, 60)}”`;
  $("add-span").disabled = false;
}

function addSpan(span) {
  const same = (s) => s.doc === span.doc && s.start === span.start && s.end === span.end;
  if (!app.spans.some(same)) app.spans.push(span);
  app.selection = null;
  $("add-span").disabled = true;
  $("selection-info").textContent = "";
  window.getSelection().removeAllRanges();
  renderSpans();
  renderDoc();
}

// A quote typed or pasted: found as the loader finds quotes; several matches ask which.
async function findQuote() {
  if (!app.doc) return;
  const quote = $("quote-find").value;
  const found = await api("GET", `/api/quote?doc=${encodeURIComponent(app.doc.id)}&q=${encodeURIComponent(quote)}`);
  if (found.matches.length === 1) {
    const [start, end] = found.matches[0];
    addSpan({doc: app.doc.id, start, end});
    say("quote found once: added");
  } else if (!found.matches.length) {
    showError(new Error(found.problem || "quote not found"));
  } else {
    showChoices($("occurrences"), app.doc.id, found.matches);
  }
}

function showChoices(list, docId, matches, chars) {
  list.replaceChildren();
  const header = document.createElement("li");
  header.textContent = `This quote occurs ${matches.length} times in ${docId}: which one is the evidence?`;
  list.append(header);
  matches.forEach(([start, end], index) => {
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.className = "occurrence";
    button.textContent = `occurrence ${index + 1} at ${start}`;
    const source = chars || (app.doc && app.doc.id === docId ? app.doc.chars : null);
    const context = source ? source.slice(Math.max(0, start - 40), end + 40).join("") : "";
    button.title = context;
    button.addEventListener("click", () => { addSpan({doc: docId, start, end}); list.replaceChildren(); });
    item.append(button, document.createTextNode(" …" + context.replace(/\s+/g, " ") + "…"));
    list.append(item);
  });
}

// --- the form -------------------------------------------------------------------------

function renderSpans() {
  const list = $("spans");
  list.replaceChildren();
  app.spans.forEach((span, index) => {
    const item = document.createElement("li");
    const show = document.createElement("a");
    show.href = "#";
    show.textContent = `${span.doc} [${span.start}, ${span.end})`;
    show.addEventListener("click", (event) => { event.preventDefault(); jumpTo(span); });
    const remove = document.createElement("button");
    remove.textContent = "remove";
    remove.addEventListener("click", () => { app.spans.splice(index, 1); renderSpans(); renderDoc(); });
    item.append(show, " ", remove);
    list.append(item);
  });
  if (app.spans.length) $("answerable").checked = true;
}

async function jumpTo(span) {
  if (!app.doc || app.doc.id !== span.doc) await openDoc(span.doc);
  renderDoc();
  scrollToOffset(span.start);
}

function fillForm(view, asDraft) {
  const record = view.record || {};
  app.keep = record;
  app.editing = asDraft ? null : view.id;
  app.draft = asDraft ? view.id : null;
  app.spans = view.spans.slice();
  $("form-title").textContent = asDraft ? `Draft ${view.id}` : `Case ${view.id}`;
  $("case-id").value = record.id || "";
  $("question").value = record.question || "";
  $("type").value = record.type || "";
  $("split").value = record.split || "";
  $("answerable").checked = record.answerable !== false;
  $("delete").hidden = asDraft;
  $("accept").hidden = $("reject").hidden = !asDraft;
  $("save").hidden = asDraft;
  renderSpans();
  const choices = $("pending-choices");
  choices.replaceChildren();
  for (const item of view.ambiguous || []) showChoices(choices, item.doc, item.matches);
  showError(view.problem ? new Error(view.problem) : null);
  if (app.spans.length) jumpTo(app.spans[0]); else renderDoc();
}

function clearForm() {
  fillForm({record: null, id: null, spans: [], ambiguous: []}, false);
  $("form-title").textContent = "New case";
  $("delete").hidden = true;
  $("answerable").checked = true;
}

function formData() {
  return {
    id: $("case-id").value,
    question: $("question").value,
    type: $("type").value,
    split: $("split").value,
    answerable: $("answerable").checked,
    spans: app.spans,
    keep: app.keep,
  };
}

async function change(action) {
  try {
    const result = await action();
    showError(null);
    setState(result);
    return result;
  } catch (error) {
    showError(error);
    return null;
  }
}

async function save() {
  const result = await change(() => api("POST", "/api/case", {
    form: formData(), replaces: app.editing, digest: app.state.golden.digest,
  }));
  if (result) { say(`saved ${result.saved}`); clearForm(); }
}

async function removeCase() {
  if (!app.editing || !confirm(`Delete case ${app.editing}?`)) return;
  const id = app.editing;
  const result = await change(() => api("POST", "/api/delete", {id, digest: app.state.golden.digest}));
  if (result) { say(`deleted ${id}`); clearForm(); }
}

async function review(accepted) {
  const body = {draft: app.draft, digest: app.state.golden.digest, drafts_digest: app.state.drafts.digest};
  const path = accepted ? "/api/accept" : "/api/reject";
  const id = app.draft;
  const result = await change(() => api("POST", path, accepted ? {...body, form: formData()} : body));
  if (result) { say(`${accepted ? "accepted" : "rejected"} draft ${id}`); clearForm(); }
}

// --- the lists ------------------------------------------------------------------------

function caseRows(table, views, asDraft) {
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const view of views) {
    const row = body.insertRow();
    row.dataset.id = view.id || "";
    row.classList.toggle("problem", Boolean(view.problem));
    row.classList.toggle("changed", view.changed && view.changed.length > 0);
    row.insertCell().textContent = view.id || `line ${view.line}`;
    const cell = row.insertCell();
    cell.textContent = view.record ? view.record.question || "" : "";
    const flags = [];
    if (view.problem) flags.push(view.problem);
    if (view.ambiguous && view.ambiguous.length) flags.push("a quote occurs several times: pick the occurrence");
    if (view.changed && view.changed.length) flags.push(`changed since labelled: ${view.changed.join(", ")}`);
    for (const text of flags) {
      const flag = document.createElement("span");
      flag.className = "flag";
      flag.textContent = text;
      cell.append(flag);
    }
    row.insertCell().textContent = view.record ? [view.record.type, view.record.split].filter(Boolean).join(" / ") : "";
    row.addEventListener("click", () => fillForm(view, asDraft));
  }
}

function statsRows(stats) {
  const body = $("stats").tBodies[0];
  body.replaceChildren();
  for (const r of stats.rows) {
    const row = body.insertRow();
    const detectable = r.detectable === null ? "none" : r.detectable.toFixed(3);
    for (const value of [r.split, r.type, r.answerable, r.unanswerable, detectable]) row.insertCell().textContent = value;
  }
  $("stats-note").textContent = `${stats.checked} cases pass every check (${stats.drafted} drafted and accepted); ` +
    `detectable difference: the smallest paired difference of a 0/1 metric a ${stats.assumptions} detects.`;
}

function setState(state) {
  app.state = state;
  $("golden-path").textContent = `${state.golden.path} (${state.golden.cases.length} lines)`;
  $("case-count").textContent = `(${state.golden.cases.length})`;
  $("draft-count").textContent = `(${state.drafts.cases.length})`;
  caseRows($("cases"), state.golden.cases, false);
  caseRows($("drafts"), state.drafts.cases, true);
  statsRows(state.stats);
  const types = new Set(["factual", "procedural", "multi-document", "unanswerable", ...state.types]);
  $("types").replaceChildren(...[...types].map((t) => Object.assign(document.createElement("option"), {value: t})));
}

async function reload() {
  try {
    setState(await api("GET", "/api/state"));
    showError(null);
  } catch (error) {
    showError(error);
  }
}

function start() {
  document.addEventListener("selectionchange", onSelectionChange);
  $("search").addEventListener("input", listDocs);
  $("add-span").addEventListener("click", () => { if (app.selection) addSpan(app.selection); });
  $("quote-go").addEventListener("click", findQuote);
  $("save").addEventListener("click", save);
  $("new").addEventListener("click", clearForm);
  $("delete").addEventListener("click", removeCase);
  $("accept").addEventListener("click", () => review(true));
  $("reject").addEventListener("click", () => review(false));
  $("reload").addEventListener("click", reload);
  listDocs();
  reload().then(() => document.body.dataset.ready = "1");
}

start();
