// A standard WHATWG EventSource client (npm `eventsource`, pinned in package.json) on one SSE
// URL, counting its connections. It does NOT close itself on the run's ending event, as a
// client written for any SSE server would not: whether it stops reconnecting is up to the
// server (HTTP 204 No Content is the standard "stop" signal).
//
//   node eventsource_count.mjs URL EVENT_KIND...
//
// Environment: MNOTE_CLIENTS_DIR (the node_modules of tests/clients, exported by ./dev),
// MNOTE_TOKEN (sent as `Authorization: Bearer …` through eventsource's custom fetch).
//
// It ends when the client has closed (readyState CLOSED) and stayed closed for two reconnect
// intervals, or once it has connected MAX_CONNECTIONS times (a client that keeps
// reconnecting), or after HANG_GUARD_MS. It prints one JSON line: every connection attempt
// (status, the Last-Event-ID it sent), opens, errors, the events received (kinds and ids),
// whether it ended closed.
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [url, ...kinds] = process.argv.slice(2);
const dir = process.env.MNOTE_CLIENTS_DIR;
if (!url || !dir) {
  console.error('usage: MNOTE_CLIENTS_DIR=… MNOTE_TOKEN=… node eventsource_count.mjs URL EVENT_KIND...');
  process.exit(2);
}
const require = createRequire(path.join(dir, 'noop.js'));
const { EventSource } = await import(pathToFileURL(require.resolve('eventsource')).href);

// The library's default reconnect interval (a `retry:` field from the server would change it).
const RECONNECT_MS = 3000;
const MAX_CONNECTIONS = 5;
const HANG_GUARD_MS = 60000;

const report = { connections: [], opens: 0, errors: [], events: [], closed: false, reason: '' };
let es;

function finish(reason) {
  report.reason = reason;
  report.closed = es.readyState === EventSource.CLOSED;
  es.close();
  console.log(JSON.stringify(report));
  process.exit(0);
}

es = new EventSource(url, {
  fetch: async (input, init) => {
    const headers = new Headers(init.headers);
    headers.set('Authorization', `Bearer ${process.env.MNOTE_TOKEN ?? ''}`);
    const conn = { lastEventId: headers.get('last-event-id'), status: null };
    report.connections.push(conn);
    const res = await fetch(input, { ...init, headers });
    conn.status = res.status;
    if (report.connections.length >= MAX_CONNECTIONS) {
      setImmediate(() => finish('kept reconnecting'));
    }
    return res;
  },
});
es.onopen = () => report.opens++;
es.onerror = (e) => {
  report.errors.push({ code: e.code ?? null, message: e.message ?? null, readyState: es.readyState });
  if (es.readyState === EventSource.CLOSED) {
    // Closed for good (a WHATWG client never reconnects from CLOSED): watch for two more
    // reconnect intervals that nothing else happens.
    setTimeout(() => finish('closed'), 2 * RECONNECT_MS);
  }
};
for (const kind of kinds) {
  es.addEventListener(kind, (e) => report.events.push({ kind, id: e.lastEventId }));
}
setTimeout(() => finish('hang guard'), HANG_GUARD_MS);
