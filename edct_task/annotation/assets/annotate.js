/* EDCT annotation page. Talks to the local server's JSON API; every text from the run is shown
 * with textContent (never as markup). Each label change is POSTed at once; the server appends it
 * to the annotator's file before it answers. */
(function () {
  "use strict";

  var $ = function (id) { return document.getElementById(id); };
  var session = null;      // /api/session
  var item = null;         // /api/items/{i}
  var index = 0;
  var label = null;        // {edit_valid, ac, ef} of the current intervention
  var saving = Promise.resolve();
  var pending = 0;
  var mode = "side";       // "side" | "flip"
  var flipShows = "after";
  var zoom = 1;
  var locked = false;
  var saves = 0;
  var newest = {};         // intervention id -> number of its newest save: older replies never win      // a complete label was given: ignore label keys until the next one shows

  function setText(id, value) { $(id).textContent = value === null || value === undefined || value === "" ? "—" : value; }
  function busy(delta) {
    pending += delta;
    document.body.dataset.pending = String(pending);
  }

  function api(method, url, body) {
    var init = {method: method, headers: {}};
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return fetch(url, init).then(function (res) {
      return res.json().catch(function () { return {}; }).then(function (data) {
        if (!res.ok) {
          var detail = data && data.detail;
          if (Array.isArray(detail)) detail = detail.map(function (d) { return d.msg; }).join("; ");
          throw new Error(res.status + ": " + (detail || res.statusText));
        }
        return data;
      });
    });
  }

  function complete(l) {
    return !!l && !!l.edit_valid && (l.edit_valid !== "valid" || (l.ac !== null && l.ac !== undefined && l.ef !== null && l.ef !== undefined));
  }

  function renderProgress(done) {
    var total = session.total;
    $("progress-text").textContent = done + " / " + total + " labelled";
    $("progress-bar").style.width = (total ? (100 * done / total) : 0) + "%";
  }

  function renderLabel() {
    var l = label || {};
    document.querySelectorAll("button[data-field]").forEach(function (b) {
      var field = b.dataset.field;
      var v = l[field];
      var on = v !== null && v !== undefined && String(v) === b.dataset.value;
      b.classList.toggle("on", on);
      b.setAttribute("aria-pressed", on ? "true" : "false");
      if (field !== "edit_valid") b.disabled = l.edit_valid !== "valid";
    });
    $("group-ac").classList.toggle("disabled", l.edit_valid !== "valid");
    $("group-ef").classList.toggle("disabled", l.edit_valid !== "valid");
    var state = $("saved-state");
    if (!label) { state.textContent = "not labelled yet"; state.className = "saved-state"; }
    else if (complete(label)) { state.textContent = "saved ✓"; state.className = "saved-state ok"; }
    else { state.textContent = "saved, incomplete (give AC and EF)"; state.className = "saved-state partial"; }
  }

  function renderImages() {
    var side = mode === "side";
    $("mode-side").classList.toggle("on", side);
    $("mode-flip").classList.toggle("on", !side);
    $("panes").classList.toggle("flip", !side);
    $("pane-before").hidden = !side && flipShows !== "before";
    $("pane-after").hidden = !side && flipShows !== "after";
    var base = side ? 38 : 60; // share of the window height an image gets at 100%
    ["img-before", "img-after"].forEach(function (id) { $(id).style.height = (zoom * base) + "vh"; });
    $("zoom-level").textContent = Math.round(zoom * 100) + "%";
  }

  function render() {
    $("position").textContent = String(index + 1);
    $("total").textContent = String(session.total);
    $("intervention-id").textContent = item.id;
    setText("question", item.question);
    $("system-prompt-box").hidden = !item.system_prompt;
    setText("system-prompt", item.system_prompt);
    setText("orig-answer", item.original && item.original.answer);
    setText("orig-explanation", item.original && item.original.explanation);
    setText("ins-keep", item.instruction.keep);
    setText("ins-change", item.instruction.change);
    setText("ins-how", item.instruction.how);
    setText("ins-constraints", item.instruction.constraints);
    $("step-note").textContent = "(edit " + item.step + " of the chain)";
    var earlier = $("earlier");
    earlier.replaceChildren();
    item.earlier_edits.forEach(function (t) { var li = document.createElement("li"); li.textContent = t; earlier.appendChild(li); });
    $("earlier-box").hidden = item.earlier_edits.length === 0;
    setText("new-answer", item["new"] && item["new"].answer);
    setText("new-explanation", item["new"] && item["new"].explanation);
    $("before-label").textContent = item.before_label;
    $("after-label").textContent = item.after_label;
    $("img-before").src = item.before_url;
    $("img-after").src = item.after_url;
    $("prev").disabled = index === 0;
    $("next").disabled = index >= session.total - 1;
    $("hint").textContent = "";
    renderLabel();
    renderImages();
  }

  // Show intervention i. Waits for the labels being saved first, unless called from the save
  // chain itself (inChain), which would wait on itself.
  function go(i, inChain) {
    if (!session || i < 0 || i >= session.total) return Promise.resolve();
    busy(1);
    var ready = inChain ? Promise.resolve() : saving;
    return ready.then(function () { return api("GET", "/api/items/" + i); }).then(function (data) {
      index = i;
      item = data;
      label = session.labels[item.id] || null;
      locked = false;
      $("finished").hidden = true;
      render();
      window.scrollTo(0, 0);
    }).catch(function (err) { $("hint").textContent = "could not load intervention: " + err.message; })
      .then(function () { busy(-1); document.body.dataset.ready = "1"; });
  }

  function save(next) {
    var body = {intervention: item.id, edit_valid: next.edit_valid, ac: next.ac, ef: next.ef};
    var forIndex = index;
    var mine = ++saves;
    newest[body.intervention] = mine;
    busy(1);
    saving = saving.then(function () {
      return api("POST", "/api/labels", body).then(function (res) {
        session.done = res.done;
        renderProgress(res.done);
        if (newest[body.intervention] !== mine) return; // a newer choice for it is on its way
        session.labels[res.saved.intervention] = res.saved;
        if (forIndex === index) { label = res.saved; renderLabel(); }
        if (res.saved.complete && forIndex === index && $("auto-advance").checked) {
          if (index + 1 < session.total) return go(index + 1, true);
          $("finished").hidden = false;
        }
        locked = false;
      }).catch(function (err) { locked = false; $("hint").textContent = "NOT saved: " + err.message; });
    }).then(function () { busy(-1); });
    return saving;
  }

  function choose(field, value) {
    if (!item || locked) return;
    var cur = label || {edit_valid: null, ac: null, ef: null};
    var next = {edit_valid: cur.edit_valid, ac: cur.ac === undefined ? null : cur.ac, ef: cur.ef === undefined ? null : cur.ef};
    if (field === "edit_valid") {
      next.edit_valid = value;
      if (value !== "valid") { next.ac = null; next.ef = null; }
    } else {
      if (cur.edit_valid !== "valid") {
        $("hint").textContent = "AC and EF are given only for valid edits: press V first.";
        return;
      }
      next[field] = Number(value);
    }
    label = next;
    if (complete(next) && $("auto-advance").checked) locked = true;
    renderLabel();
    save(next);
  }

  function setZoom(z) { zoom = Math.min(4, Math.max(0.25, z)); renderImages(); }

  document.querySelectorAll("button[data-field]").forEach(function (b) {
    b.addEventListener("click", function () { choose(b.dataset.field, b.dataset.value); });
  });
  $("prev").addEventListener("click", function () { go(index - 1); });
  $("next").addEventListener("click", function () { go(index + 1); });
  $("mode-side").addEventListener("click", function () { mode = "side"; renderImages(); });
  $("mode-flip").addEventListener("click", function () { mode = "flip"; renderImages(); });
  $("zoom-in").addEventListener("click", function () { setZoom(zoom * 1.25); });
  $("zoom-out").addEventListener("click", function () { setZoom(zoom / 1.25); });
  $("zoom-reset").addEventListener("click", function () { setZoom(1); });
  ["img-before", "img-after"].forEach(function (id) {
    $(id).addEventListener("click", function () { if (mode === "flip") { flipShows = flipShows === "after" ? "before" : "after"; renderImages(); } else setZoom(zoom === 1 ? 2 : 1); });
  });

  var KEYS = {
    v: ["edit_valid", "valid"], i: ["edit_valid", "invalid"], n: ["edit_valid", "not_assessable"],
    "1": ["ac", "1"], "2": ["ac", "0"], "3": ["ef", "1"], "4": ["ef", "0"],
  };
  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var tag = (ev.target && ev.target.tagName) || "";
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") return;
    var key = ev.key.length === 1 ? ev.key.toLowerCase() : ev.key;
    if (KEYS[key]) { choose(KEYS[key][0], KEYS[key][1]); ev.preventDefault(); return; }
    if (key === "ArrowRight" || key === "j") { go(index + 1); ev.preventDefault(); }
    else if (key === "ArrowLeft" || key === "k") { go(index - 1); ev.preventDefault(); }
    else if (key === "t") {
      if (mode !== "flip") { mode = "flip"; flipShows = "before"; }
      else flipShows = flipShows === "after" ? "before" : "after";
      renderImages();
    }
    else if (key === "s") { mode = "side"; renderImages(); }
    else if (key === "+" || key === "=") setZoom(zoom * 1.25);
    else if (key === "-") setZoom(zoom / 1.25);
    else if (key === "0") setZoom(1);
  });

  busy(1);
  api("GET", "/api/session").then(function (data) {
    session = data;
    $("annotator").textContent = data.annotator;
    $("labels-file").textContent = data.labels_file;
    document.title = "EDCT human validation · " + data.annotator;
    renderProgress(data.done);
    if (data.total === 0) { $("hint").textContent = "This run has no intervention to label."; return; }
    var start = data.position < data.total ? data.position : data.total - 1;
    return go(start).then(function () { if (data.position >= data.total) $("finished").hidden = false; });
  }).catch(function (err) { $("hint").textContent = "could not start: " + err.message; })
    .then(function () { busy(-1); });
})();
