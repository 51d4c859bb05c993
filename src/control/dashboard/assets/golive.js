// Skylark dashboard, stream page: "Go live from this browser" (docs/behaviour.md §18). Asks the
// dashboard for a publish token (session + CSRF), opens the chosen microphone, publishes it over
// WHIP (RFC 9725: one POST of the whole offer, the answer in the 201, DELETE of the Location to
// stop), shows the input level (AnalyserNode, dBFS), mute, the elapsed time and the stream's
// state as listeners see it (live.json). The stream key never reaches this script.
(function () {
  'use strict';
  var card = document.getElementById('golive');
  var page = document.getElementById('stream-page');
  if (!card || !page) return;
  var $ = function (id) { return document.getElementById(id); };
  var mic = $('golive-mic'), start = $('golive-start'), mute = $('golive-mute'), stopBtn = $('golive-stop');
  var level = $('golive-level'), elapsed = $('golive-elapsed'), state = $('golive-state'), seen = $('golive-listeners-see');
  var session = null; // { pc, stream, ctx, location, startedAt, timer, raf, poll }

  function say(text) { state.textContent = text; }
  function clock(ms) {
    var s = Math.floor(ms / 1000), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    var mm = (h > 0 && m < 10 ? '0' : '') + m, rr = (r < 10 ? '0' : '') + r;
    return (h > 0 ? h + ':' : '') + mm + ':' + rr;
  }

  if (!navigator.mediaDevices || !window.RTCPeerConnection) {
    start.disabled = true;
    say('This browser cannot publish from here (it needs HTTPS or localhost, and WebRTC).');
    return;
  }

  function listMics() {
    return navigator.mediaDevices.enumerateDevices().then(function (devices) {
      var chosen = mic.value;
      var opts = [new Option('Default microphone', '')];
      devices.filter(function (d) { return d.kind === 'audioinput' && d.deviceId && d.deviceId !== 'default'; }).forEach(function (d, i) {
        opts.push(new Option(d.label || 'Microphone ' + (i + 1), d.deviceId));
      });
      mic.replaceChildren.apply(mic, opts);
      mic.value = chosen;
    }).catch(function () {});
  }
  listMics();
  navigator.mediaDevices.addEventListener && navigator.mediaDevices.addEventListener('devicechange', listMics);

  function token() {
    var body = new URLSearchParams({ csrf_token: card.getAttribute('data-csrf') });
    return fetch(card.getAttribute('data-token-url'), { method: 'POST', credentials: 'same-origin', body: body }).then(function (res) {
      if (!res.ok) throw new Error('no publish token (HTTP ' + res.status + ')');
      return res.json();
    });
  }

  function gathered(pc) {
    if (pc.iceGatheringState === 'complete') return Promise.resolve();
    return new Promise(function (resolve) {
      var t = setTimeout(resolve, 3000); // host candidates come at once; do not wait on a slow interface
      pc.addEventListener('icegatheringstatechange', function () {
        if (pc.iceGatheringState === 'complete') { clearTimeout(t); resolve(); }
      });
    });
  }

  function meter(s) {
    var Ctx = window.AudioContext || window.webkitAudioContext;
    if (!Ctx) return;
    s.ctx = new Ctx();
    var an = s.ctx.createAnalyser();
    an.fftSize = 2048;
    s.ctx.createMediaStreamSource(s.stream).connect(an);
    var buf = new Float32Array(an.fftSize);
    (function tick() {
      if (session !== s) return;
      an.getFloatTimeDomainData(buf);
      var sum = 0;
      for (var i = 0; i < buf.length; i++) sum += buf[i] * buf[i];
      var db = 20 * Math.log10(Math.sqrt(sum / buf.length) || 1e-6);
      level.value = Math.max(-60, Math.min(0, db));
      level.textContent = Math.round(level.value) + ' dBFS';
      s.raf = requestAnimationFrame(tick);
    })();
  }

  function pollState(s) {
    var url = page.getAttribute('data-live-url');
    function once() {
      fetch(url, { credentials: 'same-origin' }).then(function (r) { return r.ok ? r.json() : null; }).then(function (j) {
        if (!j) return;
        seen.textContent = j.status + (j.source ? ' (' + j.source + ')' : '') + ' · ' + j.listenerCount + ' listening';
      }).catch(function () {});
    }
    once();
    s.poll = setInterval(once, 2000);
  }

  function end(message) {
    var s = session;
    session = null;
    if (!s) return;
    clearInterval(s.timer);
    clearInterval(s.poll);
    if (s.raf) cancelAnimationFrame(s.raf);
    if (s.location) fetch(s.location, { method: 'DELETE', headers: s.token ? { Authorization: 'Bearer ' + s.token } : {} }).catch(function () {});
    if (s.pc) s.pc.close();
    if (s.stream) s.stream.getTracks().forEach(function (t) { t.stop(); });
    if (s.ctx) s.ctx.close();
    level.value = -60;
    start.disabled = false;
    mic.disabled = false;
    mute.disabled = true;
    stopBtn.disabled = true;
    mute.textContent = 'Mute microphone';
    mute.setAttribute('aria-pressed', 'false');
    say(message || 'Stopped');
  }

  start.addEventListener('click', function () {
    if (session) return;
    var s = { pc: null, stream: null, ctx: null, location: null, token: null, startedAt: 0, timer: 0, raf: 0, poll: 0 };
    session = s;
    start.disabled = true;
    mic.disabled = true;
    say('Opening the microphone…');
    var audio = { echoCancellation: false, noiseSuppression: false, autoGainControl: false };
    if (mic.value) audio.deviceId = { exact: mic.value };
    navigator.mediaDevices.getUserMedia({ audio: audio, video: false }).then(function (stream) {
      s.stream = stream;
      listMics(); // labels are known once allowed
      meter(s);
      say('Connecting…');
      return token();
    }).then(function (t) {
      s.token = t.token;
      var pc = new RTCPeerConnection({ iceServers: [] });
      s.pc = pc;
      s.stream.getAudioTracks().forEach(function (track) { pc.addTransceiver(track, { direction: 'sendonly', streams: [s.stream] }); });
      pc.addEventListener('connectionstatechange', function () {
        if (session !== s) return;
        if (pc.connectionState === 'connected') say('Live: publishing');
        else if (pc.connectionState === 'failed') end('The connection failed');
        else if (pc.connectionState === 'disconnected') say('Connection interrupted…');
      });
      return pc.createOffer().then(function (offer) { return pc.setLocalDescription(offer); }).then(function () { return gathered(pc); }).then(function () {
        return fetch(t.whipUrl, { method: 'POST', headers: { 'Content-Type': 'application/sdp', Authorization: 'Bearer ' + t.token }, body: pc.localDescription.sdp });
      }).then(function (res) {
        return res.text().then(function (body) {
          if (res.status !== 201) {
            var msg = 'HTTP ' + res.status;
            try { msg = JSON.parse(body).error.message; } catch (e) { /* not JSON */ }
            throw new Error(msg);
          }
          s.location = new URL(res.headers.get('Location'), t.whipUrl).href;
          return pc.setRemoteDescription({ type: 'answer', sdp: body });
        });
      });
    }).then(function () {
      if (session !== s) return;
      s.startedAt = Date.now();
      elapsed.textContent = '0:00';
      s.timer = setInterval(function () { elapsed.textContent = clock(Date.now() - s.startedAt); }, 500);
      pollState(s);
      mute.disabled = false;
      stopBtn.disabled = false;
    }).catch(function (e) {
      if (session === s) end('Could not go live: ' + (e && e.message ? e.message : e));
    });
  });

  mute.addEventListener('click', function () {
    if (!session || !session.stream) return;
    var muted = mute.getAttribute('aria-pressed') !== 'true';
    session.stream.getAudioTracks().forEach(function (t) { t.enabled = !muted; });
    mute.setAttribute('aria-pressed', String(muted));
    mute.textContent = muted ? 'Unmute microphone' : 'Mute microphone';
    say(muted ? 'Live: muted (listeners hear silence)' : 'Live: publishing');
  });
  stopBtn.addEventListener('click', function () { end('Stopped'); });
  window.addEventListener('pagehide', function () { end(); });
})();
