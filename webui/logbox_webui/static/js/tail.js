/*
 * tail.js — the live tail view (templates/search/tail.html, webui/UI.md "Live tail"): reads the
 * server-sent events of /tail/stream and shows each new match as a row, newest on top.
 * Pause holds new rows aside (still counted) until Resume; the table keeps at most
 * data-max-rows rows (older ones are removed and counted in #tail-dropped); the matches
 * searchd skipped because they came too fast are counted in #tail-skipped. The view never
 * lags without saying so. Text is set with textContent only (no HTML from messages).
 */
(function () {
  'use strict';
  var root = document.getElementById('tail');
  if (!root || !window.EventSource) { return; }
  var SEVERITIES = ['emerg', 'alert', 'crit', 'err', 'warning', 'notice', 'info', 'debug'];
  var maxRows = parseInt(root.getAttribute('data-max-rows'), 10) || 1000;
  var logspace = root.getAttribute('data-logspace') || 'main';
  var baseUrl = root.getAttribute('data-stream');
  var tbody = document.querySelector('#tail-table tbody');
  var statusEl = document.getElementById('tail-status');
  var pauseBtn = document.getElementById('tail-pause');
  var skippedEl = document.getElementById('tail-skipped');
  var skippedCount = document.getElementById('tail-skipped-count');
  var droppedEl = document.getElementById('tail-dropped');
  var droppedCount = document.getElementById('tail-dropped-count');
  var countEl = document.getElementById('tail-count');
  var paused = false;
  var pending = [];
  var skipped = 0;
  var dropped = 0;
  var through = null;
  var asOf = null;
  var es = null;

  function setStatus(text, state) {
    statusEl.textContent = text;
    statusEl.setAttribute('data-state', state);
  }

  function liveStatus() {
    if (paused) {
      setStatus('Paused: ' + pending.length + ' new', 'paused');
    } else {
      setStatus('Live' + (asOf ? ': up to date as of ' + asOf : ''), 'live');
    }
  }

  function cell(tr, cls, text) {
    var td = document.createElement('td');
    td.className = cls;
    td.textContent = text === null || text === undefined ? '' : String(text);
    tr.appendChild(td);
    return td;
  }

  function row(m) {
    var tr = document.createElement('tr');
    tr.className = 'hit sev-' + (SEVERITIES[m.severity] || 'none');
    tr.setAttribute('data-id', String(m.id));
    var t = cell(tr, 'c-time', '');
    var a = document.createElement('a');
    a.href = '/messages/' + encodeURIComponent(logspace) + '/' + m.id;
    a.textContent = String(m.received || '').replace('T', ' ').replace('Z', '');
    t.appendChild(a);
    cell(tr, 'c-host', m.host);
    cell(tr, 'c-prog', m.program);
    cell(tr, 'c-sev', SEVERITIES[m.severity] || '');
    cell(tr, 'c-msg', m.message);
    return tr;
  }

  function dropOver() {
    while (tbody.rows.length > maxRows) {
      tbody.removeChild(tbody.lastChild);
      dropped++;
    }
    if (dropped > 0) {
      droppedCount.textContent = String(dropped);
      droppedEl.hidden = false;
    }
    countEl.textContent = String(tbody.rows.length);
  }

  function show(m) {
    tbody.insertBefore(row(m), tbody.firstChild);
  }

  function onLine(obj) {
    if (typeof obj.time === 'number') {
      asOf = new Date(obj.time / 1000).toISOString().slice(11, 19) + ' UTC';
    }
    if (typeof obj.through === 'string') { through = obj.through; }
    if (typeof obj.id === 'number') {
      through = String(obj.id);
      if (paused) {
        pending.push(obj);
        if (pending.length > maxRows) { pending.shift(); dropped++; }
      } else {
        show(obj);
        dropOver();
      }
    }
    if (typeof obj.skipped === 'number' && obj.skipped > 0) {
      skipped += obj.skipped;
      skippedCount.textContent = String(skipped);
      skippedEl.hidden = false;
    }
    if (obj.error) {
      setStatus('Stopped: ' + (obj.error.message || obj.error.code), 'error');
      return;
    }
    liveStatus();
  }

  function connect() {
    var url = baseUrl + (through !== null ? '&after=' + encodeURIComponent(through) : '');
    es = new EventSource(url);
    es.onmessage = function (ev) {
      var obj;
      try { obj = JSON.parse(ev.data); } catch (e) { return; }
      onLine(obj);
    };
    es.onopen = function () { liveStatus(); };
    es.onerror = function () {
      if (es.readyState === 2) {
        setStatus('Disconnected: retrying in 3 s', 'error');
        window.setTimeout(connect, 3000);
      } else {
        setStatus('Reconnecting…', 'error');
      }
    };
  }

  pauseBtn.addEventListener('click', function () {
    paused = !paused;
    pauseBtn.textContent = paused ? 'Resume' : 'Pause';
    pauseBtn.setAttribute('aria-pressed', paused ? 'true' : 'false');
    if (!paused) {
      pending.forEach(show);
      pending = [];
      dropOver();
    }
    liveStatus();
  });

  window.addEventListener('pagehide', function () { if (es) { es.close(); } });
  connect();
}());
