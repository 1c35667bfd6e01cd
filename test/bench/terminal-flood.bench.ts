// Terminal flood benchmark, run with: npx tsx test/bench/terminal-flood.bench.ts
// One sandbox; a text file of BENCH_MB (default 16) MB in the guest. Alternating,
// in the same run:
//   (a) OpenSSH: `ssh ... cat FILE > /dev/null` (and with -tt, through a pty),
//       and `ssh -tt ... true` to time its start and handshake alone;
//   (b) the session layer only: an ssh2 exec with a pty through TerminalService,
//       nobody viewing (no flow control);
//   (c) the whole path: the same exec as a stage, through the web host's
//       WebSocket into the real UI in Chromium, until xterm.js has parsed the
//       last line (flow control engaged by the renderer's acknowledgements).
//       Chromium is driven over a bare DevTools pipe (support/plain-chromium.ts),
//       not playwright, whose Network domain would copy every WebSocket frame to
//       this process and count that CPU as the app's.
// Prints throughput of each, the ratio (c)/(a), peak memory of main (this
// process, which is the app's main process under the web host) and of the
// Chromium renderer, and the CPU seconds per MB each phase cost on the host
// (the guest has as many vCPUs as the host has cores, so every host CPU second
// of the viewer's path is taken from the guest that produces the output).
// BENCH_BASELINE_STATIC_DIR=<another e2e renderer build> adds (c) through that
// renderer too, alternating with this one in the same run (before/after); the
// host's side of it can be set apart with BENCH_BASELINE_WINDOW_KB (the flow-control
// high watermark; the low one is a quarter), BENCH_BASELINE_STREAM_MS and
// BENCH_BASELINE_CHUNK_KB (flood batching), else it is this build's.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startWebHost } from '../../main/host/web/web-host.js';
import { sshChannelSource } from '../../main/terminal/ssh-channel-source.js';
import { DEFAULT_BATCH } from '../../main/terminal/flow-control.js';
import { TerminalService, type TerminalServiceOptions } from '../../main/terminal/terminal-service.js';
import { appPaths } from '../../main/state/paths.js';
import { QemuDriver, sandboxFiles } from '../../main/vm/qemu-driver.js';
import { ensureE2eRendererBuilt } from '../e2e/support/build.js';
import { rendererRss } from '../support/chromium-memory.js';
import { chromiumCpu, pidCpu, sum, waitedChildrenCpu } from '../support/process-cpu.js';
import { PlainChromium } from './support/plain-chromium.js';
import { testImage } from '../support/image.js';
import { TERMINAL_TASK_ID, TerminalHostApp } from '../support/terminal-host-app.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const MB = Number(process.env.BENCH_MB ?? 16);
const rounds = Number(process.env.BENCH_ROUNDS ?? 2);
const END = 'FLOOD-END-MARK';

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** The baseline viewer's host settings: this build's, or earlier ones named in the environment. */
function baselineHostSettings(): Partial<TerminalServiceOptions> {
  const env = (name: string) => (process.env[name] ? Number(process.env[name]) : undefined);
  const windowKb = env('BENCH_BASELINE_WINDOW_KB');
  const streamMs = env('BENCH_BASELINE_STREAM_MS');
  const chunkKb = env('BENCH_BASELINE_CHUNK_KB');
  return {
    ...(windowKb ? { watermarks: { high: windowKb * 1024, low: (windowKb * 1024) / 4 } } : {}),
    batch: { ...DEFAULT_BATCH, ...(streamMs ? { streamDelayMs: streamMs } : {}), ...(chunkKb ? { maxChunkBytes: chunkKb * 1024 } : {}) },
  };
}

function run(cmd: string, args: string[]): Promise<{ code: number | null; ms: number; stderr: string }> {
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, ms: Date.now() - t0, stderr }));
  });
}

/** The page at url with the terminal test task selected (the UI's pane follows its running stage). */
async function openTask(browser: PlainChromium, url: string): Promise<void> {
  const select = `document.querySelector('[data-testid="task-select-${TERMINAL_TASK_ID}"]')`;
  await browser.goto(url, select);
  await browser.evaluate(`${select}.click()`);
}

async function main() {
  const staticDir = ensureE2eRendererBuilt(root);
  const image = await testImage();
  const work = await mkdtemp(path.join(os.tmpdir(), 'terminal-bench-'));
  const sandboxDir = path.join(work, 'sandbox');
  const vm = await new QemuDriver({ snapshotsDir: appPaths().snapshots }).start({ sandboxDir, image, memoryMb: 1024 });
  const ssh = await vm.ssh();
  const app = new TerminalHostApp({ logDir: path.join(work, 'logs'), openShell: async (cols, rows) => sshChannelSource(await ssh.shell({ cols, rows })) });
  const host = await startWebHost(app, { staticDir: process.env.FACTORY_STATIC_DIR ?? staticDir });
  const viewers = [{ key: 'chromium', label: 'into xterm.js in Chromium', app, host }];
  const baselineDir = process.env.BENCH_BASELINE_STATIC_DIR;
  if (baselineDir) {
    const baseApp = new TerminalHostApp({ service: baselineHostSettings(), logDir: path.join(work, 'logs-baseline'), openShell: async (cols, rows) => sshChannelSource(await ssh.shell({ cols, rows })) });
    viewers.push({ key: 'baseline', label: 'into xterm.js, baseline renderer', app: baseApp, host: await startWebHost(baseApp, { staticDir: baselineDir }) });
  }
  const browser = await PlainChromium.launch();
  const results: Record<string, number[]> = { openssh: [], opensshPty: [], opensshPtyNoSetup: [], session: [], chromium: [], baseline: [] };
  const peaks: Record<string, { main: number; renderer: number; heap: number }> = {};
  let pauses = 0;
  // CPU seconds per MB, per phase: [qemu, ssh client or main, chromium].
  const cpu: Record<string, Array<[number, number, number]>> = { opensshPty: [], session: [], chromium: [], baseline: [] };
  const cpuNow = (): [number, number, number, number] => [pidCpu(vm.pid), pidCpu('self'), waitedChildrenCpu(), sum(chromiumCpu())];
  try {
    console.log(`accel ${vm.accel}, ${os.cpus().length} host cores, load ${os.loadavg()[0]!.toFixed(2)}, ${MB} MB of text, ${rounds} rounds`);
    // Text lines like build output: numbered, ~80 columns.
    const made = await ssh.run(
      `yes 'the quick brown fox jumps over the lazy dog while the build prints more and more lines' | head -c ${MB * 1048576} | nl -ba > /root/flood.txt && stat -c %s /root/flood.txt && wc -l < /root/flood.txt`,
      { timeoutMs: 600_000 },
    );
    if (made.code !== 0) throw new Error(`could not make the file: ${made.stderr}`);
    const [size, lineCount] = made.stdout.trim().split(/\s+/).map(Number) as [number, number];
    const mb = size / 1048576;

    // OpenSSH against the same sandbox, host key pinned through a known_hosts file.
    const files = sandboxFiles(sandboxDir);
    const knownHosts = path.join(work, 'known_hosts');
    const hostPub = readFileSync(files.hostPublicKey, 'utf8').trim();
    await writeFile(knownHosts, `[127.0.0.1]:${vm.sshPort} ${hostPub}\n`);
    const sshArgs = [
      '-i', files.clientKey, '-p', String(vm.sshPort),
      '-o', `UserKnownHostsFile=${knownHosts}`, '-o', 'StrictHostKeyChecking=yes', '-o', 'BatchMode=yes',
      '-o', 'IdentitiesOnly=yes', 'root@127.0.0.1',
    ];

    await openTask(browser, host.url);

    for (let round = 1; round <= rounds; round++) {
      // (a) OpenSSH, no pty and with a pty.
      for (const [label, extra, into] of [['openssh', [] as string[], results.openssh], ['openssh -tt', ['-tt'], results.opensshPty]] as const) {
        const c0 = cpuNow();
        const r = await run('ssh', [...extra, ...sshArgs, 'cat /root/flood.txt']);
        if (r.code !== 0) throw new Error(`${label} failed (${r.code}): ${r.stderr}`);
        const c1 = cpuNow();
        if (label === 'openssh -tt') cpu.opensshPty!.push([(c1[0] - c0[0]) / mb, (c1[2] - c0[2]) / mb, 0]);
        into.push(mb / (r.ms / 1000));
        console.log(`round ${round} ${label}: ${(mb / (r.ms / 1000)).toFixed(2)} MB/s`);
      }
      // OpenSSH's time includes starting the client and a whole handshake (key
      // exchange computed by the emulated guest), which the app's path does once per
      // connection, not per stage: time that alone, so the ratio can leave it out.
      {
        const r = await run('ssh', ['-tt', ...sshArgs, 'true']);
        if (r.code !== 0) throw new Error(`ssh -tt true failed (${r.code}): ${r.stderr}`);
        const ms = 1000 * (mb / results.opensshPty.at(-1)!) - r.ms;
        results.opensshPtyNoSetup.push(mb / (Math.max(1, ms) / 1000));
        console.log(`round ${round} openssh -tt connection alone (ssh -tt true): ${r.ms} ms`);
      }

      // (b) session layer, nobody viewing.
      {
        const svc = new TerminalService({ logDir: path.join(work, `logs-b${round}`), emit: () => {}, emitData: () => {} });
        const c0 = cpuNow();
        const t0 = Date.now();
        const info = svc.register({ kind: 'stage', title: 'b', cols: 120, rows: 30, source: sshChannelSource(await ssh.exec('cat /root/flood.txt', { pty: { cols: 120, rows: 30 } })) });
        await svc.waitForExit(info.id);
        const ms = Date.now() - t0;
        const c1 = cpuNow();
        cpu.session!.push([(c1[0] - c0[0]) / mb, (c1[1] - c0[1]) / mb, 0]);
        results.session.push(mb / (ms / 1000));
        console.log(`round ${round} session layer (pty, no viewer): ${(mb / (ms / 1000)).toFixed(2)} MB/s`);
        await svc.dispose();
      }

      // (c) the whole path into xterm.js in Chromium.
      for (const { key, label, app, host } of viewers) {
        if (viewers.length > 1) await openTask(browser, host.url);
        const peak = (peaks[key] ??= { main: 0, renderer: 0, heap: 0 });
        const c0 = cpuNow();
        const t0 = Date.now();
        const info = app.runStage(sshChannelSource(await ssh.exec(`cat /root/flood.txt; echo ${END}`, { pty: { cols: 120, rows: 30 } })));
        let exited = false;
        void app.terminals.waitForExit(info.id).then(() => (exited = true));
        // Sampling is kept light (every 250 ms, the page only asked once the
        // source ended): it shares the two cores with the guest and the renderer.
        let done = false;
        let samples = 0;
        while (!done) {
          await new Promise((r) => setTimeout(r, exited ? 20 : 250));
          if (samples++ % 4 === 0 || exited) {
            peak.main = Math.max(peak.main, process.memoryUsage().rss);
            peak.renderer = Math.max(peak.renderer, rendererRss());
            peak.heap = Math.max(peak.heap, await browser.jsHeapUsed());
          }
          if (exited) {
            // The last rows only: reading all 10 000 rows every 20 ms would take the renderer's
            // time from the flood being measured (a baseline build may have text() alone).
            const tail = await browser.evaluate<string>(
              `(() => { const h = window.__factoryTerminals; const id = ${JSON.stringify(info.id)}; return h?.tail ? h.tail(id, 5) : (h?.text(id).slice(-300) ?? ''); })()`,
            );
            done = tail.includes(END);
          }
          if (Date.now() - t0 > 30 * 60_000) throw new Error('the flood did not reach the renderer in 30 minutes');
        }
        const ms = Date.now() - t0;
        const c1 = cpuNow();
        cpu[key]!.push([(c1[0] - c0[0]) / mb, (c1[1] - c0[1]) / mb, (c1[3] - c0[3]) / mb]);
        const text = await browser.evaluate<string>(`window.__factoryTerminals.text(${JSON.stringify(info.id)})`);
        const lines = text.split('\n');
        const endAt = lines.lastIndexOf(END);
        const last = lines[endAt - 1] ?? '';
        if (!new RegExp(`^\\s*${lineCount}\\s+the quick`).test(last)) {
          throw new Error(`the last line is wrong: ${JSON.stringify(lines.slice(endAt - 3, endAt + 1))}`);
        }
        const st = app.terminals.stats(info.id);
        pauses += st.pauses;
        results[key]!.push(mb / (ms / 1000));
        console.log(`round ${round} ${label}: ${(mb / (ms / 1000)).toFixed(2)} MB/s (pauses ${st.pauses}, renderer ${await browser.evaluate<string | null>(`document.querySelector('[data-testid="terminal-pane"]')?.getAttribute('data-renderer') ?? null`)})`);
      }
    }

    const a = median(results.openssh!);
    const c = median(results.chromium!);
    console.log('');
    console.log(`median OpenSSH cat > /dev/null:        ${a.toFixed(2)} MB/s`);
    console.log(`median OpenSSH -tt cat > /dev/null:    ${median(results.opensshPty!).toFixed(2)} MB/s`);
    console.log(`  the same without its connection:     ${median(results.opensshPtyNoSetup!).toFixed(2)} MB/s`);
    console.log(`median session layer, pty, no viewer:  ${median(results.session!).toFixed(2)} MB/s`);
    console.log(
      `median into xterm.js in Chromium:      ${c.toFixed(2)} MB/s  (ratio to OpenSSH ${(c / a).toFixed(2)}, to OpenSSH -tt ${(c / median(results.opensshPty!)).toFixed(2)}, ` +
        `to OpenSSH -tt without its connection ${(c / median(results.opensshPtyNoSetup!)).toFixed(2)})`,
    );
    if (baselineDir) {
      const b = median(results.baseline!);
      console.log(`median baseline renderer:              ${b.toFixed(2)} MB/s  (ratio to OpenSSH ${(b / a).toFixed(2)}, to OpenSSH -tt ${(b / median(results.opensshPty!)).toFixed(2)})`);
    }
    console.log(`flow-control pauses during (c): ${pauses}`);
    const perMb = (k: string, i: number) => median(cpu[k]!.map((x) => x[i])).toFixed(3);
    console.log(`host CPU s/MB (median): OpenSSH -tt: QEMU ${perMb('opensshPty', 0)}, ssh client ${perMb('opensshPty', 1)}`);
    console.log(`                         session layer: QEMU ${perMb('session', 0)}, main ${perMb('session', 1)}`);
    console.log(`                         into xterm.js: QEMU ${perMb('chromium', 0)}, main ${perMb('chromium', 1)}, Chromium ${perMb('chromium', 2)}`);
    if (baselineDir) console.log(`              baseline renderer: QEMU ${perMb('baseline', 0)}, main ${perMb('baseline', 1)}, Chromium ${perMb('baseline', 2)}`);
    for (const { key, label } of viewers) {
      const p = peaks[key]!;
      console.log(`peak during (c) ${label}: RSS main (this process) ${(p.main / 1048576).toFixed(0)} MB; Chromium renderer RSS ${(p.renderer / 1048576).toFixed(0)} MB, JS heap ${(p.heap / 1048576).toFixed(0)} MB`);
    }
  } finally {
    await browser.close();
    for (const v of viewers) {
      await v.host.close();
      await v.app.dispose();
    }
    ssh.close();
    await vm.destroy();
    await rm(work, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
