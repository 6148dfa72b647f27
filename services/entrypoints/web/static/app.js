// agentledger's web view: plain DOM, no build step. Data from /api/…, live
// through server-sent events; the buttons post controls (only when the view was
// started with a publisher identity, `agentledger ui --as NAME`).
"use strict";
const STATUSES = ["requesting_model", "validating", "running_tools", "accepting", "awaiting_approval",
  "awaiting_human", "cancelling", "completed", "failed", "budget_exhausted", "timeout", "cancelled"];
let CONFIG = { read_only: true, publisher: null };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c ?? "")));
  return node;
}

function age(iso) {
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 90) return `${Math.round(s)}s`;
  if (s < 5400) return `${Math.round(s / 60)}m`;
  if (s < 172800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86400)}d`;
}

// signed out (the session ended, the token changed): back to the sign-in page, then here
function signInAgain() {
  location.replace(`/signin?next=${encodeURIComponent(location.pathname + location.search)}`);
}

async function stillSignedIn() {
  const reply = await fetch("/api/config", { credentials: "same-origin" });
  if (reply.status === 401) signInAgain();
}

function notice(text, isError) {
  const n = document.getElementById("notice");
  n.textContent = text;
  n.className = isError ? "error" : "";
}

async function control(runId, action, extra = {}) {
  notice(`${action}…`, false);
  const reply = await fetch(`/api/runs/${encodeURIComponent(runId)}/control`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ action, ...extra }), credentials: "same-origin",
  });
  if (reply.status === 401) { signInAgain(); return; }
  const body = await reply.json();
  if (reply.ok) notice(`${action}: recorded ${body.events.join(", ")}`, false);
  else notice(`${action} refused: ${body.message}`, true);
}

function button(label, cls, onclick) {
  const b = el("button", { class: cls, type: "button", onclick });
  b.textContent = label;
  if (CONFIG.read_only) { b.disabled = true; b.title = "read-only: start `agentledger ui --as NAME` to act"; }
  return b;
}

function approvalBox(runId, call) {
  const note = el("input", { class: "note", placeholder: "note (optional)" });
  return el("div", { class: "wait approval", "data-call": call.call_id },
    `${call.call_id} ${call.name}(${JSON.stringify(call.input)}) waits for approval `,
    call.reason ? `— ${call.reason} ` : "",
    note,
    button("Approve", "approve", () => control(runId, "approve", { call_id: call.call_id, text: note.value })),
    button("Deny", "deny", () => control(runId, "deny", { call_id: call.call_id, text: note.value })));
}

function humanBox(runId, detail) {
  const text = el("input", { class: "reply-text", placeholder: "guidance for the model", size: 50 });
  return el("div", { class: "wait human" }, `waits for a person: ${detail} `, text,
    button("Reply", "reply", () => control(runId, "reply", { text: text.value })),
    button("Resume", "resume", () => control(runId, "resume")),
    button("Abort", "abort", () => control(runId, "abort")));
}

function showMode() {
  const m = document.getElementById("mode");
  m.textContent = CONFIG.read_only ? "read-only: start `agentledger ui --as NAME` to approve, deny or reply"
    : `acting as ${CONFIG.publisher}`;
  if (CONFIG.read_only) m.classList.add("readonly");
}

// ---- the runs list ---------------------------------------------------------
// page 1 is live (a stream); older pages are read once, by the token of the page before
function indexPage() {
  const select = document.getElementById("f-status");
  for (const s of STATUSES) select.append(el("option", { value: s }, s));
  const fields = ["text", "tenant", "tool", "since", "until"].map((f) => document.getElementById(`f-${f}`));
  let source = null, rows = [], tokens = [null], next = null;
  const render = () => {
    const body = document.querySelector("#runs tbody");
    body.replaceChildren(...rows.map((r) => el("tr", { "data-run": r.run_id },
      el("td", {}, el("a", { href: `/runs/${encodeURIComponent(r.run_id)}` }, r.run_id)),
      el("td", { class: `status ${r.status}` }, r.status),
      el("td", {}, r.tenant),
      el("td", { class: "num" }, r.turns),
      el("td", { class: "num" }, `$${Number(r.cost_usd).toFixed(4)}`),
      el("td", { class: "num" }, age(r.created_at)),
      el("td", { class: "num" }, `${Number(r.duration_s).toFixed(1)}s`),
      el("td", {}, r.task))));
    document.getElementById("older").disabled = !next;
    document.getElementById("newer").disabled = tokens.length < 2;
    const searching = next && rows.length < Number(new URLSearchParams(location.search).get("limit") || 50)
      ? " — the search goes on: older →" : "";
    document.getElementById("page-no").textContent = (tokens.length < 2 ? "page 1 (live)" : `page ${tokens.length}`) + searching;
    const waiting = document.getElementById("waiting");
    const boxes = [];
    for (const r of rows) {
      if (r.status === "awaiting_approval")
        for (const c of r.tool_calls.filter((c) => c.status === "awaiting_approval"))
          boxes.push(el("div", {}, el("a", { href: `/runs/${r.run_id}` }, r.run_id), approvalBox(r.run_id, { ...c, input: "…" })));
      if (r.status === "awaiting_human")
        boxes.push(el("div", {}, el("a", { href: `/runs/${r.run_id}` }, r.run_id), humanBox(r.run_id, r.detail)));
    }
    waiting.replaceChildren(...(boxes.length ? boxes : [el("em", {}, "nothing waits")]));
  };
  const query = () => {
    const q = { status: select.value, q: fields[0].value, tenant: fields[1].value, tool: fields[2].value,
      since: fields[3].value, until: fields[4].value, limit: new URLSearchParams(location.search).get("limit") };
    return new URLSearchParams(Object.fromEntries(Object.entries(q).filter(([, v]) => v)));
  };
  const shown = (body) => { rows = body.runs; next = body.next; notice("", false); render(); };
  const listen = () => {
    if (source) source.close();
    tokens = [null];
    source = new EventSource(`/api/runs/stream?${query()}`);
    source.onerror = async () => {
      const reply = await fetch(`/api/runs?${query()}`, { credentials: "same-origin" });
      if (reply.status === 401) signInAgain();
      else if (!reply.ok) { source.close(); notice((await reply.json()).message, true); }
    };
    source.addEventListener("runs", (e) => { if (tokens.length === 1) shown(JSON.parse(e.data)); });
  };
  const turn = async (token) => {
    if (token === null) { listen(); return; }
    if (source) source.close();
    const q = query(); q.set("page", token);
    const reply = await fetch(`/api/runs?${q}`, { credentials: "same-origin" });
    if (reply.status === 401) { signInAgain(); return; }
    if (reply.ok) shown(await reply.json()); else notice((await reply.json()).message, true);
  };
  document.getElementById("older").addEventListener("click", () => { tokens.push(next); turn(next); });
  document.getElementById("newer").addEventListener("click", () => { tokens.pop(); turn(tokens[tokens.length - 1]); });
  select.addEventListener("change", listen);
  for (const f of fields) f.addEventListener("change", listen);
  fields[0].addEventListener("input", listen);
  setInterval(render, 1000);  // the ages move on
  listen();
}

// ---- one run ---------------------------------------------------------------
function runPage() {
  const runId = decodeURIComponent(location.pathname.split("/").pop());
  document.getElementById("run-id").textContent = runId;
  document.title = `agentledger — ${runId}`;
  const timeline = document.getElementById("timeline");
  const source = new EventSource(`/api/runs/${encodeURIComponent(runId)}/stream`);
  source.onerror = stillSignedIn;
  source.addEventListener("line", (e) => {
    const item = JSON.parse(e.data);
    if (timeline.querySelector(`[data-seq="${item.seq}"]`)) return;  // a reconnect resent it
    timeline.append(el("div", { class: "line", "data-seq": item.seq, "data-type": item.type }, item.line));
  });
  source.addEventListener("state", (e) => showRun(runId, JSON.parse(e.data)));
  const cancel = button("Cancel run", "cancel", () => control(runId, "cancel", { text: "cancelled from the web view" }));
  cancel.id = "cancel";
  document.getElementById("cancel").replaceWith(cancel);
  const lineOf = (seq) => timeline.querySelector(`[data-seq="${seq}"]`)?.textContent ?? `#${seq}`;
  let shown = null, picked = null;
  const box = document.getElementById("waterfall");
  const pick = (b) => { picked = b.key; draw(); barDetail(document.getElementById("bar-detail"), b, lineOf); };
  const draw = () => { if (shown) drawWaterfall(box, shown.waterfall, picked, pick); };
  source.addEventListener("picture", (e) => {
    shown = JSON.parse(e.data);
    draw();
    showTurns(document.getElementById("turns"), shown);
  });
  setInterval(() => { if (shown?.waterfall && shown.waterfall.end === null) draw(); }, 1000);  // open bars grow
  // what the model says while its reply streams (when its worker streams it); gone once recorded
  const said = document.getElementById("said");
  source.addEventListener("said", (e) => {
    const news = JSON.parse(e.data);
    if (shown && shown.turns.some((t) => t.turn >= news.turn)) return;
    document.getElementById("said-head").textContent = `turn ${news.turn} — the model is saying (not recorded yet):`;
    document.getElementById("said-text").textContent = news.text;
    said.dataset.turn = news.turn;
    said.hidden = false;
  });
  source.addEventListener("state", (e) => {
    if (JSON.parse(e.data).summary.status !== "requesting_model") said.hidden = true;
  });
}

function showRun(runId, view) {
  const s = view.summary;
  const status = document.getElementById("status");
  document.getElementById("cancel").hidden = ["completed", "failed", "budget_exhausted", "timeout", "cancelled", "cancelling"].includes(s.status);
  status.textContent = s.status;
  status.className = `status ${s.status}`;
  document.getElementById("summary").textContent =
    `${s.task} — principal ${s.principal}, ${s.turns} turns, $${Number(s.cost_usd).toFixed(4)}, ` +
    `${s.usage.input_tokens}+${s.usage.output_tokens} tokens, created ${s.created_at}` +
    (s.detail ? ` — ${s.detail}` : "");
  const waiting = document.getElementById("waiting");
  const boxes = view.pending_approvals.map((c) => approvalBox(runId, c));
  if (view.awaiting_human) boxes.push(humanBox(runId, view.awaiting_human.detail));
  waiting.replaceChildren(...boxes);
  document.querySelector("#calls tbody").replaceChildren(...view.calls.map((c) => el("tr", { "data-call": c.call_id },
    el("td", {}, c.call_id), el("td", { class: "num" }, c.turn),
    el("td", {}, `${c.name}(${JSON.stringify(c.input)})`), el("td", { class: `status ${c.status}` }, c.status),
    el("td", {}, Object.entries(c.locks_held).map(([r, t]) => `${r}#${t}`).join(" ")),
    el("td", {}, c.locks_waited.join(" ")),
    el("td", {}, c.error ?? (c.output === null ? "" : JSON.stringify(c.output))))));
  document.querySelector("#checks tbody").replaceChildren(...view.checks.map((k) => el("tr", {},
    el("td", {}, k.number), el("td", {}, k.check), el("td", { class: k.passed ? "completed" : "failed" }, k.passed ? "PASS" : "FAIL"),
    el("td", {}, el("code", {}, JSON.stringify(k.evidence))), el("td", {}, k.checked_at))));
}

(async () => {
  const config = await fetch("/api/config", { credentials: "same-origin" });
  if (config.status === 401) { signInAgain(); return; }
  CONFIG = await config.json();
  showMode();
  if (document.body.dataset.page === "index") indexPage(); else runPage();
})();
