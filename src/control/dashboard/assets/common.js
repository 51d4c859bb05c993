// Skylark dashboard, every page: copy buttons, show/hide of hidden values, time-zone hint of the
// publish form. No dependencies; everything still works (minus copying) without this script.
(function () {
  'use strict';

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    // http:// (not a secure context): the old way, through a selection.
    return new Promise(function (resolve, reject) {
      var ta = document.createElement('textarea');
      ta.value = text;
      ta.setAttribute('readonly', '');
      ta.className = 'sr-only';
      document.body.appendChild(ta);
      ta.select();
      var ok = false;
      try { ok = document.execCommand('copy'); } catch (e) { ok = false; }
      document.body.removeChild(ta);
      ok ? resolve() : reject(new Error('copy failed'));
    });
  }

  document.addEventListener('click', function (ev) {
    var btn = ev.target.closest && ev.target.closest('[data-copy],[data-reveal]');
    if (!btn) return;
    var input = document.getElementById(btn.getAttribute('data-copy') || btn.getAttribute('data-reveal'));
    if (!input) return;
    if (btn.hasAttribute('data-reveal')) {
      var show = input.type === 'password';
      input.type = show ? 'text' : 'password';
      btn.textContent = show ? 'Hide' : 'Show';
      btn.setAttribute('aria-pressed', String(show));
      return;
    }
    var label = btn.textContent;
    copyText(input.value).then(function () {
      btn.textContent = 'Copied';
      btn.classList.add('copied');
    }, function () {
      btn.textContent = 'Press Ctrl+C';
      input.type = 'text';
      input.select();
    }).then(function () {
      setTimeout(function () { btn.textContent = label; btn.classList.remove('copied'); }, 1800);
    });
  });

  // The publish form: send the browser's time-zone offset with a scheduled time.
  var tz = document.getElementById('tz-offset');
  if (tz) {
    tz.value = String(new Date().getTimezoneOffset());
    var hint = document.getElementById('tz-hint');
    if (hint) {
      var zone = '';
      try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone; } catch (e) { zone = ''; }
      hint.textContent = '(your local time' + (zone ? ', ' + zone : '') + ')';
    }
    var at = document.getElementById('publish-at');
    var later = document.getElementById('when-later');
    if (at && later) at.addEventListener('input', function () { later.checked = true; });
  }
})();
