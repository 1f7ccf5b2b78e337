// The dashboard's one script (compiled into the binary): live updates from the server's
// event stream, and the action buttons. No library, nothing fetched from elsewhere.
(function () {
  "use strict";
  var meta = function (name) {
    var m = document.querySelector('meta[name="' + name + '"]');
    return m ? m.getAttribute("content") : "";
  };
  var token = meta("token");
  var live = meta("live");
  var q = function (path) { return path + (path.indexOf("?") < 0 ? "?" : "&") + "token=" + encodeURIComponent(token); };

  // Re-fetches what `el` shows from `url`, at most once per `gap` ms.
  var pending = {};
  function refresh(key, url, el, gap) {
    if (!el || pending[key]) return;
    pending[key] = true;
    setTimeout(function () {
      fetch(q(url), { cache: "no-store" }).then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) { if (html !== null) el.innerHTML = html; })
        .finally(function () { pending[key] = false; });
    }, gap);
  }
  function content() {
    var url = location.pathname + location.search.replace(/[?&]token=[^&]*/, "");
    return url + (url.indexOf("?") < 0 ? "?" : "&") + "fragment=1";
  }
  function badge(status) { return '<span class="badge st-' + status + '">' + status + "</span>"; }

  function onPlan(doc) {
    var nodes = doc.nodes || [];
    document.querySelectorAll("svg.dag g.node").forEach(function (g) {
      var s = nodes[+g.getAttribute("data-node")];
      if (!s) return;
      var sub = g.classList.contains("sub") ? " sub" : "";
      g.setAttribute("class", "node st-" + s + sub);
      var t = g.querySelector("title");
      if (t) t.textContent = t.textContent.replace(/: [a-z]+$/, ": " + s);
    });
    document.querySelectorAll("table.jobs tr[data-node]").forEach(function (tr) {
      var s = nodes[+tr.getAttribute("data-node")];
      var cell = tr.querySelector("td.status");
      if (s && cell && cell.textContent !== s) cell.innerHTML = badge(s);
    });
    var ps = document.getElementById("plan-status");
    if (ps) ps.innerHTML = badge(doc.status);
    Object.keys(doc.counts || {}).forEach(function (k) {
      var el = document.querySelector('[data-count="' + k + '"]');
      if (el) el.textContent = doc.counts[k];
    });
    var plan = live.slice(5);
    refresh("timeline", "/plans/" + plan + "/timeline", document.getElementById("timeline"), 1000);
    if (document.getElementById("job-status")) refresh("content", content(), document.getElementById("content"), 500);
  }

  if (live) {
    var dot = document.getElementById("live");
    var es = new EventSource(q("/events?live=" + encodeURIComponent(live)));
    es.addEventListener("hello", function () { if (dot) dot.classList.add("on"); document.body.setAttribute("data-live", "on"); });
    es.onerror = function () { if (dot) dot.classList.remove("on"); };
    es.addEventListener("plan", function (e) { onPlan(JSON.parse(e.data)); });
    es.addEventListener("change", function () { refresh("content", content(), document.getElementById("content"), 700); });
  }

  document.addEventListener("click", function (e) {
    var button = e.target.closest ? e.target.closest("button[data-act]") : null;
    if (!button) return;
    var box = button.closest(".actions");
    var act = button.getAttribute("data-act");
    var body = {};
    if (box.getAttribute("data-job")) body.job = box.getAttribute("data-job");
    var reason = box.querySelector("input.reason");
    if (act === "reject" && reason) body.reason = reason.value;
    var answer = box.querySelector("input.answer");
    if (act === "answer" && answer) body.answer = answer.value;
    var msg = box.querySelector(".msg");
    if (msg) msg.textContent = act + "…";
    button.disabled = true;
    fetch("/api/plans/" + box.getAttribute("data-plan") + "/" + act, {
      method: "POST",
      headers: { "Authorization": "Bearer " + token, "Content-Type": "application/json" },
      body: JSON.stringify(body),
    }).then(function (r) { return r.json().then(function (doc) { return [r.ok, doc]; }); })
      .then(function (res) {
        var doc = res[1];
        if (msg) {
          msg.textContent = res[0] ? (doc.message || ("done: plan " + doc.status)) : doc.error;
          msg.className = res[0] ? "msg ok" : "msg err";
        }
        if (res[0] && !live.startsWith("plan:")) refresh("content", content(), document.getElementById("content"), 300);
      })
      .catch(function (err) { if (msg) { msg.textContent = String(err); msg.className = "msg err"; } })
      .finally(function () { button.disabled = false; });
  });
})();
