/* logbox web UI: keyboard shortcuts, histogram drag-to-zoom, clickable result rows, the
   date pickers of the custom range and times in the browser's zone. No inline script
   anywhere (the CSP forbids it); every page works without this file except drag-to-zoom
   (and shows its times in UTC, as it says). */
(function () {
  "use strict";

  function typing(el) {
    if (!el) return false;
    var tag = el.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable;
  }

  // "/" focuses the query box; Escape leaves it.
  document.addEventListener("keydown", function (ev) {
    var q = document.getElementById("q");
    if (!q) return;
    if (ev.key === "/" && !typing(document.activeElement) && !ev.ctrlKey && !ev.metaKey && !ev.altKey) {
      ev.preventDefault();
      q.focus();
      q.select();
    } else if (ev.key === "Escape" && document.activeElement === q) {
      q.blur();
    }
  });

  // A click anywhere on a result row opens the message (the time cell is the real link).
  document.addEventListener("click", function (ev) {
    var tr = ev.target.closest ? ev.target.closest("tr.hit[data-href]") : null;
    if (!tr || ev.target.closest("a") || ev.button !== 0) return;
    if (window.getSelection && String(window.getSelection()).length > 0) return;
    if (ev.ctrlKey || ev.metaKey) { window.open(tr.getAttribute("data-href")); return; }
    window.location.href = tr.getAttribute("data-href");
  });

  // The datetime-local pickers fill the text fields (UTC, as the page says).
  function initPickers() {
    var pickers = document.querySelectorAll("input.picker[data-for]");
    Array.prototype.forEach.call(pickers, function (p) {
      p.addEventListener("change", function () {
        var target = document.getElementById(p.getAttribute("data-for"));
        if (target && p.value) target.value = p.value;
      });
    });
  }

  // Drag across histogram bars to zoom to their range; a plain click follows the bar's link.
  function initHistogram() {
    var svg = document.getElementById("histogram");
    if (!svg) return;
    var bars = Array.prototype.slice.call(svg.querySelectorAll("a.bar"));
    if (bars.length === 0) return;
    var start = null, end = null, dragged = false;

    function barAt(ev) {
      var el = document.elementFromPoint(ev.clientX, ev.clientY);
      var a = el && el.closest ? el.closest("a.bar") : null;
      if (a) return bars.indexOf(a);
      // Outside the bars: the nearest end.
      var box = svg.getBoundingClientRect();
      if (ev.clientX < box.left) return 0;
      if (ev.clientX > box.right) return bars.length - 1;
      return null;
    }
    function paint() {
      var lo = Math.min(start, end), hi = Math.max(start, end);
      bars.forEach(function (b, i) { b.classList.toggle("selected", start !== null && i >= lo && i <= hi); });
    }
    function zoomUrl(lo, hi) {
      var url = new URL(bars[lo].getAttribute("href"), window.location.href);
      url.searchParams.set("from", bars[lo].getAttribute("data-from"));
      url.searchParams.set("to", bars[hi].getAttribute("data-to"));
      url.searchParams.delete("cursor");
      return url.toString();
    }
    svg.addEventListener("mousedown", function (ev) {
      if (ev.button !== 0) return;
      var i = barAt(ev);
      if (i === null) return;
      start = end = i;
      dragged = false;
      paint();
      ev.preventDefault();
    });
    window.addEventListener("mousemove", function (ev) {
      if (start === null) return;
      var i = barAt(ev);
      if (i !== null && i !== end) { end = i; dragged = dragged || end !== start; paint(); }
    });
    window.addEventListener("mouseup", function () {
      if (start === null) return;
      var lo = Math.min(start, end), hi = Math.max(start, end);
      var moved = dragged && lo !== hi;
      start = end = null;
      if (moved) {
        svg.classList.add("zooming");
        window.location.href = zoomUrl(lo, hi);
      } else {
        paint();
      }
    });
    // A drag ends with a click on the last bar: do not follow it.
    svg.addEventListener("click", function (ev) {
      if (svg.classList.contains("zooming")) ev.preventDefault();
    });
  }

  // The time select (received / event time) searches again at once, with what was typed.
  function initTimeBasis() {
    var sel = document.getElementById("time-basis");
    var form = document.getElementById("search-form");
    if (!sel || !form) return;
    sel.addEventListener("change", function () {
      form.submit();
    });
  }

  // A preset keeps what was typed in the query box: it submits the form with its range (the
  // link itself, used without JavaScript, carries the query of the page).
  function initPresets() {
    var form = document.getElementById("search-form");
    if (!form) return;
    var presets = form.querySelectorAll("a.preset[data-range]");
    Array.prototype.forEach.call(presets, function (a) {
      a.addEventListener("click", function (ev) {
        var q = document.getElementById("q");
        if (!q || q.value.trim() === "" || ev.ctrlKey || ev.metaKey || ev.shiftKey) return;
        ev.preventDefault();
        document.getElementById("from").value = "-" + a.getAttribute("data-range");
        document.getElementById("to").value = "";
        form.submit();
      });
    });
  }

  // Times in the browser's zone unless the page is in UTC (tz=utc): every <time data-us> is
  // written again (data-format: "ms" with milliseconds, "s", or a histogram label's "hms",
  // "hm", "mdhm"), and each .tz-name says which zone. The server writes them in UTC.
  function pad(n, w) { n = String(n); while (n.length < (w || 2)) n = "0" + n; return n; }
  function localTime(us, fmt) {
    var d = new Date(Math.floor(us / 1000));
    var ymd = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate());
    var hm = pad(d.getHours()) + ":" + pad(d.getMinutes());
    var hms = hm + ":" + pad(d.getSeconds());
    if (fmt === "hm") return hm;
    if (fmt === "hms") return hms;
    if (fmt === "mdhm") return pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + hm;
    if (fmt === "s") return ymd + " " + hms;
    return ymd + " " + hms + "." + pad(Math.floor(us / 1000) % 1000, 3);
  }
  function zoneName() {
    try {
      var z = Intl.DateTimeFormat().resolvedOptions().timeZone;
      if (z) return z;
    } catch (e) { /* an old browser: the offset below */ }
    var off = -new Date().getTimezoneOffset();
    return "UTC" + (off < 0 ? "-" : "+") + pad(Math.floor(Math.abs(off) / 60)) + ":" + pad(Math.abs(off) % 60);
  }
  function initTimes() {
    var marker = document.getElementById("results");
    if (!marker || marker.getAttribute("data-tz") !== "local") return;
    var times = document.querySelectorAll("time[data-us], text[data-us]");
    Array.prototype.forEach.call(times, function (t) {
      var us = Number(t.getAttribute("data-us"));
      if (!isFinite(us)) return;
      t.textContent = localTime(us, t.getAttribute("data-format"));
    });
    var zone = zoneName();
    Array.prototype.forEach.call(document.querySelectorAll(".tz-name"), function (el) {
      el.textContent = zone;
    });
  }

  function init() { initTimes(); initPickers(); initHistogram(); initPresets(); initTimeBasis(); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
