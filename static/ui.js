// Every page (all optional: the pages work without JavaScript):
// - [data-copy="#id"] buttons copy the text of the element #id;
// - forms with data-confirm ask in a dialog first (without JavaScript the server shows a
//   confirmation page instead); confirming adds confirm=yes and submits;
// - the narrow-screen menu closes when a link in it is followed.
(function () {
  "use strict";
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    return new Promise(function (resolve, reject) {
      var ta = document.createElement("textarea");
      ta.value = text;
      ta.setAttribute("readonly", "");
      ta.style.position = "fixed";
      ta.style.opacity = "0";
      document.body.appendChild(ta);
      ta.select();
      try { document.execCommand("copy") ? resolve() : reject(new Error("copy refused")); } catch (e) { reject(e); }
      document.body.removeChild(ta);
    });
  }
  document.querySelectorAll("[data-copy]").forEach(function (b) {
    b.hidden = false;
    b.addEventListener("click", function () {
      var el = document.querySelector(b.getAttribute("data-copy"));
      if (!el) return;
      var text = (el.value !== undefined && el.tagName === "INPUT") ? el.value : el.textContent.trim();
      var label = b.textContent;
      copyText(text).then(function () {
        b.textContent = b.getAttribute("data-copied") || "✓";
        b.classList.add("copied");
        setTimeout(function () { b.textContent = label; b.classList.remove("copied"); }, 1600);
      }, function () {
        if (el.tagName === "INPUT") { el.focus(); el.select(); }
      });
    });
  });

  var dialog = null;
  function confirmDialog(form) {
    if (!dialog) {
      dialog = document.createElement("dialog");
      dialog.className = "confirm-dialog";
      dialog.innerHTML = '<form method="dialog"><h2 class="confirm-title"></h2><p class="confirm-text"></p>' +
        '<div class="row confirm-actions"><button value="cancel" class="button confirm-cancel"></button>' +
        '<button value="ok" class="danger confirm-ok"></button></div></form>';
      document.body.appendChild(dialog);
    }
    dialog.querySelector(".confirm-title").textContent = form.getAttribute("data-confirm-title") || "";
    dialog.querySelector(".confirm-text").textContent = form.getAttribute("data-confirm");
    dialog.querySelector(".confirm-ok").textContent = form.getAttribute("data-confirm-ok") || "OK";
    dialog.querySelector(".confirm-cancel").textContent = form.getAttribute("data-confirm-cancel") || "Cancel";
    dialog.onclose = function () {
      if (dialog.returnValue !== "ok") return;
      var c = document.createElement("input");
      c.type = "hidden"; c.name = "confirm"; c.value = "yes";
      form.appendChild(c);
      form.submit();
    };
    dialog.returnValue = "";
    dialog.showModal();
  }
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-confirm")) return;
    if (typeof HTMLDialogElement !== "function") return; // the server's confirmation page
    ev.preventDefault();
    confirmDialog(form);
  }, true);

  document.querySelectorAll(".menu a").forEach(function (a) {
    a.addEventListener("click", function () {
      var d = a.closest("details");
      if (d) d.open = false;
    });
  });
})();
