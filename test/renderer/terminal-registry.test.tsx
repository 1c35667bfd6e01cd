// The renderer's terminal registry and view against a real TerminalService and
// real ptys, joined by an in-process bridge that delivers calls' answers and
// events in one ordered queue, as the WebSocket transport does.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { act, cleanup, render, screen, waitFor as rtlWaitFor } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  apiInputs,
  type ApiInput,
  type ApiMethod,
  type ApiOutputs,
  type FactoryBridge,
  type FactoryEvent,
  type TerminalDataEvent,
} from '../../common/contract.js';
import { Listeners } from '../../common/listeners.js';
import { spawnHostShell } from '../../main/terminal/host-shell.js';
import { TerminalService, type TerminalServiceOptions } from '../../main/terminal/terminal-service.js';
import type { TerminalSource } from '../../main/terminal/types.js';
import { Terminal } from '@xterm/xterm';
import { TerminalRegistry, TerminalView } from '../../renderer/terminal/index.js';
import { WRITE_PIECE_BYTES } from '../../renderer/terminal/write-pacer.js';

// jsdom has no canvas; xterm.js and the WebGL addon probe it (null = unavailable,
// which is also what a browser without WebGL answers).
vi.hoisted(() => {
  HTMLCanvasElement.prototype.getContext = (() => null) as unknown as HTMLCanvasElement['getContext'];
});

class LoopbackBridge implements FactoryBridge {
  readonly service: TerminalService;
  private readonly events = new Listeners<FactoryEvent>();
  private readonly data = new Listeners<TerminalDataEvent>();
  readonly calls: Array<{ method: string; input: unknown }> = [];

  constructor(logDir: string, options?: Partial<TerminalServiceOptions>) {
    this.service = new TerminalService({
      logDir,
      emit: (e) => this.deliver(() => this.events.emit(e)),
      // The host hands the bytes to a transport: copy, as a socket would.
      emitData: (e) => {
        const copy = { sessionId: e.sessionId, data: new Uint8Array(e.data) };
        this.deliver(() => this.data.emit(copy));
      },
      ...(options ? { options } : {}),
    });
  }

  call<M extends ApiMethod>(method: M, input: ApiInput<M>): Promise<ApiOutputs[M]> {
    this.calls.push({ method, input });
    return new Promise((resolve, reject) => {
      // Validate like a host does, then run on the "host" side in order.
      setTimeout(() => {
        let out: unknown;
        let err: unknown;
        try {
          const parsed = apiInputs[method].parse(input) as Record<string, never>;
          out = this.dispatch(method, parsed);
        } catch (e) {
          err = e;
        }
        this.deliver(() => (err ? reject(err) : resolve(out as ApiOutputs[M])));
      }, 0);
    });
  }

  private dispatch(method: ApiMethod, i: Record<string, unknown>): unknown {
    const s = this.service;
    const id = i.sessionId as string;
    switch (method) {
      case 'terminal.attach':
        return s.attach(id);
      case 'terminal.write':
        return s.write(id, i.data as string);
      case 'terminal.resize':
        return s.resize(id, i.cols as number, i.rows as number);
      case 'terminal.ack':
        return s.ack(id, i.bytes as number);
      case 'terminal.close':
        return s.close(id);
      case 'terminal.list':
        return s.list();
      default:
        throw new Error(`not served here: ${method}`);
    }
  }

  /** One ordered queue for answers and events (a socket delivers in order). */
  private queue: Array<() => void> = [];
  private deliver(fn: () => void): void {
    this.queue.push(fn);
    if (this.queue.length === 1) setTimeout(() => this.drain(), 0);
  }
  private drain(): void {
    const batch = this.queue.splice(0);
    for (const fn of batch) fn();
  }

  onEvent(l: (e: FactoryEvent) => void) {
    return this.events.add(l);
  }
  onTerminalData(l: (e: TerminalDataEvent) => void) {
    return this.data.add(l);
  }
}

/** A source the test drives byte by byte. */
function manualSource() {
  let onData: (b: Buffer) => void = () => {};
  let onExit: (code: number | null, lost: boolean) => void = () => {};
  const written: string[] = [];
  const source: TerminalSource = {
    onData: (l) => (onData = l),
    onExit: (l) => (onExit = l),
    write: (d) => written.push(String(d)),
    resize: () => {},
    pause: () => {},
    resume: () => {},
    kill: () => onExit(null, false),
  };
  return { source, push: (b: Buffer | string) => onData(Buffer.from(b)), exit: (c: number) => onExit(c, false), written };
}

let dir: string;
let bridge: LoopbackBridge;
let registry: TerminalRegistry;

beforeEach(() => {
  // jsdom has no matchMedia; xterm.js asks it for device-pixel-ratio changes.
  if (typeof window.matchMedia !== 'function') {
    window.matchMedia = ((query: string) => ({
      matches: false,
      media: query,
      onchange: null,
      addListener: () => {},
      removeListener: () => {},
      addEventListener: () => {},
      removeEventListener: () => {},
      dispatchEvent: () => false,
    })) as typeof window.matchMedia;
  }
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'term-reg-'));
});
afterEach(async () => {
  cleanup();
  registry?.dispose();
  await bridge?.service.dispose();
  fs.rmSync(dir, { recursive: true, force: true });
});

function setup(options?: Partial<TerminalServiceOptions>) {
  bridge = new LoopbackBridge(path.join(dir, 'logs'), options);
  registry = new TerminalRegistry(bridge, { webgl: false });
  return { bridge, registry, service: bridge.service };
}

function ptyCommand(cmd: string) {
  return spawnHostShell({ cwd: dir, cols: 80, rows: 24, shell: '/bin/sh', args: ['-c', cmd] }).source;
}

async function waitFor(cond: () => boolean, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('TerminalRegistry', () => {
  it('replays scrollback once, then continues live without duplicates', async () => {
    const { service } = setup();
    const m = manualSource();
    const info = service.register({ kind: 'shell', title: 't', cols: 80, rows: 24, source: m.source });
    m.push('before attach\r\n');
    registry.acquire(info.id);
    // Emitted while the attach call is in flight: part of the replay, must not repeat.
    m.push('during ');
    await waitFor(() => registry.snapshot(info.id)?.phase === 'attached');
    m.push('after\r\n');
    await waitFor(() => registry.text(info.id).includes('after'));
    expect(registry.text(info.id)).toBe('before attach\nduring after');
    expect(registry.snapshot(info.id)?.info?.status).toBe('live');
  });

  it('joins UTF-8 sequences split across data events', async () => {
    const { service } = setup({ batch: { delayMs: 1, maxChunkBytes: 3 } });
    const m = manualSource();
    const info = service.register({ kind: 'shell', title: 't', cols: 80, rows: 24, source: m.source });
    registry.acquire(info.id);
    await waitFor(() => registry.snapshot(info.id)?.phase === 'attached');
    const bytes = Buffer.from('héllo 日本語 🎉 ok', 'utf8');
    for (let i = 0; i < bytes.length; i += 2) m.push(bytes.subarray(i, i + 2));
    await waitFor(() => registry.text(info.id).includes('ok'));
    expect(registry.text(info.id)).toBe('héllo 日本語 🎉 ok');
  });

  it('reads the last rows of a terminal alone, a wrapped line joined, as the whole text ends', async () => {
    const { service } = setup();
    const m = manualSource();
    const info = service.register({ kind: 'shell', title: 't', cols: 80, rows: 24, source: m.source });
    registry.acquire(info.id);
    await waitFor(() => registry.snapshot(info.id)?.phase === 'attached');
    const long = 'x'.repeat(79) + 'yz'; // 81 columns: two rows at 80
    m.push(`one\r\ntwo\r\n${long}\r\n`);
    await waitFor(() => registry.text(info.id).endsWith('yz'));
    expect(registry.tail(info.id, 2)).toBe(long);
    expect(registry.tail(info.id, 3)).toBe(`two\n${long}`);
    expect(registry.text(info.id).endsWith(registry.tail(info.id, 3))).toBe(true);
    expect(registry.tail(info.id, 0)).toBe('z'); // one row at least: the wrapped line's second row
    expect(registry.tail('no-such-session', 5)).toBe('');
  });

  it('acknowledges after parsing: a real pty flood is paused by the host and arrives complete', async () => {
    const { service } = setup({ watermarks: { high: 12 * 1024, low: 4 * 1024 }, batch: { delayMs: 4, maxChunkBytes: 8 * 1024 } });
    const info = service.register({ kind: 'shell', title: 'flood', cols: 80, rows: 24, source: ptyCommand('stty -echo; read _go; seq 1 150000; read _end') });
    registry.acquire(info.id);
    // Start the flood once attached, so every byte goes through the ack account.
    await waitFor(() => registry.snapshot(info.id)?.phase === 'attached');
    const before = service.stats(info.id).bytesEmitted;
    registry.input(info.id, '\r');
    await waitFor(() => registry.text(info.id).endsWith('\n150000'), 60_000);
    const st = service.stats(info.id);
    expect(st.pauses).toBeGreaterThan(0);
    expect(st.resumes).toBeGreaterThan(0);
    // Everything emitted got acknowledged once parsed (acks coalesce within ~10 ms).
    await waitFor(() => service.stats(info.id).unacked === 0);
    const acked = bridge.calls.filter((c) => c.method === 'terminal.ack').reduce((n, c) => n + (c.input as { bytes: number }).bytes, 0);
    expect(acked).toBe(service.stats(info.id).bytesEmitted - before);
    // The kept lines are the last ones, in order (xterm keeps 10 000 lines of scrollback).
    const lines = registry.text(info.id).split('\n');
    expect(lines.slice(-3)).toEqual(['149998', '149999', '150000']);
    const tail = lines.slice(-5000).map(Number);
    expect(tail.every((n, i) => i === 0 || n === tail[i - 1]! + 1)).toBe(true);
    registry.paste(info.id, '\r');
    expect(await service.waitForExit(info.id)).toEqual({ code: 0, lost: false });
  });

  it('a flood of small messages reaches xterm.js in a few large writes (few redraws), complete and acknowledged', async () => {
    const { service } = setup({ batch: { delayMs: 1, maxChunkBytes: 4096 } });
    const m = manualSource();
    const info = service.register({ kind: 'stage', title: 'flood', cols: 80, rows: 24, source: m.source });
    registry.acquire(info.id, { interactive: false });
    await waitFor(() => registry.snapshot(info.id)?.phase === 'attached');
    const writes = vi.spyOn(Terminal.prototype, 'write');
    const before = service.stats(info.id).bytesEmitted;
    // 10 bursts of 20 messages of 4 KiB each: 200 data events.
    let line = 0;
    for (let burst = 0; burst < 10; burst++) {
      for (let i = 0; i < 20; i++) {
        let chunk = '';
        while (chunk.length < 4000) chunk += `${++line}\r\n`;
        m.push(chunk.padEnd(4096, ' '));
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    m.push('END\r\n');
    await waitFor(() => registry.text(info.id).endsWith('END'));
    const dataWrites = writes.mock.calls.filter(([d]) => d instanceof Uint8Array).length;
    writes.mockRestore();
    // Joined, then cut into the pacer's pieces: about one write per piece, not one per message.
    const flooded = 200 * 4096 + 'END\r\n'.length;
    expect(dataWrites).toBeLessThanOrEqual(Math.ceil(flooded / WRITE_PIECE_BYTES) + 12);
    expect(dataWrites).toBeLessThan(200 / 2);
    const lines = registry.text(info.id).split('\n').map((l) => l.trim());
    expect(lines.at(-2)).toBe(String(line));
    await waitFor(() => service.stats(info.id).unacked === 0);
    const acked = bridge.calls.filter((c) => c.method === 'terminal.ack').reduce((n, c) => n + (c.input as { bytes: number }).bytes, 0);
    expect(acked).toBe(service.stats(info.id).bytesEmitted - before);
  });

  it('a keystroke and the end of a session write held output at once, whatever the pacing', async () => {
    bridge = new LoopbackBridge(path.join(dir, 'logs'));
    // Pacing so slow that only a keystroke or the session's end can write what is held.
    registry = new TerminalRegistry(bridge, { webgl: false, pacing: { intervalMs: 60_000, floodIntervalMs: 60_000, floodAfterMs: 0, maxHeldBytes: 1 << 30, quietMs: 60_000 } });
    const m = manualSource();
    const info = bridge.service.register({ kind: 'shell', title: 'sh', cols: 80, rows: 24, source: m.source });
    registry.acquire(info.id);
    await waitFor(() => registry.snapshot(info.id)?.phase === 'attached');
    m.push('first\r\n');
    await waitFor(() => registry.text(info.id).includes('first'));
    m.push('held by the pacing\r\n');
    await new Promise((r) => setTimeout(r, 200));
    expect(registry.text(info.id)).not.toContain('held by the pacing');
    registry.paste(info.id, '\x03'); // Ctrl+C
    await waitFor(() => registry.text(info.id).includes('held by the pacing'));
    expect(m.written).toEqual(['\x03']);
    m.push('^C\r\n$ ');
    await waitFor(() => registry.text(info.id).includes('$')); // the answer to the keystroke, not held
    m.push('last words\r\n');
    await new Promise((r) => setTimeout(r, 200));
    expect(registry.text(info.id)).not.toContain('last words');
    m.exit(0);
    await waitFor(() => registry.text(info.id).includes('last words'));
  });

  it('sends input to the session and shows the answer; resize reaches the pty', async () => {
    const { service } = setup();
    const info = service.register({ kind: 'shell', title: 'sh', cols: 80, rows: 24, source: ptyCommand('read line; echo "got:$line"; stty size; read _end') });
    registry.acquire(info.id);
    await waitFor(() => registry.snapshot(info.id)?.phase === 'attached');
    registry.paste(info.id, 'hello\r');
    // The two lines may come in two data events, the second up to a pacing interval later.
    await waitFor(() => registry.text(info.id).includes('24 80'));
    expect(registry.text(info.id)).toMatch(/got:hello\n24 80/);
    await act(async () => {});
  });

  it('keys typed while a just-opened shell attaches reach it once it is live, in order; none when it failed', async () => {
    const { service, bridge } = setup();
    const info = service.register({ kind: 'shell', title: 'sh', cols: 80, rows: 24, source: ptyCommand('read line; echo "got:$line"; read _end') });
    registry.acquire(info.id);
    // Typed before the attach answered (it comes a turn later, over the "socket").
    expect(registry.snapshot(info.id)?.phase).toBe('attaching');
    registry.input(info.id, 'hel');
    registry.input(info.id, 'lo\r');
    expect(bridge.calls.filter((c) => c.method === 'terminal.write')).toEqual([]);
    await waitFor(() => registry.text(info.id).includes('got:hello'));
    expect(bridge.calls.filter((c) => c.method === 'terminal.write').map((c) => (c.input as { data: string }).data)).toEqual(['hello\r']);
    // A session that cannot be attached gets nothing written.
    registry.acquire('no-such-session');
    registry.input('no-such-session', 'x');
    await waitFor(() => registry.snapshot('no-such-session')?.phase === 'failed');
    expect(bridge.calls.filter((c) => c.method === 'terminal.write')).toHaveLength(1);
    service.write(info.id, '\r');
  });

  it('a re-attach (after a reconnect) resets and replays without duplicating', async () => {
    const { service } = setup();
    const m = manualSource();
    const info = service.register({ kind: 'shell', title: 't', cols: 80, rows: 24, source: m.source });
    registry.acquire(info.id);
    m.push('line one\r\nline two\r\n');
    await waitFor(() => registry.text(info.id).includes('line two'));
    registry.reattachAll();
    m.push('line three\r\n');
    await waitFor(() => registry.text(info.id).includes('line three'));
    expect(registry.text(info.id)).toBe('line one\nline two\nline three');
  });

  it('shows status changes and an attach failure', async () => {
    const { service } = setup();
    const m = manualSource();
    const info = service.register({ kind: 'stage', title: 't', cols: 80, rows: 24, source: m.source });
    registry.acquire(info.id, { interactive: false });
    await waitFor(() => registry.snapshot(info.id)?.phase === 'attached');
    m.exit(4);
    await waitFor(() => registry.snapshot(info.id)?.info?.status === 'exited');
    expect(registry.snapshot(info.id)?.info?.exitCode).toBe(4);
    registry.acquire('no-such-session');
    await waitFor(() => registry.snapshot('no-such-session')?.phase === 'failed');
    expect(registry.snapshot('no-such-session')?.error).toMatch(/no terminal session/);
  });

  it('keeps acknowledging for a live session whose hidden instance was evicted', async () => {
    bridge = new LoopbackBridge(path.join(dir, 'logs'), { watermarks: { high: 8 * 1024, low: 1024 } });
    registry = new TerminalRegistry(bridge, { webgl: false, maxHidden: 0 });
    const m = manualSource();
    const info = bridge.service.register({ kind: 'shell', title: 't', cols: 80, rows: 24, source: m.source });
    registry.acquire(info.id);
    await waitFor(() => registry.snapshot(info.id)?.phase === 'attached');
    registry.release(info.id); // evicted at once (maxHidden 0)
    expect(registry.sessions()).toEqual([]);
    for (let i = 0; i < 10; i++) m.push(Buffer.alloc(4096, 0x41));
    await waitFor(() => bridge.service.stats(info.id).bytesEmitted === 40960);
    await waitFor(() => !bridge.service.stats(info.id).paused && bridge.service.stats(info.id).unacked === 0);
  });

  it('an instance evicted with output not yet parsed still acknowledges it, so the host never stalls', async () => {
    bridge = new LoopbackBridge(path.join(dir, 'logs'), { watermarks: { high: 8 * 1024, low: 1024 }, batch: { delayMs: 1, maxChunkBytes: 2048 } });
    registry = new TerminalRegistry(bridge, { webgl: false, maxHidden: 0 });
    const m = manualSource();
    const info = bridge.service.register({ kind: 'shell', title: 't', cols: 80, rows: 24, source: m.source });
    registry.acquire(info.id);
    await waitFor(() => registry.snapshot(info.id)?.phase === 'attached');
    const evicted = new Promise<void>((resolve) => {
      const off = bridge.onTerminalData(() => {
        // The second message arrives: evict while it is still on its way into xterm.js.
        off();
        queueMicrotask(() => {
          registry.release(info.id);
          resolve();
        });
      });
    });
    for (let i = 0; i < 3; i++) m.push(Buffer.alloc(2048, 0x41));
    await evicted;
    expect(registry.sessions()).toEqual([]);
    await waitFor(() => bridge.service.stats(info.id).bytesEmitted === 6144);
    await waitFor(() => !bridge.service.stats(info.id).paused && bridge.service.stats(info.id).unacked === 0);
  });
});

describe('TerminalView', () => {
  it('mounts the session in a pane, replays, shows status, and searches', async () => {
    const { service } = setup();
    const m = manualSource();
    const info = service.register({ kind: 'shell', title: 't', cols: 80, rows: 24, source: m.source });
    m.push('alpha\r\nbeta\r\ngamma beta\r\n');
    render(<TerminalView sessionId={info.id} transport={bridge} registry={registry} />);
    const pane = screen.getByTestId('terminal-pane');
    await rtlWaitFor(() => expect(pane.getAttribute('data-phase')).toBe('attached'));
    expect(pane.getAttribute('data-status')).toBe('live');
    expect(pane.getAttribute('data-renderer')).toBe('dom');
    expect(screen.getByTestId('terminal-status').textContent).toBe('live');
    expect(pane.querySelector('.xterm')).not.toBeNull();
    await waitFor(() => registry.text(info.id).includes('gamma'));
    expect(registry.findNext(info.id, 'beta')).toBe(true);
    expect(registry.selection(info.id)).toBe('beta');
    act(() => m.exit(0));
    await rtlWaitFor(() => expect(screen.getByTestId('terminal-status').textContent).toBe('exited (0)'));
    cleanup();
    // The instance outlives the view (hidden), so reopening the tab does not replay.
    expect(registry.sessions()).toEqual([info.id]);
  });
});
