// The factory CLI as a user runs it: its own Node process, a data dir of the
// test's choosing, stdout, stderr and exit status kept apart. The app it talks
// to (or starts) is the real one.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CLI_ENTRY = path.join(ROOT, 'main/cli/main.ts');
export const WEB_ENTRY = path.join(ROOT, 'main/host/web/main.ts');

/**
 * How a test starts a module of this checkout in a Node process of its own: `node
 * ...nodeArgs file`, or `import(url)` in a script run that way. `npm test` builds dist/
 * from this tree before any test runs and says so (FACTORY_TEST_DIST=1): the compiled
 * JavaScript then starts in about a third of the CPU time tsx takes to load the
 * TypeScript (the app 0.8 s against 2.0 s, the CLI 0.35 s against 1.0 s), paid at every
 * app, CLI and hook call. A file run alone by vitest gets the TypeScript, never a stale build.
 */
export function runnable(tsFile: string): { nodeArgs: string[]; file: string; url: string } {
  if (process.env.FACTORY_TEST_DIST === '1') {
    const js = path.join(ROOT, 'dist', path.relative(ROOT, tsFile)).replace(/\.ts$/, '.js');
    if (!fs.existsSync(js)) throw new Error(`FACTORY_TEST_DIST=1 but ${path.relative(ROOT, js)} is missing: run npm run build`);
    return { nodeArgs: [], file: js, url: pathToFileURL(js).href };
  }
  // tsx by its file: a process started in a folder outside the project finds no node_modules.
  return { nodeArgs: ['--import', pathToFileURL(path.join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href], file: tsFile, url: pathToFileURL(tsFile).href };
}

/** `node` arguments that run the factory CLI. */
export function cliArgs(...args: string[]): string[] {
  const cli = runnable(CLI_ENTRY);
  return [...cli.nodeArgs, cli.file, ...args];
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runCli(dataDir: string, args: string[], opts: { stdin?: string; timeoutMs?: number; env?: NodeJS.ProcessEnv } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, cliArgs('--data-dir', dataDir, ...args), {
      cwd: ROOT,
      env: { ...process.env, ...opts.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`factory ${args.join(' ')} did not finish in time\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, opts.timeoutMs ?? 120_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(opts.stdin ?? '');
  });
}

/** The pid in the data dir's lock file: the app the CLI started. */
export function appPid(dataDir: string): number | undefined {
  try {
    const pid = Number(fs.readFileSync(path.join(dataDir, 'factory.lock'), 'utf8').trim());
    return pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Stops the app the CLI started (SIGTERM tears its sandboxes down) and waits until it is gone. */
export async function stopApp(dataDir: string, timeoutMs = 60_000): Promise<void> {
  const pid = appPid(dataDir);
  if (!pid || !alive(pid)) return;
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + timeoutMs;
  while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  if (alive(pid)) process.kill(pid, 'SIGKILL');
}
