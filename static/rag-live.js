// Live sync state on a KB's knowledge-RAG page: on every change event of the KB, re-read
// the rows' state from status.json (the server renders the words in the page's language).
(function () {
  var table = document.getElementById("rag-items");
  if (!table || !window.EventSource) return;
  var url = table.getAttribute("data-status");
  function refresh() {
    fetch(url, { credentials: "same-origin" }).then(function (r) { return r.ok ? r.json() : null; }).then(function (d) {
      if (!d) return;
      var drift = document.getElementById("rag-drift");
      if (drift && d.drift) {
        drift.textContent = d.drift.text;
        drift.className = d.drift.lost ? "notice warn" : "muted small";
        drift.setAttribute("data-lost", String(d.drift.lost));
      }
      d.items.forEach(function (it) {
        var row = table.querySelector('tr[data-source-id="' + it.sourceId + '"]');
        if (!row) return;
        var s = row.querySelector(".rag-state span");
        s.textContent = it.state;
        s.className = "status " + (it.status || "");
        var notes = row.querySelector(".rag-notes");
        notes.textContent = "";
        it.notes.forEach(function (n) { var div = document.createElement("div"); div.textContent = n; notes.appendChild(div); });
      });
    }).catch(function () {});
  }
  var es = new EventSource(table.getAttribute("data-events"));
  es.onmessage = refresh;
  es.addEventListener("sources", refresh);
})();
