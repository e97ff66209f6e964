// sepipe dashboard: fetches api/panels and draws each panel as SVG. Every
// text from a panel file or the warehouse goes in as textContent, never as
// markup.
"use strict";

const NS = "http://www.w3.org/2000/svg";
const palette = ["#2f6fde", "#e0782b", "#2e9e6a", "#9b51e0", "#d6455d", "#3bb3c3", "#8a8f9c", "#c9a227"];
const fmt = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });
const small = new Intl.NumberFormat("en-US", { maximumSignificantDigits: 2 }); // |v| < 1: 0.043, not 0

function el(tag, attrs = {}, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function sv(tag, attrs = {}, text) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

function num(v) { return typeof v === "number" ? v : (v === null || v === "" ? NaN : Number(v)); }
function show(v) {
  if (typeof v === "number") return (v !== 0 && Math.abs(v) < 1 ? small : fmt).format(v);
  return v === null ? "–" : String(v);
}
function col(p, name) { return p.columns.findIndex((c) => c.toLowerCase() === name.toLowerCase()); }

function legend(names) {
  const box = el("div", { class: "legend" });
  names.forEach((n, i) => {
    const item = el("span", { class: "key" });
    const s = sv("svg", { width: 10, height: 10, viewBox: "0 0 10 10" });
    s.appendChild(sv("rect", { width: 10, height: 10, rx: 2, fill: palette[i % palette.length] }));
    item.appendChild(s);
    item.appendChild(document.createTextNode(" " + n));
    box.appendChild(item);
  });
  return box;
}

// Axis ticks from 0 to a round maximum, at steps of 1, 2, 2.5 or 5 × 10^k;
// when every value is whole (counts), only whole steps of at least 1: a
// count of 9 had ticks of 2.5 and 7.5. Rates of 0.004 keep steps of 0.001.
function scale(values) {
  let max = values.reduce((m, v) => Math.max(m, v), 0);
  if (!(max > 0)) max = 1;
  const whole = values.every(Number.isInteger);
  const raw = max / 4, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  let step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw && (!whole || Number.isInteger(s)));
  if (whole) step = Math.max(step, 1);
  const top = Math.ceil(max / step) * step;
  const ticks = [];
  for (let i = 0; i * step <= top + step / 2; i++) ticks.push(i * step);
  return { top, ticks };
}

function numbers(p, box) {
  const row = p.rows && p.rows[0] ? p.rows[0] : [];
  const wrap = el("div", { class: "numbers" });
  p.columns.forEach((c, i) => {
    const item = el("div", { class: "number" });
    item.appendChild(el("div", { class: "value", "data-column": c, "data-value": String(row[i]) }, show(row[i])));
    item.appendChild(el("div", { class: "label" }, c.replace(/_/g, " ")));
    wrap.appendChild(item);
  });
  box.appendChild(wrap);
  return p.columns.length;
}

function table(p, box) {
  const t = el("table");
  const head = el("tr");
  p.columns.forEach((c) => head.appendChild(el("th", {}, c)));
  t.appendChild(head);
  (p.rows || []).forEach((r) => {
    const tr = el("tr");
    r.forEach((v) => tr.appendChild(el("td", typeof v === "number" ? { class: "num" } : {}, show(v))));
    t.appendChild(tr);
  });
  box.appendChild(t);
  return (p.rows || []).length;
}

function bars(p, box) {
  const xi = col(p, p.x);
  const ys = p.y.map((y) => col(p, y));
  const rows = p.rows || [];
  const band = 8 + 12 * ys.length, left = 170, width = 640, right = 60;
  const height = 24 + rows.length * band;
  const sc = scale(rows.flatMap((r) => ys.map((i) => num(r[i])).filter((v) => !isNaN(v))));
  const s = sv("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": p.title });
  sc.ticks.forEach((t) => {
    const x = left + ((width - left - right) * t) / sc.top;
    s.appendChild(sv("line", { x1: x, x2: x, y1: 0, y2: height - 18, stroke: "#e2e5ea" }));
    s.appendChild(sv("text", { x, y: height - 4, "text-anchor": "middle", class: "tick" }, show(t)));
  });
  let marks = 0;
  rows.forEach((r, k) => {
    const y0 = 4 + k * band;
    const label = String(r[xi] ?? "–");
    s.appendChild(sv("text", { x: left - 6, y: y0 + band / 2, "text-anchor": "end", "dominant-baseline": "middle" },
      label.length > 24 ? label.slice(0, 23) + "…" : label));
    ys.forEach((i, j) => {
      const v = num(r[i]);
      const w = isNaN(v) ? 0 : ((width - left - right) * v) / sc.top;
      const bar = sv("rect", { x: left, y: y0 + j * 12, width: Math.max(w, 0), height: 10, rx: 2,
        fill: palette[j % palette.length], "data-value": String(r[i]) });
      bar.appendChild(sv("title", {}, `${label} · ${p.y[j]}: ${show(r[i])}`));
      s.appendChild(bar);
      s.appendChild(sv("text", { x: left + w + 4, y: y0 + j * 12 + 5, "dominant-baseline": "middle" }, show(r[i])));
      marks++;
    });
  });
  box.appendChild(s);
  if (ys.length > 1) box.appendChild(legend(p.y));
  return marks;
}

function lines(p, box) {
  const xi = col(p, p.x);
  const rows = p.rows || [];
  // x in order: numbers by value (hours 2 before 10), days and text as text.
  const xv = new Map(rows.map((r) => [String(r[xi]), r[xi]]));
  const byValue = [...xv.values()].every((v) => typeof v === "number");
  const xs = [...xv.keys()].sort(byValue ? (a, b) => xv.get(a) - xv.get(b) : undefined);
  let series; // [{name, points: Map x -> value}]
  if (p.series) {
    const si = col(p, p.series), yi = col(p, p.y[0]);
    const by = new Map();
    rows.forEach((r) => {
      const name = String(r[si]);
      if (!by.has(name)) by.set(name, new Map());
      by.get(name).set(String(r[xi]), num(r[yi]));
    });
    series = [...by.entries()].map(([name, points]) => ({ name, points }));
  } else {
    series = p.y.map((y) => {
      const yi = col(p, y);
      return { name: y, points: new Map(rows.map((r) => [String(r[xi]), num(r[yi])])) };
    });
  }
  const left = 56, right = 16, top = 10, width = 640, height = 240, bottom = 28;
  const sc = scale(series.flatMap((s) => [...s.points.values()].filter((v) => !isNaN(v))));
  const X = (i) => left + (xs.length < 2 ? (width - left - right) / 2 : ((width - left - right) * i) / (xs.length - 1));
  const Y = (v) => top + (height - top - bottom) * (1 - v / sc.top);
  const s = sv("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": p.title });
  sc.ticks.forEach((t) => {
    s.appendChild(sv("line", { x1: left, x2: width - right, y1: Y(t), y2: Y(t), stroke: "#e2e5ea" }));
    s.appendChild(sv("text", { x: left - 6, y: Y(t), "text-anchor": "end", "dominant-baseline": "middle", class: "tick" }, show(t)));
  });
  const every = Math.max(1, Math.ceil(xs.length / 8));
  xs.forEach((x, i) => {
    if (i % every === 0 || i === xs.length - 1) {
      const anchor = xs.length > 1 && i === xs.length - 1 ? "end" : (xs.length > 1 && i === 0 ? "start" : "middle");
      s.appendChild(sv("text", { x: X(i), y: height - 8, "text-anchor": anchor }, x));
    }
  });
  let marks = 0;
  series.forEach((ser, j) => {
    const color = palette[j % palette.length];
    const pts = xs.map((x, i) => [i, ser.points.get(x)]).filter(([, v]) => v !== undefined && !isNaN(v));
    if (pts.length > 1) {
      s.appendChild(sv("path", { d: pts.map(([i, v], k) => `${k ? "L" : "M"}${X(i).toFixed(1)},${Y(v).toFixed(1)}`).join(" "),
        fill: "none", stroke: color, "stroke-width": 2 }));
    }
    pts.forEach(([i, v]) => {
      const c = sv("circle", { cx: X(i), cy: Y(v), r: 3, fill: color, "data-value": String(v) });
      c.appendChild(sv("title", {}, `${ser.name} · ${xs[i]}: ${show(v)}`));
      s.appendChild(c);
      marks++;
    });
  });
  box.appendChild(s);
  box.appendChild(legend(series.map((x) => x.name)));
  return marks;
}

function render(p) {
  const box = el("section", { class: "panel " + p.kind, "data-name": p.name, "data-kind": p.kind });
  box.appendChild(el("h2", {}, p.title));
  if (p.question) box.appendChild(el("p", { class: "question muted" }, p.question));
  if (p.error) {
    box.dataset.state = "error";
    box.appendChild(el("pre", { class: "error" }, p.error));
    return box;
  }
  let marks = 0;
  if (p.missing) {
    box.dataset.state = "missing";
    box.appendChild(el("p", { class: "muted" }, `No data yet: the warehouse has no table ${p.missing}.`));
    return box;
  }
  if (!p.rows || p.rows.length === 0) {
    box.appendChild(el("p", { class: "muted" }, "No rows for these filters."));
  } else if (p.kind === "number") marks = numbers(p, box);
  else if (p.kind === "table") marks = table(p, box);
  else if (p.kind === "bar") marks = bars(p, box);
  else if (p.kind === "line") marks = lines(p, box);
  box.dataset.state = "ok";
  box.dataset.marks = String(marks);
  box.dataset.rows = String((p.rows || []).length);
  if (p.truncated) {
    box.dataset.truncated = p.truncated_by || "rows";
    const n = (p.rows || []).length.toLocaleString("en");
    const why = p.truncated_by === "bytes"
      ? `the answer reached the dashboard's bound of ${Math.round((p.truncated_at || 0) / 1024).toLocaleString("en")} KiB for one panel`
      : `a panel shows at most ${(p.truncated_at || 1000).toLocaleString("en")} rows`;
    box.appendChild(el("p", { class: "muted truncated" }, `Only the first ${n} rows are shown: ${why}. Aggregate in the panel's SQL, or query the warehouse with sepipe query.`));
  }
  return box;
}

function fillSelect(sel, values, current) {
  for (const v of values) {
    const o = el("option", { value: v }, v);
    if (v === current) o.selected = true;
    sel.appendChild(o);
  }
}

async function main() {
  const params = new URLSearchParams(location.search);
  const form = document.getElementById("filters");
  for (const k of ["from", "to"]) form.elements[k].value = params.get(k) || "";
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const k of ["from", "to", "team", "region"]) if (form.elements[k].value) q.set(k, form.elements[k].value);
    location.search = q.toString();
  });
  const status = document.getElementById("status");
  try {
    let res;
    // A dashboard busy writing to other viewers answers 503 with
    // Retry-After: wait and ask again, a few times.
    for (let attempt = 0; ; attempt++) {
      res = await fetch("api/panels?" + params.toString(), { cache: "no-store" });
      const wait = Number(res.headers.get("Retry-After"));
      if (res.status !== 503 || !wait || attempt >= 5) break;
      status.textContent = "The dashboard is busy; trying again…";
      await new Promise((ok) => setTimeout(ok, wait * 1000));
    }
    const ans = await res.json();
    if (!res.ok) throw new Error(ans.error || res.statusText);
    fillSelect(form.elements.team, ans.options.teams, params.get("team"));
    fillSelect(form.elements.region, ans.options.regions, params.get("region"));
    if (ans.options.min_day) { form.elements.from.min = form.elements.to.min = ans.options.min_day; }
    if (ans.options.max_day) { form.elements.from.max = form.elements.to.max = ans.options.max_day; }
    document.getElementById("source").textContent = `${ans.warehouse} · published ${new Date(ans.published_at).toLocaleString()}`;
    const main = document.getElementById("panels");
    for (const p of ans.panels) main.appendChild(render(p));
    const failed = ans.panels.filter((p) => p.error).length;
    status.textContent = `${ans.panels.length} panels` + (failed ? `, ${failed} failed` : "");
    document.body.dataset.ready = "true";
  } catch (e) {
    status.textContent = "Could not load the dashboard: " + e.message;
    status.className = "error";
    document.body.dataset.ready = "error";
  }
}

main();
