// The app as the user runs it without Electron: the web host entry in its own
// Node process (compiled, or TypeScript loaded by tsx in that same process: its
// pid is the app's, see runnable), on a data dir of the test's choosing. The test talks to it the
// way scripts do, POST /api/call with the token, and can kill it like a crash.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { ROOT, runnable, WEB_ENTRY } from './cli.js';

export interface AppProcess {
  pid: number;
  url: string;
  /** Everything it printed so far (stdout and stderr), for failure messages. */
  output(): string;
  call<T = unknown>(method: string, input?: unknown): Promise<T>;
  kill(signal: NodeJS.Signals): void;
  /** Resolves with the exit code or signal once the process has ended. */
  exited: Promise<number | NodeJS.Signals | null>;
}

export class AppCallError extends Error {
  constructor(name: string, message: string) {
    super(message);
    this.name = name;
  }
}

export async function startAppProcess(opts: { dataDir: string; startTimeoutMs?: number }): Promise<AppProcess> {
  const token = randomBytes(24).toString('base64url');
  const web = runnable(WEB_ENTRY);
  const child: ChildProcess = spawn(process.execPath, [...web.nodeArgs, web.file], {
    cwd: ROOT,
    env: { ...process.env, FACTORY_DATA_DIR: opts.dataDir, FACTORY_WEB_PORT: '0', FACTORY_WEB_TOKEN: token },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let printed = '';
  child.stdout!.on('data', (c: Buffer) => (printed += c.toString('utf8')));
  child.stderr!.on('data', (c: Buffer) => (printed += c.toString('utf8')));
  const exited = new Promise<number | NodeJS.Signals | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));

  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the app did not print its address in time:\n${printed}`)), opts.startTimeoutMs ?? 120_000);
    const look = () => {
      const m = /http:\/\/127\.0\.0\.1:(\d+)\/\?token=/.exec(printed);
      if (!m) return;
      clearTimeout(timer);
      child.stdout!.off('data', look);
      resolve(`http://127.0.0.1:${m[1]}`);
    };
    child.stdout!.on('data', look);
    void exited.then((how) => {
      clearTimeout(timer);
      reject(new Error(`the app exited (${how}) before it served:\n${printed}`));
    });
  });

  return {
    pid: child.pid!,
    url,
    output: () => printed,
    kill: (signal) => void child.kill(signal),
    exited,
    async call<T>(method: string, input: unknown = {}): Promise<T> {
      const res = await fetch(`${url}/api/call`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ method, input }),
      });
      const body = (await res.json()) as { result?: T; error?: { name: string; message: string } };
      if (body.error) throw new AppCallError(body.error.name, body.error.message);
      return body.result as T;
    },
  };
}
