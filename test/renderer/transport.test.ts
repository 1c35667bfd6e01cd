// The renderer's transports: the WebSocket bridge against a scripted socket,
// the token handling, and the Electron error adapter.
import { describe, expect, it } from 'vitest';
import { FactoryError } from '../../common/errors.js';
import { encodeTerminalFrame } from '../../common/terminal-frame.js';
import { takeToken } from '../../renderer/transport/choose-bridge.js';
import { electronBridge, WIRE_ERROR_PREFIX } from '../../renderer/transport/electron-bridge.js';
import { WebSocketBridge } from '../../renderer/transport/web-socket-bridge.js';

class ScriptedSocket {
  static last: ScriptedSocket;
  sent: string[] = [];
  binaryType = 'blob';
  onopen?: () => void;
  onmessage?: (e: { data: unknown }) => void;
  onclose?: () => void;
  constructor(public url: string) {
    ScriptedSocket.last = this;
  }
  send(s: string) {
    this.sent.push(s);
  }
  close() {
    this.onclose?.();
  }
}

describe('WebSocketBridge', () => {
  it('queues calls until open, resolves results, rebuilds errors, delivers events and frames', async () => {
    const bridge = new WebSocketBridge('ws://x/ws?token=t', ScriptedSocket as unknown as new (url: string) => WebSocket);
    const sock = ScriptedSocket.last;
    expect(sock.binaryType).toBe('arraybuffer');
    const p1 = bridge.call('tasks.list', {});
    const p2 = bridge.call('tasks.get', { taskId: 'x' });
    expect(sock.sent).toEqual([]);
    sock.onopen!();
    expect(sock.sent.map((s) => JSON.parse(s).method)).toEqual(['tasks.list', 'tasks.get']);
    const [id1, id2] = sock.sent.map((s) => JSON.parse(s).id);
    sock.onmessage!({ data: JSON.stringify({ id: id1, result: [] }) });
    sock.onmessage!({ data: JSON.stringify({ id: id2, error: { name: 'NotFound', message: 'no task x', detail: 'd' } }) });
    expect(await p1).toEqual([]);
    const err = await p2.catch((e) => e);
    expect(err).toBeInstanceOf(FactoryError);
    expect([err.name, err.message, err.detail]).toEqual(['NotFound', 'no task x', 'd']);

    const events: unknown[] = [];
    const frames: Array<{ sessionId: string; text: string }> = [];
    bridge.onEvent((e) => events.push(e));
    bridge.onTerminalData((e) => frames.push({ sessionId: e.sessionId, text: new TextDecoder().decode(e.data) }));
    sock.onmessage!({ data: JSON.stringify({ event: { type: 'task.removed', taskId: 'x' } }) });
    const frame = encodeTerminalFrame('s1', new TextEncoder().encode('hello'));
    sock.onmessage!({ data: frame.buffer.slice(frame.byteOffset, frame.byteOffset + frame.byteLength) });
    expect(events).toEqual([{ type: 'task.removed', taskId: 'x' }]);
    expect(frames).toEqual([{ sessionId: 's1', text: 'hello' }]);

    const p3 = bridge.call('tasks.list', {});
    const states: string[] = [];
    bridge.onConnectionState((s) => states.push(s));
    sock.onclose!();
    expect((await p3.catch((e) => e)).name).toBe('Disconnected');
    expect(states).toEqual(['open', 'closed']);
    bridge.dispose();
  });
});

describe('token handling', () => {
  it('moves the token from the address bar into sessionStorage', () => {
    window.history.replaceState(null, '', '/?token=abc123&x=1#h');
    expect(takeToken(window)).toBe('abc123');
    expect(window.location.search).toBe('?x=1');
    expect(window.location.hash).toBe('#h');
    expect(window.sessionStorage.getItem('factory.token')).toBe('abc123');
    expect(takeToken(window)).toBe('abc123');
  });
});

describe('Electron adapter', () => {
  it('turns the wire error carried in a message back into a named error', async () => {
    const raw = {
      call: async () => {
        throw new Error(`Error invoking remote method: Error: ${WIRE_ERROR_PREFIX}${JSON.stringify({ name: 'NotAGitRepository', message: 'nope', detail: 'fatal' })}`);
      },
      onEvent: () => () => {},
      onTerminalData: () => () => {},
    };
    const err = await electronBridge(raw as never).call('tasks.list', {}).catch((e) => e);
    expect([err.name, err.message, err.detail]).toEqual(['NotAGitRepository', 'nope', 'fatal']);
  });
});
