// The console's only script, served from 'self' (the policy allows no inline script). Pages work
// without it; it adds a copy button, select-all, and confirmation before destructive actions.
'use strict';
document.addEventListener('click', function (e) {
  var t = e.target;
  if (!(t instanceof Element)) return;
  var copy = t.closest('[data-copy]');
  if (copy) {
    var source = document.getElementById(copy.getAttribute('data-copy'));
    if (source && navigator.clipboard) {
      navigator.clipboard.writeText(source.textContent || '').then(function () {
        copy.textContent = 'Copied';
      });
    }
  }
});
document.addEventListener('change', function (e) {
  var t = e.target;
  if (t instanceof HTMLInputElement && t.hasAttribute('data-select-all')) {
    var boxes = document.querySelectorAll('input[type=checkbox][name="' + t.getAttribute('data-select-all') + '"]');
    for (var i = 0; i < boxes.length; i++) boxes[i].checked = t.checked;
  }
});
document.addEventListener('submit', function (e) {
  var form = e.target;
  if (form instanceof HTMLFormElement && form.hasAttribute('data-confirm')) {
    if (!window.confirm(form.getAttribute('data-confirm'))) e.preventDefault();
  }
});
