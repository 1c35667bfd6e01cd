// The local socket host: the same API and validation as the web host (parseCall
// through dispatchCall), for the factory CLI. A unix socket in the data dir,
// mode 0600 in a 0700 folder, so only this user reaches it; no token needed.
//
// Protocol, one JSON message per line (main/instance/line-framing.ts):
//   host → client, first:  {"hello":{"app":"factory-in-a-box","protocol":1,"pid":N}}
//   client → host:         {"id":1,"method":"tasks.list","input":{}}
//   host → client:         {"id":1,"result":...}  or  {"id":1,"error":{"name","message","detail?"}}
//   client → host:         {"id":2,"watch":{"events":true,"terminal":true}}   (streams start; reply {"id":2,"result":null})
//   host → client:         {"event":{...}}  and  {"terminal":{"sessionId":"...","data":"<base64>"}}
// A line that is not JSON or not a call gets {"id":null,"error":...} and the connection goes on;
// a line over the cap gets an error and the connection is closed.
import fs from 'node:fs';
import net from 'node:net';
import { dispatchCall, type HostedApp } from '../hosted-app.js';
import { LineReader, MAX_LINE_BYTES, encodeLine } from '../../instance/line-framing.js';
import { socketPath } from '../../instance/socket-path.js';

export const SOCKET_PROTOCOL = 1;
/** A client that stops reading is dropped rather than buffering without bound. */
const MAX_BUFFERED_BYTES = 64 * 1024 * 1024;
/** sun_path is 108 bytes on Linux (104 on macOS), with the terminating NUL. */
const MAX_SOCKET_PATH_BYTES = 103;

export interface SocketHost {
  path: string;
  close(): Promise<void>;
}

/** The caller holds the data dir's instance lock (main/instance/instance-lock.ts), so a socket file left there is stale. */
export async function startSocketHost(app: HostedApp, opts: { dataDir: string; maxLineBytes?: number }): Promise<SocketHost> {
  const file = socketPath(opts.dataDir);
  if (Buffer.byteLength(file) > MAX_SOCKET_PATH_BYTES) {
    throw new Error(`the socket path ${file} is longer than ${MAX_SOCKET_PATH_BYTES} bytes, the limit of a unix socket: use a shorter data folder (FACTORY_DATA_DIR)`);
  }
  fs.mkdirSync(opts.dataDir, { recursive: true, mode: 0o700 });
  // The folder, not only the socket, keeps other users out (no window between bind and chmod).
  fs.chmodSync(opts.dataDir, 0o700);
  fs.rmSync(file, { force: true });
  const clients = new Set<net.Socket>();
  const server = net.createServer((socket) => attach(socket));

  function attach(socket: net.Socket): void {
    clients.add(socket);
    const offs: Array<() => void> = [];
    const attached = new Set<string>();
    const send = (message: unknown) => {
      if (socket.destroyed || !socket.writable) return;
      if (socket.writableLength > MAX_BUFFERED_BYTES) return void socket.destroy();
      socket.write(encodeLine(message));
    };
    const reader = new LineReader(
      (line) => onLine(line),
      (err) => {
        send({ id: null, error: { name: 'InvalidInput', message: err.message } });
        socket.end();
      },
      opts.maxLineBytes ?? MAX_LINE_BYTES,
    );
    function onLine(line: string): void {
      let msg: unknown;
      try {
        msg = JSON.parse(line);
      } catch (err) {
        return send({ id: null, error: { name: 'InvalidInput', message: `the line is not JSON: ${(err as Error).message}` } });
      }
      const m = (typeof msg === 'object' && msg !== null ? msg : {}) as { id?: unknown; method?: unknown; input?: unknown; watch?: unknown };
      const id = typeof m.id === 'number' || typeof m.id === 'string' ? m.id : null;
      if (id === null) return send({ id: null, error: { name: 'InvalidInput', message: 'id: must be a number or string' } });
      if (m.watch !== undefined) return watch(id, m.watch);
      void dispatchCall(app.api, m.method, m.input).then((reply) => {
        // Sessions this client viewed: when it goes, the sessions stop waiting for its acknowledgements.
        if (m.method === 'terminal.attach' && !('error' in reply)) attached.add((m.input as { sessionId: string }).sessionId);
        send({ id, ...reply });
      });
    }
    function watch(id: number | string, what: unknown): void {
      const w = (typeof what === 'object' && what !== null ? what : {}) as { events?: unknown; terminal?: unknown };
      if (offs.length === 0) {
        if (w.events === true) offs.push(app.onEvent((event) => send({ event })));
        if (w.terminal === true) {
          offs.push(app.onTerminalData((e) => send({ terminal: { sessionId: e.sessionId, data: Buffer.from(e.data).toString('base64') } })));
        }
      }
      send({ id, result: null });
    }
    socket.on('data', (chunk: Buffer) => reader.push(chunk));
    socket.on('error', () => socket.destroy());
    socket.on('close', () => {
      clients.delete(socket);
      for (const off of offs.splice(0)) off();
      for (const sessionId of attached) void app.api['terminal.detach']({ sessionId }).catch(() => {}); // the session may have ended already
    });
    send({ hello: { app: 'factory-in-a-box', protocol: SOCKET_PROTOCOL, pid: process.pid } });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(file, () => {
      server.off('error', reject);
      resolve();
    });
  });
  fs.chmodSync(file, 0o600);

  let closed: Promise<void> | undefined;
  return {
    path: file,
    close() {
      closed ??= new Promise<void>((resolve) => {
        for (const s of clients) s.destroy();
        server.close(() => {
          fs.rmSync(file, { force: true });
          resolve();
        });
      });
      return closed;
    },
  };
}
