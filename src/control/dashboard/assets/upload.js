// Skylark dashboard, episode page: uploads the audio file with XMLHttpRequest (for the progress
// bar) to the session-authenticated upload route, with the CSRF token in X-CSRF-Token.
(function () {
  'use strict';
  var form = document.getElementById('upload-form');
  if (!form) return;
  var input = document.getElementById('audio-file');
  var bar = document.getElementById('upload-progress');
  var state = document.getElementById('upload-state');
  var button = document.getElementById('upload-button');
  var max = Number(form.getAttribute('data-max-bytes'));

  function say(text) { state.textContent = text; }
  function mb(n) { return (n / 1048576).toFixed(1) + ' MB'; }

  form.addEventListener('submit', function (ev) {
    ev.preventDefault();
    var file = input.files && input.files[0];
    if (!file) { say('Choose a file first.'); input.focus(); return; }
    if (max && file.size > max) { say('The file is larger than the limit of ' + mb(max) + '.'); return; }
    var xhr = new XMLHttpRequest();
    xhr.open('PUT', form.getAttribute('data-upload-url'));
    xhr.setRequestHeader('Content-Type', file.type || 'application/octet-stream');
    xhr.setRequestHeader('X-CSRF-Token', form.getAttribute('data-csrf'));
    bar.hidden = false;
    bar.value = 0;
    button.disabled = true;
    say('Uploading…');
    xhr.upload.addEventListener('progress', function (e) {
      if (!e.lengthComputable) return;
      var pct = Math.round((e.loaded / e.total) * 100);
      bar.value = pct;
      say('Uploading… ' + pct + ' % (' + mb(e.loaded) + ' of ' + mb(e.total) + ')');
    });
    xhr.addEventListener('load', function () {
      var body = null;
      try { body = JSON.parse(xhr.responseText); } catch (e) { body = null; }
      if (xhr.status === 200) {
        bar.value = 100;
        say('Uploaded and checked' + (body && body.audio && body.audio.durationSeconds ? ': ' + Math.round(body.audio.durationSeconds) + ' s of audio' : '') + '. Reloading…');
        // Leave the confirmation on screen long enough to be read before the page reloads.
        setTimeout(function () { location.reload(); }, 700);
        return;
      }
      button.disabled = false;
      say('Upload failed: ' + (body && body.error ? body.error.message : 'HTTP ' + xhr.status));
    });
    xhr.addEventListener('error', function () { button.disabled = false; say('Upload failed: the connection was lost.'); });
    xhr.send(file);
  });
})();
