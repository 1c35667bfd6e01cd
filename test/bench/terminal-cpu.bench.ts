// Where a terminal flood's CPU goes, without a sandbox: run with
//   npx tsx test/bench/terminal-cpu.bench.ts
// A host pty prints BENCH_MB (default 16) MB of build-like lines, optionally
// paced to BENCH_RATE MB/s (the pace a sandbox's pty reaches), through the real
// TerminalService and web host into the real UI in Chromium. Prints the wall
// time and the CPU seconds per MB of main (this process) and of each kind of
// Chromium process. With BENCH_PROFILE=1 it also records the renderer's CPU
// profile over CDP and prints the functions with the most self time.
// On a shared 2-core machine with a 2-vCPU guest, every CPU second spent here
// is taken from the guest, so CPU per MB is what the whole-path ratio follows.
// Chromium is driven by playwright here (for its profiler and tracing), whose
// Network domain copies every WebSocket frame to this process: main's and the
// browser process's figures include that; terminal-flood.bench.ts measures without it.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startWebHost } from '../../main/host/web/web-host.js';
import { DEFAULT_BATCH } from '../../main/terminal/flow-control.js';
import { spawnHostShell } from '../../main/terminal/host-shell.js';
import { openBrowser } from '../e2e/support/browser.js';
import { ensureE2eRendererBuilt } from '../e2e/support/build.js';
import { chromiumCpu } from '../support/process-cpu.js';
import { TERMINAL_TASK_ID, TerminalHostApp } from '../support/terminal-host-app.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const MB = Number(process.env.BENCH_MB ?? 16);
const RATE = Number(process.env.BENCH_RATE ?? 0);
const rounds = Number(process.env.BENCH_ROUNDS ?? 2);
const END = 'FLOOD-END-MARK';
function mainCpu(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

function topSelf(profile: { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] }, n: number): string[] {
  const byNode = new Map<number, number>();
  profile.samples.forEach((id, i) => byNode.set(id, (byNode.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const byName = new Map<string, number>();
  let total = 0;
  for (const node of profile.nodes) {
    const us = byNode.get(node.id) ?? 0;
    total += us;
    const f = node.callFrame;
    const key = `${f.functionName || '(anonymous)'} ${f.url ? path.basename(f.url) + ':' + f.lineNumber : ''}`;
    byName.set(key, (byName.get(key) ?? 0) + us);
  }
  return [...byName.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, us]) => `${((100 * us) / total).toFixed(1).padStart(5)}%  ${(us / 1e6).toFixed(2)} s  ${k}`);
}

async function main() {
  const staticDir = ensureE2eRendererBuilt(root);
  const work = await mkdtemp(path.join(os.tmpdir(), 'terminal-cpu-'));
  const file = path.join(work, 'flood.txt');
  const line = 'the quick brown fox jumps over the lazy dog while the build prints more and more lines';
  const lines: string[] = [];
  for (let i = 1, size = 0; size < MB * 1048576; i++) {
    const l = `${String(i).padStart(6)}\t${line}\n`;
    lines.push(l);
    size += l.length;
  }
  await writeFile(file, lines.join(''));
  const lineCount = lines.length;
  const pacer = path.join(work, 'pace.py');
  // Writes the file in 4 KiB pieces at RATE MB/s (what a slow pty upstream looks like).
  await writeFile(
    pacer,
    'import sys,time\nrate=float(sys.argv[2])*1048576\nf=open(sys.argv[1],"rb")\nt0=time.time();n=0\nout=sys.stdout.buffer\n' +
      'while True:\n  b=f.read(4096)\n  if not b: break\n  out.write(b);out.flush();n+=len(b)\n  d=n/rate-(time.time()-t0)\n  if d>0: time.sleep(d)\n',
  );
  // The shell stays a moment after the end mark: Linux discards what is still in
  // a pty's buffer when its session leader exits, and a paused reader leaves some there.
  const cmd = `${RATE > 0 ? `python3 ${pacer} ${file} ${RATE}` : `cat ${file}`}; echo ${END}; sleep 2`;

  // BENCH_BATCH_MS / BENCH_STREAM_MS / BENCH_CHUNK_KB try other host batching without editing the defaults.
  const batch = { ...DEFAULT_BATCH };
  if (process.env.BENCH_BATCH_MS) batch.delayMs = Number(process.env.BENCH_BATCH_MS);
  if (process.env.BENCH_STREAM_MS) batch.streamDelayMs = Number(process.env.BENCH_STREAM_MS);
  if (process.env.BENCH_CHUNK_KB) batch.maxChunkBytes = Number(process.env.BENCH_CHUNK_KB) * 1024;
  const app = new TerminalHostApp({ logDir: path.join(work, 'logs'), openShell: async () => { throw new Error('no shell here'); }, service: { batch } });
  const host = await startWebHost(app, { staticDir: process.env.FACTORY_STATIC_DIR ?? staticDir });
  // What crosses the WebSocket: data frames, events, acknowledgements.
  const seen = { frames: 0, frameBytes: 0, events: 0, acks: 0 };
  app.onTerminalData((e) => {
    seen.frames++;
    seen.frameBytes += e.data.byteLength;
  });
  app.onEvent(() => seen.events++);
  const ack = app.terminals.ack.bind(app.terminals);
  app.terminals.ack = (id, bytes) => {
    seen.acks++;
    ack(id, bytes);
  };
  const browser = await openBrowser();
  try {
    const page = browser.page;
    const cdp = await page.context().newCDPSession(page);
    await page.goto(host.url);
    await page.getByTestId(`task-select-${TERMINAL_TASK_ID}`).click();
    console.log(`${os.cpus().length} cores, load ${os.loadavg()[0]!.toFixed(2)}, ${MB} MB, rate ${RATE || 'unlimited'} MB/s, ${rounds} rounds`);
    for (let round = 1; round <= rounds; round++) {
      const profiling = process.env.BENCH_PROFILE === '1' && round === rounds;
      if (profiling) {
        await cdp.send('Profiler.enable');
        await cdp.send('Profiler.setSamplingInterval', { interval: 500 });
        await cdp.send('Profiler.start');
      }
      const tracing = process.env.BENCH_TRACE === '1' && round === rounds;
      const events: Array<{ name: string; ph: string; dur?: number; tdur?: number; tid: number; pid: number; args?: { name?: string } }> = [];
      if (tracing) {
        cdp.on('Tracing.dataCollected', (e) => events.push(...(e.value as unknown as typeof events)));
        await cdp.send('Tracing.start', { categories: 'devtools.timeline,blink,cc,viz', transferMode: 'ReportEvents' });
      }
      const c0 = chromiumCpu();
      const m0 = mainCpu();
      Object.assign(seen, { frames: 0, frameBytes: 0, events: 0, acks: 0 });
      const t0 = Date.now();
      const { source } = spawnHostShell({ cwd: work, cols: 120, rows: 30, shell: '/bin/sh', args: ['-c', cmd] });
      const info = app.runStage(source);
      let exited = false;
      void app.terminals.waitForExit(info.id).then(() => (exited = true));
      for (;;) {
        await new Promise((r) => setTimeout(r, exited ? 20 : 250));
        if (!exited) continue;
        const tail = await page.evaluate(
          (id) => {
            // The last rows only: reading all 10 000 rows every 20 ms would take the renderer's
            // time from the flood being measured (a baseline build may have text() alone).
            const h = (window as unknown as { __factoryTerminals?: { text(id: string): string; tail?(id: string, rows: number): string } }).__factoryTerminals;
            return h?.tail ? h.tail(id, 5) : (h?.text(id).slice(-300) ?? '');
          },
          info.id,
        );
        if (tail.includes(END)) break;
      }
      const s = (Date.now() - t0) / 1000;
      const m = mainCpu() - m0;
      const c1 = chromiumCpu();
      const text = await page.evaluate((id) => (window as unknown as { __factoryTerminals: { text(id: string): string } }).__factoryTerminals.text(id), info.id);
      const all = text.split('\n');
      const last = all[all.lastIndexOf(END) - 1] ?? '';
      if (!new RegExp(`^\\s*${lineCount}\\s+the quick`).test(last)) throw new Error(`the last line is wrong: ${JSON.stringify(last)}`);
      const st = app.terminals.stats(info.id);
      const per = (x: number) => `${x.toFixed(2)} s (${(x / MB).toFixed(3)} s/MB)`;
      console.log(`round ${round}: ${(MB / s).toFixed(2)} MB/s, wall ${s.toFixed(1)} s, pauses ${st.pauses}`);
      console.log(`  ${seen.frames} data frames (mean ${(seen.frameBytes / Math.max(1, seen.frames) / 1024).toFixed(1)} KiB), ${seen.acks} acks, ${seen.events} events`);
      console.log(`  main ${per(m)}`);
      let chromeTotal = 0;
      for (const [k, v] of Object.entries(c1)) {
        const d = v - (c0[k] ?? 0);
        chromeTotal += d;
        console.log(`  chromium ${k} ${per(d)}`);
      }
      console.log(`  total ${per(m + chromeTotal)}`);
      if (tracing) {
        const done = new Promise((r) => cdp.once('Tracing.tracingComplete', r));
        await cdp.send('Tracing.end');
        await done;
        const threads = new Map<string, string>();
        for (const e of events) if (e.ph === 'M' && e.name === 'thread_name') threads.set(`${e.pid}:${e.tid}`, e.args?.name ?? '?');
        const sums = new Map<string, number>();
        const counts = new Map<string, number>();
        for (const e of events) {
          // Thread time where the trace has it: wall time is inflated when the cores are shared.
          const us = e.tdur ?? e.dur;
          if (e.ph !== 'X' || !us) continue;
          const k = `${threads.get(`${e.pid}:${e.tid}`) ?? e.tid} ${e.name}`;
          sums.set(k, (sums.get(k) ?? 0) + us);
          counts.set(k, (counts.get(k) ?? 0) + 1);
        }
        console.log('trace, total thread time by thread and event (nested events overlap):');
        for (const [k, us] of [...sums.entries()].sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log(`  ${(us / 1e6).toFixed(2)} s  ${String(counts.get(k)).padStart(6)}x  ${k}`);
      }
      if (profiling) {
        const { profile } = (await cdp.send('Profiler.stop')) as { profile: { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] } };
        const out = path.join(os.tmpdir(), `terminal-renderer-${Date.now()}.cpuprofile`);
        await writeFile(out, JSON.stringify(profile));
        console.log(`renderer profile: ${out}`);
        for (const l of topSelf(profile, 25)) console.log('  ' + l);
      }
    }
  } finally {
    await browser.close();
    await host.close();
    await app.dispose();
    await rm(work, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
