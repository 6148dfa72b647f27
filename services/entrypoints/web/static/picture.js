// A run as a picture: the waterfall (SVG, one row per lane, a bar per model
// request, tool call and acceptance pass, cut into its approval, lock wait and
// run) and the conversation turn by turn. Plain DOM and SVG, no build step.
"use strict";
const SVG = "http://www.w3.org/2000/svg";
const LANE_H = 24, LABEL_W = 90, AXIS_H = 18, RIGHT_W = 150;

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

function seconds(s) {
  if (s === null || s === undefined) return "running";
  return s < 1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(2)} s`;
}

function tickStep(span) {
  for (const step of [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 600, 1800, 3600])
    if (span / step <= 10) return step;
  return 7200;
}

// the bar's text: what it is, how long (so far, while open), and a model request's tokens and cost
function barText(b, now) {
  if (b.end === null) return `${b.label} ${b.kind === "model" ? "answering" : "running"}… ${seconds(now - b.start)}`;
  const money = b.kind === "model" ? ` ${b.input_tokens}+${b.output_tokens} tok $${Number(b.cost_usd).toFixed(4)}` : "";
  return `${b.label} ${seconds(b.duration_s)}${money}${b.error ? " ✗" : ""}`;
}

const CHAR_W = 6.7;  // of the 11px monospace labels

function drawWaterfall(box, w, picked, onPick) {
  if (!w || !w.bars.length) { box.replaceChildren(document.createTextNode("no bars yet")); return; }
  const now = Date.now() / 1000;
  const end = w.end ?? Math.max(now, ...w.bars.map((b) => b.end ?? b.start));
  const span = Math.max(end - w.start, 0.001);
  const width = Math.max(box.clientWidth || 900, 600);
  const plot = width - LABEL_W - RIGHT_W;
  const x = (t) => LABEL_W + ((t - w.start) / span) * plot;
  x.right = width;
  const height = AXIS_H + w.lanes.length * LANE_H + 4;
  const root = svg("svg", { width, height, role: "img", "aria-label": "waterfall of the run" });
  const step = tickStep(span);
  for (let t = 0; t <= span + 1e-9; t += step) {
    root.append(svg("line", { class: "tick", x1: x(w.start + t), x2: x(w.start + t), y1: AXIS_H - 4, y2: height }));
    root.append(svg("text", { class: "tick-label", x: x(w.start + t) + 2, y: 11 }, seconds(t)));
  }
  w.lanes.forEach((name, i) =>
    root.append(svg("text", { class: "lane-name", x: 4, y: AXIS_H + i * LANE_H + 15, "data-lane": i }, name)));
  for (const m of w.marks)
    root.append(svg("line", { class: "mark", x1: x(m.at), x2: x(m.at), y1: AXIS_H, y2: height, "data-type": m.type },
    ));
  for (const b of w.bars) root.append(barNode(b, x, now, picked, onPick));
  const took = w.end === null ? `running for ${seconds(now - w.start)}` : `took ${seconds(w.end - w.start)}`;
  const caption = el("p", { class: "caption" }, `${took}; model requests cost $${Number(w.cost_usd).toFixed(4)}; ` +
    `${w.bars.filter((b) => b.kind === "tool").length} tool calls on ${w.lanes.length - 2} lanes — click a bar for its events`);
  box.replaceChildren(caption, root);
}

function barNode(b, x, now, picked, onPick) {
  const y = AXIS_H + b.lane * LANE_H;
  const g = svg("g", {
    class: `bar ${b.kind}${b.error ? " error" : ""}${picked === b.key ? " selected" : ""}`,
    "data-key": b.key, "data-kind": b.kind, "data-lane": b.lane, "data-start": b.start,
    "data-end": b.end ?? "", "data-call": b.call_id ?? "", "data-label": b.label,
  });
  const end = b.end ?? now;
  g.append(svg("line", { class: "span", x1: x(b.start), x2: x(end), y1: y + 11, y2: y + 11 }));
  for (const s of b.segments) {
    const sEnd = s.end ?? now;
    g.append(svg("rect", {
      class: `${s.phase}${s.end === null ? " open" : ""}`, "data-phase": s.phase,
      "data-start": s.start, "data-end": s.end ?? "", "data-waiting-for": s.waiting_for.join(" "),
      x: x(s.start), y: y + 4, width: Math.max(x(sEnd) - x(s.start), 2), height: LANE_H - 8,
    }));
  }
  const said = barText(b, now);
  const title = svg("title", {}, said + (b.error ? `\n${b.error}` : ""));
  // the label after the bar; else before it; else (a bar as wide as the picture) inside it
  const wide = said.length * CHAR_W;
  const at = x(end) + 4 + wide <= x.right ? { x: x(end) + 4 }
    : x(b.start) - 4 - wide >= LABEL_W ? { x: x(b.start) - 4, "text-anchor": "end" }
    : { x: x(b.start) + 4, class: "label inside" };
  const label = svg("text", { class: "label", y: y + 15, ...at }, said);
  g.append(title, label);
  g.addEventListener("click", () => onPick(b));
  return g;
}

// a bar's own page: what it is, its segments, and the log entries it stands for
function barDetail(box, b, lineOf) {
  const parts = [el("b", {}, b.label), ` — ${b.kind}, turn ${b.turn}, ${seconds(b.duration_s)}`];
  if (b.kind === "model") parts.push(`, ${b.input_tokens} in + ${b.output_tokens} out tokens, $${Number(b.cost_usd).toFixed(6)}`);
  if (b.error) parts.push(el("span", { class: "failed" }, ` — ${b.error}`));
  const segs = b.segments.map((s) => `${s.phase} ${seconds(s.end === null ? null : s.end - s.start)}` +
    (s.waiting_for.length ? ` (waiting for ${s.waiting_for.join(", ")})` : ""));
  box.replaceChildren(el("div", {}, ...parts), el("div", { class: "segments" }, segs.join(" · ")),
    el("pre", { class: "events" }, b.seqs.map(lineOf).join("\n")));
  box.hidden = false;
}

function blockNode(block) {
  switch (block.type) {
    case "text": return el("div", { class: "block text" }, block.text);
    case "tool_use": return el("div", { class: "block tool-use" }, `→ ${block.name}(${JSON.stringify(block.input)}) [${block.id}]`);
    case "thinking": return el("details", { class: "block thinking" }, el("summary", {}, "thinking"), block.thinking ?? "");
    default: return el("div", { class: "block other" }, `[${block.type}] ${JSON.stringify(block).slice(0, 300)}`);
  }
}

function showTurns(box, p) {
  const items = [el("div", { class: "turn user" }, el("b", {}, "task "), p.task)];
  for (const t of p.turns) {
    const calls = t.calls.map((c) => el("div", { class: `result ${c.error ? "failed" : ""}`, "data-call": c.call_id },
      `${c.call_id} ${c.name} ${c.status}: ` + (c.error ?? (c.output === null ? "" : JSON.stringify(c.output)))));
    items.push(el("div", { class: "turn", "data-turn": t.turn },
      el("div", {}, el("b", {}, `turn ${t.turn}`), ` — ${t.model}, stopped: ${t.stop_reason}`),
      ...t.content.map(blockNode), ...calls,
      t.feedback ? el("div", { class: "block feedback" }, `acceptance said: ${t.feedback}`) : ""));
  }
  box.replaceChildren(...items);
}
