// The factory CLI as a user runs it: its own Node process (TypeScript through
// tsx), a data dir of the test's choosing, stdout, stderr and exit status kept
// apart. The app it talks to (or starts) is the real one.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CLI_ENTRY = path.join(ROOT, 'main/cli/main.ts');
export const WEB_ENTRY = path.join(ROOT, 'main/host/web/main.ts');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runCli(dataDir: string, args: string[], opts: { stdin?: string; timeoutMs?: number; env?: NodeJS.ProcessEnv } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CLI_ENTRY, '--data-dir', dataDir, ...args], {
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
