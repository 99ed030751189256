// The KB page without reloads (the page works without this file):
// - live source status over server-sent events. Every event is the whole state (ids and each
//   row's status cell, rendered by the server's own template), sent on every (re)connect, so
//   the live view equals a reload; when the set of sources changed, the sources card is
//   re-read from the page itself. A closed stream (server or database restart) reconnects
//   with backoff, and reconnecting re-reads the state first.
// - confirmation dialogs for destructive links (`data-confirm`: delete KB, remove source);
//   without JavaScript the link opens the confirmation page.
// - uploads: several files, drag and drop, a per-file progress line, the server's outcome
//   ("already in this knowledge base"), a client-side kind and size check.
(function () {
  'use strict';

  // ------------------------------------------------------------ confirmation dialogs
  const dialog = document.getElementById('confirm-dialog');
  document.addEventListener('click', (ev) => {
    const a = ev.target.closest && ev.target.closest('a[data-confirm]');
    if (!a || !dialog || typeof dialog.showModal !== 'function') return;
    ev.preventDefault();
    const form = dialog.querySelector('form');
    form.action = a.dataset.confirmAction;
    dialog.querySelector('.confirm-title').textContent = a.dataset.confirmTitle || '';
    dialog.querySelector('.confirm-message').textContent = a.dataset.confirm;
    dialog.querySelector('.confirm-ok').textContent = a.dataset.confirmButton || 'OK';
    dialog.showModal();
    dialog.querySelector('.confirm-cancel').focus();
  });
  if (dialog) {
    dialog.querySelector('.confirm-cancel').addEventListener('click', () => dialog.close());
  }

  // ------------------------------------------------------------ live status
  const card = document.getElementById('sources-card');
  const table = () => document.getElementById('sources');
  const elapsedLabels = () => JSON.parse((table() && table().dataset.elapsed) || '{}');

  function fmtElapsed(secs) {
    const l = elapsedLabels();
    const m = Math.floor(secs / 60);
    if (m < 1) return l.under || '';
    if (m < 60) return (l.min || '{m} min').replace('{m}', m);
    return (l.h || '{h} h {m} min').replace('{h}', Math.floor(m / 60)).replace('{m}', m % 60);
  }

  function tickElapsed() {
    const now = Date.now() / 1000;
    document.querySelectorAll('.progress-line[data-since]').forEach((p) => {
      const e = p.querySelector('.elapsed');
      if (e) e.textContent = ' · ' + fmtElapsed(Math.max(0, now - Number(p.dataset.since)));
    });
  }

  // Re-read the whole sources card from the page (a reload of just that part). A request
  // while one is in flight runs once more after it: the one in flight may predate the change.
  let refetching = null;
  let again = false;
  function refetchCard() {
    if (refetching) { again = true; return refetching; }
    // Marked as a background read, so it leaves the session's one-time notice to the next page.
    refetching = fetch(location.pathname, { credentials: 'same-origin', headers: { Accept: 'text/html', 'X-Mnote-Background': '1' } })
      .then((r) => (r.ok ? r.text() : Promise.reject(r.status)))
      .then((html) => {
        const doc = new DOMParser().parseFromString(html, 'text/html');
        const fresh = doc.getElementById('sources-card');
        if (fresh && card) card.innerHTML = fresh.innerHTML;
      })
      .catch(() => {})
      .finally(() => {
        refetching = null;
        if (again) { again = false; refetchCard(); }
      });
    return refetching;
  }

  function apply(snap) {
    const t = table();
    if (!t) return;
    const rows = Array.from(t.querySelectorAll('tbody tr[data-source-id]'));
    const ids = rows.map((r) => r.dataset.sourceId);
    const removed = Array.from(document.querySelectorAll('[data-removed-id]')).map((e) => e.dataset.removedId);
    const same = ids.length === snap.ids.length && ids.every((id, i) => id === snap.ids[i])
      && removed.length === snap.removed.length && removed.every((id, i) => id === snap.removed[i]);
    if (!same) { refetchCard(); return; }
    rows.forEach((row, i) => {
      const cell = row.querySelector('.status-cell');
      if (cell && cell.innerHTML.trim() !== snap.cells[i].trim()) cell.innerHTML = snap.cells[i];
      const link = row.querySelector('td.path a');
      // A source indexed since the page loaded becomes a link to the viewer.
      if (!link && cell && cell.querySelector('.status.indexed')) refetchCard();
    });
    tickElapsed();
  }

  let es = null;
  let backoff = 1000;
  function connect() {
    const t = table();
    if (!t || !window.EventSource) return;
    es = new EventSource(t.dataset.events);
    es.addEventListener('open', () => { backoff = 1000; });
    es.addEventListener('sources', (ev) => {
      backoff = 1000;
      document.documentElement.dataset.kbLive = 'synced';
      apply(JSON.parse(ev.data));
    });
    es.addEventListener('error', () => {
      document.documentElement.dataset.kbLive = 'reconnecting';
      // The browser retries by itself while the stream is CONNECTING; a failed (re)connect
      // (an error status while the database is away) closes it for good: retry ourselves.
      if (es.readyState === EventSource.CLOSED) {
        es = null;
        setTimeout(connect, backoff);
        backoff = Math.min(backoff * 2, 15000);
      }
    });
  }
  if (card) {
    connect();
    setInterval(tickElapsed, 15000);
  }

  // ------------------------------------------------------------ uploads
  const form = document.querySelector('form.upload-form');
  if (form && window.FormData && window.XMLHttpRequest) {
    const input = form.querySelector('input[type=file]');
    const list = form.querySelector('.upload-progress');
    const msgs = JSON.parse(form.dataset.msgs || '{}');
    const accepted = (input.getAttribute('accept') || '').split(',').map((e) => e.trim().toLowerCase());
    const maxBytes = Number(form.dataset.maxBytes || 0);
    const csrf = form.querySelector('input[name=csrf_token]').value;
    const zone = form.querySelector('.dropzone');

    const line = (name) => {
      const li = document.createElement('li');
      li.className = 'upload-item';
      const n = document.createElement('span');
      n.className = 'name';
      n.textContent = name;
      const bar = document.createElement('progress');
      bar.max = 100;
      bar.value = 0;
      const st = document.createElement('span');
      st.className = 'outcome small';
      li.append(n, ' ', bar, ' ', st);
      list.append(li);
      return { li, bar, st };
    };

    const uploadOne = (file) => new Promise((resolve) => {
      const ui = line(file.name);
      const ext = '.' + (file.name.split('.').pop() || '').toLowerCase();
      if (!file.name.includes('.') || !accepted.includes(ext)) {
        ui.li.classList.add('bad');
        ui.bar.remove();
        ui.st.textContent = msgs.kind;
        return resolve(false);
      }
      if (maxBytes && file.size > maxBytes) {
        ui.li.classList.add('bad');
        ui.bar.remove();
        ui.st.textContent = msgs.too_large;
        return resolve(false);
      }
      const fd = new FormData();
      fd.append('file', file, file.name);
      const xhr = new XMLHttpRequest();
      xhr.open('POST', form.dataset.api);
      xhr.setRequestHeader('x-csrf-token', csrf);
      xhr.setRequestHeader('Accept', 'application/json');
      xhr.upload.addEventListener('progress', (e) => {
        if (e.lengthComputable) ui.bar.value = Math.round((e.loaded / e.total) * 100);
      });
      xhr.addEventListener('load', () => {
        ui.bar.value = 100;
        let body = null;
        try { body = JSON.parse(xhr.responseText); } catch (_) { /* not JSON */ }
        if (xhr.status >= 200 && xhr.status < 300 && body && body.results && body.results[0]) {
          const o = body.results[0].outcome;
          ui.li.classList.add(o);
          ui.st.textContent = msgs[o] || o;
          resolve(o !== 'duplicate');
        } else {
          ui.li.classList.add('bad');
          ui.st.textContent = (body && body.error && body.error.message) || msgs.failed;
          resolve(false);
        }
      });
      xhr.addEventListener('error', () => {
        ui.li.classList.add('bad');
        ui.st.textContent = msgs.failed;
        resolve(false);
      });
      xhr.send(fd);
    });

    const uploadAll = async (files) => {
      list.innerHTML = '';
      let added = false;
      for (const f of files) added = (await uploadOne(f)) || added;
      input.value = '';
      if (added) refetchCard();
    };

    form.addEventListener('submit', (ev) => {
      if (!input.files.length) return;
      ev.preventDefault();
      uploadAll(Array.from(input.files));
    });
    ['dragenter', 'dragover'].forEach((t) => zone.addEventListener(t, (ev) => {
      ev.preventDefault();
      zone.classList.add('over');
    }));
    ['dragleave', 'drop'].forEach((t) => zone.addEventListener(t, () => zone.classList.remove('over')));
    zone.addEventListener('drop', (ev) => {
      ev.preventDefault();
      if (ev.dataTransfer && ev.dataTransfer.files.length) uploadAll(Array.from(ev.dataTransfer.files));
    });
  }
})();
