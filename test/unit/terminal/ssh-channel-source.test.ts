// sshChannelSource against a real ssh2 server on 127.0.0.1 (the server side is
// in-process so the test controls exactly what the "guest" does).
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import ssh2 from 'ssh2';
import type { ServerChannel } from 'ssh2';
import { generateEd25519 } from '../../../main/ssh/sandbox-keys.js';
import { sshChannelSource } from '../../../main/terminal/ssh-channel-source.js';
import { TerminalService } from '../../../main/terminal/terminal-service.js';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const { Client, Server } = ssh2;
const hostKey = generateEd25519('test-guest').private;

interface Guest {
  onExec: (cmd: string, stream: ServerChannel) => void;
  windowChanges: Array<{ cols: number; rows: number }>;
  signals: string[];
}

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

async function startGuest(onExec: Guest['onExec']): Promise<{ guest: Guest; connect: () => Promise<InstanceType<typeof Client>> }> {
  const guest: Guest = { onExec, windowChanges: [], signals: [] };
  const server = new Server({ hostKeys: [hostKey] }, (client) => {
    client.on('authentication', (ctx) => ctx.accept());
    client.on('error', () => {});
    client.on('ready', () => {
      client.on('session', (accept) => {
        const session = accept();
        session.on('pty', (ok) => ok?.());
        session.on('window-change', (ok, _rej, info) => {
          guest.windowChanges.push({ cols: info.cols, rows: info.rows });
          ok?.();
        });
        session.on('signal', (ok, _rej, info) => {
          guest.signals.push(info.name);
          ok?.();
        });
        session.on('exec', (ok, _rej, info) => guest.onExec(info.command, ok()));
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  cleanups.push(() => server.close());
  const connect = () =>
    new Promise<InstanceType<typeof Client>>((resolve, reject) => {
      const c = new Client();
      c.on('ready', () => resolve(c)).on('error', reject);
      c.connect({ host: '127.0.0.1', port, username: 'root', password: 'x' });
      cleanups.push(() => c.end());
    });
  return { guest, connect };
}

function exec(c: InstanceType<typeof Client>, cmd: string) {
  return new Promise<ssh2.ClientChannel>((resolve, reject) =>
    c.exec(cmd, { pty: { cols: 80, rows: 24, term: 'xterm-256color' } }, (err, ch) => (err ? reject(err) : resolve(ch))),
  );
}

/** Writes `total` bytes honouring backpressure; returns a counter of bytes handed to ssh2. */
function produce(stream: ServerChannel, total: number, onDone: () => void) {
  const state = { written: 0 };
  const block = Buffer.alloc(16 * 1024, 0x61);
  const pump = () => {
    while (state.written < total) {
      const n = Math.min(block.length, total - state.written);
      state.written += n;
      if (!stream.write(block.subarray(0, n))) return void stream.once('drain', pump);
    }
    onDone();
  };
  pump();
  return state;
}

describe('sshChannelSource', () => {
  it('reports the exit status, forwards resize as window-change and data in order', async () => {
    const { guest, connect } = await startGuest((_cmd, stream) => {
      stream.write('hello ');
      setTimeout(() => {
        stream.write('world\r\n');
        stream.exit(7);
        stream.end();
      }, 100);
    });
    const src = sshChannelSource(await exec(await connect(), 'greet'));
    const chunks: Buffer[] = [];
    src.onData((d) => chunks.push(d));
    const exit = new Promise<[number | null, boolean]>((r) => src.onExit((code, lost) => r([code, lost])));
    src.resize(120, 40);
    expect(await exit).toEqual([7, false]);
    expect(Buffer.concat(chunks).toString()).toBe('hello world\r\n');
    expect(guest.windowChanges).toEqual([{ cols: 120, rows: 40 }]);
  });

  it('pause stops the far side writing (window not refilled) and resume lets it finish', async () => {
    let progress = { written: 0 };
    const total = 16 * 1024 * 1024;
    const { connect } = await startGuest((_cmd, stream) => {
      progress = produce(stream, total, () => {
        stream.exit(0);
        stream.end();
      });
    });
    const src = sshChannelSource(await exec(await connect(), 'flood'));
    let received = 0;
    src.onData((d) => (received += d.length));
    const exit = new Promise<[number | null, boolean]>((r) => src.onExit((code, lost) => r([code, lost])));
    src.pause();
    await new Promise((r) => setTimeout(r, 500));
    // While paused: the server may fill the 2 MiB channel window plus its own
    // stream buffer, but no more; our side holds what it read in its stream buffer.
    const writtenWhilePaused = progress.written;
    expect(writtenWhilePaused).toBeLessThan(8 * 1024 * 1024);
    await new Promise((r) => setTimeout(r, 300));
    expect(progress.written).toBe(writtenWhilePaused);
    src.resume();
    expect(await exit).toEqual([0, false]);
    expect(received).toBe(total);
  });

  it('kill sends KILL and closes; the exit is not reported as lost', async () => {
    const { guest, connect } = await startGuest((_cmd, stream) => {
      stream.write('running\r\n');
      stream.on('close', () => {});
    });
    const src = sshChannelSource(await exec(await connect(), 'sleep'));
    // The command is running once its first line arrives (no fixed pause).
    const running = new Promise<void>((r) => src.onData(() => r()));
    const exit = new Promise<[number | null, boolean]>((r) => src.onExit((code, lost) => r([code, lost])));
    await running;
    src.pause(); // even a paused channel must end on kill
    src.kill();
    expect(await exit).toEqual([null, false]);
    // The signal request travels to the server on its own; wait for it to land.
    await expect.poll(() => guest.signals, { timeout: 15_000, interval: 20 }).toEqual(['KILL']);
  });

  it('a dropped connection without exit status is reported as lost', async () => {
    const { connect } = await startGuest((_cmd, stream) => stream.write('partial output\r\n'));
    const client = await connect();
    const src = sshChannelSource(await exec(client, 'long'));
    const chunks: Buffer[] = [];
    const firstOutput = new Promise<void>((r) => src.onData((d) => {
      chunks.push(d);
      r();
    }));
    const exit = new Promise<[number | null, boolean]>((r) => src.onExit((code, lost) => r([code, lost])));
    await firstOutput;
    client.destroy();
    expect(await exit).toEqual([null, true]);
    expect(Buffer.concat(chunks).toString()).toBe('partial output\r\n');
  });

  it('through the TerminalService: 8 MB arrive complete with the source paused by watermarks', async () => {
    const total = 8 * 1024 * 1024;
    const { connect } = await startGuest((_cmd, stream) => {
      produce(stream, total, () => {
        stream.exit(0);
        stream.end();
      });
    });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'term-ssh-'));
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    let received = 0;
    let acked = 0;
    const svc = new TerminalService({
      logDir: dir,
      emit: () => {},
      emitData: (e) => (received += e.data.byteLength),
      options: { watermarks: { high: 256 * 1024, low: 64 * 1024 }, batch: { delayMs: 8, streamDelayMs: 32, streamAfterMs: 100, maxChunkBytes: 64 * 1024 } },
    });
    cleanups.push(() => void svc.dispose()); // not persisted: nothing to wait for
    const info = svc.register({ kind: 'shell', title: 'flood', cols: 80, rows: 24, source: sshChannelSource(await exec(await connect(), 'flood')) });
    svc.attach(info.id);
    let maxUnacked = 0;
    const viewer = setInterval(() => {
      maxUnacked = Math.max(maxUnacked, svc.stats(info.id).unacked);
      svc.ack(info.id, received - acked);
      acked = received;
    }, 10);
    const exit = await svc.waitForExit(info.id);
    clearInterval(viewer);
    expect(exit).toEqual({ code: 0, lost: false });
    expect(received).toBe(total);
    const st = svc.stats(info.id);
    expect(st.pauses).toBeGreaterThan(0);
    // Paused promptly: at most the high watermark plus one ssh2 read plus one batch in flight.
    expect(maxUnacked).toBeLessThan(256 * 1024 + 2 * 64 * 1024 + 64 * 1024);
  });
});
