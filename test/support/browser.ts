import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium as playwright, type Browser } from 'playwright-core';

export type { Browser, BrowserContext, Page } from 'playwright-core';

// The browser comes from npm alone (CI has no `playwright install` nor apt step): @sparticuz/chromium ships a
// brotli-packed headless shell that it unpacks to os.tmpdir() on first use; playwright-core drives it.
// The two are pinned together: playwright-core 1.59.1 speaks the protocol of Chromium 147, the last
// @sparticuz/chromium whose engines allow Node 20.

// Of @sparticuz/chromium's Lambda flags, drop those that break Playwright or make the page unlike a user's:
// --single-process crashes the browser (SIGTRAP) at the first newPage; Chromium keeps only the last
// --enable-features/--disable-features, so its lists would cancel Playwright's own; and tests must meet
// the same-origin and mixed-content rules a real browser applies.
const DROPPED = ['--single-process', '--disable-web-security', '--allow-running-insecure-content', '--disable-site-isolation-trials'];
const kept = (args: string[]) =>
  args.filter((a) => !DROPPED.includes(a) && !a.startsWith('--enable-features=') && !a.startsWith('--disable-features='));

// No network here beyond loopback: stop every background fetch, which would only wait on timeouts.
const OFFLINE_ARGS = [
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
  '--disable-default-apps',
  '--disable-extensions',
  '--disable-breakpad',
  '--disable-crash-reporter',
  '--metrics-recording-only',
  '--no-service-autorun',
  '--password-store=basic',
  '--use-mock-keychain',
  '--mute-audio',
  '--disable-dev-shm-usage',
];

let shared: Promise<Browser> | undefined;

/** The test process's one headless Chromium, started on first call; pages get a fresh `browser.newContext()` each. */
export function launchBrowser(): Promise<Browser> {
  if (shared) return shared;
  const launching = start();
  shared = launching;
  const forget = () => {
    if (shared === launching) shared = undefined;
  };
  // A browser that failed to start, or died mid-run, must not be handed out again.
  launching.then((browser) => browser.on('disconnected', forget), forget);
  return launching;
}

/** Closes the shared browser, if one was started; safe to call more than once. */
export async function closeBrowser(): Promise<void> {
  const pending = shared;
  shared = undefined;
  if (!pending) return;
  const browser = await pending.catch(() => undefined);
  await browser?.close();
}

async function start(): Promise<Browser> {
  let executablePath = '';
  try {
    // Its type declarations are ESM-only, so TypeScript refuses a require() of it from this CommonJS file.
    const { default: chromium } = await import('@sparticuz/chromium');
    // Our pages need no WebGL: leave it off rather than run it on the software SwiftShader stack.
    chromium.setGraphicsMode = false;
    if (!unpackIntact()) dropUnpack();
    executablePath = await chromium.executablePath();
    fs.writeFileSync(unpackMarker(), String(fs.statSync(executablePath).size));
    return await playwright.launch({
      executablePath,
      headless: true,
      args: [...kept(chromium.args), ...OFFLINE_ARGS],
      timeout: 60_000,
    });
  } catch (err) {
    const cause = err instanceof Error ? err.message : String(err);
    throw new Error(
      `test/support/browser: headless Chromium did not start (binary: ${executablePath || 'not unpacked'}). ` +
        `It is unpacked from node_modules/@sparticuz/chromium into ${os.tmpdir()} on first use: check that npm ci ran and ` +
        `${os.tmpdir()} has ~250 MB free; if it persists, delete ${TMP_BINARY()} to force a fresh unpack.\n${cause}`,
      { cause: err },
    );
  }
}

// @sparticuz/chromium reuses any <tmpdir>/chromium it finds, even one half-written by an interrupted first
// run or unpacked by another version: trust it only if this version's marker records its size.
const TMP_BINARY = () => path.join(os.tmpdir(), 'chromium');

function unpackMarker(): string {
  // The package's exports hide its package.json: reach it from its entry point (build/cjs/index.cjs).
  const manifest = path.resolve(path.dirname(require.resolve('@sparticuz/chromium')), '..', '..', 'package.json');
  const { version } = JSON.parse(fs.readFileSync(manifest, 'utf8')) as { version: string };
  return path.join(os.tmpdir(), `.sparticuz-chromium-${version}.unpacked`);
}

function unpackIntact(): boolean {
  try {
    return fs.readFileSync(unpackMarker(), 'utf8') === String(fs.statSync(TMP_BINARY()).size);
  } catch {
    return false;
  }
}

function dropUnpack(): void {
  const tmp = os.tmpdir();
  for (const file of [unpackMarker(), TMP_BINARY(), path.join(tmp, 'fonts'), path.join(tmp, 'libGLESv2.so')]) {
    fs.rmSync(file, { force: true, recursive: true });
  }
}
