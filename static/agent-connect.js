// The connect section of /settings/agents (admins): picking a provider fills the endpoint
// field of the same tab at once (without this script, the "Fill in its URL" button reloads
// the tab with the preset's URL in the field). Saving stays the settings form's job.
(function () {
  "use strict";
  Array.prototype.forEach.call(document.querySelectorAll("select.connect-provider"), function (sel) {
    var panel = sel.closest(".settings-panel");
    var field = panel && panel.querySelector('input[name="' + sel.getAttribute("data-url-field") + '"]');
    if (!field) return;
    var use = sel.form && sel.form.querySelector(".connect-use");
    if (use) { use.hidden = true; use.style.display = "none"; }
    sel.addEventListener("change", function () {
      var opt = sel.options[sel.selectedIndex];
      var url = opt ? opt.getAttribute("data-url") : "";
      if (url) field.value = url;
      else { field.value = ""; field.focus(); }
    });
    // Typing another URL: the provider becomes "custom" unless the URL is a preset's.
    field.addEventListener("input", function () {
      var v = field.value.trim().replace(/\/+$/, "");
      var match = Array.prototype.filter.call(sel.options, function (o) { return o.getAttribute("data-url") === v && v; })[0];
      sel.value = match ? match.value : "custom";
    });
  });
})();
