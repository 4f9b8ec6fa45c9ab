// quotaroute dashboard: plain JavaScript, no framework, no build step.
//
// The admin key lives in this tab's sessionStorage only and travels in the Authorization
// header, never in a URL. Live state comes from GET /admin/events (`state`, `clients`,
// `traffic` events), read with fetch() and a stream reader (EventSource cannot send headers). Every change the buttons make goes through
// the existing admin endpoints, which journal it with by: "admin".
'use strict';

const KEY_SLOT = 'quotaroute.adminKey';
const HISTORY_POINTS = 300; // one per second: five minutes
const STALE_AFTER_MS = 5000; // the feed sends traffic every second
const TIMELINE_EVERY_MS = 60000;
const TIMELINE_MIN_GAP_MS = 3000;
const PALETTE = ['#2563eb', '#16a34a', '#d97706', '#9333ea', '#0891b2', '#db2777', '#65a30d',
  '#ea580c', '#4f46e5', '#0d9488', '#be123c', '#854d0e'];

let adminKey = null;
let feed = null; // AbortController of the running feed
let state = null;
let stateAt = 0; // performance.now() when `state` arrived
let structure = ''; // what the rendered DOM was built from
let binds = []; // [element, update(state)] refreshed on every state
const traffic = []; // [{at, byId: {id: [attempts/s, failures/s]}}]
let attemptsSeen = 0; // since the page opened
let incident = '';
let timelineAt = 0;
let timelineTimer = null;
let timelineUrl = null;
let noticeTimer = null;

const $ = (id) => document.getElementById(id);

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === 'text') node.textContent = value;
    else if (name === 'class') node.className = value;
    else if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) {
      node.append(child instanceof Node ? child : String(child));
    }
  }
  return node;
}

function bind(node, update) {
  binds.push([node, update]);
  return node;
}

// A span counting `ms(state)` down from when the state arrived.
function countdown(ms, none) {
  const node = el('span', { class: 'countdown' });
  node.dataset.none = none || '—';
  return bind(node, (s) => {
    const value = ms(s);
    node.dataset.deadline = value === null || value === undefined ? '' : String(stateAt + value);
    tick(node);
  });
}

function tick(node) {
  const deadline = node.dataset.deadline;
  if (!deadline) { node.textContent = node.dataset.none; return; }
  const left = Number(deadline) - performance.now();
  node.textContent = left > 0 ? duration(left) : 'now';
}

function duration(ms) {
  if (ms < 1000) return (ms / 1000).toFixed(1) + ' s';
  const s = Math.round(ms / 1000);
  if (s < 60) return s + ' s';
  const m = Math.floor(s / 60);
  if (m < 60) return m + 'm ' + String(s % 60).padStart(2, '0') + 's';
  const h = Math.floor(m / 60);
  if (h < 48) return h + 'h ' + String(m % 60).padStart(2, '0') + 'm';
  return Math.floor(h / 24) + 'd ' + (h % 24) + 'h';
}

function number(n) {
  return Number(n).toLocaleString('en-US');
}

// ---- the admin API -------------------------------------------------------------------------

function call(method, path, key) {
  return fetch(path, {
    method,
    headers: { Authorization: 'Bearer ' + (key || adminKey) },
    cache: 'no-store',
    credentials: 'omit',
  });
}

async function errorOf(response) {
  try {
    const body = await response.json();
    if (body && body.error && body.error.message) return body.error.message;
  } catch (_) { /* not JSON */ }
  return response.statusText || 'HTTP ' + response.status;
}

async function signIn(candidate) {
  const message = $('login-error');
  message.hidden = true;
  let response;
  try {
    response = await call('GET', '/admin/state', candidate);
  } catch (error) {
    return loginFailed('The node cannot be reached: ' + error.message);
  }
  if (response.status === 403) {
    return loginFailed('Wrong admin key: the node says this key is not the admin key (403).');
  }
  if (response.status === 401) {
    return loginFailed('The node wants its admin key (401): ' + await errorOf(response));
  }
  if (!response.ok) {
    return loginFailed('The node answered ' + response.status + ': ' + await errorOf(response));
  }
  adminKey = candidate;
  sessionStorage.setItem(KEY_SLOT, candidate);
  $('key').value = '';
  $('login').hidden = true;
  $('dashboard').hidden = false;
  $('reload').hidden = false;
  $('signout').hidden = false;
  applyState(await response.json());
  startFeed();
  loadTimeline();

  function loginFailed(text) {
    sessionStorage.removeItem(KEY_SLOT);
    message.textContent = text;
    message.hidden = false;
    return false;
  }
}

function signOut(reason) {
  if (feed) feed.abort();
  feed = null;
  adminKey = null;
  sessionStorage.removeItem(KEY_SLOT);
  $('dashboard').hidden = true;
  $('reload').hidden = true;
  $('signout').hidden = true;
  $('login').hidden = false;
  setLive(false, 'not connected');
  const message = $('login-error');
  message.textContent = reason || '';
  message.hidden = !reason;
}

async function act(what, method, path) {
  let response;
  try {
    response = await call(method, path);
  } catch (error) {
    return notice(what + ' failed: ' + error.message, true);
  }
  if (response.status === 401 || response.status === 403) {
    return signOut('The admin key is no longer accepted (' + response.status + ').');
  }
  if (!response.ok) return notice(what + ' failed: ' + await errorOf(response), true);
  const body = await response.json().catch(() => ({}));
  notice(what + (body.summary ? ': ' + body.summary : ' done.'));
  // Shown at once, without waiting for the feed's next push.
  const fresh = await call('GET', '/admin/state').catch(() => null);
  if (fresh && fresh.ok) applyState(await fresh.json());
  scheduleTimeline(true);
}

function notice(text, bad) {
  const node = $('notice');
  node.textContent = text;
  node.className = bad ? 'notice bad' : 'notice';
  node.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { node.hidden = true; }, bad ? 12000 : 6000);
}

// ---- the live feed -------------------------------------------------------------------------

function setLive(on, text) {
  const node = $('live');
  node.className = on ? 'live on' : 'live off';
  node.textContent = text || (on ? 'live' : 'reconnecting…');
}

async function startFeed() {
  if (feed) feed.abort();
  const control = new AbortController();
  feed = control;
  let backoff = 1000;
  while (!control.signal.aborted) {
    try {
      const response = await fetch('/admin/events', {
        headers: { Authorization: 'Bearer ' + adminKey },
        cache: 'no-store',
        credentials: 'omit',
        signal: control.signal,
      });
      if (response.status === 401 || response.status === 403) {
        return signOut('The admin key is no longer accepted (' + response.status + ').');
      }
      if (!response.ok || !response.body) throw new Error('HTTP ' + response.status);
      setLive(true);
      backoff = 1000;
      await readEvents(response.body.getReader(), control.signal);
    } catch (_) {
      if (control.signal.aborted) return;
    }
    if (control.signal.aborted) return;
    setLive(false);
    await new Promise((resolve) => setTimeout(resolve, backoff));
    backoff = Math.min(backoff * 2, 10000);
  }
}

async function readEvents(reader, signal) {
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    let timer;
    const silence = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error('silent feed')), STALE_AFTER_MS);
    });
    let chunk;
    try {
      chunk = await Promise.race([reader.read(), silence]);
    } catch (error) {
      reader.cancel().catch(() => {});
      throw error;
    } finally {
      clearTimeout(timer);
    }
    if (chunk.done || signal.aborted) return;
    buffer += decoder.decode(chunk.value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      dispatch(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
    }
  }
}

function dispatch(block) {
  let name = 'message';
  const data = [];
  for (const line of block.split('\n')) {
    if (line.startsWith('event:')) name = line.slice(6).trim();
    else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
  }
  if (data.length === 0) return;
  let value;
  try { value = JSON.parse(data.join('\n')); } catch (_) { return; }
  if (name === 'state') applyState(value);
  else if (name === 'clients') renderClients(value.clients || []);
  else if (name === 'traffic') addTraffic(value);
  else if (name === 'error' && value.reason === 'key') signOut(value.message);
  else if (name === 'error') setLive(false, value.message);
}

// ---- rendering -----------------------------------------------------------------------------

// Numbers that change all the time are updated in place; anything else rebuilds the DOM
// (so a button is not replaced under the pointer twice a second).
const VOLATILE = new Set(['failures', 'cycles', 'retry_after_ms', 'cooldown_remaining_ms',
  'cooldown_level', 'in_flight', 'used', 'limit', 'resets_at_ms', 'remaining_ms',
  'failure_count', 'deficit', 'input_tokens', 'cached_input_tokens', 'cached_share',
  'pace', 'runs_out_at_ms', 'next_reset_at_ms', 'reserved', 'held', 'new', 'moved',
  'unused_at_reset']);

function applyState(next) {
  state = next;
  stateAt = performance.now();
  const shape = JSON.stringify(next, (k, v) => (VOLATILE.has(k) ? undefined : v))
    + JSON.stringify(next.connections.map((c) => c.cooldown_remaining_ms > 0));
  if (shape !== structure) {
    structure = shape;
    binds = [];
    renderProviders(next);
    renderConnections(next);
    renderCombos(next);
  }
  for (const [node, update] of binds) update(next, node);
  renderSummary(next);
  const now = incidentOf(next);
  if (now !== incident) {
    incident = now;
    scheduleTimeline(false);
  }
}

const provider = (s, name) => s.providers.find((p) => p.name === name) || {};
const connection = (s, id) => s.connections.find((c) => c.id === id) || {};

function renderSummary(s) {
  const locks = s.connections.reduce((n, c) => n + c.lockouts.length, 0);
  const unusable = s.connections.filter((c) => !connectionUsable(s, c)).length;
  const open = s.providers.filter((p) => p.breaker !== 'CLOSED').length;
  const inFlight = s.connections.reduce((n, c) => n + c.in_flight, 0);
  const last = traffic[traffic.length - 1];
  const rate = last ? Object.values(last.byId).reduce((n, v) => n + v[0], 0) : 0;
  const errors = last ? Object.values(last.byId).reduce((n, v) => n + v[1], 0) : 0;
  const stat = (value, label, bad) => el('div', { class: bad ? 'stat bad' : 'stat' },
    el('b', { text: value }), el('span', { text: label }));
  $('summary').replaceChildren(
    stat(number(Math.round(rate)), 'attempts / s'),
    stat(number(Math.round(errors)), 'failures / s', errors > 0),
    stat(number(inFlight), 'in flight'),
    // What `/admin/state` says a request to each combo gets now: how many targets it would
    // be sent to, and the router's refusal when none (behaviour §7).
    ...s.combos.map((combo) => stat('usable now: ' + combo.usable + ' of ' + combo.targets.length,
      combo.name, combo.usable < combo.targets.length)),
    ...s.combos.filter((combo) => combo.refusal).map((combo) => stat(refusalText(combo.refusal),
      combo.name + ': what a request gets now', true)),
    // Behaviour §13's forecast: a combo still serving that runs out before its next reset.
    ...s.combos.filter((combo) => !combo.refusal && combo.runs_out_at_ms > Date.now())
      .map((combo) => stat('runs out in ' + duration(combo.runs_out_at_ms - Date.now()),
        combo.name + ' before its next reset', true)),
    // Spare now (behaviour §13): quota each combo's windows are forecast to lose at their
    // next resets, what spare-class requests may use.
    ...s.combos.filter((combo) => (combo.spare_now || []).length > 0)
      .map((combo) => stat('spare now: ' + combo.spare_now.map((spare) =>
        number(spare.unused_at_reset) + ' of ' + number(spare.limit) + ' ' + spare.window).join(', '),
      combo.name + ': forecast lost at the next resets')),
    stat(s.connections.length - unusable + ' / ' + s.connections.length, 'connections usable', unusable > 0),
    stat(number(locks), 'model lockouts', locks > 0),
    stat(number(open), 'breakers not closed', open > 0),
  );
}

// The router's refusal in words: "429 until 17:20 UTC (in 59m 40s)", or without an end.
function refusalText(refusal) {
  if (refusal.retry_after_ms === null || refusal.retry_after_ms === undefined) {
    return refusal.status + ', until cleared';
  }
  const at = new Date(Date.now() + refusal.retry_after_ms).toISOString().slice(11, 16);
  return refusal.status + ' until ' + at + ' UTC (in ' + duration(refusal.retry_after_ms) + ')';
}

// Every combo target on connection `id`, with its block as `/admin/state` gives it.
const targetsOn = (s, id) => s.combos.flatMap((combo) => combo.targets).filter((t) => t.connection === id);

// A connection a request would be sent to now: one of its combo targets is not blocked (the
// routing's own verdict, `/admin/state`); on no combo, neither cooling nor disabled.
function connectionUsable(s, c) {
  const targets = targetsOn(s, c.id);
  if (targets.length) return targets.some((t) => !t.block);
  return !(c.cooldown_remaining_ms > 0 || c.disabled);
}

// What blocks every target of a connection, in the badge's words (null: one is usable).
const BLOCK_WORDS = {
  quota_exhausted: 'spent', reserved: 'reserved', rate_limited: 'locked', not_found: 'locked',
  cooldown: 'cooling', breaker_open: 'breaker open', probe_in_flight: 'breaker open',
  disabled_auth: 'disabled', disabled_billing: 'disabled',
};
function blockedAs(s, id) {
  const targets = targetsOn(s, id);
  if (!targets.length || targets.some((t) => !t.block)) return null;
  const words = targets.map((t) => BLOCK_WORDS[t.block.reason] || 'blocked');
  return ['spent', 'locked', 'reserved', 'breaker open', 'cooling', 'disabled'].find((w) => words.includes(w)) || words[0];
}

// What a window says of its account (§13): used to its limit, within the owner's reserve,
// nearly used (saturated), or nothing to say.
function windowState(b) {
  if (b.limit && b.used >= b.limit) return 'spent';
  if (b.reserved) return 'reserved';
  if (b.saturated) return 'saturated';
  return null;
}

// An account's state: what blocks all its targets, else its worst window state, or `ready`.
function accountState(s, c) {
  const blocked = blockedAs(s, c.id);
  if (blocked) return blocked;
  const states = (c.buckets || []).map(windowState);
  return ['spent', 'reserved', 'saturated'].find((st) => states.includes(st)) || 'ready';
}

// A window's pace and, when it runs out before its reset, when.
function paceText(b) {
  if (b.pace === undefined || b.pace === null) return '';
  const out = b.runs_out_at_ms > Date.now() ? ' · runs out in ' + duration(b.runs_out_at_ms - Date.now()) : '';
  return 'pace ' + Number(b.pace).toFixed(2) + out;
}

function renderProviders(s) {
  const head = el('tr', {}, ['Provider', 'Profile', 'Breaker', 'Failures', 'Cycles', 'Next probe', '']
    .map((h, i) => el('th', { class: i === 3 || i === 4 ? 'num' : null, text: h })));
  const rows = s.providers.map((p) => el('tr', { 'data-provider': p.name },
    el('td', {}, el('strong', { text: p.name })),
    el('td', { text: p.profile }),
    el('td', {}, el('span', { class: 'badge ' + p.breaker, 'data-breaker': p.breaker, text: p.breaker })),
    el('td', { class: 'num' }, boundNumber((x) => provider(x, p.name).failures)),
    el('td', { class: 'num' }, boundNumber((x) => provider(x, p.name).cycles)),
    el('td', {}, countdown((x) => provider(x, p.name).retry_after_ms)),
    el('td', {}, el('button', {
      type: 'button', class: 'small', 'data-action': 'reset-breaker',
      disabled: p.breaker === 'CLOSED',
      onclick: () => act('Breaker of ' + p.name + ' reset', 'POST',
        '/admin/providers/' + encodeURIComponent(p.name) + '/breaker/reset'),
      text: 'Reset breaker',
    })),
  ));
  $('providers').replaceChildren(el('thead', {}, head), el('tbody', {}, rows));
}

// A priming connection's entry in the state (behaviour §13), if it primes.
function primeOf(s, id) {
  return (s.primes || []).find((p) => p.connection === id);
}

function primeText(p) {
  if (!p) return '';
  const utc = (ms) => new Date(ms).toISOString().slice(0, 16).replace('T', ' ') + ' UTC';
  const last = p.last_primed_at_ms ? 'last ' + utc(p.last_primed_at_ms) : 'not yet';
  const next = p.next_prime_at_ms ? ', next ' + utc(p.next_prime_at_ms) : '';
  return last + next + ' (' + p.schedule + ')';
}

function renderConnections(s) {
  const cards = s.connections.map((c) => {
    const cooling = c.cooldown_remaining_ms > 0;
    const troubled = cooling || c.disabled || c.lockouts.length > 0;
    // Spent, reserved and saturated windows move with every reading: the badge follows them.
    const status = c.disabled
      ? el('span', { class: 'badge disabled', text: 'disabled: ' + c.disabled.reason })
      : cooling ? el('span', { class: 'badge cooling', text: 'cooling' })
        : bind(el('span', { 'data-account': c.id }), (x, node) => {
          const st = accountState(x, connection(x, c.id));
          node.className = 'badge ' + (st === 'ready' ? 'ok' : st.replace(' ', '-'));
          node.textContent = st;
        });
    const facts = el('dl', { class: 'facts' },
      el('dt', { text: 'in flight' }), el('dd', {}, boundNumber((x) => connection(x, c.id).in_flight)),
      el('dt', { text: 'cooldown' }), el('dd', {},
        countdown((x) => nonzero(connection(x, c.id).cooldown_remaining_ms), 'none'),
        bind(el('span', { class: 'muted' }), (x, node) => {
          const level = connection(x, c.id).cooldown_level;
          node.textContent = level ? '  (level ' + level + ')' : '';
        })),
      el('dt', { text: 'cached input' }), bind(el('dd', { 'data-cached-share': c.id }), (x, node) => {
        node.textContent = cachedShare(connection(x, c.id));
      }),
      primeOf(s, c.id) ? [el('dt', { text: 'primed' }), bind(el('dd', { 'data-prime': c.id }), (x, node) => {
        node.textContent = primeText(primeOf(x, c.id));
      })] : null,
      c.disabled ? [el('dt', { text: 'disabled' }), el('dd', {}, c.disabled.reason + ', ',
        countdown((x) => (connection(x, c.id).disabled || {}).remaining_ms, 'until cleared'))] : null,
    );
    // Each window as a bar: used of its limit, its reset countdown, its pace and state.
    const buckets = c.buckets.map((b) => {
      const fill = el('i');
      const text = el('span');
      const pace = el('span', { class: 'pace', 'data-window-pace': c.id + '/' + b.window });
      const row = el('div', { class: 'bucket', 'data-window': b.window },
        el('div', {}, el('strong', { text: b.window }), ' ', text, ' ',
          el('span', { class: 'muted' }, 'resets ', countdown((x) => {
            const at = bucketOf(x, c.id, b.window).resets_at_ms;
            return at ? Math.max(0, at - Date.now()) : null;
          }, 'never')), ' ', pace),
        el('div', { class: 'meter' }, fill));
      bind(row, (x) => {
        const now = bucketOf(x, c.id, b.window);
        const st = windowState(now);
        row.className = st ? 'bucket ' + st : 'bucket';
        row.dataset.state = st || 'ok';
        text.textContent = number(now.used || 0) + ' / ' + (now.limit ? number(now.limit) : '∞');
        fill.style.width = now.limit ? Math.min(100, (100 * now.used) / now.limit) + '%' : '0';
        pace.textContent = paceText(now);
      });
      return row;
    });
    const locks = c.lockouts.map((l) => el('div', {
      class: 'lock', 'data-lockout': c.id + '/' + l.model,
    },
    el('span', { class: 'model', text: l.model }),
    el('span', { class: 'why', text: [l.reason, l.quota_window && 'per ' + l.quota_window,
      l.error_code, l.upstream_code,
      l.resets_at_ms && 'resets ' + new Date(l.resets_at_ms).toISOString().slice(0, 16).replace('T', ' ') + ' UTC',
    ].filter(Boolean).join(' · ') }),
    countdown((x) => lockOf(x, c.id, l.model).remaining_ms),
    bind(el('span', { class: 'muted' }), (x, node) => {
      const n = lockOf(x, c.id, l.model).failure_count;
      node.textContent = n ? '×' + n : '';
    }),
    el('button', {
      type: 'button', class: 'small', 'data-action': 'clear-lockout',
      onclick: () => act('Lockout of ' + c.id + ' / ' + l.model + ' cleared', 'DELETE',
        '/admin/lockouts/' + encodeURIComponent(c.id) + '/' + encodeURIComponent(l.model)),
      text: 'Clear lockout',
    })));
    return el('article', { class: troubled ? 'conn troubled' : 'conn', 'data-connection': c.id },
      el('header', {}, el('strong', { text: c.id }), el('span', { class: 'provider', text: c.provider + ' · ' + c.auth }),
        status,
        el('button', {
          type: 'button', class: 'small quiet', 'data-action': 'clear-connection',
          disabled: !(cooling || c.disabled || c.cooldown_level > 0),
          onclick: () => act('Connection ' + c.id + ' cleared', 'POST',
            '/admin/connections/' + encodeURIComponent(c.id) + '/clear'),
          text: 'Clear connection',
        })),
      facts,
      buckets.length ? el('div', { class: 'buckets' }, buckets) : el('div', { class: 'bucket muted', text: 'no usage windows known yet' }),
      locks.length ? el('div', { class: 'locks' }, locks) : null);
  });
  $('connections').replaceChildren(...cards);
}

function nonzero(ms) {
  return ms > 0 ? ms : null;
}

// A connection's cached share of input tokens (behaviour §10): what its prompt cache saved.
function cachedShare(c) {
  if (c.cached_share === null || c.cached_share === undefined) return '— (no input yet)';
  return (100 * c.cached_share).toFixed(1) + ' % of ' + number(c.input_tokens) + ' tokens';
}

function boundNumber(value) {
  return bind(el('span'), (x, node) => {
    const v = value(x);
    node.textContent = v === null || v === undefined ? '—' : number(v);
  });
}

const bucketOf = (s, id, window) => (connection(s, id).buckets || []).find((b) => b.window === window) || {};
const lockOf = (s, id, model) => (connection(s, id).lockouts || []).find((l) => l.model === model) || {};
const targetOf = (s, combo, i) => ((s.combos.find((c) => c.name === combo) || {}).targets || [])[i] || {};
const affinityOf = (s, combo) => (s.affinity || []).find((a) => a.combo === combo);

// A combo's affinity hit rate since the node started (behaviour §10): the turns affinity kept
// on their account, placed new or moved, and the share of input the upstream's cache read.
function affinityText(a) {
  if (!a) return 'no conversation turns yet';
  const share = a.cached_share === null || a.cached_share === undefined ? '— (no input yet)'
    : (100 * a.cached_share).toFixed(1) + ' % of ' + number(a.input_tokens) + ' input tokens';
  return number(a.held) + ' held · ' + number(a.new) + ' new · ' + number(a.moved) + ' moved · cached '
    + share;
}

function renderCombos(s) {
  const cards = s.combos.map((combo) => el('div', { class: 'combo conn', 'data-combo': combo.name },
    el('h3', {}, combo.name, ' ', el('small', { text: combo.strategy })),
    el('p', { class: 'affinity' }, el('b', { text: 'affinity ' }), bind(el('span', { 'data-affinity': combo.name }),
      (x, node) => { node.textContent = affinityText(affinityOf(x, combo.name)); })),
    el('table', {},
      el('thead', {}, el('tr', {}, ['Connection', 'Model', 'Weight', 'Deficit', 'Pace', 'Now']
        .map((h, i) => el('th', { class: i > 1 && i < 5 ? 'num' : null, text: h })))),
      el('tbody', {}, combo.targets.map((t, i) => el('tr', {},
        el('td', { text: t.connection }),
        el('td', { text: t.model }),
        el('td', { class: 'num', text: t.weight }),
        el('td', { class: 'num' }, boundNumber((x) => targetOf(x, combo.name, i).deficit)),
        el('td', { class: 'num', 'data-pace': t.connection }, bind(el('span'), (x, node) => {
          const pace = targetOf(x, combo.name, i).pace;
          node.textContent = pace === undefined ? '—' : Number(pace).toFixed(2);
        })),
        // Whether a request would be sent to it now, and why not (`/admin/state`).
        el('td', { 'data-target-block': combo.name + '/' + t.connection }, bind(el('span'), (x, node) => {
          const block = targetOf(x, combo.name, i).block;
          node.className = block ? 'badge ' + (BLOCK_WORDS[block.reason] || 'blocked').replace(' ', '-') : 'badge ok';
          node.textContent = !block ? 'ready'
            : (BLOCK_WORDS[block.reason] || block.reason)
              + (block.remaining_ms ? ' ' + duration(block.remaining_ms) : '');
        }))))))));
  $('combos').replaceChildren(...cards);
}

function incidentOf(s) {
  return JSON.stringify([
    s.providers.map((p) => p.breaker !== 'CLOSED' && p.name),
    s.connections.map((c) => [c.cooldown_remaining_ms > 0, !!c.disabled,
      c.lockouts.map((l) => l.model)]),
  ]);
}

// ---- clients (behaviour §11) ---------------------------------------------------------------

// `/admin/clients`' windows, in the order of the panel's columns, with the unit shown.
const CLIENT_WINDOWS = [['requests_per_min', 'rpm'], ['tokens_per_min', 'tpm'], ['tokens_per_day', 'tpd']];

function usd(n) {
  return '$' + (n >= 1 ? n.toFixed(2) : n.toFixed(4));
}

// A span counting `ms` down from now (the 250 ms tick keeps it true between pushes).
function countdownFrom(ms, none) {
  const node = el('span', { class: 'countdown' });
  node.dataset.none = none || '—';
  node.dataset.deadline = ms === null || ms === undefined ? '' : String(performance.now() + ms);
  tick(node);
  return node;
}

// One row per client `/admin/clients` lists (with no [[clients]], the `default` client of
// server.api_keys); the card hides when there is none. The panel has no buttons, so each push
// rebuilds it. The view holds no key or digest.
function renderClients(list) {
  $('clients-card').hidden = list.length === 0;
  const heads = ['Client', 'Weight', 'In flight', 'Queued', 'Requests / min', 'Tokens / min',
    'Tokens / day', 'Spend', 'Models', 'Limited now'];
  const head = el('tr', {}, heads.map((h, i) => el('th', {
    scope: 'col', class: i >= 1 && i <= 6 ? 'num' : null, text: h,
  })));
  const rows = list.map((c) => {
    const windows = CLIENT_WINDOWS.map(([window, unit]) => {
      const w = (c.usage || []).find((u) => u.window === window) || { used: 0, limit: null };
      const limit = w.limit === null || w.limit === undefined ? '∞' : number(w.limit);
      const full = w.limit !== null && w.limit !== undefined && w.used >= w.limit;
      return el('td', { class: full ? 'num bad' : 'num', 'data-client-window': c.id + '/' + window },
        number(w.used) + ' / ' + limit + ' ' + unit);
    });
    const budget = c.budget_usd === null || c.budget_usd === undefined ? null : c.budget_usd;
    let meter = null;
    if (budget !== null) {
      const share = budget > 0 ? Math.min(100, (100 * c.spend_usd) / budget) : 100;
      const fill = el('i');
      fill.style.width = share + '%';
      meter = el('div', {
        class: share >= 100 ? 'meter full' : 'meter', role: 'img',
        'aria-label': share.toFixed(0) + ' % of the budget spent',
      }, fill);
    }
    const spend = el('td', { class: 'spend', 'data-client-spend': c.id, 'data-spend-usd': String(c.spend_usd) },
      el('span', { class: 'amount', text: usd(c.spend_usd) + (budget !== null ? ' / ' + usd(budget) : '') }),
      budget === null ? el('span', { class: 'muted', text: ' no budget' }) : null,
      meter,
      el('div', { class: 'muted' }, 'period ends in ',
        countdownFrom(Math.max(0, c.budget_resets_at_ms - Date.now()))));
    const models = el('td', { class: 'models', 'data-client-models': c.id },
      c.models ? c.models.join(', ') : el('span', { class: 'muted', text: 'all' }));
    const held = c.limited;
    const limited = el('td', { 'data-client-limited': c.id, 'data-limit': held ? held.limit : '' },
      held
        ? [el('span', { class: 'badge limited', text: 'limited: ' + held.limit }), ' retry in ',
          countdownFrom(held.retry_after_ms, 'never')]
        : el('span', { class: 'badge ok', text: 'admitting' }));
    return el('tr', { 'data-client': c.id, class: held ? 'limited' : null },
      el('td', {}, el('strong', { text: c.id })),
      el('td', { class: 'num', text: number(c.weight) }),
      el('td', { class: 'num', 'data-client-in-flight': c.id, text: number(c.in_flight) }),
      el('td', { class: 'num', 'data-client-queued': c.id, text: number(c.queued) }),
      windows, spend, models, limited);
  });
  const table = $('clients');
  table.className = 'clients';
  table.replaceChildren(el('thead', {}, head), el('tbody', {}, rows));
}

// ---- traffic charts ------------------------------------------------------------------------

function addTraffic(sample) {
  const seconds = Math.max(0.001, sample.interval_ms / 1000);
  const byId = {};
  for (const c of sample.connections) {
    byId[c.id] = [c.attempts / seconds, c.failures / seconds];
    attemptsSeen += c.attempts;
  }
  traffic.push({ at: Date.now(), byId });
  if (traffic.length > HISTORY_POINTS) traffic.shift();
  renderTraffic();
  $('traffic').dataset.attempts = String(attemptsSeen);
  $('traffic').dataset.samples = String(traffic.length);
  if (state) renderSummary(state);
}

function renderTraffic() {
  const ids = state ? state.connections.map((c) => c.id) : [];
  const colour = (i) => PALETTE[i % PALETTE.length];
  const legend = el('div', { class: 'legend' }, ids.map((id, i) => el('span', {},
    el('i', { 'data-colour': colour(i) }), id)));
  for (const swatch of legend.querySelectorAll('i')) swatch.style.background = swatch.dataset.colour;
  $('traffic').replaceChildren(
    el('div', { class: 'chart' }, el('h3', { text: 'attempts / s' }), chart(ids, 0, colour)),
    el('div', { class: 'chart' }, el('h3', { text: 'failures / s' }), chart(ids, 1, colour)),
    legend);
}

function chart(ids, which, colour) {
  const W = 600; const H = 150; const PAD = 28;
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
  svg.setAttribute('role', 'img');
  const max = Math.max(1, ...traffic.flatMap((t) => ids.map((id) => (t.byId[id] || [0, 0])[which])));
  const top = niceCeil(max);
  // The last minute at first, growing to five as the page stays open.
  const span = Math.min(HISTORY_POINTS, Math.max(60, traffic.length));
  const x = (i) => PAD + ((W - PAD - 6) * (span - traffic.length + i)) / (span - 1);
  const y = (v) => H - 18 - ((H - 30) * v) / top;
  const line = (x1, y1, x2, y2, stroke) => {
    const l = document.createElementNS(ns, 'line');
    for (const [k, v] of Object.entries({ x1, y1, x2, y2, stroke })) l.setAttribute(k, v);
    return l;
  };
  const text = (tx, ty, value, anchor) => {
    const t = document.createElementNS(ns, 'text');
    t.setAttribute('x', tx); t.setAttribute('y', ty); t.setAttribute('font-size', '11');
    t.setAttribute('fill', '#6b7280'); t.setAttribute('text-anchor', anchor || 'end');
    t.textContent = value;
    return t;
  };
  for (const f of [0, 0.5, 1]) {
    svg.append(line(PAD, y(top * f), W - 6, y(top * f), '#e5e7eb'), text(PAD - 4, y(top * f) + 4, fmtRate(top * f)));
  }
  svg.append(text(PAD, H - 4, '−' + (span >= 120 ? Math.round(span / 60) + ' min' : span + ' s'), 'start'),
    text(W - 6, H - 4, 'now'));
  ids.forEach((id, i) => {
    if (traffic.length < 2) return;
    const points = traffic.map((t, k) => x(k).toFixed(1) + ',' + y((t.byId[id] || [0, 0])[which]).toFixed(1));
    const path = document.createElementNS(ns, 'polyline');
    path.setAttribute('points', points.join(' '));
    path.setAttribute('fill', 'none');
    path.setAttribute('stroke', colour(i));
    path.setAttribute('stroke-width', '1.6');
    path.setAttribute('data-connection', id);
    svg.append(path);
  });
  return svg;
}

function niceCeil(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function fmtRate(v) {
  return v >= 1000 ? (v / 1000).toFixed(v >= 10000 ? 0 : 1) + 'k' : String(Math.round(v * 10) / 10);
}

// ---- the incident timeline -----------------------------------------------------------------

function scheduleTimeline(soon) {
  clearTimeout(timelineTimer);
  const wait = Math.max(soon ? 300 : 0, timelineAt + TIMELINE_MIN_GAP_MS - Date.now());
  timelineTimer = setTimeout(loadTimeline, wait);
}

async function loadTimeline() {
  clearTimeout(timelineTimer);
  timelineAt = Date.now();
  timelineTimer = setTimeout(loadTimeline, TIMELINE_EVERY_MS);
  if (!adminKey) return;
  let response;
  try {
    response = await call('GET', '/admin/timeline.svg?since=' + encodeURIComponent($('timeline-since').value));
  } catch (_) { return; }
  if (!response.ok) {
    $('timeline').replaceChildren(el('p', { class: 'error', text: 'timeline: ' + await errorOf(response) }));
    return;
  }
  const blob = await response.blob();
  const url = URL.createObjectURL(blob);
  const image = el('img', { alt: 'incident timeline', src: url });
  image.addEventListener('load', () => {
    if (timelineUrl) URL.revokeObjectURL(timelineUrl);
    timelineUrl = url;
    $('timeline').replaceChildren(image);
    $('timeline').dataset.loadedAt = String(Date.now());
  }, { once: true });
}

// ---- start ---------------------------------------------------------------------------------

document.addEventListener('DOMContentLoaded', () => {
  $('login-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const candidate = $('key').value.trim();
    if (candidate) signIn(candidate);
  });
  $('signout').addEventListener('click', () => signOut(''));
  $('reload').addEventListener('click', () => act('Config reloaded', 'POST', '/admin/reload'));
  $('timeline-refresh').addEventListener('click', () => loadTimeline());
  $('timeline-since').addEventListener('change', () => loadTimeline());
  setInterval(() => document.querySelectorAll('.countdown').forEach(tick), 250);
  const remembered = sessionStorage.getItem(KEY_SLOT);
  if (remembered) signIn(remembered);
  else $('key').focus();
});
