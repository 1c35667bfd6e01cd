// FactoryBridge over the web host's WebSocket: JSON text frames for calls and
// events, binary frames for terminal bytes. Reconnects after a drop; calls made
// while disconnected wait for the connection (and fail if it never comes back).
import { fromWireError, type ApiInput, type ApiMethod, type ApiOutputs, type FactoryBridge, type FactoryEvent, type TerminalDataEvent } from '../../common/contract.js';
import { FactoryError } from '../../common/errors.js';
import { Listeners } from '../../common/listeners.js';
import { decodeTerminalFrame } from '../../common/terminal-frame.js';

export type ConnectionState = 'connecting' | 'open' | 'closed';

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
}

type SocketCtor = new (url: string) => WebSocket;

export class WebSocketBridge implements FactoryBridge {
  private socket: WebSocket | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly queued: string[] = [];
  private readonly eventListeners = new Listeners<FactoryEvent>();
  private readonly dataListeners = new Listeners<TerminalDataEvent>();
  private readonly stateListeners = new Listeners<ConnectionState>();
  private state: ConnectionState = 'connecting';
  private retryMs = 250;
  private disposed = false;

  constructor(
    private readonly url: string,
    private readonly Socket: SocketCtor = WebSocket,
  ) {
    this.open();
  }

  call<M extends ApiMethod>(method: M, input: ApiInput<M>): Promise<ApiOutputs[M]> {
    if (this.disposed) return Promise.reject(new FactoryError('Disconnected', 'the connection to the app is closed'));
    const id = this.nextId++;
    const frame = JSON.stringify({ id, method, input });
    return new Promise<ApiOutputs[M]>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      if (this.socket && this.state === 'open') this.socket.send(frame);
      else this.queued.push(frame);
    });
  }

  onEvent(listener: (event: FactoryEvent) => void): () => void {
    return this.eventListeners.add(listener);
  }

  onTerminalData(listener: (event: TerminalDataEvent) => void): () => void {
    return this.dataListeners.add(listener);
  }

  /** Connection changes, so the UI can say "reconnecting" and refetch after a drop. */
  onConnectionState(listener: (state: ConnectionState) => void): () => void {
    const off = this.stateListeners.add(listener);
    listener(this.state);
    return off;
  }

  dispose(): void {
    this.disposed = true;
    this.socket?.close();
    this.failPending('the connection to the app is closed');
  }

  private setState(s: ConnectionState): void {
    this.state = s;
    this.stateListeners.emit(s);
  }

  private open(): void {
    const ws = new this.Socket(this.url);
    ws.binaryType = 'arraybuffer';
    this.socket = ws;
    this.setState('connecting');
    ws.onopen = () => {
      this.retryMs = 250;
      this.setState('open');
      for (const frame of this.queued.splice(0)) ws.send(frame);
    };
    ws.onmessage = (ev: MessageEvent) => this.receive(ev.data);
    ws.onclose = () => {
      if (this.socket !== ws) return;
      this.socket = undefined;
      // Calls in flight may or may not have run; the caller decides whether to retry.
      this.failPending('the connection to the app was lost');
      this.setState('closed');
      if (!this.disposed) {
        setTimeout(() => this.open(), this.retryMs);
        this.retryMs = Math.min(this.retryMs * 2, 5000);
      }
    };
  }

  private failPending(message: string): void {
    const err = new FactoryError('Disconnected', message);
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    if (this.disposed) this.queued.length = 0;
  }

  private receive(data: unknown): void {
    if (data instanceof ArrayBuffer) {
      let frame: TerminalDataEvent;
      try {
        frame = decodeTerminalFrame(new Uint8Array(data));
      } catch {
        return;
      }
      this.dataListeners.emit(frame);
      return;
    }
    if (typeof data !== 'string') return;
    let msg: { id?: unknown; result?: unknown; error?: { name: string; message: string; detail?: string }; event?: FactoryEvent };
    try {
      msg = JSON.parse(data);
    } catch {
      return;
    }
    if (msg.event) {
      this.eventListeners.emit(msg.event);
      return;
    }
    if (typeof msg.id !== 'number') return;
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    if (msg.error) p.reject(fromWireError({ error: msg.error }));
    else p.resolve(msg.result === null ? undefined : msg.result);
  }
}
