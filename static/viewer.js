// Viewer niceties (the page works without them): ← / → (or j / k) turn PDF pages,
// + / − zoom the page image, 0 resets the zoom; on a narrow screen the page opens zoomed to
// the highlight.
(function () {
  "use strict";
  var frame = document.querySelector(".page-frame");
  var zoomBox = document.querySelector(".pager .zoom");
  var key = "mnote.viewer.zoom";
  var zoom = 1;
  var stored = null;
  try { stored = parseFloat(sessionStorage.getItem(key)); } catch (e) { /* storage off */ }
  if (stored) zoom = stored;
  function apply(save) {
    if (!frame) return;
    zoom = Math.min(4, Math.max(0.5, zoom));
    frame.style.width = zoom === 1 ? "" : (zoom * 100) + "%";
    frame.style.maxWidth = zoom === 1 ? "" : "none";
    if (save !== false) {
      try { sessionStorage.setItem(key, String(zoom)); } catch (e) { /* ignore */ }
    }
  }
  // Narrow screen, a box on the page, no zoom chosen yet: zoom so the box fills most of the
  // width and bring it to the middle of the view.
  function zoomToHighlight() {
    var hl = frame && frame.querySelector(".hl-box");
    if (!hl || stored || window.innerWidth > 720) return;
    var frac = hl.offsetWidth / Math.max(1, frame.offsetWidth);
    if (!(frac > 0) || frac > 0.6) return;
    zoom = Math.min(3, 0.85 / frac);
    apply(false);
    var scroller = frame.parentElement;
    var target = hl.offsetLeft + hl.offsetWidth / 2 - scroller.clientWidth / 2;
    // After the zoomed layout (and again once the page has loaded: a reload would otherwise
    // restore the scroll position of the unzoomed page over it).
    var bring = function () {
      scroller.scrollLeft = Math.max(0, target);
      hl.scrollIntoView({ block: "center", inline: "nearest" });
    };
    requestAnimationFrame(bring);
    if (document.readyState !== "complete") window.addEventListener("load", function () { requestAnimationFrame(bring); }, { once: true });
  }
  // The viewer opens at its highlight: never at a scroll position restored from before.
  if (document.getElementById("hl") && "scrollRestoration" in history) history.scrollRestoration = "manual";
  if (frame && zoomBox) {
    zoomBox.hidden = false;
    zoomBox.addEventListener("click", function (ev) {
      var b = ev.target.closest("[data-zoom]");
      if (!b) return;
      zoom = zoom * (b.getAttribute("data-zoom") === "1" ? 1.25 : 0.8);
      apply();
    });
    apply(false);
    var img = frame.querySelector("img");
    if (img && !img.complete) img.addEventListener("load", zoomToHighlight, { once: true });
    else zoomToHighlight();
  }
  // A sheet grid: the next window of rows comes in as the reader scrolls near the end (the
  // "more rows" link does the same without script).
  var grid = document.querySelector("table.sheet-grid[data-more]");
  var sentinel = document.querySelector(".sheet-sentinel");
  if (grid && sentinel && "IntersectionObserver" in window && window.fetch) {
    var moreLink = document.querySelector(".sheet-more .more-rows");
    if (moreLink) moreLink.hidden = true;
    var loading = false;
    var io = new IntersectionObserver(function (entries) {
      var url = grid.getAttribute("data-more");
      if (loading || !url || !entries.some(function (e) { return e.isIntersecting; })) return;
      loading = true;
      fetch(url, { credentials: "same-origin" }).then(function (r) {
        if (!r.ok) throw new Error("rows " + r.status);
        var next = r.headers.get("X-Mnote-Next-Row");
        return r.text().then(function (html) {
          grid.tBodies[0].insertAdjacentHTML("beforeend", html);
          if (next) grid.setAttribute("data-more", url.replace(/([?&]from=)\d+/, "$1" + next));
          else { grid.removeAttribute("data-more"); io.disconnect(); }
          loading = false;
        });
      }).catch(function () { io.disconnect(); if (moreLink) moreLink.hidden = false; });
    }, { root: sentinel.parentElement, rootMargin: "300px" });
    io.observe(sentinel);
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
