// The host's end of a first shell over the identity port, against a real unix
// socket standing in for QEMU's chardev; the test plays the guest's relay,
// honest and hostile: frames split anywhere, frames too long, unknown types,
// an exit frame of the wrong size, an error with control bytes, a relay that
// never answers a kill, a port that closes. The real relay runs in
// test/integration/first-shell.test.ts.
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CONSOLE_FRAME, encodeConsoleFrame, GuestConsole, MAX_CONSOLE_DATA } from '../../../main/guest/guest-console.js';

let dir: string;
const servers: net.Server[] = [];
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'guest-console-'));
});
afterEach(async () => {
  for (const s of servers.splice(0)) s.close();
  await rm(dir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const frame = (type: number, payload: Buffer | string = Buffer.alloc(0)) => encodeConsoleFrame(type, Buffer.isBuffer(payload) ? payload : Buffer.from(payload, 'latin1'));
const exitFrame = (code: number, signal = 0) => frame(CONSOLE_FRAME.exitOrResize, Buffer.from([code, signal]));

/** A connected pair: `guest` is the relay's end, `shell` the host's GuestConsole with what it saw. */
async function pair(initial: Buffer = Buffer.alloc(0)) {
  const socketPath = path.join(dir, `c${servers.length}.sock`);
  let guest!: net.Socket;
  let listening!: Promise<void>;
  const accepted = new Promise<void>((resolve) => {
    const server = net.createServer((s) => {
      guest = s;
      s.on('error', () => {});
      resolve();
    });
    servers.push(server);
    // Connect only once the socket listens (a fixed pause raced it on a busy machine).
    listening = new Promise((r) => server.listen(socketPath, r));
  });
  await listening;
  const host = net.createConnection({ path: socketPath });
  await Promise.all([accepted, new Promise((r) => host.once('connect', r))]);
  const shell = new GuestConsole(host, initial);
  const out: Buffer[] = [];
  let exit: { code: number | null; lost: boolean } | undefined;
  shell.onData((d) => out.push(d));
  shell.onExit((code, lost) => (exit = { code, lost }));
  const fromHost: Buffer[] = [];
  guest.on('data', (d: Buffer) => fromHost.push(d));
  return {
    guest,
    shell,
    text: () => Buffer.concat(out).toString('latin1'),
    exit: () => exit,
    fromHost: () => Buffer.concat(fromHost),
    async settle() {
      await sleep(50);
    },
  };
}

describe("a first shell's frames, host side", () => {
  it('passes bytes through in order however the frames are split, and ends with the exit status', async () => {
    const p = await pair();
    const stream = Buffer.concat([frame(CONSOLE_FRAME.data, 'root@sandbox:~# '), frame(CONSOLE_FRAME.data, Buffer.from([0x00, 0xff, 0x1b, 0x5b, 0x41])), exitFrame(3)]);
    for (const byte of stream) {
      p.guest.write(Buffer.from([byte]));
      await sleep(1);
    }
    await p.settle();
    expect(p.text()).toBe('root@sandbox:~# \x00\xff\x1b[A');
    expect(p.exit()).toEqual({ code: 3, lost: false });
  });

  it('keeps output that came before anyone listened, and reports an exit that came before', async () => {
    const initial = Buffer.concat([frame(CONSOLE_FRAME.data, 'early'), exitFrame(0)]);
    const socketPath = path.join(dir, 'early.sock');
    const server = net.createServer(() => {});
    servers.push(server);
    await new Promise<void>((r) => server.listen(socketPath, r));
    const host = net.createConnection({ path: socketPath });
    await new Promise((r) => host.once('connect', r));
    const shell = new GuestConsole(host, initial);
    const seen: string[] = [];
    shell.onData((d) => seen.push(d.toString()));
    let exit: unknown;
    shell.onExit((code, lost) => (exit = { code, lost }));
    expect(seen).toEqual(['early']);
    expect(exit).toEqual({ code: 0, lost: false });
  });

  it('a shell killed by a signal has no exit code', async () => {
    const p = await pair();
    p.guest.write(exitFrame(0, 9));
    await p.settle();
    expect(p.exit()).toEqual({ code: null, lost: false });
  });

  it('ends the session on a frame no relay sends: too long, empty, unknown, an exit of the wrong size', async () => {
    const hostile: Array<[Buffer, RegExp]> = [
      [Buffer.from([CONSOLE_FRAME.data, 0xff, 0xff]), /data frame of 65535 bytes/],
      [Buffer.from([CONSOLE_FRAME.data, (MAX_CONSOLE_DATA + 1) >> 8, (MAX_CONSOLE_DATA + 1) & 0xff]), /data frame of 4097 bytes/],
      [frame(CONSOLE_FRAME.data), /data frame of 0 bytes/],
      [frame(7, 'x'), /frame of unknown type 7/],
      [frame(0, 'x'), /frame of unknown type 0/],
      [frame(CONSOLE_FRAME.exitOrResize, Buffer.from([0, 0, 0, 0])), /exit frame of 4 bytes/],
      [Buffer.from([CONSOLE_FRAME.errorOrKill, 0x10, 0x00]), /error frame of 4096 bytes/],
    ];
    for (const [bytes, why] of hostile) {
      const p = await pair();
      // A header alone is judged: nothing waits for a body it would refuse.
      p.guest.write(Buffer.concat([frame(CONSOLE_FRAME.data, 'before'), bytes.subarray(0, 3)]));
      await p.settle();
      expect(p.exit(), why.source).toEqual({ code: null, lost: true });
      expect(p.text()).toMatch(/^before\r\n\[factory: the console sent /);
      expect(p.text()).toMatch(why);
      expect(p.shell.problem).toMatch(why);
      // Nothing after it is read.
      p.guest.write(frame(CONSOLE_FRAME.data, 'after'));
      await p.settle();
      expect(p.text()).not.toContain('after');
    }
  });

  it("shows the relay's own error as printable text and ends the session as lost", async () => {
    const p = await pair();
    p.guest.write(frame(CONSOLE_FRAME.errorOrKill, '/dev/ptmx: No such device\x1b]0;pwned\x07\r\n'));
    await p.settle();
    expect(p.exit()).toEqual({ code: null, lost: true });
    expect(p.text()).toBe("\r\n[factory: the sandbox's first shell could not start: /dev/ptmx: No such device?]0;pwned???]\r\n");
  });

  it('sends keys in frames of at most 4 KiB, a resize as its size, a kill as a kill', async () => {
    const p = await pair();
    const keys = 'é'.repeat(3000); // 6000 bytes of UTF-8
    p.shell.write(keys);
    p.shell.resize(132, 43);
    p.shell.kill();
    await p.settle();
    const got = p.fromHost();
    const frames: Array<{ type: number; payload: Buffer }> = [];
    for (let at = 0; at < got.length; ) {
      const length = got.readUInt16BE(at + 1);
      frames.push({ type: got[at]!, payload: got.subarray(at + 3, at + 3 + length) });
      at += 3 + length;
    }
    expect(frames.map((f) => [f.type, f.payload.length])).toEqual([
      [CONSOLE_FRAME.data, 4096],
      [CONSOLE_FRAME.data, 6000 - 4096],
      [CONSOLE_FRAME.exitOrResize, 4],
      [CONSOLE_FRAME.errorOrKill, 0],
    ]);
    expect(Buffer.concat(frames.slice(0, 2).map((f) => f.payload)).toString('utf8')).toBe(keys);
    expect([frames[2]!.payload.readUInt16BE(0), frames[2]!.payload.readUInt16BE(2)]).toEqual([132, 43]);
    // The relay answers a kill with the shell's end.
    p.guest.write(exitFrame(0, 9));
    await p.settle();
    expect(p.exit()).toEqual({ code: null, lost: false });
  });

  it('a kill the relay never answers still ends the session, not as lost', async () => {
    const p = await pair();
    p.shell.kill();
    expect(p.exit(), 'the relay is given time to answer first').toBeUndefined();
    // The session's own give-up timer ends it; wait for that end, not for a fixed time past it.
    await expect.poll(() => p.exit(), { timeout: 15_000, interval: 50 }).toEqual({ code: null, lost: false });
  });

  it('a port that closes without an exit is a lost shell; writes after the end go nowhere', async () => {
    const p = await pair();
    p.guest.end(frame(CONSOLE_FRAME.data, 'bye'));
    await p.settle();
    expect(p.text()).toBe('bye');
    expect(p.exit()).toEqual({ code: null, lost: true });
    expect(() => p.shell.write('ls\r')).not.toThrow();
    expect(() => p.shell.resize(80, 24)).not.toThrow();
  });

  it('pausing stops reading the port, so the guest is held; resuming delivers the rest', async () => {
    const p = await pair();
    p.shell.pause();
    const chunk = frame(CONSOLE_FRAME.data, Buffer.alloc(MAX_CONSOLE_DATA, 0x61));
    for (let i = 0; i < 64; i++) p.guest.write(chunk);
    await sleep(200);
    expect(p.text().length).toBe(0);
    p.shell.resume();
    for (let i = 0; i < 100 && p.text().length < 64 * MAX_CONSOLE_DATA; i++) await sleep(20);
    expect(p.text()).toBe('a'.repeat(64 * MAX_CONSOLE_DATA));
  });
});
