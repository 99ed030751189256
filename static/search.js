// Search page niceties (the page works without this): "/" focuses the query box, j/k move
// between documents, copy buttons put the citation Markdown on the clipboard (without script
// the citation is behind a <details>), the mode's explanation follows the mode select.
(function () {
  const box = document.getElementById('search-q');
  const typing = (el) => el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  const links = () => Array.from(document.querySelectorAll('#results .result-title'));

  document.addEventListener('keydown', (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
    if (e.key === '/' && box) {
      e.preventDefault();
      box.focus();
      box.select();
    } else if (e.key === 'j' || e.key === 'k') {
      const all = links();
      if (!all.length) return;
      const i = all.indexOf(document.activeElement);
      const next = e.key === 'j' ? Math.min(i + 1, all.length - 1) : Math.max(i - 1, 0);
      const target = all[i < 0 ? 0 : next];
      e.preventDefault();
      target.focus();
      // The document's block (a title sits in `.result-doc`, not in a passage's `.result`).
      (target.closest('.result-doc, .result') || target).scrollIntoView({ block: 'nearest' });
    }
  });

  // The selected mode's one-line explanation follows the select.
  const mode = document.getElementById('search-mode');
  const help = document.getElementById('mode-help');
  if (mode && help) {
    mode.addEventListener('change', () => {
      const opt = mode.options[mode.selectedIndex];
      if (opt && opt.dataset.help) help.textContent = opt.dataset.help;
    });
  }

  if (!navigator.clipboard) return;
  for (const b of document.querySelectorAll('button.copy[data-copy]')) {
    b.hidden = false;
    const label = b.textContent;
    b.addEventListener('click', () => {
      navigator.clipboard.writeText(b.dataset.copy).then(() => {
        b.textContent = b.dataset.done || label;
        setTimeout(() => { b.textContent = label; }, 1500);
      });
    });
  }
})();
