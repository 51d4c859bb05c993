// Skylark dashboard, stream page: polls the session-authenticated live.json every 2 s for the
// status, listener counts, countries, the loudness meter (docs/streams.md "Live loudness"), what
// plays now, the play log and recent errors; draws the
// listeners-over-time chart (inline SVG) from those samples; plays the stream with hls.js (served by
// Skylark) on "Play".
(function () {
  'use strict';
  var root = document.getElementById('stream-page');
  if (!root) return;
  var SVG = 'http://www.w3.org/2000/svg';
  var POLL_MS = 2000;
  var MAX_SAMPLES = 300; // 10 minutes at 2 s
  var samples = [];
  var $ = function (id) { return document.getElementById(id); };

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function svg(tag, attrs, text) {
    var e = document.createElementNS(SVG, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function duration(s) {
    if (!(s > 0)) return '0 s';
    var m = Math.floor(s / 60), r = Math.round(s % 60);
    return m > 0 ? m + ' min ' + r + ' s' : r + ' s';
  }
  function isoText(iso) { return iso.replace('T', ' ').replace(/\.\d+Z$|Z$/, ' UTC'); }

  function renderStatus(status) {
    var holder = $('stream-status');
    var cur = holder.firstElementChild;
    if (cur && cur.textContent === status) return;
    holder.replaceChildren(el('span', { class: 'badge badge-' + status.replace(/[^a-z_]/g, '') }, status));
  }

  function renderCountries(list) {
    var box = $('countries');
    if (!list.length) { box.replaceChildren(el('p', { class: 'muted' }, 'Nobody is listening right now.')); return; }
    var max = Math.max.apply(null, list.map(function (c) { return c.listeners; }));
    var ul = el('ul', { class: 'bars' });
    list.forEach(function (c) {
      var name = c.country || 'Unknown';
      var li = el('li');
      li.appendChild(el('span', { class: 'bar-label' }, name));
      li.appendChild(el('meter', { min: '0', max: String(max), value: String(c.listeners), 'aria-label': name }, String(c.listeners)));
      li.appendChild(el('span', { class: 'bar-value' }, String(c.listeners)));
      ul.appendChild(li);
    });
    box.replaceChildren(ul);
  }

  var lastErrors = '';
  function renderErrors(errors) {
    var key = errors.map(function (e) { return e.id; }).join(',');
    if (key === lastErrors) return;
    lastErrors = key;
    var box = $('stream-errors');
    if (!errors.length) { box.replaceChildren(el('p', { class: 'muted' }, 'No errors.')); return; }
    var wrap = el('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': 'Recent stream errors' });
    var table = el('table');
    var head = el('tr');
    ['Time', 'Code', 'Message'].forEach(function (h) { head.appendChild(el('th', { scope: 'col' }, h)); });
    table.appendChild(el('thead')).appendChild(head);
    var body = table.appendChild(el('tbody'));
    errors.forEach(function (e) {
      var tr = el('tr');
      var td = el('td');
      td.appendChild(el('time', { datetime: e.created }, isoText(e.created)));
      tr.appendChild(td);
      var code = el('td');
      code.appendChild(el('code', {}, e.code));
      tr.appendChild(code);
      tr.appendChild(el('td', {}, e.message));
      body.appendChild(tr);
    });
    wrap.appendChild(table);
    box.replaceChildren(wrap);
  }

  var lastNowPlaying = null;
  function renderNowPlaying(np) {
    var key = np ? JSON.stringify(np) : '';
    if (key === lastNowPlaying) return;
    lastNowPlaying = key;
    var box = $('now-playing');
    if (!np) { box.replaceChildren(el('span', { class: 'muted' }, 'Nothing set.')); return; }
    var nodes = [el('strong', {}, np.title)];
    if (np.artist) nodes.push(document.createTextNode(' \u2014 ' + np.artist));
    if (np.album) { nodes.push(document.createTextNode(' ')); nodes.push(el('span', { class: 'muted' }, '(' + np.album + ')')); }
    nodes.push(document.createTextNode(' '));
    var since = el('span', { class: 'muted small' }, 'since ');
    since.appendChild(el('time', { datetime: np.startedAt }, isoText(np.startedAt)));
    nodes.push(since);
    box.replaceChildren.apply(box, nodes);
  }

  var lastTracks = null;
  function renderTracks(tracks) {
    var key = JSON.stringify(tracks);
    if (key === lastTracks) return;
    lastTracks = key;
    var box = $('play-log');
    if (!tracks.length) { box.replaceChildren(el('p', { class: 'muted' }, 'No tracks yet: set what plays now, or let your DJ software send it.')); return; }
    var wrap = el('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': 'Play log' });
    var table = el('table');
    var head = el('tr');
    ['Started', 'Track', 'Listeners at start', 'Peak', 'Countries', 'Ended'].forEach(function (h) { head.appendChild(el('th', { scope: 'col' }, h)); });
    table.appendChild(el('thead')).appendChild(head);
    var body = table.appendChild(el('tbody'));
    var timeCell = function (iso) {
      var td = el('td');
      if (iso) td.appendChild(el('time', { datetime: iso }, isoText(iso)));
      else td.appendChild(el('span', { class: 'muted' }, '\u2014'));
      return td;
    };
    tracks.forEach(function (t) {
      var tr = el('tr');
      tr.appendChild(timeCell(t.startedAt));
      var track = el('td', {}, t.artist ? t.artist + ' \u2013 ' : '');
      track.appendChild(el('strong', {}, t.title));
      tr.appendChild(track);
      tr.appendChild(el('td', { class: 'num' }, String(t.listenersAtStart)));
      tr.appendChild(el('td', { class: 'num' }, String(t.peakListeners)));
      tr.appendChild(el('td', {}, t.countries.map(function (c) { return (c.country || 'Unknown') + ' ' + c.listeners; }).join(', ')));
      tr.appendChild(timeCell(t.endedAt));
      body.appendChild(tr);
    });
    wrap.appendChild(table);
    box.replaceChildren(wrap);
  }

  function renderChart() {
    var chart = $('listeners-chart');
    var W = 600, H = 180, L = 34, R = 8, T = 10, B = 22;
    var nodes = [];
    var maxN = 1;
    samples.forEach(function (s) { if (s.n > maxN) maxN = s.n; });
    var now = samples.length ? samples[samples.length - 1].t : Date.now();
    var span = Math.max(60000, samples.length ? now - samples[0].t : 0);
    var x = function (t) { return L + (W - L - R) * (1 - (now - t) / span); };
    var y = function (n) { return T + (H - T - B) * (1 - n / maxN); };
    [0, 0.5, 1].forEach(function (f) {
      var v = Math.round(maxN * f);
      nodes.push(svg('line', { class: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v) }));
      nodes.push(svg('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end' }, String(v)));
    });
    nodes.push(svg('line', { class: 'axis', x1: L, x2: L, y1: T, y2: H - B }));
    nodes.push(svg('line', { class: 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B }));
    nodes.push(svg('text', { x: L, y: H - 6 }, Math.round(span / 1000) + ' s ago'));
    nodes.push(svg('text', { x: W - R, y: H - 6, 'text-anchor': 'end' }, 'now'));
    if (samples.length > 0) {
      var pts = samples.map(function (s) { return x(s.t).toFixed(1) + ',' + y(s.n).toFixed(1); });
      if (samples.length === 1) pts.unshift(L + ',' + y(samples[0].n).toFixed(1));
      var first = pts[0].split(',')[0], last = pts[pts.length - 1].split(',')[0];
      nodes.push(svg('polygon', { class: 'area', points: first + ',' + (H - B) + ' ' + pts.join(' ') + ' ' + last + ',' + (H - B) }));
      nodes.push(svg('polyline', { class: 'line', points: pts.join(' ') }));
    }
    var cur = samples.length ? samples[samples.length - 1].n : 0;
    nodes.unshift(svg('title', {}, 'Listeners over time: ' + cur + ' now, at most ' + maxN + ' in the last ' + Math.round(span / 1000) + ' seconds'));
    chart.replaceChildren.apply(chart, nodes);
  }

  function renderTime(id, iso) {
    var dd = $(id);
    var cur = dd.querySelector('time');
    if (!iso || (cur && cur.getAttribute('datetime') === iso)) return;
    dd.replaceChildren(el('time', { datetime: iso }, isoText(iso)));
  }

  // The loudness meter: short-term loudness from -60 to 0 LUFS on a 600-wide SVG.
  var LOUDNESS_NOTE = 'ITU-R BS.1770-4, measured on the publisher\u2019s audio. EBU R128 aims at \u221223 LUFS; streaming services at about \u221216.';
  var LOUDNESS_NONE = 'Not measured now: nobody publishes, or the stream has no encoding process (quality low without silence detection, or the ABR ladder off).';
  function lufsText(v) { return v === null || v === undefined ? '\u2014' : v.toFixed(1).replace('-', '\u2212') + ' LUFS'; }
  function setText(id, text) { var e = $(id); if (e && e.textContent !== text) e.textContent = text; }
  function renderLoudness(l) {
    var meter = $('loudness-meter');
    if (!meter) return;
    var clamped = l ? Math.min(0, Math.max(-60, l.shortTermLufs)) : -60;
    meter.setAttribute('aria-valuenow', String(clamped));
    meter.setAttribute('aria-valuetext', l ? lufsText(l.shortTermLufs) : 'not measured');
    $('loudness-fill').setAttribute('width', String(Math.round((clamped + 60) * 100) / 10));
    setText('loudness-short', lufsText(l ? l.shortTermLufs : null));
    setText('loudness-momentary', lufsText(l ? l.momentaryLufs : null));
    setText('loudness-integrated', lufsText(l ? l.integratedLufs : null));
    setText('loudness-note', l ? LOUDNESS_NOTE : LOUDNESS_NONE);
  }

  function renderSource(source) {
    var holder = $('stream-source');
    if (!holder) return;
    var text = source === 'live' ? 'live audio' : source === 'fallback' ? 'the fallback episodes' : 'nothing (off air)';
    if (holder.textContent !== text) holder.textContent = text;
  }

  function apply(d) {
    renderStatus(d.status);
    renderSource(d.source);
    renderTime('started-at', d.startedAt);
    renderTime('ended-at', d.endedAt);
    $('listener-count').textContent = String(d.listenerCount);
    $('peak-count').textContent = String(d.peakListenerCount);
    $('total-count').textContent = String(d.totalListeners);
    $('avg-duration').textContent = duration(d.averageListenDurationSeconds);
    renderCountries(d.countries);
    renderNowPlaying(d.nowPlaying);
    renderTracks(d.tracks);
    renderErrors(d.errors);
    renderLoudness(d.loudness);
    samples.push({ t: Date.parse(d.at), n: d.listenerCount });
    if (samples.length > MAX_SAMPLES) samples.shift();
    renderChart();
  }

  var polling = false;
  function poll() {
    if (polling) return;
    polling = true;
    fetch(root.getAttribute('data-live-url'), { credentials: 'same-origin', headers: { Accept: 'application/json' } })
      .then(function (res) {
        if (res.status === 401) { location.reload(); return null; }
        return res.ok ? res.json() : null;
      })
      .then(function (d) { if (d) apply(d); })
      .catch(function () {})
      .then(function () { polling = false; });
  }
  poll();
  setInterval(poll, POLL_MS);

  // The player.
  var audio = $('player');
  var play = $('play');
  var state = $('player-state');
  var hls = null;
  function say(t) { state.textContent = t; }
  audio.addEventListener('playing', function () { say('Playing'); play.textContent = 'Stop'; });
  audio.addEventListener('waiting', function () { say('Buffering…'); });
  audio.addEventListener('pause', function () { if (hls) say('Paused'); });

  function loadHlsJs() {
    if (window.Hls) return Promise.resolve(window.Hls);
    return new Promise(function (resolve, reject) {
      var s = document.createElement('script');
      s.src = root.getAttribute('data-hls-js');
      s.onload = function () { window.Hls ? resolve(window.Hls) : reject(new Error('hls.js is not installed on the server')); };
      s.onerror = function () { reject(new Error('hls.js did not load')); };
      document.head.appendChild(s);
    });
  }
  function playbackUrl(only) {
    var url = only || root.getAttribute('data-hls-url');
    var tokenUrl = root.getAttribute('data-token-url');
    if (!tokenUrl) return Promise.resolve(url);
    var body = new URLSearchParams({ csrf_token: root.getAttribute('data-csrf') });
    return fetch(tokenUrl, { method: 'POST', credentials: 'same-origin', body: body })
      .then(function (res) { if (!res.ok) throw new Error('no listener token (HTTP ' + res.status + ')'); return res.json(); })
      .then(function (j) { return url + (url.indexOf('?') < 0 ? '?' : '&') + 'token=' + encodeURIComponent(j.token); });
  }
  function stop() {
    if (hls) { hls.destroy(); hls = null; }
    audio.pause();
    audio.removeAttribute('src');
    audio.load();
    play.textContent = 'Play';
    say('Stopped');
  }
  play.addEventListener('click', function () {
    if (hls || audio.getAttribute('src')) { stop(); return; }
    start(null);
  });
  // A broadcast's catch-up playlist (docs/behaviour.md §17) plays in the same player.
  document.addEventListener('click', function (ev) {
    var b = ev.target && ev.target.closest ? ev.target.closest('[data-catch-up-url]') : null;
    if (!b) return;
    if (hls || audio.getAttribute('src')) stop();
    start(b.getAttribute('data-catch-up-url'));
  });
  function start(only) {
    say('Loading…');
    playbackUrl(only).then(function (url) {
      if (audio.canPlayType('application/vnd.apple.mpegurl') && !(window.MediaSource || window.ManagedMediaSource)) {
        audio.src = url; // Safari on iOS: native HLS
        return audio.play();
      }
      return loadHlsJs().then(function (Hls) {
        if (!Hls.isSupported()) throw new Error('this browser cannot play HLS');
        hls = new Hls({ lowLatencyMode: true });
        hls.on(Hls.Events.ERROR, function (_e, data) {
          if (!data.fatal) return;
          // The playlist exists once the first segment does (a few seconds after going live), and
          // not at all while the stream is idle: try again until it is there.
          if (data.details === Hls.ErrorDetails.MANIFEST_LOAD_ERROR || data.details === Hls.ErrorDetails.MANIFEST_LOAD_TIMEOUT) {
            say('Waiting for the stream…');
            var h = hls;
            setTimeout(function () { if (hls === h) h.loadSource(url); }, 2000);
          } else if (data.type === Hls.ErrorTypes.NETWORK_ERROR) { say('Network error; retrying…'); hls.startLoad(); }
          else if (data.type === Hls.ErrorTypes.MEDIA_ERROR) { say('Media error; recovering…'); hls.recoverMediaError(); }
          else { say('Playback failed: ' + data.details); stop(); }
        });
        hls.loadSource(url);
        hls.attachMedia(audio);
        play.textContent = 'Stop';
        return audio.play();
      });
    }).catch(function (e) { say('Playback failed: ' + e.message); });
  }
})();
