/* The explorer page's script (written for autograd_lite; explorer.py embeds it).
   Data in (the JSON in #explorer-data: items, scopes with their laid-out views, the memory
   curve), DOM out: the view of one call at a time, breadcrumb, search, details, memory plot.
   API for tests and power users: window.autogradExplorer (see explorer.py's docstring). */
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("explorer-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const STATS = ["mean", "std", "min", "max", "zeros", "nonfinite", "grad_norm"];
  const state = {scope: 0, selected: null, gradients: false, colour: "", view: null};
  const byPath = new Map(DATA.scopes.map(function (s, i) { return [s.path, i]; }));
  let ui = null;

  // ---------------------------------------------------------------- small helpers
  function svgEl(tag, attrs, parent) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function htmlEl(tag, cls, text, parent) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  function bytes(n) {
    const units = ["B", "KB", "MB", "GB"];
    let k = 0;
    while (n >= 1024 && k < units.length - 1) { n /= 1024; k += 1; }
    return k === 0 ? n + " B" : n.toFixed(1) + " " + units[k];
  }

  function number(v) {
    if (v === null || v === undefined) return "–";
    if (typeof v === "string") return v;  // "inf", "nan": JSON has no such numbers
    return Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(3) : v.toPrecision(4);
  }

  function typed(item) { return item.shape_text + " " + item.dtype; }

  // ---------------------------------------------------------------- page skeleton
  function buildPage() {
    const header = htmlEl("header", "", null, document.body);
    const top = htmlEl("div", "row", null, header);
    htmlEl("span", "title", DATA.title, top);
    const prev = htmlEl("button", "", "◀ previous", top);
    const count = htmlEl("span", "note", "", top);
    const next = htmlEl("button", "", "next ▶", top);
    const search = htmlEl("input", "", null, top);
    search.type = "search";
    search.placeholder = "search: op, parameter path, call, shape";
    const controls = htmlEl("span", "row", null, top);
    const crumbs = htmlEl("div", "row crumbs", null, header);
    const main = htmlEl("main", "", null, document.body);
    const canvas = svgEl("svg", {id: "canvas"}, main);
    const aside = htmlEl("aside", "", null, main);
    const details = htmlEl("div", "details", null, aside);
    const hits = htmlEl("div", "hits", null, aside);
    const shares = htmlEl("div", "shares", null, aside);
    ui = {prev: prev, next: next, count: count, search: search, crumbs: crumbs, canvas: canvas,
          hits: hits, details: details, shares: shares, controls: controls};
    prev.onclick = function () { step("prev"); };
    next.onclick = function () { step("next"); };
    search.oninput = function () { showHits(search.value); };
    buildControls(controls);
    if (DATA.backward) buildMemoryPlot();
    enablePanZoom(canvas);
  }

  function buildControls(controls) {
    if (DATA.backward) {
      const label = htmlEl("label", "", null, controls);
      const box = htmlEl("input", "", null, label);
      box.type = "checkbox";
      box.id = "gradients";
      label.appendChild(document.createTextNode(" gradient edges"));
      box.onchange = function () { state.gradients = box.checked; drawView(); };
    }
    if (DATA.values) {
      htmlEl("span", "", "colour by", controls);
      const pick = htmlEl("select", "", null, controls);
      pick.id = "colour";
      ["", ...STATS].forEach(function (s) { htmlEl("option", "", s || "none", pick).value = s; });
      pick.onchange = function () { state.colour = pick.value; drawView(); };
      ui.scale = htmlEl("span", "note", "", controls);
    }
  }

  // ---------------------------------------------------------------- one call's view
  function openScope(index) {
    state.scope = index;
    state.selected = null;
    drawCrumbs();
    drawView();
    fit();
    drawShares();
    drawBand();
    const scope = DATA.scopes[index];
    ui.prev.disabled = scope.prev === null;
    ui.next.disabled = scope.next === null;
    ui.count.textContent = scope.repeat[1] > 1 ? scope.repeat[0] + " of " + scope.repeat[1] : "";
  }

  function step(direction) {
    const target = DATA.scopes[state.scope][direction];
    if (target !== null) openScope(target);
  }

  function drawCrumbs() {
    ui.crumbs.textContent = "";
    const chain = [];
    for (let s = state.scope; s !== null; s = DATA.scopes[s].parent) chain.unshift(s);
    chain.forEach(function (s, k) {
      if (k) htmlEl("span", "sep", "›", ui.crumbs);
      if (s === state.scope) { htmlEl("span", "here", DATA.scopes[s].label, ui.crumbs); return; }
      const a = htmlEl("a", "", DATA.scopes[s].label, ui.crumbs);
      a.onclick = function () { openScope(s); };
    });
  }

  function drawView() {
    const scope = DATA.scopes[state.scope];
    const layout = DATA.layouts[scope.layout];
    const canvas = ui.canvas;
    const keep = canvas.querySelector("g.world");
    const transform = keep && state.view === state.scope ? keep.getAttribute("transform") : null;
    canvas.textContent = "";
    const defs = svgEl("defs", {}, canvas);
    const marker = svgEl("marker", {id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5,
      markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse"}, defs);
    svgEl("path", {d: "M0,0 L10,5 L0,10 z", fill: "#64748b"}, marker);
    const world = svgEl("g", {class: "world"}, canvas);
    if (transform) world.setAttribute("transform", transform);
    state.view = state.scope;
    layout.edges.forEach(function (e, k) {
      svgEl("path", {class: "edge", d: splinePath(e[2]), "marker-end": "url(#arrow)",
        "data-from": e[0], "data-to": e[1], "data-edge": k}, world);
    });
    const colours = state.colour ? colourScale(scope.slots, state.colour) : null;
    if (ui.scale) ui.scale.textContent = colours ? colours.caption : "";
    scope.slots.forEach(function (slot, k) { drawNode(world, slot, layout.nodes[k], k, colours); });
    if (state.gradients) drawGradients(world, scope, layout);
    if (state.selected !== null) markSelected(state.selected);
  }

  function splinePath(p) {
    let d = "M" + p[0] + "," + p[1];
    for (let i = 2; i + 5 < p.length; i += 6) {
      d += " C" + p.slice(i, i + 6).join(",");
    }
    return d;
  }

  function drawNode(world, slot, centre, k, colours) {
    const kind = slot[0], ref = slot[1], lines = slot[2], w = slot[3], h = slot[4];
    const item = kind === "call" ? null : DATA.items[ref];
    let cls = "node " + kind;
    if (DATA.backward && item && item.kept) cls += " kept";
    const g = svgEl("g", {class: cls, "data-slot": k, "data-ref": ref,
      transform: "translate(" + (centre[0] - w / 2) + "," + (centre[1] - h / 2) + ")"}, world);
    const rect = svgEl("rect", {width: w, height: h}, g);
    if (colours && colours.has(k)) rect.style.fill = colours.get(k);
    lines.forEach(function (line, n) {
      const t = svgEl("text", {x: w / 2, y: 8 + 14 * n + 11, "text-anchor": "middle",
        class: n === 0 ? "first" : ""}, g);
      t.textContent = line;
    });
    svgEl("title", {}, g).textContent = lines.join("\n");
    g.addEventListener("click", function (event) { event.stopPropagation(); clickNode(kind, ref); });
    g.addEventListener("mouseenter", function () { lightNeighbours(k, true); });
    g.addEventListener("mouseleave", function () { lightNeighbours(k, false); });
  }

  function clickNode(kind, ref) {
    if (kind === "call") openScope(ref);
    else select(ref);
  }

  function lightNeighbours(k, on) {
    ui.canvas.querySelectorAll(".edge").forEach(function (e) {
      const from = +e.dataset.from, to = +e.dataset.to;
      if (from !== k && to !== k) return;
      e.classList.toggle("lit", on);
      const other = from === k ? to : from;
      const node = ui.canvas.querySelector('.node[data-slot="' + other + '"]');
      if (node) node.classList.toggle("neighbour", on);
    });
  }

  function drawGradients(world, scope, layout) {
    layout.edges.forEach(function (e) {
      const source = scope.slots[e[0]];
      if (source[0] !== "param" && source[0] !== "input") return;
      const a = layout.nodes[e[1]], b = layout.nodes[e[0]];
      const bend = (a[0] - b[0]) / 2 + 40;
      svgEl("path", {class: "gradient", "marker-end": "url(#arrow)",
        d: "M" + a[0] + "," + a[1] + " Q" + ((a[0] + b[0]) / 2 + bend) + "," +
           ((a[1] + b[1]) / 2) + " " + b[0] + "," + b[1]}, world);
    });
  }

  // ---------------------------------------------------------------- colour by a statistic
  function statOf(item, name) {
    if (name === "grad_norm") return item.grad_norm;
    return item.stats ? item.stats[name] : null;
  }

  function colourScale(slots, name) {
    // std and gradient norms spread over decades: coloured by log10, zeros the lightest
    const log = name === "std" || name === "grad_norm";
    const found = new Map();
    slots.forEach(function (slot, k) {
      if (slot[0] === "call") return;
      const v = statOf(DATA.items[slot[1]], name);
      if (v === null || v === undefined) return;
      if (typeof v === "string") { found.set(k, "nonfinite"); return; }
      found.set(k, log ? (v > 0 ? Math.log10(v) : null) : v);
    });
    const vs = Array.from(found.values()).filter(function (v) { return typeof v === "number"; });
    const lo = Math.min(...vs), hi = Math.max(...vs);
    const out = new Map();
    found.forEach(function (v, k) {
      if (v === "nonfinite") { out.set(k, "#f87171"); return; }  // red: inf or NaN
      const t = v === null ? 0 : (hi > lo ? (v - lo) / (hi - lo) : 0.5);
      out.set(k, "hsl(" + (190 + 60 * t) + ", 85%, " + (95 - 27 * t) + "%)");
    });
    const shown = function (v) { return log ? number(Math.pow(10, v)) : number(v); };
    out.caption = vs.length ? "light " + (log ? "0 or " : "") + shown(lo) + " … dark " + shown(hi) +
      (log ? " (log scale)" : "") + ", red inf or NaN" : "no values here";
    return out;
  }

  // ---------------------------------------------------------------- pan and zoom
  function fit() {
    const layout = DATA.layouts[DATA.scopes[state.scope].layout];
    const box = ui.canvas.getBoundingClientRect();
    const k = Math.min(1.2, (box.width - 20) / layout.w, (box.height - 20) / layout.h);
    const x = (box.width - layout.w * k) / 2, y = Math.max(10, (box.height - layout.h * k) / 2);
    setTransform(x, y, k);
  }

  function setTransform(x, y, k) {
    ui.canvas.dataset.x = x; ui.canvas.dataset.y = y; ui.canvas.dataset.k = k;
    ui.canvas.querySelector("g.world").setAttribute("transform",
      "translate(" + x + "," + y + ") scale(" + k + ")");
  }

  function enablePanZoom(canvas) {
    let drag = null;
    canvas.addEventListener("wheel", function (event) {
      event.preventDefault();
      const d = canvas.dataset, r = canvas.getBoundingClientRect();
      const f = Math.exp(-event.deltaY / 500), px = event.clientX - r.left, py = event.clientY - r.top;
      setTransform(px - (px - d.x) * f, py - (py - d.y) * f, d.k * f);
    }, {passive: false});
    canvas.addEventListener("mousedown", function (event) {
      drag = [event.clientX, event.clientY, +canvas.dataset.x, +canvas.dataset.y];
      canvas.classList.add("dragging");
    });
    window.addEventListener("mousemove", function (event) {
      if (drag) setTransform(drag[2] + event.clientX - drag[0], drag[3] + event.clientY - drag[1], +canvas.dataset.k);
    });
    window.addEventListener("mouseup", function () { drag = null; canvas.classList.remove("dragging"); });
  }

  // ---------------------------------------------------------------- search
  function search(text) {
    const q = String(text).trim().toLowerCase();
    if (!q) return [];
    const hits = [];
    DATA.items.forEach(function (item) {
      const where = DATA.scopes[item.home].path;
      const texts = [item.label, item.extra, item.shape_text, item.shape.join(","), typed(item),
                     item.kind === "op" ? where : ""];
      if (texts.some(function (t) { return t && t.toLowerCase().includes(q); })) {
        hits.push({id: item.id, op: item.kind === "op" ? item.label : item.kind, scope: where,
                   label: item.kind === "op" ? (item.label + " " + item.extra).trim() : item.label});
      }
    });
    DATA.scopes.forEach(function (s) {
      if (s.label.toLowerCase().includes(q)) hits.push({id: null, op: "call", scope: s.path, label: s.label});
    });
    return hits;
  }

  function showHits(text) {
    ui.hits.textContent = "";
    const hits = search(text);
    if (!text.trim()) return;
    htmlEl("h3", "", hits.length + " found", ui.hits);
    hits.slice(0, 200).forEach(function (hit) {
      const row = htmlEl("div", "", null, ui.hits);
      const a = htmlEl("a", "link", hit.label, row);
      htmlEl("span", "where", " in " + hit.scope, row);
      a.onclick = function () {
        if (hit.id === null) openScope(byPath.get(hit.scope)); else select(hit.id);
      };
    });
  }

  // ---------------------------------------------------------------- details
  function details(id) {
    const item = DATA.items[id];
    const src = item.source;
    return {id: id, kind: item.kind, op: item.kind === "op" ? item.label : null,
      label: item.label, options: item.extra, shape: item.shape, dtype: item.dtype,
      scope: item.scope === null ? DATA.scopes[item.home].path : DATA.scopes[item.scope].path,
      source: src ? src[0] + ":" + src[1] + "  " + src[2] : null,
      pullback: item.pullback, saved_bytes: item.kept + item.residual,
      param_path: item.kind === "param" ? item.label : null,
      inputs: item.inputs, consumers: item.consumers, stats: item.stats, grad_norm: item.grad_norm};
  }

  function select(id) {
    const item = DATA.items[id];
    if (!item) return null;
    const scope = item.home;
    if (scope !== state.scope) openScope(scope);
    state.selected = id;
    markSelected(id);
    const d = details(id);
    showDetails(d);
    return d;
  }

  function markSelected(id) {
    ui.canvas.querySelectorAll(".node.selected").forEach(function (n) { n.classList.remove("selected"); });
    ui.canvas.querySelectorAll(".node").forEach(function (n) {
      if (n.classList.contains("call") || n.classList.contains("output")) return;
      if (+n.dataset.ref === id) n.classList.add("selected");
    });
  }

  function row(table, name, value) {
    const tr = htmlEl("tr", "", null, table);
    htmlEl("td", "", name, tr);
    const td = htmlEl("td", "", null, tr);
    if (value instanceof Node) td.appendChild(value); else td.textContent = value;
  }

  function itemLinks(ids) {
    const span = document.createElement("span");
    if (!ids.length) span.textContent = "–";
    ids.forEach(function (i, k) {
      if (k) span.appendChild(document.createTextNode(", "));
      const a = htmlEl("a", "link", DATA.items[i].label + " " + DATA.items[i].shape_text, span);
      a.onclick = function () { select(i); };
    });
    return span;
  }

  function showDetails(d) {
    ui.details.textContent = "";
    htmlEl("h3", "", "details", ui.details);
    const table = htmlEl("table", "", null, ui.details);
    row(table, d.op ? "op" : d.kind, d.op ? (d.op + " " + (d.options || "")).trim() : d.label);
    row(table, "shape", typed(DATA.items[d.id]));
    row(table, "scope", d.scope);
    if (d.param_path) row(table, "parameter", d.param_path);
    if (d.source) {
      const code = htmlEl("code", "", d.source);
      row(table, "source", code);
    }
    if (d.pullback) row(table, "pullback", d.pullback);
    const item = DATA.items[d.id];
    row(table, "keeps", bytes(d.saved_bytes) + (item.residual ? " (" + bytes(item.residual) + " residuals)" : ""));
    row(table, "inputs", itemLinks(d.inputs));
    row(table, "consumers", itemLinks(d.consumers));
    if (d.stats) STATS.slice(0, 5).forEach(function (s) { row(table, s, number(d.stats[s])); });
    if (d.stats) row(table, "NaN / inf", String(d.stats.nonfinite));
    if (d.grad_norm !== null && d.grad_norm !== undefined) row(table, "gradient norm", number(d.grad_norm));
  }

  // ---------------------------------------------------------------- memory of the backward pass
  function buildMemoryPlot() {
    const footer = htmlEl("footer", "", null, document.body);
    const total = DATA.memory.length ? DATA.memory[DATA.memory.length - 1] : 0;
    htmlEl("div", "caption", "memory the backward pass holds over the forward's ops: " +
      bytes(total) + " made during the call, plus " + bytes(DATA.arguments_kept) +
      " of the arguments (click to select an op)", footer);
    const plot = svgEl("svg", {id: "plot", viewBox: "0 0 1000 100", preserveAspectRatio: "none"}, footer);
    ui.band = svgEl("rect", {y: 0, height: 100, fill: "#fed7aa"}, plot);
    const n = DATA.memory.length, top = Math.max(total, 1);
    const points = DATA.memory.map(function (m, i) {
      return (1000 * (i + 0.5) / n).toFixed(1) + "," + (98 - 94 * m / top).toFixed(1);
    });
    svgEl("polyline", {points: points.join(" "), fill: "none", stroke: "#ea580c",
      "stroke-width": 2, "vector-effect": "non-scaling-stroke"}, plot);
    plot.addEventListener("click", function (event) {
      const r = plot.getBoundingClientRect();
      const k = Math.min(n - 1, Math.floor((event.clientX - r.left) / r.width * n));
      select(DATA.order[k]);
    });
  }

  function drawBand() {
    if (!ui.band) return;
    const ops = DATA.scopes[state.scope].ops, n = DATA.memory.length;
    ui.band.setAttribute("x", 1000 * ops[0] / n);
    ui.band.setAttribute("width", Math.max(2, 1000 * (ops[1] - ops[0] + 1) / n));
  }

  function drawShares() {
    ui.shares.textContent = "";
    if (!DATA.backward) return;
    const scope = DATA.scopes[state.scope];
    const total = Math.max(1, DATA.memory[DATA.memory.length - 1]);
    htmlEl("h3", "", "what this call keeps: " + bytes(scope.kept) + " (" +
      (100 * scope.kept / total).toFixed(1) + "% of the call's)", ui.shares);
    scope.children.map(function (c) { return DATA.scopes[c]; })
      .sort(function (a, b) { return b.kept - a.kept; }).slice(0, 12).forEach(function (child) {
        const line = htmlEl("div", "share", null, ui.shares);
        htmlEl("div", "bar", null, line).style.width = (120 * child.kept / total).toFixed(1) + "px";
        const a = htmlEl("a", "link", child.label, line);
        htmlEl("span", "note", bytes(child.kept) + " · " + (100 * child.kept / total).toFixed(1) + "%", line);
        a.onclick = function () { openScope(byPath.get(child.path)); };
      });
  }

  // ---------------------------------------------------------------- start
  buildPage();
  openScope(0);
  document.body.dataset.firstView = performance.now().toFixed(1);  // ms after navigation start
  window.autogradExplorer = {
    scopes: function () { return DATA.scopes.map(function (s) { return s.path; }); },
    current: function () { return DATA.scopes[state.scope].path; },
    open: function (path) {
      if (!byPath.has(path)) return false;
      openScope(byPath.get(path));
      return true;
    },
    search: search,
    select: select,
  };
})();
