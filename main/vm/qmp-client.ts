// QEMU Machine Protocol over the VM's unix socket: JSON objects one per line.
// After the greeting, qmp_capabilities leaves negotiation mode; each execute
// gets exactly one return or error (matched by id); events arrive in between.
import net from 'node:net';
import { z } from 'zod';

const QmpGreeting = z.object({ QMP: z.object({ version: z.unknown(), capabilities: z.array(z.unknown()) }) });
const QmpReturn = z.object({ return: z.unknown(), id: z.unknown().optional() });
const QmpErrorReply = z.object({ error: z.object({ class: z.string(), desc: z.string() }), id: z.unknown().optional() });
const QmpEvent = z.object({ event: z.string(), data: z.unknown().optional(), timestamp: z.unknown().optional() });

export type QmpMessage =
  | { kind: 'greeting'; version: unknown }
  | { kind: 'return'; id: unknown; value: unknown }
  | { kind: 'error'; id: unknown; errorClass: string; desc: string }
  | { kind: 'event'; event: string; data: unknown };

export class QmpError extends Error {
  constructor(
    public readonly errorClass: string,
    desc: string,
    command: string,
  ) {
    super(`QMP ${command} failed: ${errorClass}: ${desc}`);
    this.name = 'QmpError';
  }
}

/** Splits the byte stream into messages; a line longer than maxLineBytes is a protocol error. */
export class QmpParser {
  private buffer = '';
  constructor(private readonly maxLineBytes = 4 * 1024 * 1024) {}

  push(chunk: string): QmpMessage[] {
    this.buffer += chunk;
    const out: QmpMessage[] = [];
    let nl: number;
    while ((nl = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, nl).trim();
      this.buffer = this.buffer.slice(nl + 1);
      if (line) out.push(parseQmpLine(line));
    }
    if (this.buffer.length > this.maxLineBytes) throw new Error(`QMP message longer than ${this.maxLineBytes} bytes`);
    return out;
  }
}

export function parseQmpLine(line: string): QmpMessage {
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch {
    throw new Error(`QMP sent a line that is not JSON: ${line.slice(0, 120)}`);
  }
  const greeting = QmpGreeting.safeParse(raw);
  if (greeting.success) return { kind: 'greeting', version: greeting.data.QMP.version };
  const ret = QmpReturn.safeParse(raw);
  if (ret.success) return { kind: 'return', id: ret.data.id, value: ret.data.return };
  const err = QmpErrorReply.safeParse(raw);
  if (err.success) return { kind: 'error', id: err.data.id, errorClass: err.data.error.class, desc: err.data.error.desc };
  const ev = QmpEvent.safeParse(raw);
  if (ev.success) return { kind: 'event', event: ev.data.event, data: ev.data.data };
  throw new Error(`QMP sent an unknown message: ${line.slice(0, 120)}`);
}

interface Pending {
  command: string;
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
}

export class QmpClient {
  private readonly parser = new QmpParser();
  private readonly pending = new Map<number, Pending>();
  private readonly eventListeners = new Set<(event: string, data: unknown) => void>();
  private nextId = 1;
  private closedError: Error | undefined;

  private constructor(private readonly socket: net.Socket) {}

  /** Connects, reads the greeting and negotiates capabilities. */
  static async connect(socketPath: string, opts: { timeoutMs?: number } = {}): Promise<QmpClient> {
    const timeoutMs = opts.timeoutMs ?? 5000;
    const socket = net.createConnection(socketPath);
    const client = new QmpClient(socket);
    socket.setEncoding('utf8');
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`QMP on ${socketPath}: no greeting within ${timeoutMs} ms`));
      }, timeoutMs);
      let greeted = false;
      socket.on('data', (chunk: string) => {
        let messages: QmpMessage[];
        try {
          messages = client.parser.push(chunk);
        } catch (err) {
          client.failAll(err as Error);
          socket.destroy();
          return;
        }
        for (const m of messages) {
          if (!greeted) {
            if (m.kind !== 'greeting') {
              clearTimeout(timer);
              socket.destroy();
              reject(new Error(`QMP on ${socketPath}: expected a greeting, got ${m.kind}`));
              return;
            }
            greeted = true;
            clearTimeout(timer);
            resolve();
            continue;
          }
          client.dispatch(m);
        }
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        client.failAll(err);
        reject(err);
      });
      socket.on('close', () => client.failAll(new Error('QMP connection closed')));
    });
    await client.execute('qmp_capabilities');
    return client;
  }

  execute(command: string, args?: Record<string, unknown>): Promise<unknown> {
    if (this.closedError) return Promise.reject(this.closedError);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { command, resolve, reject });
      this.socket.write(JSON.stringify({ execute: command, ...(args ? { arguments: args } : {}), id }) + '\n');
    });
  }

  onEvent(listener: (event: string, data: unknown) => void): () => void {
    this.eventListeners.add(listener);
    return () => this.eventListeners.delete(listener);
  }

  close(): void {
    this.socket.destroy();
  }

  private dispatch(m: QmpMessage) {
    if (m.kind === 'event') {
      for (const l of this.eventListeners) l(m.event, m.data);
      return;
    }
    if (m.kind === 'greeting') return;
    const id = typeof m.id === 'number' ? m.id : -1;
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    if (m.kind === 'return') p.resolve(m.value);
    else p.reject(new QmpError(m.errorClass, m.desc, p.command));
  }

  private failAll(err: Error) {
    this.closedError ??= err;
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}
