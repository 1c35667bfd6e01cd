// Stands in for QEMU's `guestfwd=...-cmd:COMMAND` on the host side of a test:
// a TCP listener on 127.0.0.1 that, like QEMU, spawns COMMAND once per
// connection with the connection on its stdin/stdout. Lets host-side clients
// (curl, git, node) reach a sandbox's proxy through the very command QEMU runs.
import { spawn } from 'node:child_process';
import net from 'node:net';

export interface GuestfwdEmulator {
  url: string;
  port: number;
  close(): Promise<void>;
}

export async function emulateGuestfwd(command: string): Promise<GuestfwdEmulator> {
  const children = new Set<ReturnType<typeof spawn>>();
  const server = net.createServer((conn) => {
    const child = spawn('/bin/sh', ['-c', command], { stdio: ['pipe', 'pipe', 'ignore'] });
    children.add(child);
    conn.pipe(child.stdin);
    child.stdout.pipe(conn);
    child.stdin.on('error', () => undefined);
    conn.on('error', () => child.kill());
    conn.on('close', () => child.kill());
    child.on('close', () => {
      children.delete(child);
      conn.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const c of children) c.kill();
        server.close(() => resolve());
      }),
  };
}
