// Debian's Chromium driven by playwright-core (no browser is ever
// downloaded), for the browser tests (through lib.mjs) and make bench-web.
// Nothing here reads the test environment, so the bench can import it.
import { mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';

export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

// Headless, without the sandbox (it will not start as root or in many
// containers), and quiet: no GPU, no first-run page, nothing fetched or
// synced in the background.
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

// Chromium in a fresh profile under `dir` (no cache or storage left from an
// earlier run). `playwright` is the imported playwright-core; other options
// go to launchPersistentContext, `args` after the common ones. Returns the
// context, its first page, the profile's path, and close(), which closes the
// browser and removes the profile.
export async function launchChromium(playwright, { dir, args = [], ...options }) {
  const chromium = playwright.chromium ?? playwright.default.chromium;
  const profile = mkdtempSync(path.join(dir, 'chromium-profile-'));
  let ctx;
  const close = async () => {
    try {
      await ctx?.close();
    } finally {
      rmSync(profile, { recursive: true, force: true });
    }
  };
  try {
    ctx = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, ...options, args: [...ARGS, ...args] });
    const page = ctx.pages()[0] ?? await ctx.newPage();
    return { ctx, page, profile, close };
  } catch (e) {
    await close().catch(() => {}); // the launch's error is the one to see
    throw e;
  }
}
