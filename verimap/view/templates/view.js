(function () {
  "use strict";
  // Filters of the task list, and opening the <details> around a linked section.
  // Reads only the page's own data-* attributes; no data is embedded in this script.
  var rows = Array.prototype.slice.call(document.querySelectorAll("#task-list tbody tr"));
  var controls = ["correct", "verified", "method", "benchmark"].map(function (k) {
    return [k, document.getElementById("f-" + k)];
  }).filter(function (c) { return c[1]; });
  var search = document.getElementById("f-search");
  var count = document.getElementById("f-count");

  function apply() {
    var q = search ? search.value.trim().toLowerCase() : "";
    var shown = 0;
    rows.forEach(function (row) {
      var ok = controls.every(function (c) {
        return !c[1].value || row.dataset[c[0]] === c[1].value;
      }) && (!q || row.dataset.search.indexOf(q) !== -1);
      row.hidden = !ok;
      if (ok) { shown += 1; }
    });
    if (count) { count.textContent = shown + " of " + rows.length + " shown"; }
  }

  controls.forEach(function (c) { c[1].addEventListener("change", apply); });
  if (search) { search.addEventListener("input", apply); }
  if (rows.length) { apply(); }

  function reveal() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id && document.getElementById(id);
    if (!el) { return; }
    for (var d = el; d; d = d.parentElement) {
      if (d.tagName === "DETAILS") { d.open = true; }
    }
    el.scrollIntoView();
  }
  window.addEventListener("hashchange", reveal);
  reveal();

  var all = document.getElementById("expand-all");
  if (all) {
    all.addEventListener("click", function () {
      var open = all.dataset.open !== "1";
      document.querySelectorAll("details.task").forEach(function (d) { d.open = open; });
      all.dataset.open = open ? "1" : "0";
      all.textContent = open ? "collapse all tasks" : "expand all tasks";
    });
  }
})();
