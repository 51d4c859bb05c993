// Skylark dashboard, webhooks pages: keeps the event log current (delivery attempts appear as they
// happen) by re-fetching its HTML fragment every 3 s while the page is visible.
(function () {
  'use strict';
  var log = document.getElementById('event-log');
  if (!log) return;
  var url = log.getAttribute('data-refresh-url');
  var busy = false;
  function refresh() {
    if (busy || document.hidden) return;
    // Do not replace the log under the keyboard focus (a Redeliver button).
    if (log.contains(document.activeElement)) return;
    busy = true;
    fetch(url, { credentials: 'same-origin', headers: { Accept: 'text/html' } })
      .then(function (res) {
        if (res.redirected || res.status === 401 || res.status === 303) { location.reload(); return null; }
        return res.ok ? res.text() : null;
      })
      .then(function (html) { if (html !== null && html !== log.innerHTML) log.innerHTML = html; })
      .catch(function () {})
      .then(function () { busy = false; });
  }
  setInterval(refresh, 3000);
})();
