// Viewer niceties (the page works without them): ← / → (or j / k) turn PDF pages,
// + / − zoom the page image, 0 resets the zoom.
(function () {
  "use strict";
  var frame = document.querySelector(".page-frame");
  var zoomBox = document.querySelector(".pager .zoom");
  var key = "mnote.viewer.zoom";
  var zoom = 1;
  try { zoom = parseFloat(sessionStorage.getItem(key)) || 1; } catch (e) { /* storage off */ }
  function apply() {
    if (!frame) return;
    zoom = Math.min(4, Math.max(0.5, zoom));
    frame.style.width = zoom === 1 ? "" : (zoom * 100) + "%";
    frame.style.maxWidth = zoom === 1 ? "" : "none";
    try { sessionStorage.setItem(key, String(zoom)); } catch (e) { /* ignore */ }
  }
  if (frame && zoomBox) {
    zoomBox.hidden = false;
    zoomBox.addEventListener("click", function (ev) {
      var b = ev.target.closest("[data-zoom]");
      if (!b) return;
      zoom = zoom * (b.getAttribute("data-zoom") === "1" ? 1.25 : 0.8);
      apply();
    });
    apply();
  }
  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var t = ev.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    var link = null;
    if (ev.key === "ArrowLeft" || ev.key === "k") link = document.querySelector('.pager a[rel="prev"]');
    else if (ev.key === "ArrowRight" || ev.key === "j") link = document.querySelector('.pager a[rel="next"]');
    else if (frame && (ev.key === "+" || ev.key === "=")) { zoom *= 1.25; apply(); ev.preventDefault(); return; }
    else if (frame && (ev.key === "-" || ev.key === "_")) { zoom *= 0.8; apply(); ev.preventDefault(); return; }
    else if (frame && ev.key === "0") { zoom = 1; apply(); ev.preventDefault(); return; }
    if (link) { ev.preventDefault(); window.location.href = link.href; }
  });
})();
