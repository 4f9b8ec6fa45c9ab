// Opens the dashboard in Debian's chromium, signs in and keeps it open for QR_SECONDS, for
// bench/dashboard.sh (what an open page costs the node). Prints one JSON line at the end.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const node = process.env.QR_NODE;
const key = process.env.QR_ADMIN_KEY;
const seconds = Number(process.env.QR_SECONDS || '10');
const profile = mkdtempSync(join(tmpdir(), 'qr-hold-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.QR_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  timeout: 20000,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = context.pages()[0] || await context.newPage();
  await page.goto(node + '/ui');
  await page.fill('#key', key);
  await page.click('#login-form button[type=submit]');
  await page.locator('#live.on').waitFor({ state: 'visible', timeout: 10000 });
  console.error('dashboard open');
  await page.waitForTimeout(seconds * 1000);
  console.log(JSON.stringify({ ok: true, attempts_seen: await page.evaluate(() => document.querySelector('#traffic').dataset.attempts) }));
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
