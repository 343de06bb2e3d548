// Braid's dashboard: /api/history for the timeline, then a server-sent event per
// second (/api/events) with the session's snapshot: streams, queries, plan graphs.
"use strict";

const braid = (window.braid = { updates: 0, graphs: {}, samples: [] });
const fmt = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

// Counters of one sample: {t, streams: {name: rows}, queries: {n: [in, out]}}.
function sampleOf(t, snapshot) {
  const streams = {};
  for (const s of snapshot.streams) streams[s.name] = s.rows;
  const queries = {};
  let latency = null;
  for (const q of snapshot.queries) {
    queries[q.number] = [q.rows_in, q.rows_out];
    const p99 = q.latency && q.latency.p99_ms;
    if (q.state === "running" && p99 !== null && p99 !== undefined) latency = Math.max(latency ?? 0, p99);
  }
  return { t, streams, queries, latency };
}

function sum(obj, pick) {
  let total = 0;
  for (const k in obj) total += pick(obj[k]);
  return total;
}

// Rows per second between consecutive samples: ingest (all streams) and output
// (all queries).
function rates(samples) {
  const xs = [], ingest = [], output = [], latency = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1], b = samples[i];
    const dt = b.t - a.t;
    if (dt <= 0) continue;
    xs.push(b.t);
    ingest.push(Math.max(0, (sum(b.streams, (r) => r) - sum(a.streams, (r) => r)) / dt));
    output.push(Math.max(0, (sum(b.queries, (r) => r[1]) - sum(a.queries, (r) => r[1])) / dt));
    latency.push(b.latency ?? null);
  }
  return [xs, ingest, output, latency];
}

let chart = null;
function drawTimeline() {
  const data = rates(braid.samples);
  if (!chart) {
    const el = document.getElementById("timeline");
    chart = new uPlot(
      {
        width: Math.min(1100, window.innerWidth - 60),
        height: 220,
        scales: { x: { time: false }, ms: { auto: true } },
        legend: { live: false },
        axes: [
          { label: "seconds since the server started" },
          { label: "rows/s", size: 70 },
          { scale: "ms", side: 1, label: "p99 latency (ms)", size: 60, grid: { show: false } },
        ],
        series: [
          { label: "seconds" },
          { label: "rows in (all streams)", stroke: "#2b6cb0", width: 2 },
          { label: "rows out (all queries)", stroke: "#d9822b", width: 2 },
          { label: "p99 latency, worst query (ms)", stroke: "#9b2c2c", width: 1.5, dash: [4, 3], scale: "ms" },
        ],
      },
      data,
      el
    );
  } else {
    chart.setData(data);
  }
}

function rateOf(name) {
  const s = braid.samples;
  if (s.length < 2) return 0;
  const a = s[s.length - 2], b = s[s.length - 1];
  const dt = b.t - a.t;
  return dt > 0 ? Math.max(0, ((b.streams[name] || 0) - (a.streams[name] || 0)) / dt) : 0;
}

function queryRate(n, side) {
  const s = braid.samples;
  if (s.length < 2) return 0;
  const a = s[s.length - 2].queries[n], b = s[s.length - 1].queries[n];
  const dt = s[s.length - 1].t - s[s.length - 2].t;
  if (!a || !b || dt <= 0) return 0;
  return Math.max(0, (b[side] - a[side]) / dt);
}

function ms(v) {
  return v === null || v === undefined ? "–" : v.toFixed(v < 10 ? 1 : 0) + " ms";
}

function cell(text) {
  const td = document.createElement("td");
  td.textContent = text;
  return td;
}

function drawStreams(snapshot) {
  const body = document.querySelector("#streams tbody");
  body.replaceChildren();
  for (const s of snapshot.streams) {
    const tr = document.createElement("tr");
    tr.dataset.stream = s.name;
    tr.append(
      cell(s.name),
      cell(fmt.format(s.rows)),
      cell(fmt.format(rateOf(s.name))),
      cell(s.subscribers),
      cell(s.filters),
      cell(s.producers),
      cell(fmt.format(s.malformed)),
      cell(fmt.format(s.queued)),
      cell(s.made_by ? "query " + s.made_by : ""),
      cell(s.read_by.map((n) => "query " + n).join(", "))
    );
    tr.children[1].className = "rows";
    body.append(tr);
  }
}

// Busy share 0..1 as a colour from green through yellow to red; grey when unknown.
function busyColour(busy) {
  if (busy === undefined || busy === null) return "#cfd5de";
  const b = Math.max(0, Math.min(1, busy));
  const hue = 120 - 120 * b;
  return `hsl(${hue}, 70%, 60%)`;
}

// Busy share of each box since the last update: its operators' time over the wall
// time of the workers it runs on.
const lastNanos = {};
function measure(q, t) {
  for (const n of q.graph) {
    const key = q.number + "/" + n.id;
    const prev = lastNanos[key];
    n.busy = undefined;
    n.rate = undefined;
    if (prev && t > prev.t) {
      if (n.nanos !== null && n.nanos !== undefined && prev.nanos !== null) {
        n.busy = (n.nanos - prev.nanos) / 1e9 / (t - prev.t) / Math.max(1, n.on_workers);
      }
      if (n.rows_out !== null && n.rows_out !== undefined && prev.rows !== null) {
        n.rate = Math.max(0, (n.rows_out - prev.rows) / (t - prev.t));
      }
    }
    lastNanos[key] = { nanos: n.nanos ?? null, rows: n.rows_out ?? null, t };
  }
}

function labelOf(n) {
  let l = n.label;
  const figures = [];
  if (n.busy !== undefined) figures.push("busy " + Math.round(n.busy * 100) + "%");
  if (n.nanos !== null && n.nanos !== undefined) figures.push("ran " + (n.nanos / 1e9).toFixed(2) + " s");
  if (n.rate !== undefined) figures.push(fmt.format(n.rate) + " rows/s out");
  else if (n.rows_out !== null && n.rows_out !== undefined) figures.push(fmt.format(n.rows_out) + " rows out");
  if (figures.length) l += "\n" + figures.join(" · ");
  if (n.latency_ms) l += "\ndone after " + ms(n.latency_ms[0]) + " / " + ms(n.latency_ms[1]) + " (p50/p99)";
  return l;
}

// What an edge adds to latency: the p99 at its end less the p99 at its start.
// and the epochs done at its start but not yet at its end (where they queue).
function edgeLabel(q, from, to) {
  const parts = [];
  const a = q.graph[from] && q.graph[from].latency_ms, b = to.latency_ms;
  if (a && b) parts.push("+" + ms(Math.max(0, b[1] - a[1])) + " p99");
  const fa = q.graph[from] && q.graph[from].frontier, fb = to.frontier;
  if (fa !== null && fa !== undefined && fb !== null && fb !== undefined) {
    parts.push(Math.max(0, fa - fb) + " epochs queued");
  }
  return parts.join(" · ");
}

function graphElements(q) {
  const els = [];
  for (const n of q.graph) {
    els.push({
      data: { id: "n" + n.id, label: labelOf(n), kind: n.kind, busy: n.busy },
    });
    for (const i of n.inputs) {
      els.push({ data: { id: `e${i}-${n.id}`, source: "n" + i, target: "n" + n.id, label: edgeLabel(q, i, n) } });
    }
  }
  return els;
}

function positions(q) {
  const deepest = Math.max(...q.graph.map((n) => n.depth));
  const rows = {};
  for (const n of q.graph) (rows[n.depth] = rows[n.depth] || []).push(n.id);
  const at = {};
  for (const d in rows) {
    const ids = rows[d];
    ids.forEach((id, k) => {
      at["n" + id] = { x: (k - (ids.length - 1) / 2) * 190, y: (deepest - d) * 95 };
    });
  }
  return at;
}

function drawGraph(container, q) {
  const cy = cytoscape({
    container,
    elements: graphElements(q),
    userZoomingEnabled: false,
    boxSelectionEnabled: false,
    // EXPLAIN's nesting as rows, the source at the top; a Map's worker boxes side by
    // side.
    layout: { name: "preset", positions: positions(q), fit: true, padding: 12 },
    style: [
      {
        selector: "node",
        style: {
          shape: "round-rectangle",
          "background-color": (e) => busyColour(e.data("busy")),
          label: "data(label)",
          "text-wrap": "wrap",
          "text-max-width": 150,
          "text-valign": "center",
          "font-size": 9,
          width: 170,
          height: 58,
          "border-width": 1,
          "border-color": "#8a94a6",
        },
      },
      {
        selector: "edge",
        style: {
          width: 1.5,
          "line-color": "#8a94a6",
          "target-arrow-color": "#8a94a6",
          "target-arrow-shape": "triangle",
          "curve-style": "bezier",
          label: "data(label)",
          "font-size": 8,
          color: "#5b6475",
          "text-background-color": "#fff",
          "text-background-opacity": 1,
        },
      },
    ],
  });
  return cy;
}

function drawQueries(t, snapshot) {
  const box = document.getElementById("queries");
  const shown = new Set();
  for (const q of snapshot.queries) {
    if (q.state !== "running" && q.state !== "failed") continue;
    measure(q, t);
    shown.add(String(q.number));
    let card = box.querySelector(`[data-query="${q.number}"]`);
    if (!card) {
      card = document.createElement("div");
      card.className = "query";
      card.dataset.query = q.number;
      card.innerHTML =
        '<h3></h3><code></code><div class="figures"></div><div class="constraint"></div><div class="graph"></div>' +
        '<div class="legend">boxes coloured by busy share (green idle, red busy; grey: not measured)</div>';
      box.append(card);
      card.querySelector("code").textContent = q.sql;
      braid.graphs[q.number] = drawGraph(card.querySelector(".graph"), q);
      card.dataset.nodes = q.graph.length;
    } else {
      const cy = braid.graphs[q.number];
      for (const n of q.graph) {
        cy.$id("n" + n.id).data("busy", n.busy);
        cy.$id("n" + n.id).data("label", labelOf(n));
        for (const i of n.inputs) cy.$id(`e${i}-${n.id}`).data("label", edgeLabel(q, i, n));
      }
    }
    const h = card.querySelector("h3");
    h.innerHTML = "";
    h.append(`Query ${q.number} → ${q.writes}`);
    const st = document.createElement("span");
    st.className = "state " + q.state;
    st.textContent = q.state + (q.error ? ": " + q.error : "");
    h.append(st);
    card.querySelector(".figures").textContent =
      `in ${fmt.format(q.rows_in)} (${fmt.format(queryRate(q.number, 0))}/s) · ` +
      `out ${fmt.format(q.rows_out)} (${fmt.format(queryRate(q.number, 1))}/s) · ` +
      `latency p50 ${ms(q.latency.p50_ms)} · p99 ${ms(q.latency.p99_ms)} · ` +
      `skipped on faults ${fmt.format(q.faults)} · late ${fmt.format(q.late)} · ` +
      `epochs read, not yet complete: ${Math.max(0, q.epoch_in - q.epoch_out)}`;
    // Under a latency constraint: its rows' latencies against it, red when over.
    const c = card.querySelector(".constraint");
    if (q.constraint_ms !== null && q.constraint_ms !== undefined) {
      const r = q.row_latency_ms;
      c.textContent = `max_latency ${ms(q.constraint_ms)}: rows p50 ${r ? ms(r[0]) : "-"} · p99 ${r ? ms(r[1]) : "-"}` +
        (r && r[1] > q.constraint_ms ? " (over)" : "");
      c.className = "constraint" + (r && r[1] > q.constraint_ms ? " over" : "");
      card.dataset.rowP99 = r ? r[1] : "";
    } else {
      c.textContent = "";
    }
  }
  for (const card of [...box.children]) {
    if (!shown.has(card.dataset.query)) {
      const cy = braid.graphs[card.dataset.query];
      if (cy) cy.destroy();
      delete braid.graphs[card.dataset.query];
      card.remove();
    }
  }
}

function update(t, snapshot) {
  braid.samples.push(sampleOf(t, snapshot));
  if (braid.samples.length > 300) braid.samples.shift();
  braid.snapshot = snapshot;
  document.getElementById("workers").textContent = snapshot.workers + " workers";
  drawStreams(snapshot);
  drawQueries(t, snapshot);
  drawTimeline();
  braid.updates += 1;
}

async function start() {
  const status = document.getElementById("status");
  try {
    const history = await (await fetch("/api/history")).json();
    braid.samples = history;
  } catch (e) {
    console.warn("no history", e);
  }
  const events = new EventSource("/api/events");
  events.onopen = () => {
    status.textContent = "live";
    status.className = "status live";
  };
  events.onerror = () => {
    status.textContent = "connection lost; retrying";
    status.className = "status lost";
  };
  events.onmessage = (m) => {
    const u = JSON.parse(m.data);
    // The first event may repeat the last sample of the history.
    const last = braid.samples[braid.samples.length - 1];
    if (last && last.t >= u.t) braid.samples.pop();
    update(u.t, u.snapshot);
  };
}

start();
