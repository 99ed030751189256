// Live source status on the KB page (server-sent events; the page works without this).
(function () {
  const table = document.getElementById('sources');
  if (!table || !window.EventSource) return;
  const labels = JSON.parse(table.dataset.labels || '{}');
  const es = new EventSource(table.dataset.events);
  es.addEventListener('sources', (ev) => {
    const { items } = JSON.parse(ev.data);
    for (const s of items) {
      const row = table.querySelector(`tr[data-source-id="${s.id}"]`);
      if (!row) continue;
      const badge = row.querySelector('.status-cell .status');
      badge.className = `status ${s.status}`;
      badge.textContent = labels[s.status] || s.status;
      const err = row.querySelector('.error-line');
      err.hidden = !s.error;
      if (s.error) {
        err.querySelector('code').textContent = s.error.code;
        err.querySelector('.msg').textContent = s.error.message || '';
      }
    }
  });
})();
