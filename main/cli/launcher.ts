// Reaching the app: its socket in the data dir, or, when no app runs there, the
// headless host started in the background (the web host's entry with
// --headless, detached, its output in the data dir's logs), then its socket.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DISPLAYLESS_SWITCHES, HEADLESS_FLAG } from './cli-route.js';
import { LOCK_FILE, pidAlive, readPid } from '../instance/instance-lock.js';
import { socketPath } from '../instance/socket-path.js';
import { FactoryClient } from './client.js';
import { FactoryError } from '../../common/errors.js';

export interface LaunchOptions {
  dataDir: string;
  /** Progress lines (stderr). */
  progress: (line: string) => void;
  startTimeoutMs?: number;
  /** Do not start an app; fail when none runs. */
  noStart?: boolean;
}

export const HEADLESS_LOG = 'headless.log';

export async function connectOrStart(opts: LaunchOptions): Promise<FactoryClient> {
  const sock = socketPath(opts.dataDir);
  const first = await tryConnect(sock);
  if (first) return first;
  const lockFile = path.join(opts.dataDir, LOCK_FILE);
  const holder = readPid(lockFile);
  const running = holder !== undefined && pidAlive(holder);
  let exited: string | undefined;
  /** An app we did not start whose socket we wait for (its pid): it ending means no answer will come. */
  let other = running ? holder : undefined;
  let childPid: number | undefined;
  if (!running) {
    if (opts.noStart) throw new FactoryError('AppNotRunning', `no Factory in a Box app runs on ${opts.dataDir}`);
    const child = startHeadless(opts.dataDir);
    childPid = child.pid;
    child.once('exit', (code, signal) => (exited = signal ?? `exit status ${code}`));
    opts.progress(`factory: no app was running; starting one in the background (log: ${path.join(opts.dataDir, 'logs', HEADLESS_LOG)})`);
  } else {
    opts.progress(`factory: waiting for the app (pid ${holder}) to open its socket…`);
  }
  const timeoutMs = opts.startTimeoutMs ?? 120_000;
  const deadline = Date.now() + timeoutMs;
  let lastNote = Date.now();
  const ended = (how: string) =>
    new FactoryError('AppStartFailed', `the app ended before it opened its socket (${how}). The last lines of its log:\n${logTail(opts.dataDir, 20)}`);
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    // An app that ended (e.g. it could not open its socket) will not answer: say why now.
    if (exited) {
      const how = exited;
      exited = undefined;
      // Unless another command started one on this folder at the same moment and took the lock first: ours gave way, that one answers.
      const winner = readPid(lockFile);
      if (winner === undefined || winner === childPid || !pidAlive(winner)) throw ended(how);
      opts.progress(`factory: another command started the app (pid ${winner}) at the same time; waiting for it…`);
      other = winner;
    }
    if (other !== undefined && !pidAlive(other)) throw ended(`pid ${other} is gone`);
    const client = await tryConnect(sock);
    if (client) {
      opts.progress('factory: the app is ready');
      return client;
    }
    if (Date.now() - lastNote > 5000) {
      lastNote = Date.now();
      opts.progress(`factory: still starting (${Math.round((Date.now() - (deadline - timeoutMs)) / 1000)} s)…`);
    }
  }
  throw new FactoryError('AppStartFailed', `the app did not open its socket within ${Math.round(timeoutMs / 1000)} s. The last lines of its log:\n${logTail(opts.dataDir, 20)}`);
}

async function tryConnect(sock: string): Promise<FactoryClient | undefined> {
  try {
    return await FactoryClient.connect(sock, 5000);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ECONNREFUSED') return undefined;
    throw err;
  }
}

/** The Electron app this CLI runs inside, if any (the packaged app's `factory` launcher). */
export interface ElectronRuntime {
  execPath: string;
  platform: NodeJS.Platform;
  /** Run from a checkout (`electron .`): argv[1] is the app's path. */
  defaultApp: boolean;
  appPath?: string;
}

function electronRuntime(): ElectronRuntime | undefined {
  if (!process.versions.electron) return undefined;
  const defaultApp = (process as NodeJS.Process & { defaultApp?: boolean }).defaultApp === true;
  return { execPath: process.execPath, platform: process.platform, defaultApp, ...(defaultApp && process.argv[1] ? { appPath: process.argv[1] } : {}) };
}

/**
 * What starts the headless host. Inside the packaged app the binary cannot run as
 * Node (its fuses), and its files are inside app.asar: the app binary itself is
 * started with HEADLESS_FLAG, in the data dir (a folder in app.asar is no cwd).
 * Otherwise the web host's entry next to this file: compiled .js in a build,
 * TypeScript through tsx in the source tree.
 */
export function headlessCommand(electron: ElectronRuntime | undefined = electronRuntime()): { command: string; args: string[]; inDataDir?: boolean } {
  if (electron) {
    const appPath = electron.defaultApp && electron.appPath ? [electron.appPath] : [];
    // No display needed, nor wanted: the CLI may run over SSH (see DISPLAYLESS_SWITCHES).
    const switches = electron.platform === 'linux' ? DISPLAYLESS_SWITCHES : [];
    return { command: electron.execPath, args: [...appPath, ...switches, HEADLESS_FLAG], inDataDir: true };
  }
  const here = path.dirname(fileURLToPath(import.meta.url)); // main/cli or dist/main/cli
  const js = path.resolve(here, '../host/web/main.js');
  if (fs.existsSync(js)) return { command: process.execPath, args: [js, '--headless'] };
  return { command: process.execPath, args: ['--import', 'tsx', path.resolve(here, '../host/web/main.ts'), '--headless'] };
}

function startHeadless(dataDir: string): ChildProcess {
  const logs = path.join(dataDir, 'logs');
  fs.mkdirSync(logs, { recursive: true, mode: 0o700 });
  const out = fs.openSync(path.join(logs, HEADLESS_LOG), 'a', 0o600);
  const { command, args, inDataDir } = headlessCommand();
  const env: NodeJS.ProcessEnv = { ...process.env, FACTORY_DATA_DIR: dataDir };
  // Its own random token and port: not the caller's.
  delete env.FACTORY_WEB_TOKEN;
  delete env.FACTORY_WEB_PORT;
  const cwd = inDataDir ? dataDir : path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
  const child = spawn(command, args, { detached: true, stdio: ['ignore', out, out], env, cwd });
  child.unref();
  fs.closeSync(out);
  return child;
}

export function logTail(dataDir: string, lines: number): string {
  try {
    const text = fs.readFileSync(path.join(dataDir, 'logs', HEADLESS_LOG), 'utf8');
    return text.split('\n').slice(-lines - 1).join('\n');
  } catch {
    // The app ended before it wrote a log: say so in place of its last lines.
    return '(no log)';
  }
}
