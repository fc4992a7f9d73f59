/* EDCT audit report. Renders the page's JSON data (script#edct-data) into the DOM.
 *
 * Every value from the run (model answers, explanations, judge reasons, ids, questions) is put
 * into the page as text (textContent / createTextNode), never as markup; attributes are only set
 * from values this report generated itself (image paths, page names, class names).
 */
(function () {
  "use strict";

  var data = JSON.parse(document.getElementById("edct-data").textContent);
  // the per-sample scores shown (key, label): the score rows of the metric table, sent by the report
  var SCORES = data.scores || [];
  function scoreClass(key) { return key.replace(/_/g, "-"); }
  var app = document.getElementById("app");

  // h("div", {className: "x", href: "..."}, child, "text", [children]) -> Element
  function h(tag, props) {
    var el = document.createElement(tag);
    if (props) {
      Object.keys(props).forEach(function (key) {
        var value = props[key];
        if (value === null || value === undefined || value === false) return;
        if (key === "className") el.className = value;
        else if (key === "text") el.textContent = value;
        else if (key === "dataset") Object.keys(value).forEach(function (k) { el.dataset[k] = value[k]; });
        else if (key.slice(0, 2) === "on") el.addEventListener(key.slice(2), value);
        else el.setAttribute(key, value === true ? "" : String(value));
      });
    }
    for (var i = 2; i < arguments.length; i++) append(el, arguments[i]);
    return el;
  }
  function append(el, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { append(el, c); }); return; }
    el.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  function num(x, digits) {
    return x === null || x === undefined ? "—" : Number(x).toFixed(digits === undefined ? 3 : digits);
  }
  function pct(x) { return x === null || x === undefined ? "—" : (100 * x).toFixed(1) + "%"; }
  function bit(x) { return x === null || x === undefined ? "—" : String(x); }
  function bitBadge(x, title) {
    var cls = x === null || x === undefined ? "none" : (x ? "one" : "zero");
    return h("span", {className: "badge " + cls, title: title}, bit(x));
  }
  function scoreBadge(name, x) {
    var none = x === null || x === undefined;
    return h("span", {className: "badge " + (none ? "none" : (x ? "one" : "zero")),
      title: name + (none ? " not scored" : " = " + x)}, name + " " + (none ? "–" : (x ? "✓" : "✗")));
  }
  function badge(text, cls) { return h("span", {className: "badge " + (cls || "")}, text); }
  function block(label, text, cls) {
    return h("div", {className: cls || ""},
      h("div", {className: "label"}, label),
      h("div", {className: "text"}, text === null || text === undefined || text === "" ? "—" : text));
  }

  // ------------------------------------------------------------------ lightbox (full image on click)
  var lightbox = null;
  function openFull(src, caption) {
    if (!lightbox) {
      lightbox = h("div", {className: "lightbox", id: "lightbox", role: "dialog", onclick: closeFull},
        h("img", {alt: ""}), h("div", {className: "caption"}));
      document.body.appendChild(lightbox);
      document.addEventListener("keydown", function (ev) { if (ev.key === "Escape") closeFull(); });
    }
    lightbox.querySelector("img").setAttribute("src", src);
    lightbox.querySelector(".caption").textContent = caption || "";
    lightbox.classList.add("open");
  }
  function closeFull() { if (lightbox) lightbox.classList.remove("open"); }

  function picture(pic, caption, prefix, extraClass) {
    if (!pic) {
      return h("figure", {className: extraClass || ""},
        h("div", {className: "missing-image"}, "image not available in this run's output"),
        h("figcaption", null, caption));
    }
    var img = h("img", {
      src: prefix + pic.thumb, alt: caption, loading: "lazy", title: "click for the full image",
      dataset: {full: prefix + pic.full},
      onclick: function () { openFull(prefix + pic.full, caption + " (" + pic.width + "×" + pic.height + ")"); },
    });
    return h("figure", {className: extraClass || ""}, img, h("figcaption", null, caption));
  }

  // ------------------------------------------------------------------ index
  function failed(row, key) { return (row[key] || []).some(function (v) { return v === 0; }); }
  var FAILURES = {
    any: {label: "any", test: function () { return true; }},
    ac: {label: "AC failed at some step", test: function (r) { return failed(r, "ac"); }},
    ef: {label: "EF failed at some step", test: function (r) { return failed(r, "ef"); }},
    either: {label: "AC or EF failed", test: function (r) { return failed(r, "ac") || failed(r, "ef"); }},
    none: {label: "no AC/EF failure", test: function (r) { return !failed(r, "ac") && !failed(r, "ef"); }},
  };
  var COLUMNS = [
    {key: "thumb", label: "", sortable: false},
    {key: "id", label: "sample", sortable: true},
    {key: "domain", label: "domain", sortable: true},
    {key: "status", label: "status", sortable: true},
    {key: "reason", label: "exclusion / reason", sortable: true},
  ].concat(SCORES.map(function (m) { return {key: m.key, label: m.label, sortable: true, numeric: true}; }), [
    {key: "acef", label: "AC / EF per step", sortable: false},
    {key: "question", label: "question", sortable: true},
  ]);

  function distinct(rows, key) {
    var seen = {};
    rows.forEach(function (r) { seen[r[key]] = (seen[r[key]] || 0) + 1; });
    return Object.keys(seen).sort();
  }

  function option(value, label, selected) {
    var o = h("option", {value: value}, label);
    if (selected) o.selected = true;
    return o;
  }

  function readHash() {
    var state = {};
    (location.hash || "").replace(/^#/, "").split("&").forEach(function (part) {
      if (!part) return;
      var i = part.indexOf("=");
      if (i > 0) state[decode(part.slice(0, i))] = decode(part.slice(i + 1));
    });
    return state;
  }
  // a hand-typed or cut-off link (#q=%E0%A4%A) must not stop the page: take such a part as typed
  function decode(text) {
    try { return decodeURIComponent(text); } catch (e) { return text; }
  }
  function writeHash(state) {
    var parts = [];
    Object.keys(state).forEach(function (k) {
      if (state[k]) parts.push(encodeURIComponent(k) + "=" + encodeURIComponent(state[k]));
    });
    history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname);
  }

  function renderIndex() {
    var rows = data.rows;
    var run = data.run || {};
    document.title = "EDCT audit report" + (run.model ? ": " + run.model : run.source ? ": " + run.source : "");
    app.classList.add("wide"); // the index's table needs the width: the reason column stays in view
    var state = readHash();
    state.sort = state.sort || "";
    state.dir = state.dir || "asc";

    var domainSel = h("select", {id: "filter-domain", name: "domain"}, option("", "all"),
      distinct(rows, "domain").map(function (d) { return option(d, d, state.domain === d); }));
    var statusSel = h("select", {id: "filter-status", name: "status"}, option("", "all"),
      distinct(rows, "status").map(function (s) { return option(s, s, state.status === s); }));
    var failSel = h("select", {id: "filter-failure", name: "failure"},
      Object.keys(FAILURES).map(function (k) { return option(k, FAILURES[k].label, (state.failure || "any") === k); }));
    var search = h("input", {id: "filter-text", type: "search", placeholder: "id, question, answers, concepts…"});
    search.value = state.q || "";
    var shown = h("span", {id: "shown"}, "0");
    var tbody = h("tbody");
    var headCells = COLUMNS.map(function (c) {
      var th = h("th", {className: c.sortable ? "sortable" : "", dataset: {key: c.key}}, c.label);
      if (c.sortable) {
        th.addEventListener("click", function () {
          if (state.sort === c.key) state.dir = state.dir === "asc" ? "desc" : "asc";
          else { state.sort = c.key; state.dir = "asc"; }
          update();
        });
      }
      return th;
    });

    var counts = data.by_status || {};
    var metrics = run.metrics || {};
    var summary = h("div", {className: "summary"},
      h("span", null, h("strong", null, String(rows.length)), " samples"),
      Object.keys(counts).sort().map(function (k) { return h("span", null, badge(k, k), " ", String(counts[k])); }),
      SCORES.filter(function (c) { return metrics[c.key] && typeof metrics[c.key].estimate === "number"; }).map(function (c) {
        var m = metrics[c.key];
        return h("span", {className: "metric"}, c.label + " ", h("strong", null, num(m.estimate)),
          typeof m.low === "number" ? " [" + num(m.low) + ", " + num(m.high) + "]" : "");
      }));

    app.appendChild(h("header", null,
      h("h1", null, "EDCT audit report" + (run.model ? ": " : ""), run.model ? h("span", {id: "model"}, run.model) : null),
      run.source ? h("p", {className: "muted text"}, run.source) : null,
      summary));
    app.appendChild(h("section", {className: "card"},
      h("div", {className: "filters"},
        h("label", null, "domain", domainSel),
        h("label", null, "status", statusSel),
        h("label", null, "AC / EF", failSel),
        h("label", null, "search", search))));
    app.appendChild(h("p", {id: "count"}, "Showing ", shown, " of " + rows.length + " samples"));
    app.appendChild(h("div", {className: "table-wrap"},
      h("table", {className: "samples", id: "samples"}, h("thead", null, h("tr", null, headCells)), tbody)));

    function compare(a, b) {
      var col = COLUMNS.filter(function (c) { return c.key === state.sort; })[0];
      if (!col) return 0;
      var x = a[col.key], y = b[col.key];
      var nx = x === null || x === undefined, ny = y === null || y === undefined;
      if (nx || ny) return nx === ny ? 0 : (nx ? 1 : -1); // missing values last, either direction
      var r = col.numeric ? x - y : String(x).localeCompare(String(y), undefined, {numeric: true});
      return state.dir === "asc" ? r : -r;
    }

    function rowElement(r) {
      var steps = [];
      for (var i = 0; i < Math.max((r.ac || []).length, (r.ef || []).length); i++) {
        steps.push(h("span", {className: "step-scores"}, h("span", {className: "muted"}, "k=" + (i + 1)),
          scoreBadge("AC", r.ac[i]), scoreBadge("EF", r.ef[i])));
      }
      return h("tr", {dataset: {status: r.status, domain: r.domain}},
        h("td", null, r.thumb ? h("a", {href: r.page}, h("img", {className: "thumb", src: r.thumb, alt: "", loading: "lazy"})) : null),
        h("td", null, h("a", {href: r.page, className: "sample-link"}, r.id)),
        h("td", null, r.domain),
        h("td", null, badge(r.status, r.status)),
        h("td", {className: "reason"}, h("div", {className: "clip"}, r.reason || "")),
        SCORES.map(function (c) { return h("td", {className: "num " + scoreClass(c.key)}, num(r[c.key])); }),
        h("td", {className: "steps-cell"}, steps.length ? steps : "—"),
        h("td", {className: "question"}, h("div", {className: "clip"}, r.question)));
    }

    function update() {
      state.domain = domainSel.value;
      state.status = statusSel.value;
      state.failure = failSel.value === "any" ? "" : failSel.value;
      state.q = search.value;
      var q = search.value.trim().toLowerCase();
      var test = FAILURES[failSel.value].test;
      var list = rows.filter(function (r) {
        return (!state.domain || r.domain === state.domain) &&
          (!state.status || r.status === state.status) &&
          test(r) && (!q || r.search.indexOf(q) >= 0);
      });
      if (state.sort) list = list.slice().sort(compare);
      tbody.replaceChildren.apply(tbody, list.map(rowElement));
      shown.textContent = String(list.length);
      headCells.forEach(function (th) {
        var old = th.querySelector(".arrow");
        if (old) old.remove();
        if (th.dataset.key === state.sort) th.appendChild(h("span", {className: "arrow"}, state.dir === "asc" ? "▲" : "▼"));
      });
      writeHash(state);
    }
    [domainSel, statusSel, failSel].forEach(function (el) { el.addEventListener("change", update); });
    search.addEventListener("input", update);
    update();
  }

  // ------------------------------------------------------------------ sample page
  function checkRow(a) {
    var c = a.check;
    if (!c) {
      return h("tr", {className: "attempt-row"},
        h("td", null, String(a.attempt)), h("td", {className: "num"}, String(a.seed)),
        h("td", {colSpan: 6}, badge("no check", "fail"), " ", a.failure || ""));
    }
    return h("tr", {className: "attempt-row"},
      h("td", null, String(a.attempt)),
      h("td", {className: "num"}, String(a.seed)),
      h("td", null, badge(c.verdict, c.passed ? "pass" : "fail")),
      h("td", {className: "num r-in"}, num(c.r_in)),
      h("td", {className: "num r-out"}, num(c.r_out)),
      h("td", {className: "num mask-share"}, pct(c.mask_fraction)),
      h("td", {className: "alignment"}, c.alignment),
      h("td", null, a.failure || ""));
  }

  function votesTable(votes) {
    if (!votes.length) return null;
    return h("table", {className: "attempts votes"},
      h("thead", null, h("tr", null, ["judge", "sample", "AC", "AC reason", "EF", "EF reason", "graded", "graded reason", "error"].map(function (t) { return h("th", null, t); }))),
      h("tbody", null, votes.map(function (v) {
        var b = v.binary || {}, g = v.graded || {};
        return h("tr", {className: "vote"},
          h("td", null, "judge " + v.member), h("td", null, String(v.sample)),
          h("td", null, bitBadge(b.ac, "AC")), h("td", {className: "text"}, b.ac_reason || ""),
          h("td", null, bitBadge(b.ef, "EF")), h("td", {className: "text"}, b.ef_reason || ""),
          h("td", {className: "num"}, g.score === null || g.score === undefined ? "—" : String(g.score)),
          h("td", {className: "text"}, g.reason || ""),
          h("td", {className: "text"}, [b.error, g.error].filter(Boolean).join("; ")));
      })));
  }

  function rawDetails(label, raw) {
    if (!raw) return null;
    return h("details", null, h("summary", null, label), h("pre", {className: "raw"}, raw));
  }

  function judgement(step) {
    var b = step.binary, g = step.graded;
    if (!b && !g) return h("p", {className: "muted"}, step.requery ? "not judged" : "no re-query, so no judgement");
    return h("div", {className: "judgement"},
      b ? h("div", {className: "score-line"},
        h("span", null, "AC ", bitBadge(b.ac, "answer consistency")),
        h("span", null, "EF ", bitBadge(b.ef, "explanation faithfulness")),
        h("span", null, "CCS ", bitBadge(b.ccs, "AC·EF"))) : null,
      b ? h("dl", {className: "kv"},
        h("dt", null, "AC reason"), h("dd", {className: "ac-reason"}, b.ac_reason || "—"),
        h("dt", null, "EF reason"), h("dd", {className: "ef-reason"}, b.ef_reason || "—"),
        b.note ? [h("dt", null, "note"), h("dd", null, b.note)] : null,
        b.error ? [h("dt", null, "unscored"), h("dd", null, b.error)] : null) : null,
      g ? h("div", {className: "score-line"},
        h("span", null, "graded ", h("strong", null, g.score === null ? "—" : String(g.score)), " / 5"),
        h("span", {className: "muted"}, "normalised " + num(g.normalised))) : null,
      g ? h("dl", {className: "kv"},
        h("dt", null, "graded reason"), h("dd", {className: "graded-reason"}, g.reason || "—"),
        g.error ? [h("dt", null, "unscored"), h("dd", null, g.error)] : null) : null,
      step.votes.length ? [h("h3", null, "Panel votes"), votesTable(step.votes)] : null,
      rawDetails("binary judge reply", b && b.raw),
      rawDetails("graded judge reply", g && g.raw));
  }

  function stepCard(step, prefix) {
    var ins = step.instruction, t = step.edit_target;
    var attempts = step.attempts.map(function (a) {
      var c = a.check;
      var figs = [picture(step.before, "before edit " + step.index, prefix),
        picture(a.image, "attempt " + a.attempt + ": edited", prefix)];
      if (a.figures) {
        figs.push(picture(a.figures.heatmap, "change heatmap", prefix, "heatmap"));
        figs.push(picture(a.figures.overlay, "changes (red) and mask M (green)", prefix, "overlay"));
      } else if (c) {
        figs.push(h("figure", null, h("div", {className: "missing-image"},
          c.maps_stored ? "gate maps not available in this run's output" :
            "this run did not keep the gate's maps (heatmap and mask)"), h("figcaption", null, "change heatmap / mask")));
      }
      return h("div", {className: "attempt", dataset: {attempt: String(a.attempt)}},
        h("div", {className: "score-line"},
          h("strong", null, "Attempt " + a.attempt),
          c ? badge(c.passed ? "passed" : "failed: " + c.verdict, c.passed ? "pass" : "fail") : badge("failed", "fail"),
          c ? h("span", null, "r_in ", h("strong", {className: "r-in"}, num(c.r_in)), " (τ_in " + num(c.tau_in, 2) + ")") : null,
          c ? h("span", null, "r_out ", h("strong", {className: "r-out"}, num(c.r_out)), " (τ_out " + num(c.tau_out, 2) + ")") : null,
          c ? h("span", null, "mask share ", h("strong", {className: "mask-share"}, pct(c.mask_fraction))) : null),
        h("div", {className: "figrow"}, figs),
        c ? h("dl", {className: "kv"},
          h("dt", null, "alignment"), h("dd", {className: "alignment"}, c.alignment),
          h("dt", null, "searched"), h("dd", null, c.searched + " image, locator " + (c.locator || "—") + ", " + c.n_boxes + " box(es)"),
          c.detail ? [h("dt", null, "detail"), h("dd", null, c.detail)] : null) : null,
        a.failure ? h("p", {className: "muted text"}, a.failure) : null);
    });
    return h("section", {className: "card step", id: "step-" + step.index},
      h("h2", null, "Edit " + step.index + ": ", h("span", {className: "concept"}, ins.concept),
        " ", badge(step.verified ? "verified" : "not verified", step.verified ? "pass" : "fail")),
      h("div", {className: "two"},
        h("dl", {className: "kv instruction"},
          h("dt", null, "Keep"), h("dd", null, ins.keep),
          h("dt", null, "Change"), h("dd", null, ins.change),
          h("dt", null, "How"), h("dd", null, ins.how),
          h("dt", null, "Constraints"), h("dd", null, ins.constraints)),
        h("dl", {className: "kv"},
          h("dt", null, "parsed target"),
          h("dd", {className: "edit-target"}, t ? t.edit_type + " · " + t.target + " (" + t.source + ")" : "—"),
          t && t.note ? [h("dt", null, "parser note"), h("dd", null, t.note)] : null)),
      h("h3", null, "Attempts"),
      h("table", {className: "attempts"},
        h("thead", null, h("tr", null, ["#", "seed", "verdict", "r_in", "r_out", "mask share", "alignment", "failure"].map(function (x) { return h("th", null, x); }))),
        h("tbody", null, step.attempts.map(checkRow))),
      attempts,
      h("h3", null, "Re-query on the edited image"),
      step.requery ? h("div", {className: "two requery"},
        block("answer", step.requery.answer, "requery-answer"),
        block("explanation", step.requery.explanation, "requery-explanation")) :
        h("p", {className: "muted"}, step.requery_error ? "re-query failed: " + step.requery_error : "not asked (the edit was not verified)"),
      h("h3", null, "Judgement"),
      judgement(step));
  }

  function renderSample() {
    var s = data.sample, nav = data.nav, prefix = data.prefix || "";
    document.title = "EDCT audit: " + s.id;
    app.appendChild(h("nav", {className: "nav"},
      h("a", {href: nav.index, id: "to-index"}, "← all samples"),
      h("span", {className: "spacer"}),
      nav.prev ? h("a", {href: nav.prev, id: "prev"}, "‹ previous") : h("span", {className: "muted"}, "‹ previous"),
      h("span", {className: "muted"}, "sample " + nav.position + " of " + nav.total),
      nav.next ? h("a", {href: nav.next, id: "next"}, "next ›") : h("span", {className: "muted"}, "next ›")));
    app.appendChild(h("header", null,
      h("h1", {id: "sample-id"}, s.id),
      h("div", {className: "head-badges"},
        badge(s.domain), badge(s.status, s.status),
        SCORES.map(function (c) {
          return h("span", null, c.label + " ", h("strong", {id: scoreClass(c.key)}, num(s[c.key])));
        })),
      s.reason ? h("p", {className: "text", id: "reason"}, s.reason) : null));

    var strip = [picture(s.original, "original", prefix)];
    s.steps.forEach(function (st) {
      var last = st.attempts.length ? st.attempts[st.attempts.length - 1] : null;
      var pic = st.image || (last && last.image);
      strip.push(h("span", {className: "arrow"}, "→"));
      strip.push(picture(pic, "edit " + st.index + (st.verified ? "" : " (not verified)") + ": " + st.instruction.concept, prefix));
    });
    app.appendChild(h("section", {className: "card"}, h("h2", null, "Edit chain"), h("div", {className: "strip", id: "strip"}, strip)));

    var b = s.baseline, c = s.concepts;
    app.appendChild(h("section", {className: "card"},
      h("h2", null, "Question and baseline"),
      block("question", s.question, "question"),
      s.system_prompt ? h("details", null, h("summary", null, "system prompt"), h("div", {className: "text"}, s.system_prompt)) : null,
      h("div", {className: "two", style: null},
        block("answer", b ? b.answer : null, "baseline-answer"),
        block("explanation", b ? b.explanation : null, "baseline-explanation")),
      h("h3", null, "Concepts cited"),
      c && c.concepts.length ? h("ol", {className: "concepts"}, c.concepts.map(function (x) { return h("li", null, x); })) :
        h("p", {className: "muted"}, c && c.error ? c.error : "none"),
      rawDetails("extractor reply", c && c.raw),
      s.instructions_error ? h("p", {className: "text"}, "instructions: " + s.instructions_error) : null,
      rawDetails("instruction writer reply", s.instructions_raw),
      Object.keys(s.metadata || {}).length ? h("details", null, h("summary", null, "metadata"),
        h("dl", {className: "kv"}, Object.keys(s.metadata).map(function (k) { return [h("dt", null, k), h("dd", null, s.metadata[k])]; }))) : null));

    s.steps.forEach(function (st) { app.appendChild(stepCard(st, prefix)); });
  }

  if (document.body.dataset.page === "index") renderIndex();
  else renderSample();
})();
