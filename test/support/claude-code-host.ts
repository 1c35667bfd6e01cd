// Runs the real Claude Code CLI on the host (not in a VM) against a local
// model-API stub, through the same command line the ClaudeCodeAdapter builds
// for the guest. Claude Code refuses to skip permissions as root, so when the
// tests run as root the CLI runs as an unprivileged user created for it.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ClaudeCodeAdapter } from '../../main/pipeline/agents/claude-code.js';
import { cachedNpmBinary, CLAUDE_CODE_BINARY, fetchNpmBinary } from '../../main/pipeline/agents/npm-binary.js';
import { renderCommand } from '../../main/pipeline/agents/shell.js';

export const HOST_AGENT_USER = 'factory-test';

/** Where host tests keep fetched agent binaries: FACTORY_CACHE_DIR, else a folder under the OS temp dir. */
export function agentBinaryCacheDir(): string {
  return process.env.FACTORY_CACHE_DIR ?? path.join(os.tmpdir(), 'factory-test-cache');
}

/** The pinned CLI, from the cache or fetched with `npm pack` when allowed. */
export async function claudeCodeBinary(opts: { allowFetch: boolean }): Promise<string | undefined> {
  const cache = agentBinaryCacheDir();
  const cached = cachedNpmBinary(cache, CLAUDE_CODE_BINARY);
  if (cached || !opts.allowFetch) return cached;
  return fetchNpmBinary(cache, CLAUDE_CODE_BINARY);
}

/** Creates the unprivileged user when running as root; returns its name, or undefined when not root. */
export function ensureHostAgentUser(): string | undefined {
  if (process.getuid?.() !== 0) return undefined;
  try {
    execFileSync('id', ['-u', HOST_AGENT_USER], { stdio: 'ignore' });
  } catch {
    try {
      execFileSync('useradd', ['--create-home', '--shell', '/bin/bash', HOST_AGENT_USER], { stdio: 'ignore' });
    } catch (err) {
      // Two test files side by side may both find no user: the loser's useradd fails, the user exists.
      try {
        execFileSync('id', ['-u', HOST_AGENT_USER], { stdio: 'ignore' });
      } catch {
        throw err;
      }
    }
  }
  return HOST_AGENT_USER;
}

export interface HostRunResult {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
  workDir: string;
  homeDir: string;
  commandLine: string;
}

/**
 * One headless run: a fresh work dir and HOME, the prompt in a file on stdin,
 * only the adapter's env (plus HOME/PATH). The caller removes `root` afterwards.
 */
export async function runClaudeOnHost(opts: {
  binary: string;
  baseUrl: string;
  apiKey: string;
  prompt: string;
  root: string;
  maxTurns?: number;
  timeoutMs?: number;
}): Promise<HostRunResult> {
  const workDir = path.join(opts.root, 'repo');
  const homeDir = path.join(opts.root, 'home');
  const promptFile = path.join(opts.root, 'prompt.md');
  fs.mkdirSync(workDir, { recursive: true });
  fs.mkdirSync(homeDir, { recursive: true });
  fs.writeFileSync(promptFile, opts.prompt);
  const user = ensureHostAgentUser();
  if (user) {
    // The unprivileged user must reach the binary, the prompt and its folders.
    execFileSync('chown', ['-R', user, workDir, homeDir]);
    fs.chmodSync(opts.root, 0o755);
    fs.chmodSync(promptFile, 0o644);
  }
  let binary = opts.binary;
  if (user && !canExecute(user, binary)) {
    // The cache may sit under root's home: give the user its own copy rather than open up folders.
    binary = path.join(opts.root, 'claude');
    fs.copyFileSync(opts.binary, binary);
    fs.chmodSync(binary, 0o755);
  }
  const adapter = new ClaudeCodeAdapter({ binary });
  const spec = adapter.command({
    promptFile,
    cwd: workDir,
    env: { ANTHROPIC_BASE_URL: opts.baseUrl, ANTHROPIC_API_KEY: opts.apiKey },
    maxTurns: opts.maxTurns,
  });
  const commandLine = renderCommand(spec);
  const baseEnv = [`HOME=${homeDir}`, 'PATH=/usr/local/bin:/usr/bin:/bin', 'LANG=C.UTF-8'];
  const [cmd, args] = user
    ? ['runuser', ['-u', user, '--', 'env', '-i', ...baseEnv, 'bash', '-c', commandLine]]
    : ['env', ['-i', ...baseEnv, 'bash', '-c', commandLine]];
  const started = Date.now();
  // Own process group, so a timeout stops the CLI and not only the runuser wrapper.
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const timer = setTimeout(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }, opts.timeoutMs ?? 120_000);
  const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
  clearTimeout(timer);
  return { code, stdout, stderr, ms: Date.now() - started, workDir, homeDir, commandLine };
}

/** Whether `user` may run `file` (a binary under root's cache may not be reachable for the agent user). */
export function canExecute(user: string, file: string): boolean {
  try {
    execFileSync('runuser', ['-u', user, '--', 'test', '-x', file], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
