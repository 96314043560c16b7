/* logbox status dashboard: reloads the page every 10 s while it is visible (no inline script). */
(function () {
  "use strict";
  var PERIOD_MS = 10000;
  var due = Date.now() + PERIOD_MS;
  function tick() {
    if (document.visibilityState === "visible" && Date.now() >= due) {
      window.location.reload();
      return;
    }
    window.setTimeout(tick, 1000);
  }
  document.addEventListener("visibilitychange", function () {
    // Back from a hidden tab after the period: reload at once.
    if (document.visibilityState === "visible" && Date.now() >= due) {
      window.location.reload();
    }
  });
  window.setTimeout(tick, PERIOD_MS);
})();
