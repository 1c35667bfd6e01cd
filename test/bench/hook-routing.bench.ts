// Hook routing benchmark, run with: bash test/support/with-keyring.sh npx tsx test/bench/hook-routing.bench.ts
// What the PreToolUse hook adds to a command of a Claude Code session whose
// hooks are installed (issue 27): the same commands, in the same session
// sandbox, run as `factory exec <task> -- sh -c '<cmd>'` (the baseline) and the
// way Claude Code runs a routed Bash call: the hook process decides (`factory
// hook pre-tool-use`, the tool input on stdin), then Claude Code's shell runs
// the rewritten line (`factory hook run …`: the working tree's changes go in
// first, then the command). Both through the real CLI, app and sandbox, in
// alternating order; prints the medians and the ratio routed / exec, and the
// hook's own share. A subagent's sandbox ready after SubagentStart is timed
// too, three ways: after the session was idle (the spare fork the session keeps,
// tasks/spare-forks.ts), right after a command in the session (the spare is
// stale: a fork of the sandbox then), and a fresh sandbox of the same
// repository (a second session's start, the path a subagent takes when its
// session has no running sandbox), all after the first boot. The warm pool is
// on, as by default (spares are made only then). Each round also times the hook's
// decision for file tools on this computer: Glob (decided without git, the
// baseline), Read (git check-ignore) and Grep with a glob (git status, for the
// exclusions of what git ignores; sessions/ignored-files.ts).
// The CLI is the compiled one (built here into a temporary folder), as users run
// it: under tsx each process would spend most of its time transpiling.
// BENCH_ROUNDS (default 7).
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, runCli, stopApp } from '../support/cli.js';
import { testImage } from '../support/image.js';
import { makeRepo } from '../support/repo.js';

const rounds = Number(process.env.BENCH_ROUNDS ?? 7);
const env = { FACTORY_WARM_POOL: '1' };

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** The compiled CLI's entry. */
let cliJs = '';

/** Compiles main/ and common/ into `out` as ES modules beside the project's node_modules. */
function buildCli(out: string): string {
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(ROOT, 'tsconfig.main.json'), '--outDir', out], { cwd: ROOT, stdio: 'inherit' });
  fs.writeFileSync(path.join(out, 'package.json'), '{"type":"module"}\n');
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(out, 'node_modules'));
  return path.join(out, 'main', 'cli', 'main.js');
}

/** Runs the CLI as Claude Code would (a fresh process), with `stdin`; resolves with its output and time. */
function cli(dataDir: string, args: string[], stdin = ''): Promise<{ code: number | null; stdout: string; stderr: string; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cliJs, '--data-dir', dataDir, ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d));
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr, ms: performance.now() - t0 }));
    child.stdin.end(stdin);
  });
}

async function main() {
  await testImage();
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hook-routing-bench-'));
  const dataDir = path.join(root, 'data');
  const repo = await makeRepo({ files: { 'README.md': '# bench\n', 'src/a.txt': 'a\n' } });
  const sessionId = 'bench-session';
  const t0 = Date.now();
  cliJs = buildCli(path.join(root, 'cli'));
  console.log(`compiled the CLI in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  // The CLI as the hooks were installed with it: Claude Code's shell runs the routed line from the repository.
  const via = `${process.execPath} ${cliJs} --data-dir ${dataDir}`;
  try {
    const ls = await runCli(dataDir, ['ls'], { env });
    if (ls.code !== 0) throw new Error(`the app did not start: ${ls.stderr}`);
    const start = await cli(dataDir, ['hook', 'session-start'], JSON.stringify({ session_id: sessionId, cwd: repo.dir }));
    if (start.code !== 0) throw new Error(`session-start failed: ${start.stderr}`);
    const task = /\(task ([A-Za-z0-9]+)\)/.exec(start.stdout)![1]!;
    console.log(`session sandbox ${task} ready in ${(start.ms / 1000).toFixed(1)} s; ${os.cpus().length} host cores, load ${os.loadavg()[0]!.toFixed(2)}`);
    // The pool's refill and the session's first spare fork boot VMs: the rounds start once both are done.
    const appLog = () => fs.readFileSync(path.join(dataDir, 'logs', 'app.log'), 'utf8');
    const spares = () => appLog().split('\n').filter((l) => l.includes('a spare fork of the session’s sandbox is ready')).length;
    const waitSpare = async (after: number) => {
      const deadline = Date.now() + 180_000;
      while (spares() <= after) {
        if (Date.now() > deadline) throw new Error('no spare fork was made');
        await new Promise((r) => setTimeout(r, 250));
      }
    };
    await waitSpare(0);
    for (const deadline = Date.now() + 180_000; ; ) {
      const pool = JSON.parse((await runCli(dataDir, ['status', '--json'], { env })).stdout).pool as { ready: number; target: number } | undefined;
      if (!pool || pool.ready >= pool.target) break;
      if (Date.now() > deadline) throw new Error('the warm pool did not fill');
      await new Promise((r) => setTimeout(r, 500));
    }
    const commands: Record<string, string> = { true: 'true', 'git status': 'git status --short && ls -R >/dev/null' };
    const times = new Map(Object.keys(commands).map((k) => [k, { exec: [] as number[], routed: [] as number[], hook: [] as number[] }]));
    const fileTools: Record<string, Record<string, unknown>> = {
      Glob: { tool_name: 'Glob', tool_input: { pattern: '**/*.txt' } },
      Read: { tool_name: 'Read', tool_input: { file_path: path.join(repo.dir, 'src', 'a.txt') } },
      Grep: { tool_name: 'Grep', tool_input: { pattern: 'round', glob: '*' } },
    };
    const fileToolMs = new Map(Object.keys(fileTools).map((k) => [k, [] as number[]]));
    for (let round = 1; round <= rounds; round++) {
      // An edit on this computer each round, as the agent's Write tool would make: the routed command carries it in.
      repo.write('src/a.txt', `round ${round}\n`);
      for (const [name, line] of Object.entries(commands)) {
        const t = times.get(name)!;
        const order = round % 2 ? ['exec', 'routed'] : ['routed', 'exec'];
        for (const way of order) {
          if (way === 'exec') {
            const r = await cli(dataDir, ['exec', task, '--', 'sh', '-c', line]);
            if (r.code !== 0) throw new Error(`exec ${name}: ${r.stderr}`);
            t.exec.push(r.ms);
            continue;
          }
          const input = { session_id: sessionId, cwd: repo.dir, hook_event_name: 'PreToolUse', tool_name: 'Bash', tool_input: { command: line, description: name } };
          const hook = await cli(dataDir, ['hook', 'pre-tool-use', '--via', via], JSON.stringify(input));
          const routed = JSON.parse(hook.stdout).hookSpecificOutput.updatedInput.command as string;
          const t0 = performance.now();
          execFileSync('bash', ['-c', routed], { cwd: repo.dir, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
          const runMs = performance.now() - t0;
          t.hook.push(hook.ms);
          t.routed.push(hook.ms + runMs);
        }
        console.log(`round ${round}: ${name.padEnd(10)} exec ${t.exec.at(-1)!.toFixed(0).padStart(5)} ms, routed ${t.routed.at(-1)!.toFixed(0).padStart(5)} ms (hook ${t.hook.at(-1)!.toFixed(0)} ms)`);
      }
      const names = Object.keys(fileTools);
      for (const name of round % 2 ? names : [...names].reverse()) {
        const decision = await cli(dataDir, ['hook', 'pre-tool-use', '--via', via], JSON.stringify({ session_id: sessionId, cwd: repo.dir, hook_event_name: 'PreToolUse', ...fileTools[name] }));
        if (decision.code !== 0 || JSON.parse(decision.stdout).hookSpecificOutput.permissionDecision === 'deny') throw new Error(`${name} was not let through: ${decision.stdout}${decision.stderr}`);
        fileToolMs.get(name)!.push(decision.ms);
      }
    }
    // A subagent's own sandbox, from SubagentStart to ready. After the session was idle: its spare fork.
    const subagent = async (agentId: string) => {
      const sub = await cli(dataDir, ['hook', 'subagent-start'], JSON.stringify({ session_id: sessionId, cwd: repo.dir, agent_id: agentId, agent_type: 'general-purpose' }));
      if (sub.code !== 0) throw new Error(`subagent-start failed: ${sub.stderr}`);
      const stop = await cli(dataDir, ['hook', 'subagent-stop'], JSON.stringify({ session_id: sessionId, cwd: repo.dir, agent_id: agentId }));
      const task = JSON.parse((await runCli(dataDir, ['ls', '--json'], { env })).stdout).find((t: { title: string }) => t.title.includes(agentId));
      return { ms: sub.ms, stopMs: stop.ms, how: String(task?.setup?.summary ?? '') };
    };
    await waitSpare(spares());
    const idle = await subagent('bench-idle');
    // Right after a command in the session: the spare made when it was idle is stale, the sandbox is forked then.
    await waitSpare(spares());
    await cli(dataDir, ['exec', task, '--', 'sh', '-c', 'date > ~/changed']);
    const busy = await subagent('bench-busy');
    await cli(dataDir, ['hook', 'session-end'], JSON.stringify({ session_id: sessionId, cwd: repo.dir }));
    // Fresh from the repository, as a subagent whose session has no running sandbox gets it.
    const fresh = await cli(dataDir, ['hook', 'session-start'], JSON.stringify({ session_id: `${sessionId}-2`, cwd: repo.dir }));
    if (fresh.code !== 0) throw new Error(`the second session-start failed: ${fresh.stderr}`);
    await cli(dataDir, ['hook', 'session-end'], JSON.stringify({ session_id: `${sessionId}-2`, cwd: repo.dir }));
    console.log('\n== hook routing benchmark ==');
    for (const [name, t] of times) {
      const exec = median(t.exec);
      const routed = median(t.routed);
      console.log(`${name.padEnd(10)} factory exec ${exec.toFixed(0).padStart(5)} ms, routed ${routed.toFixed(0).padStart(5)} ms (of which the hook's decision ${median(t.hook).toFixed(0)} ms), routed / exec ${(routed / exec).toFixed(2)}`);
    }
    const glob = median(fileToolMs.get('Glob')!);
    console.log(`file tools, the hook's decision: Glob ${glob.toFixed(0)} ms (no git), ${['Read', 'Grep'].map((n) => `${n} ${median(fileToolMs.get(n)!).toFixed(0)} ms (${(median(fileToolMs.get(n)!) / glob).toFixed(2)}×)`).join(', ')}`);
    const kind = (how: string) => (how.includes('spare') ? 'spare fork' : how.startsWith('forked') ? 'fork' : 'NOT forked');
    console.log(
      `subagent sandbox ready after SubagentStart: session idle (${kind(idle.how)}) ${(idle.ms / 1000).toFixed(2)} s; right after a command (${kind(busy.how)}) ${(busy.ms / 1000).toFixed(1)} s; ` +
        `a fresh sandbox of the repository ${(fresh.ms / 1000).toFixed(1)} s; idle / fresh ${(idle.ms / fresh.ms).toFixed(2)}, after a command / fresh ${(busy.ms / fresh.ms).toFixed(2)}; ` +
        `its stop (leak check, work carried, destroyed): ${(idle.stopMs / 1000).toFixed(1)} s`,
    );
  } finally {
    await stopApp(dataDir);
    repo.cleanup();
    if (!process.env.BENCH_KEEP) fs.rmSync(root, { recursive: true, force: true });
    else console.log(`kept ${root}`);
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
