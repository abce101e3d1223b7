"use strict";
// dokimi's report pages: sort and filter tables, offline, with no framework (dokimi.analysis.html inlines this
// file and allows it alone by its hash in the page's Content-Security-Policy).
//
// <table class="sortable">: a click on a header sorts by that column, a second click reverses; a cell's
// data-sort attribute is its sort key (else its text); th.num sorts as numbers; "-" and empty cells sort last.
// A header with data-filter gets a drop-down above the table with every value of its column (a cell's
// data-value, else its text); rows that do not match every chosen value are hidden, and a line says how many
// rows show. The page reads the same without this script: nothing here adds content, only order and hiding.
(function () {
  function key(row, index, attribute) {
    var cell = row.cells[index];
    if (!cell) return "";
    var value = cell.getAttribute(attribute);
    return value !== null ? value : cell.textContent.trim();
  }

  function isEmpty(value) {
    return value === "" || value === "-";
  }

  function order(a, b, numeric) {
    if (numeric) {
      var x = parseFloat(a), y = parseFloat(b);
      if (!isNaN(x) && !isNaN(y)) return x - y;
    }
    return a.localeCompare(b, undefined, { numeric: true });
  }

  function sortBy(table, th, index) {
    var body = table.tBodies[0];
    var descending = th.getAttribute("aria-sort") === "ascending";
    table.querySelectorAll("th[aria-sort]").forEach(function (other) {
      other.removeAttribute("aria-sort");
    });
    th.setAttribute("aria-sort", descending ? "descending" : "ascending");
    var numeric = th.classList.contains("num");
    var rows = Array.prototype.map.call(body.rows, function (row, position) {
      return { row: row, value: key(row, index, "data-sort"), position: position };
    });
    rows.sort(function (a, b) {
      var emptyA = isEmpty(a.value), emptyB = isEmpty(b.value);
      if (emptyA || emptyB) return emptyA === emptyB ? a.position - b.position : emptyA ? 1 : -1;
      var found = order(a.value, b.value, numeric);
      return (descending ? -found : found) || a.position - b.position;
    });
    rows.forEach(function (item) {
      body.appendChild(item.row);
    });
  }

  function makeSortable(table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, index) {
      var button = document.createElement("button");
      button.type = "button";
      button.className = "sort";
      while (th.firstChild) button.appendChild(th.firstChild);
      th.appendChild(button);
      button.addEventListener("click", function () {
        sortBy(table, th, index);
      });
    });
  }

  function makeFilterable(table) {
    var headers = Array.prototype.filter.call(table.tHead.rows[0].cells, function (th) {
      return th.hasAttribute("data-filter");
    });
    if (!headers.length || table.tBodies[0].rows.length < 2) return;
    var bar = document.createElement("div");
    bar.className = "filters";
    var shown = document.createElement("span");
    shown.className = "muted shown";
    var chosen = [];
    var rows = Array.prototype.slice.call(table.tBodies[0].rows);

    function apply() {
      var visible = 0;
      rows.forEach(function (row) {
        var match = chosen.every(function (filter) {
          return filter.select.value === "" || key(row, filter.index, "data-value") === filter.select.value;
        });
        row.hidden = !match;
        if (match) visible += 1;
      });
      shown.textContent = visible + " of " + rows.length + " rows";
      table.setAttribute("data-shown", String(visible));
    }

    headers.forEach(function (th) {
      var index = th.cellIndex;
      var values = [];
      rows.forEach(function (row) {
        var value = key(row, index, "data-value");
        if (values.indexOf(value) < 0) values.push(value);
      });
      values.sort(function (a, b) {
        return order(a, b, false);
      });
      var label = document.createElement("label");
      label.textContent = th.getAttribute("data-filter") + " ";
      var select = document.createElement("select");
      select.setAttribute("data-filter", th.getAttribute("data-filter"));
      var all = document.createElement("option");
      all.value = "";
      all.textContent = "all";
      select.appendChild(all);
      values.forEach(function (value) {
        var option = document.createElement("option");
        option.value = value;
        option.textContent = value;
        select.appendChild(option);
      });
      select.addEventListener("change", apply);
      label.appendChild(select);
      bar.appendChild(label);
      chosen.push({ index: index, select: select });
    });
    bar.appendChild(shown);
    var anchor = table.parentNode.classList.contains("scroll") ? table.parentNode : table;
    anchor.parentNode.insertBefore(bar, anchor);
    apply();
  }

  document.querySelectorAll("table.sortable").forEach(function (table) {
    if (!table.tHead || !table.tBodies.length) return;
    makeSortable(table);
    makeFilterable(table);
  });
  document.documentElement.setAttribute("data-tables", "ready");
})();
