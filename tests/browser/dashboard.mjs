// Drives the operator dashboard (GET /ui) in Debian's chromium through playwright-core, for
// tests/it/node_dashboard.rs. Every step is bounded; the last line on stdout is one JSON object:
// {"ok":true,"steps":[…],"lockout_shown_ms":N,…} or {"ok":false,"step":…,"error":…}.
//
// Environment: QR_NODE (the node's base URL), QR_ADMIN_KEY, QR_CLIENT_KEY, QR_MOCK (the mock
// upstream's base URL, for its fault rules), QR_SHOTS (where screenshots go; unset: none),
// QR_CHROMIUM (default /usr/bin/chromium), QR_LIMITED_KEY and QR_OTHER_KEY (the keys of the
// configured clients `team-a`, limited to 2 requests a minute, and `team-b`).

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const NODE = need('QR_NODE');
const ADMIN_KEY = need('QR_ADMIN_KEY');
const CLIENT_KEY = need('QR_CLIENT_KEY');
const MOCK = need('QR_MOCK');
const SHOTS = process.env.QR_SHOTS || '';
const CHROMIUM = process.env.QR_CHROMIUM || '/usr/bin/chromium';
const LIMITED_KEY = need('QR_LIMITED_KEY');
const OTHER_KEY = need('QR_OTHER_KEY');
const OPENAI_MODEL = 'gpt-4o-mini';
const ANTHROPIC_MODEL = 'claude-3-5-haiku';
const LOCKOUT_SHOWN_WITHIN_MS = 1000;

const result = { ok: false, steps: [] };
let step = 'start';
const watchdog = setTimeout(() => finish(new Error('the whole run took longer than 50 s')), 50000);

function need(name) {
  const value = process.env[name];
  if (!value) {
    console.log(JSON.stringify({ ok: false, step: 'env', error: `${name} is not set` }));
    process.exit(2);
  }
  return value;
}

function done(name, detail) {
  result.steps.push(name);
  console.error(`ok: ${name}${detail ? ' — ' + detail : ''}`);
}

function finish(error) {
  clearTimeout(watchdog);
  if (error) {
    console.log(JSON.stringify({ ok: false, step, error: String(error && error.stack || error), steps: result.steps }));
    process.exit(1);
  }
  result.ok = true;
  console.log(JSON.stringify(result));
  process.exit(0);
}

async function admin(method, path, body) {
  const headers = { Authorization: 'Bearer ' + ADMIN_KEY };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(NODE + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(5000),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

async function mockRules(rules) {
  const response = await fetch(MOCK + '/mock/rules', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(rules),
    signal: AbortSignal.timeout(5000),
  });
  if (response.status !== 204) throw new Error('mock rules: HTTP ' + response.status);
}

async function chat(key) {
  const response = await fetch(NODE + '/v1/chat/completions', {
    method: 'POST',
    headers: { Authorization: 'Bearer ' + (key || CLIENT_KEY), 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'team', messages: [{ role: 'user', content: 'hi' }] }),
    signal: AbortSignal.timeout(10000),
  });
  await response.arrayBuffer();
  return response;
}

async function message() {
  const response = await fetch(NODE + '/v1/messages', {
    method: 'POST',
    headers: { 'x-api-key': CLIENT_KEY, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'claude', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }),
    signal: AbortSignal.timeout(10000),
  });
  await response.arrayBuffer();
  return response;
}

function usd(n) {
  return '$' + (n >= 1 ? n.toFixed(2) : n.toFixed(4));
}

async function shot(page, name, options) {
  if (!SHOTS) return;
  await page.screenshot({ path: join(SHOTS, name), fullPage: true, ...options });
  done('screenshot ' + name);
}

async function run() {
  const profile = mkdtempSync(join(tmpdir(), 'qr-dashboard-'));
  step = 'launch';
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    timeout: 20000,
    viewport: { width: 1280, height: 900 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    await drive(context);
  } finally {
    await context.close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
  }
}

async function drive(context) {
  const page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(5000);
  const urls = [];
  const pageErrors = [];
  page.on('request', (request) => urls.push(request.url()));
  page.on('pageerror', (error) => pageErrors.push(String(error)));
  // Chromium logs every non-2xx answer as a console error (the wrong key's 403 among them):
  // those are checked where they are expected; anything else the page logs is a failure.
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !msg.text().startsWith('Failed to load resource')) pageErrors.push(msg.text());
  });
  page.on('response', (response) => {
    const url = new URL(response.url());
    const expected = response.status() === 403 && url.pathname === '/admin/state';
    if (response.status() >= 400 && !expected) pageErrors.push(`${response.status()} for ${url.pathname}`);
  });

  step = 'the page loads and asks for the key';
  const loaded = await page.goto(NODE + '/ui', { waitUntil: 'load' });
  if (loaded.status() !== 200) throw new Error('/ui answered ' + loaded.status());
  await page.locator('#login').waitFor({ state: 'visible' });
  await page.locator('#key').waitFor({ state: 'visible' });
  if (await page.locator('#dashboard').isVisible()) throw new Error('the dashboard shows before a key');
  done('asks for the admin key');

  step = 'a wrong key shows a clear message';
  await page.fill('#key', 'sk-qr-not-the-admin-key');
  await page.click('#login-form button[type=submit]');
  const refusal = page.locator('#login-error');
  await refusal.waitFor({ state: 'visible' });
  const refusalText = (await refusal.textContent()) || '';
  if (!/wrong admin key/i.test(refusalText)) throw new Error('the refusal says: ' + refusalText);
  if (await page.locator('#dashboard').isVisible()) throw new Error('the dashboard opened with a wrong key');
  if (await page.evaluate(() => sessionStorage.length) !== 0) throw new Error('a wrong key was kept');
  result.wrong_key_message = refusalText;
  done('wrong key refused', refusalText);

  step = 'the right key shows the pool';
  await page.fill('#key', ADMIN_KEY);
  await page.click('#login-form button[type=submit]');
  await page.locator('#dashboard').waitFor({ state: 'visible' });
  const expected = (await admin('GET', '/admin/state')).body;
  for (const c of expected.connections) {
    await page.locator(`[data-connection="${c.id}"]`).first().waitFor({ state: 'visible' });
  }
  for (const p of expected.providers) {
    await page.locator(`tr[data-provider="${p.name}"]`).waitFor({ state: 'visible' });
  }
  for (const combo of expected.combos) {
    await page.locator(`[data-combo="${combo.name}"]`).waitFor({ state: 'visible' });
  }
  const cards = await page.locator('#connections [data-connection]').count();
  if (cards !== expected.connections.length) {
    throw new Error(`${cards} connection cards for ${expected.connections.length} connections`);
  }
  await page.locator('#live.on').waitFor({ state: 'visible' });
  result.connections_shown = cards;
  done('shows the pool', `${cards} connections, feed live`);

  step = 'a combo shows its affinity hit rate';
  // Three turns of one conversation through `team`, its system prompt long enough for
  // affinity (behaviour §10): the first placed new, the next held on its account, whose
  // prompt cache (the mock's, per key) reads the history it has seen.
  const system = 'You are the support agent of a large shop; follow the policies below. '.repeat(80);
  const history = [{ role: 'system', content: system }];
  for (let turn = 0; turn < 3; turn++) {
    history.push({ role: 'user', content: `question ${turn}: ` + 'the details of this case '.repeat(40) });
    const response = await fetch(NODE + '/v1/chat/completions', {
      method: 'POST',
      headers: { Authorization: 'Bearer ' + CLIENT_KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'team', messages: history }),
      signal: AbortSignal.timeout(10000),
    });
    if (response.status !== 200) throw new Error('conversation turn ' + turn + ' answered ' + response.status);
    const answer = await response.json();
    history.push({ role: 'assistant', content: answer.choices[0].message.content });
  }
  const hit = ((await admin('GET', '/admin/state')).body.affinity || []).find((a) => a.combo === 'team');
  if (!hit || !(hit.held > 0)) throw new Error('/admin/state counts no held turn: ' + JSON.stringify(hit));
  const hitText = Number(hit.held).toLocaleString('en-US') + ' held · ' + Number(hit.new).toLocaleString('en-US')
    + ' new · ' + Number(hit.moved).toLocaleString('en-US') + ' moved · cached '
    + (100 * hit.cached_share).toFixed(1) + ' % of ' + Number(hit.input_tokens).toLocaleString('en-US')
    + ' input tokens';
  await page.waitForFunction((want) => {
    const node = document.querySelector('[data-affinity="team"]');
    return node && node.textContent === want;
  }, hitText, { timeout: 3000 });
  result.affinity = { ...hit, shown: hitText };
  done('affinity hit rate shown', hitText);

  step = 'traffic reaches the chart';
  // Two clients keep sending through the incident below, as a pool under use would.
  let pumping = true;
  let pumped = 0;
  const pump = async () => {
    while (pumping) {
      const response = await chat().catch(() => null);
      if (response) pumped += 1;
      await new Promise((resolve) => setTimeout(resolve, 40));
    }
  };
  const pumps = [pump(), pump()];
  for (let i = 0; i < 4; i++) {
    const response = await message();
    if (response.status !== 200) throw new Error('a routine message answered ' + response.status);
  }
  await page.waitForFunction(() => {
    const chart = document.querySelector('#traffic');
    return document.querySelectorAll('#traffic polyline').length > 0
      && Number(chart.dataset.attempts || 0) >= 24 && Number(chart.dataset.samples || 0) >= 4;
  }, null, { timeout: 8000 });
  done('traffic charted');
  await page.waitForFunction(() => document.querySelector('#timeline img') !== null, null, { timeout: 5000 });
  await shot(page, 'ui-normal.png');

  step = 'an incident: anthropic answers 503';
  await mockRules([{ model: ANTHROPIC_MODEL, fault: { status: 503 } }]);
  for (let i = 0; i < 4; i++) await message();
  await page.locator('#connections .conn.troubled').first().waitFor({ state: 'visible', timeout: 3000 });
  done('cooldowns shown');

  step = 'a 429 is reflected within a second';
  await mockRules([
    { model: ANTHROPIC_MODEL, fault: { status: 503 } },
    { model: OPENAI_MODEL, fault: { status429: { reset: { retry_after_seconds: 600 } } }, times: 1 },
  ]);
  // The 429 cannot come before its rule is in place: time from there is an upper bound on the
  // time from the 429 (whichever client's request meets it) to the page.
  const answeredAt = Date.now();
  const answered = await chat();
  if (answered.status !== 200) throw new Error('a request answered ' + answered.status + ' during the 429');
  const locks = (await admin('GET', '/admin/lockouts')).body.lockouts.filter((l) => l.model === OPENAI_MODEL);
  if (locks.length !== 1) throw new Error('expected one lockout of ' + OPENAI_MODEL + ', got ' + JSON.stringify(locks));
  const lock = locks[0];
  const selector = `[data-lockout="${lock.connection}/${lock.model}"]`;
  await page.locator(selector).waitFor({ state: 'visible', timeout: LOCKOUT_SHOWN_WITHIN_MS + 1000 });
  const shownMs = Date.now() - answeredAt;
  result.lockout_shown_ms = shownMs;
  result.locked_connection = lock.connection;
  if (shownMs > LOCKOUT_SHOWN_WITHIN_MS) throw new Error(`the lockout took ${shownMs} ms to show`);
  const lockText = await page.locator(selector).textContent();
  if (!/rate_limited/.test(lockText) || !/429/.test(lockText)) throw new Error('the lockout row says: ' + lockText);
  done('lockout shown', `${lock.connection}/${lock.model} after ${shownMs} ms`);

  step = 'the timeline draws the incident';
  await page.waitForFunction((since) => Number(document.querySelector('#timeline').dataset.loadedAt || 0) > since,
    answeredAt, { timeout: 8000 });
  // The last ten minutes, where a fresh incident is wide enough to read.
  const before = Number(await page.locator('#timeline').getAttribute('data-loaded-at'));
  await page.selectOption('#timeline-since', '10m');
  await page.waitForFunction((since) => Number(document.querySelector('#timeline').dataset.loadedAt || 0) > since,
    before, { timeout: 5000 });
  await shot(page, 'ui-incident.png');
  await page.selectOption('#timeline-since', '1h');
  await page.setViewportSize({ width: 390, height: 844 });
  await page.locator(selector).scrollIntoViewIfNeeded();
  await shot(page, 'ui-phone.png', { fullPage: false });
  await page.setViewportSize({ width: 1280, height: 900 });
  pumping = false;
  await Promise.all(pumps);
  result.background_requests = pumped;

  step = 'each connection shows its cached share of input tokens';
  // Traffic has stopped: the page must come to show what /admin/state says, per connection.
  const shares = (await admin('GET', '/admin/state')).body.connections.map((c) => ({
    id: c.id,
    text: c.cached_share === null ? '— (no input yet)'
      : (100 * c.cached_share).toFixed(1) + ' % of ' + Number(c.input_tokens).toLocaleString('en-US') + ' tokens',
  }));
  if (!shares.some((s) => !s.text.startsWith('—'))) throw new Error('no connection counted input tokens');
  await page.waitForFunction((want) => want.every(({ id, text }) => {
    const node = document.querySelector(`[data-cached-share="${id}"]`);
    return node && node.textContent === text;
  }), shares, { timeout: 3000 });
  result.cached_shares = shares;
  done('cached shares shown', shares.map((s) => s.id + ': ' + s.text).join(', '));

  step = 'the clients panel shows each client as /admin/clients does';
  // One request of team-b held in flight by a slow answer, while nothing else moves.
  await mockRules([
    { model: ANTHROPIC_MODEL, fault: { status: 503 } },
    { model: OPENAI_MODEL, fault: { latency: { ms: 2500 } }, times: 1 },
  ]);
  const slow = chat(OTHER_KEY);
  let held = null;
  for (let i = 0; i < 40 && !held; i++) {
    const clients = (await admin('GET', '/admin/clients')).body.clients;
    if (clients.some((c) => c.id === 'team-b' && c.in_flight === 1)) held = clients;
    else await new Promise((resolve) => setTimeout(resolve, 50));
  }
  if (!held) throw new Error('team-b never had a request in flight');
  const shown = (clients) => clients.map((c) => ({
    id: c.id,
    in_flight: String(c.in_flight),
    spend: usd(c.spend_usd) + (c.budget_usd === null ? '' : ' / ' + usd(c.budget_usd)),
  }));
  const matches = (want) => want.every(({ id, in_flight, spend }) => {
    const flight = document.querySelector(`[data-client-in-flight="${id}"]`);
    const amount = document.querySelector(`[data-client-spend="${id}"] .amount`);
    return flight && amount && flight.textContent === in_flight && amount.textContent === spend;
  }) && document.querySelectorAll('#clients tr[data-client]').length === want.length;
  await page.waitForFunction(matches, shown(held), { timeout: 2000 });
  result.clients_in_flight = shown(held);
  if ((await slow).status !== 200) throw new Error('the slow request failed');
  await page.waitForFunction(() => document.querySelector('[data-client-in-flight="team-b"]').textContent === '0',
    null, { timeout: 2000 });
  done('clients shown', JSON.stringify(result.clients_in_flight));

  step = 'a client over its requests_per_min is shown limited';
  for (let i = 0; i < 2; i++) {
    const answered = await chat(LIMITED_KEY);
    if (answered.status !== 200) throw new Error('team-a answered ' + answered.status + ' within its limit');
  }
  const refused = await fetch(NODE + '/v1/chat/completions', {
    method: 'POST',
    headers: { Authorization: 'Bearer ' + LIMITED_KEY, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'team', messages: [{ role: 'user', content: 'hi' }] }),
    signal: AbortSignal.timeout(10000),
  });
  const refusedBody = await refused.json();
  if (refused.status !== 429 || refusedBody.error.code !== 'client_rate_limited') {
    throw new Error('the third request answered ' + refused.status + ' ' + JSON.stringify(refusedBody));
  }
  const refusedAt = Date.now();
  const limitedCell = page.locator('[data-client-limited="team-a"][data-limit="requests_per_min"]');
  await limitedCell.waitFor({ state: 'visible', timeout: 2000 });
  result.client_limited_shown_ms = Date.now() - refusedAt;
  const limitedText = (await limitedCell.textContent()) || '';
  if (!/limited: requests_per_min/.test(limitedText) || !/retry in \d/.test(limitedText)) {
    throw new Error('the limited client says: ' + limitedText);
  }
  const clientsAfter = (await admin('GET', '/admin/clients')).body.clients;
  await page.waitForFunction(matches, shown(clientsAfter), { timeout: 2000 });
  if (await page.locator('[data-client-limited="team-b"] .badge.ok').count() !== 1) {
    throw new Error('team-b is not shown admitting');
  }
  result.clients_after = shown(clientsAfter);
  result.limited_text = limitedText;
  const html = await page.content();
  for (const key of [CLIENT_KEY, LIMITED_KEY, OTHER_KEY]) {
    if (html.includes(key)) throw new Error('a client key is on the page');
  }
  done('limited client shown', limitedText + ' after ' + result.client_limited_shown_ms + ' ms');
  if (SHOTS) {
    await page.locator('#clients-card').screenshot({ path: join(SHOTS, 'ui-clients.png') });
    done('screenshot ui-clients.png');
  }

  step = 'clear the lockout with a click';
  await mockRules([]);
  await page.locator(`${selector} button[data-action="clear-lockout"]`).click();
  await page.locator(selector).waitFor({ state: 'detached', timeout: 2000 });
  const after = (await admin('GET', '/admin/lockouts')).body.lockouts;
  if (after.some((l) => l.connection === lock.connection && l.model === lock.model)) {
    throw new Error('the admin API still shows the lockout: ' + JSON.stringify(after));
  }
  done('lockout cleared', 'gone from the page and from /admin/lockouts');

  step = 'clear a connection with a click';
  const state = (await admin('GET', '/admin/state')).body;
  const cooling = state.connections.find((c) => c.cooldown_remaining_ms > 0);
  if (!cooling) throw new Error('no connection is cooling after the 503s');
  const card = page.locator(`#connections [data-connection="${cooling.id}"]`);
  await card.locator('button[data-action="clear-connection"]').click();
  await page.waitForFunction((id) => {
    const node = document.querySelector(`#connections [data-connection="${id}"]`);
    return node && !node.classList.contains('troubled');
  }, cooling.id, { timeout: 2000 });
  const cleared = (await admin('GET', '/admin/state')).body.connections.find((c) => c.id === cooling.id);
  if (cleared.cooldown_remaining_ms !== 0) throw new Error('the admin API still shows a cooldown');
  result.cleared_connection = cooling.id;
  done('connection cleared', cooling.id);

  step = 'a spent window shows on its account, its bar and its combo';
  // An operator's reading (behaviour §13): oa-2's 5-hour window used up for two more hours.
  const spentAt = new Date(Date.now() + 2 * 3600 * 1000).toISOString();
  const pushed = await admin('POST', '/admin/connections/oa-2/usage', { window: '5h', used_pct: 100, resets_at: spentAt });
  if (pushed.status !== 200) throw new Error('the usage push answered ' + pushed.status + ' ' + JSON.stringify(pushed.body));
  await page.locator('[data-account="oa-2"]', { hasText: 'spent' }).waitFor({ state: 'visible', timeout: 2000 });
  const bar = page.locator('[data-connection="oa-2"] .bucket[data-window="5h"]');
  await bar.and(page.locator('[data-state="spent"]')).waitFor({ state: 'visible', timeout: 2000 });
  const barText = (await bar.textContent()) || '';
  if (!/resets \d/.test(barText)) {
    throw new Error('the 5h bar says: ' + barText);
  }
  if (!/pace \d+\.\d\d/.test(barText)) throw new Error('the 5h bar shows no pace: ' + barText);
  const teamTargets = expected.combos.find((combo) => combo.name === 'team').targets.length;
  const headline = page.locator('#summary .stat', { hasText: 'team' });
  await headline.filter({ hasText: `usable now: ${teamTargets - 1} of ${teamTargets}` }).waitFor({ state: 'visible', timeout: 2000 });
  result.spent_bar = barText;
  await shot(page, 'ui-spent.png');
  // The operator's next reading: a fresh window.
  const fresh = await admin('POST', '/admin/connections/oa-2/usage', { window: '5h', used_pct: 10, resets_at: spentAt });
  if (fresh.status !== 200) throw new Error('the usage push answered ' + fresh.status);
  await page.waitForFunction(() => {
    const badge = document.querySelector('[data-account="oa-2"]');
    return badge && badge.textContent !== 'spent';
  }, null, { timeout: 2000 });
  done('spent window shown', barText);

  step = 'a pool whose only model is locked for an hour reads as /admin/state says';
  // Every Anthropic account answers 429 for an hour: one request locks the `claude` combo's
  // three targets, whose only model it is. The page must say what a request would get (none
  // usable, refused until when), not "ready" and "usable".
  for (const id of ['an-1', 'an-2', 'an-3']) await admin('POST', '/admin/connections/' + id + '/clear');
  await admin('POST', '/admin/providers/anthropic/breaker/reset');
  await mockRules([{ model: ANTHROPIC_MODEL, fault: { status429: { reset: { retry_after_seconds: 3600 } } } }]);
  const metSpent = await message();
  await mockRules([]);
  if (metSpent.status !== 429) throw new Error("the pool met its 429s with " + metSpent.status);
  const locked = (await admin('GET', '/admin/state')).body;
  const claude = locked.combos.find((combo) => combo.name === 'claude');
  if (claude.usable !== 0 || !claude.refusal || claude.refusal.status !== 429
    || !(claude.refusal.retry_after_ms > 3500 * 1000)) {
    throw new Error('/admin/state says of claude: ' + JSON.stringify(claude));
  }
  await page.locator('#summary .stat', { hasText: 'claude' })
    .filter({ hasText: `usable now: 0 of ${claude.targets.length}` }).waitFor({ state: 'visible', timeout: 2000 });
  const refusalStat = page.locator('#summary .stat', { hasText: 'claude: what a request gets now' });
  await refusalStat.filter({ hasText: /^429 until \d\d:\d\d UTC \(in (59m|1h 00m)/ }).waitFor({ state: 'visible', timeout: 2000 });
  const words = { quota_exhausted: 'spent', rate_limited: 'locked' };
  for (const t of claude.targets) {
    const word = words[t.block && t.block.reason];
    if (!word) throw new Error('claude target ' + t.connection + ' is not locked: ' + JSON.stringify(t));
    await page.locator(`[data-account="${t.connection}"]`, { hasText: word }).waitFor({ state: 'visible', timeout: 2000 });
    await page.locator(`[data-target-block="claude/${t.connection}"]`, { hasText: word }).waitFor({ state: 'visible', timeout: 2000 });
  }
  // The headline counts the connections a request would be sent to, as /admin/state has it.
  const targetsOf = (id) => locked.combos.flatMap((combo) => combo.targets).filter((t) => t.connection === id);
  const usableConnections = locked.connections.filter((c) => targetsOf(c.id).some((t) => !t.block)).length;
  await page.locator('#summary .stat', { hasText: 'connections usable' })
    .filter({ hasText: `${usableConnections} / ${locked.connections.length}` }).waitFor({ state: 'visible', timeout: 2000 });
  const summary = (await page.locator('#summary').textContent()) || '';
  if (/runs out in 0\.0 s/.test(summary) || summary.includes('claude before its next reset')) {
    throw new Error('a refused combo is forecast: ' + summary);
  }
  result.locked_pool = { refusal: (await refusalStat.textContent()) || '', usable_connections: usableConnections };
  for (const t of claude.targets) {
    await admin('DELETE', '/admin/lockouts/' + encodeURIComponent(t.connection) + '/' + encodeURIComponent(t.model));
  }
  await page.locator('#summary .stat', { hasText: 'claude' })
    .filter({ hasText: `usable now: ${claude.targets.length} of ${claude.targets.length}` }).waitFor({ state: 'visible', timeout: 2000 });
  done('locked pool shown as refused', result.locked_pool.refusal);

  step = 'reload the config with a click';
  await page.click('#reload');
  await page.locator('#notice', { hasText: 'Config reloaded' }).waitFor({ state: 'visible', timeout: 3000 });
  done('config reloaded');

  step = 'the key stays out of URLs and localStorage';
  const leaked = urls.filter((u) => u.includes(ADMIN_KEY));
  if (leaked.length) throw new Error('the admin key is in a URL: ' + leaked.join(' '));
  const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }));
  if (stored.includes(ADMIN_KEY)) throw new Error('the admin key is in localStorage');
  const session = await page.evaluate(() => sessionStorage.getItem('quotaroute.adminKey'));
  if (session !== ADMIN_KEY) throw new Error('the key is not kept for the tab');
  if (pageErrors.length) throw new Error('the page logged errors: ' + pageErrors.join(' | '));
  result.requests_seen = urls.length;
  done('key only in the header and sessionStorage', `${urls.length} requests checked`);
}

run().then(() => finish(), (error) => finish(error));
