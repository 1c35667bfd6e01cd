import net from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseQmpLine, QmpClient, QmpError, QmpParser } from '../../../main/vm/qmp-client.js';

describe('QMP parsing', () => {
  it('recognises greeting, return, error and event', () => {
    expect(parseQmpLine('{"QMP": {"version": {"qemu": {"major": 7}}, "capabilities": ["oob"]}}')).toMatchObject({ kind: 'greeting' });
    expect(parseQmpLine('{"return": {}, "id": 3}')).toEqual({ kind: 'return', id: 3, value: {} });
    expect(parseQmpLine('{"error": {"class": "CommandNotFound", "desc": "nope"}, "id": 4}')).toEqual({
      kind: 'error',
      id: 4,
      errorClass: 'CommandNotFound',
      desc: 'nope',
    });
    expect(parseQmpLine('{"timestamp": {"seconds": 1}, "event": "SHUTDOWN", "data": {"guest": false}}')).toEqual({
      kind: 'event',
      event: 'SHUTDOWN',
      data: { guest: false },
    });
  });

  it('rejects non-JSON and unknown shapes', () => {
    expect(() => parseQmpLine('hello')).toThrow(/not JSON/);
    expect(() => parseQmpLine('{"what": 1}')).toThrow(/unknown message/);
  });

  it('splits a stream at newlines, across chunks, and caps a runaway line', () => {
    const p = new QmpParser(64);
    expect(p.push('{"return": {}, "id"')).toEqual([]);
    expect(p.push(': 1}\r\n{"event": "STOP"}\n')).toEqual([
      { kind: 'return', id: 1, value: {} },
      { kind: 'event', event: 'STOP', data: undefined },
    ]);
    expect(() => p.push('x'.repeat(100))).toThrow(/longer than 64/);
  });
});

describe('QMP client against a fake QEMU monitor', () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('negotiates, matches replies by id, delivers events and rethrows errors', async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'qmp-'));
    const sock = path.join(dir, 'qmp.sock');
    const seen: string[] = [];
    const server = net.createServer((c) => {
      c.write('{"QMP": {"version": {}, "capabilities": []}}\r\n');
      let buf = '';
      c.on('data', (d) => {
        buf += d.toString();
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          const msg = JSON.parse(buf.slice(0, i)) as { execute: string; id: number };
          buf = buf.slice(i + 1);
          seen.push(msg.execute);
          if (msg.execute === 'bogus') c.write(JSON.stringify({ error: { class: 'CommandNotFound', desc: 'no bogus' }, id: msg.id }) + '\r\n');
          else if (msg.execute === 'query-status') {
            c.write('{"event": "RESUME", "data": {}}\r\n');
            c.write(JSON.stringify({ return: { status: 'running' }, id: msg.id }) + '\r\n');
          } else c.write(JSON.stringify({ return: {}, id: msg.id }) + '\r\n');
        }
      });
    });
    await new Promise<void>((r) => server.listen(sock, r));
    try {
      const qmp = await QmpClient.connect(sock);
      const events: string[] = [];
      qmp.onEvent((e) => events.push(e));
      expect(await qmp.execute('query-status')).toEqual({ status: 'running' });
      await expect(qmp.execute('bogus')).rejects.toBeInstanceOf(QmpError);
      expect(events).toEqual(['RESUME']);
      expect(seen).toEqual(['qmp_capabilities', 'query-status', 'bogus']);
      qmp.close();
    } finally {
      server.close();
    }
  });
});
