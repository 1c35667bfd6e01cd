// Debian's Chromium for a benchmark that measures the page's own CPU: driven over
// a bare DevTools pipe with only the Runtime and Performance domains. Playwright
// enables the Network domain on every page, and then Chromium copies each
// WebSocket frame's payload to the driver (a 4 MB terminal flood sent 4.6 MB of
// frames over DevTools): CPU that the browser and this process spend only because
// a test drives them, and that the app's own window never pays.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { CHROMIUM, CHROMIUM_ARGS } from '../../e2e/support/browser.js';

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
}

export class PlainChromium {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private sessionId = '';

  private constructor(
    private readonly child: ChildProcess,
    private readonly profile: string,
  ) {
    const out = child.stdio[4] as Readable;
    let buf = '';
    out.setEncoding('utf8');
    out.on('data', (d: string) => {
      buf += d;
      for (let end = buf.indexOf('\0'); end >= 0; end = buf.indexOf('\0')) {
        const msg = JSON.parse(buf.slice(0, end)) as { id?: number; result?: unknown; error?: { message: string } };
        buf = buf.slice(end + 1);
        const p = msg.id !== undefined ? this.pending.get(msg.id) : undefined;
        if (!p) continue; // an event: none is enabled that the bench needs
        this.pending.delete(msg.id!);
        if (msg.error) p.reject(new Error(`DevTools: ${msg.error.message}`));
        else p.resolve(msg.result);
      }
    });
  }

  static async launch(): Promise<PlainChromium> {
    const profile = mkdtempSync(path.join(os.tmpdir(), 'factory-bench-chromium-'));
    const args = ['--headless', ...CHROMIUM_ARGS, '--remote-debugging-pipe', `--user-data-dir=${profile}`, '--window-size=1400,1000', 'about:blank'];
    const child = spawn(CHROMIUM, args, { stdio: ['ignore', 'ignore', 'ignore', 'pipe', 'pipe'] });
    const browser = new PlainChromium(child, profile);
    const { targetInfos } = (await browser.send('Target.getTargets')) as { targetInfos: Array<{ targetId: string; type: string }> };
    const page = targetInfos.find((t) => t.type === 'page');
    if (!page) throw new Error('Chromium opened no page');
    const { sessionId } = (await browser.send('Target.attachToTarget', { targetId: page.targetId, flatten: true })) as { sessionId: string };
    browser.sessionId = sessionId;
    await browser.send('Performance.enable', {}, true);
    return browser;
  }

  /** A DevTools command, to the browser or (onPage) to the page. */
  send(method: string, params: object = {}, onPage = false): Promise<unknown> {
    const id = this.nextId++;
    const msg = { id, method, params, ...(onPage ? { sessionId: this.sessionId } : {}) };
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      (this.child.stdio[3] as Writable).write(JSON.stringify(msg) + '\0');
    });
  }

  /** Evaluates an expression in the page and returns its value (JSON-serialisable). */
  async evaluate<T>(expression: string): Promise<T> {
    const r = (await this.send('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true }, true)) as {
      result: { value?: T };
      exceptionDetails?: { text: string; exception?: { description?: string } };
    };
    if (r.exceptionDetails) throw new Error(`in the page: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
    return r.result.value as T;
  }

  /** Loads a URL and waits until the expression is true in it. */
  async goto(url: string, readyWhen: string, timeoutMs = 30_000): Promise<void> {
    await this.send('Page.navigate', { url }, true);
    const end = Date.now() + timeoutMs;
    while (!(await this.evaluate<boolean>(`document.readyState === 'complete' && Boolean(${readyWhen})`).catch(() => false))) {
      if (Date.now() > end) throw new Error(`${url} was not ready (${readyWhen}) within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async jsHeapUsed(): Promise<number> {
    const { metrics } = (await this.send('Performance.getMetrics', {}, true)) as { metrics: Array<{ name: string; value: number }> };
    return metrics.find((m) => m.name === 'JSHeapUsedSize')?.value ?? 0;
  }

  async close(): Promise<void> {
    await this.send('Browser.close').catch(() => {}); // teardown: what is already gone is fine
    if (this.child.exitCode === null && this.child.signalCode === null) await new Promise((r) => this.child.once('exit', r));
    rmSync(this.profile, { recursive: true, force: true });
  }
}
