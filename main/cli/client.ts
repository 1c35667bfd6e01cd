// The CLI's side of the local socket (main/host/socket/socket-host.ts): calls by
// id, events and terminal bytes for commands that watch. Replies come from the
// app, which validated our input with the same schemas as the UI's.
import net from 'node:net';
import type { ApiInput, ApiMethod, ApiOutputs, FactoryEvent } from '../../common/contract.js';
import { FactoryError, fromWireError, type WireError } from '../../common/errors.js';
import { Listeners } from '../../common/listeners.js';
import { LineReader, encodeLine } from '../instance/line-framing.js';

export interface TerminalChunk {
  sessionId: string;
  data: Buffer;
}

/** The replies and streams a host may send can be large (a review's patch): a generous cap, still a cap. */
const MAX_REPLY_LINE_BYTES = 256 * 1024 * 1024;

export class FactoryClient {
  readonly events = new Listeners<FactoryEvent>();
  readonly terminal = new Listeners<TerminalChunk>();
  /** The connection to the app was lost (the app quit or failed), not closed by us: why. */
  readonly disconnected = new Listeners<Error>();
  private nextId = 1;
  private pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private closedError: Error | undefined;

  private constructor(
    private readonly socket: net.Socket,
    readonly hostPid: number,
  ) {}

  /** Connects and waits for the host's hello; rejects with the socket's error (ENOENT, ECONNREFUSED) when nobody listens. */
  static connect(socketPath: string, timeoutMs = 10_000): Promise<FactoryClient> {
    return new Promise((resolve, reject) => {
      const socket = net.createConnection(socketPath);
      let client: FactoryClient | undefined;
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`the app at ${socketPath} did not greet within ${timeoutMs} ms`));
      }, timeoutMs);
      const reader = new LineReader(
        (line) => {
          let msg: Record<string, unknown>;
          try {
            msg = JSON.parse(line) as Record<string, unknown>;
          } catch {
            return client?.fail(new Error('the app sent a line that is not JSON'));
          }
          if (!client) {
            const hello = msg.hello as { app?: unknown; pid?: unknown } | undefined;
            clearTimeout(timer);
            if (hello?.app !== 'factory-in-a-box' || typeof hello.pid !== 'number') {
              socket.destroy();
              return reject(new Error(`${socketPath} is not a Factory in a Box socket`));
            }
            client = new FactoryClient(socket, hello.pid);
            return resolve(client);
          }
          client.onMessage(msg);
        },
        (err) => client?.fail(err),
        MAX_REPLY_LINE_BYTES,
      );
      socket.on('data', (c: Buffer) => reader.push(c));
      socket.once('error', (err) => {
        clearTimeout(timer);
        if (client) client.fail(new FactoryError('Disconnected', `the connection to the app failed: ${err.message}`));
        else reject(err);
      });
      socket.on('close', () => client?.fail(new FactoryError('Disconnected', 'the app closed the connection')));
    });
  }

  call<M extends ApiMethod>(method: M, input: ApiInput<M>): Promise<ApiOutputs[M]> {
    return this.send({ method, input }) as Promise<ApiOutputs[M]>;
  }

  /** Starts the streams of events and terminal bytes on this connection. */
  async watch(): Promise<void> {
    await this.send({ watch: { events: true, terminal: true } });
  }

  close(): void {
    this.closedError ??= new FactoryError('Disconnected', 'closed');
    this.socket.end();
    this.socket.destroy();
  }

  private send(body: Record<string, unknown>): Promise<unknown> {
    if (this.closedError) return Promise.reject(this.closedError);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.socket.write(encodeLine({ id, ...body }));
    });
  }

  private onMessage(msg: Record<string, unknown>): void {
    if (msg.event) return this.events.emit(msg.event as FactoryEvent);
    const t = msg.terminal as { sessionId?: unknown; data?: unknown } | undefined;
    if (t && typeof t.sessionId === 'string' && typeof t.data === 'string') {
      return this.terminal.emit({ sessionId: t.sessionId, data: Buffer.from(t.data, 'base64') });
    }
    const waiter = typeof msg.id === 'number' ? this.pending.get(msg.id) : undefined;
    if (!waiter) {
      // An error not tied to a call of ours (e.g. the host refused a line): it ends everything pending.
      if (msg.error) this.fail(fromWireError(msg as unknown as WireError));
      return;
    }
    this.pending.delete(msg.id as number);
    if (msg.error) waiter.reject(fromWireError(msg as unknown as WireError));
    else waiter.resolve(msg.result);
  }

  private fail(err: Error): void {
    const first = !this.closedError;
    if (first) this.closedError = err;
    for (const w of this.pending.values()) w.reject(err);
    this.pending.clear();
    this.socket.destroy();
    if (first) this.disconnected.emit(err);
  }
}
