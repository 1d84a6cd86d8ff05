// Live receipts for the approval console. The pages work without this file:
// a pending send's page then reloads once and waits for its receipt on the
// server. With it, the page subscribes to the send's server-sent events and
// shows the receipt as soon as the executor stores it.
(function () {
  'use strict';
  var region = document.getElementById('result');
  if (!region || !region.dataset.events || typeof EventSource === 'undefined') {
    return;
  }
  var events = new EventSource(region.dataset.events);
  events.addEventListener('row', function (ev) {
    var row = document.getElementById(region.dataset.row);
    if (row) {
      row.outerHTML = ev.data;
    }
  });
  events.addEventListener('result', function (ev) {
    events.close();
    var state = /data-outcome="([^"]*)"/.exec(ev.data);
    region.innerHTML = ev.data;
    region.dataset.state = state ? state[1] : '';
    region.removeAttribute('aria-busy');
  });
})();
