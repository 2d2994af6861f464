// The trajectory browser of a factrl report. Every string from the data goes into the
// DOM through textContent / text nodes, never as markup: model output is hostile.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var PAGE = 200;
  var KNOWN = new Set(["plan", "search", "think", "answer", "information", "note"]);
  var $ = function (id) { return document.getElementById(id); };
  var q = $("q"), f = $("f"), lab = $("label"), runSel = $("run");
  var list = $("items"), more = $("more"), count = $("count");
  var state = { run: 0, shown: PAGE, timer: 0 };

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function num(x) { return x === null || x === undefined ? "n/a" : Number(x).toFixed(3); }
  function setOption(select, value) {
    for (var i = 0; i < select.options.length; i++) {
      if (select.options[i].value === value) { select.selectedIndex = i; return; }
    }
  }

  var golds = {};
  data.runs.forEach(function (run, i) {
    run.byId = new Map();
    run.items.forEach(function (it) { run.byId.set(it.id, it); if (it.gold) golds[it.gold] = 1; });
    var o = el("option", null, run.name);
    o.value = String(i);
    runSel.appendChild(o);
  });
  runSel.hidden = data.runs.length < 2;
  if (data.runs.length > 1) {
    var d = el("option", null, "label differs between runs");
    d.value = "differs";
    f.appendChild(d);
  }
  Object.keys(golds).sort().forEach(function (g) { var o = el("option", null, g); o.value = g; lab.appendChild(o); });

  function hay(it) {
    if (it._hay === undefined) {
      var parts = [it.id, it.claim, it.gold || "", it.pred || "no label", it.err || ""]
        .concat(it.searches, it.fmt, it.cited, it.shown, it.ev.map(function (e) { return e[0]; }));
      it.ctx.forEach(function (c) {
        c.blocks.forEach(function (b) { if (b[0] === "m") parts.push(b[2]); });
      });
      it._hay = parts.join("\n").toLowerCase();
    }
    return it._hay;
  }

  function differs(it) {
    return data.runs.some(function (run) {
      var o = run.byId.get(it.id);
      return o !== undefined && o.pred !== it.pred;
    });
  }

  function matches(it, words, outcome, gold) {
    if (gold && it.gold !== gold) return false;
    if (outcome === "correct" && !it.ok) return false;
    if (outcome === "wrong" && it.ok) return false;
    if (outcome === "format" && (it.fmt_ok || it.err)) return false;
    if (outcome === "error" && !it.err) return false;
    if (outcome === "differs" && !differs(it)) return false;
    var h = words.length ? hay(it) : "";
    for (var i = 0; i < words.length; i++) if (h.indexOf(words[i]) < 0) return false;
    return true;
  }

  // Text with evidence ids: "[[id]]: ..." lines become passages, gold ones highlighted.
  function inline(parent, text, gold) {
    var re = /\[\[([^\[\]]*)\]\]/g, last = 0, m;
    while ((m = re.exec(text)) !== null) {
      if (m.index > last) parent.appendChild(document.createTextNode(text.slice(last, m.index)));
      parent.appendChild(el("mark", gold.has(m[1].trim()) ? "eid gold" : "eid", m[0]));
      last = re.lastIndex;
    }
    if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
  }
  function richText(parent, text, gold) {
    var lines = String(text).split("\n");
    lines.forEach(function (line, i) {
      var m = /^\s*\[\[([^\[\]]*)\]\]/.exec(line);
      if (m) {
        var p = el("div", gold.has(m[1].trim()) ? "psg gold" : "psg");
        inline(p, line, gold);
        parent.appendChild(p);
      } else {
        inline(parent, line + (i < lines.length - 1 ? "\n" : ""), gold);
      }
    });
  }

  function block(b, gold) {
    var src = b[0], tag = b[1];
    var kind = tag ? (KNOWN.has(tag) ? tag : "other") : (src === "m" ? "outside" : "obs");
    var div = el("div", "blk " + (src === "m" ? "model" : "env") + " t-" + kind);
    div.appendChild(el("span", "tag", tag ? tag : (src === "m" ? "text outside tags" : "environment")));
    var t = el("div", "txt");
    richText(t, b[2], gold);
    div.appendChild(t);
    return div;
  }

  function fact(dl, name, value) {
    dl.appendChild(el("dt", null, name));
    var dd = el("dd");
    if (value instanceof Node) dd.appendChild(value); else dd.textContent = String(value);
    dl.appendChild(dd);
  }

  function evidenceList(items, gold) {
    var ul = el("ul", "ev-list");
    items.forEach(function (e) {
      var li = el("li");
      li.appendChild(el("mark", gold.has(e[0]) ? "eid gold" : "eid", "[[" + e[0] + "]]"));
      if (e[1]) li.appendChild(document.createTextNode(" " + e[1]));
      ul.appendChild(li);
    });
    return ul;
  }

  function body(it) {
    var gold = new Set(it.ev.map(function (e) { return e[0]; }));
    var div = el("div", "body");
    var dl = el("dl", "facts");
    fact(dl, "claim", it.claim);
    fact(dl, "gold label", it.gold || "none");
    fact(dl, "gold evidence", it.ev.length ? evidenceList(it.ev, gold) : "none");
    fact(dl, "predicted label", (it.pred || "no label") + (it.ok ? "  (correct)" : "  (wrong)"));
    fact(dl, "cited evidence", it.cited.length ? evidenceList(it.cited.map(function (c) { return [c, gold.has(c) ? "(gold)" : ""]; }), gold) : "none");
    if (it.searches.length) fact(dl, "searches", it.searches.join("  ·  "));
    if (it.reward) {
      var tb = el("table", "parts"), tr;
      Object.keys(it.reward.parts).forEach(function (k) {
        tr = el("tr"); tr.appendChild(el("th", null, k)); tr.appendChild(el("td", "num", num(it.reward.parts[k]))); tb.appendChild(tr);
      });
      tr = el("tr"); tr.appendChild(el("th", null, "total")); tr.appendChild(el("td", "num", num(it.reward.total))); tb.appendChild(tr);
      fact(dl, "reward", tb);
    }
    if (it.conf !== null) fact(dl, "confidence", num(it.conf));
    if (it.hops !== null && it.hops !== undefined) fact(dl, "hops", it.hops);
    if (it.fmt.length) fact(dl, "format errors", el("div", "errtxt", it.fmt.join("\n")));
    if (it.err) fact(dl, "episode error", el("div", "errtxt", it.err));
    if (it.secs !== null && it.secs !== undefined) fact(dl, "seconds", Number(it.secs).toFixed(2));
    if (data.runs.length > 1) {
      var others = data.runs.map(function (run, j) {
        if (j === state.run) return null;
        var o = run.byId.get(it.id);
        return run.name + ": " + (o ? (o.pred || "no label") + (o.ok ? " ✓" : " ✗") : "not in this run");
      }).filter(Boolean);
      fact(dl, "other runs", others.join("  ·  "));
    }
    div.appendChild(dl);
    it.ctx.forEach(function (c, i) {
      var box = el("div", "ctx");
      box.appendChild(el("h4", null, i === 0 ? "episode" : "segment " + i + ": " + c.role));
      if (c.prompt.length) {
        var pd = el("details", "prompt");
        pd.appendChild(el("summary", null, "prompt (" + c.prompt.length + " message" + (c.prompt.length > 1 ? "s" : "") + ")"));
        c.prompt.forEach(function (m) { pd.appendChild(block(["e", m[0], m[1]], gold)); });
        box.appendChild(pd);
      }
      c.blocks.forEach(function (b) { box.appendChild(block(b, gold)); });
      div.appendChild(box);
    });
    return div;
  }

  function expand(d, it) {
    if (!d.built) { d.built = true; d.appendChild(body(it)); }
  }

  function item(it) {
    var li = el("li", "item " + (it.ok ? "ok" : "bad"));
    li.dataset.id = it.id;
    var d = el("details"), s = el("summary");
    s.appendChild(el("span", "mark", it.ok ? "✓" : "✗"));
    s.appendChild(el("span", "cid", it.id));
    s.appendChild(el("span", "claim", it.claim));
    var labs = el("span", "labs");
    labs.appendChild(el("span", "gold-l", it.gold || "?"));
    labs.appendChild(document.createTextNode(" → " + (it.pred || "no label")));
    s.appendChild(labs);
    if (it.reward) s.appendChild(el("span", "rew", "reward " + num(it.reward.total)));
    if (it.err) s.appendChild(el("span", "flag err", "error"));
    else if (!it.fmt_ok) s.appendChild(el("span", "flag fmt", "format"));
    d.appendChild(s);
    d.addEventListener("toggle", function () { if (d.open) expand(d, it); });
    li.appendChild(d);
    li.item = it;
    return li;
  }

  function render() {
    var run = data.runs[state.run];
    var words = q.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    var hits = run.items.filter(function (it) { return matches(it, words, f.value, lab.value); });
    var frag = document.createDocumentFragment();
    hits.slice(0, state.shown).forEach(function (it) { frag.appendChild(item(it)); });
    list.textContent = "";
    list.appendChild(frag);
    count.textContent = "showing " + Math.min(hits.length, state.shown) + " of " + hits.length +
      " matching (" + run.items.length + " in " + run.name + ")";
    more.hidden = hits.length <= state.shown;
  }

  function writeHash() {
    var p = new URLSearchParams();
    if (q.value) p.set("q", q.value);
    if (f.value !== "all") p.set("f", f.value);
    if (lab.value) p.set("label", lab.value);
    if (state.run) p.set("run", String(state.run));
    var h = p.toString();
    try { history.replaceState(null, "", h ? "#" + h : location.pathname + location.search); } catch (e) { /* file: URLs in some browsers */ }
  }

  function readHash() {
    var raw = location.hash.replace(/^#/, "");
    if (raw.indexOf("=") < 0) return null;  // a section link, not a filter
    var p = new URLSearchParams(raw);
    q.value = p.get("q") || "";
    setOption(f, p.get("f") || "all");
    setOption(lab, p.get("label") || "");
    var r = parseInt(p.get("run") || "0", 10);
    state.run = r >= 0 && r < data.runs.length ? r : 0;
    setOption(runSel, String(state.run));
    return p.get("open");
  }

  function openItem(id) {
    var lis = list.children;
    for (var i = 0; i < lis.length; i++) {
      if (lis[i].dataset.id === id) {
        var d = lis[i].firstChild;
        expand(d, lis[i].item);
        d.open = true;
        lis[i].scrollIntoView();
        return;
      }
    }
  }

  function changed() { state.shown = PAGE; render(); writeHash(); }
  q.addEventListener("input", function () { clearTimeout(state.timer); state.timer = setTimeout(changed, 120); });
  f.addEventListener("change", changed);
  lab.addEventListener("change", changed);
  runSel.addEventListener("change", function () { state.run = parseInt(runSel.value, 10) || 0; changed(); });
  more.addEventListener("click", function () { state.shown += PAGE; render(); });
  window.addEventListener("hashchange", function () { var o = readHash(); state.shown = PAGE; render(); if (o) openItem(o); });

  var toOpen = readHash();
  render();
  if (toOpen) openItem(toOpen);
  document.body.setAttribute("data-browser", "ready");
})();
