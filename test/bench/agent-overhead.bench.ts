// Agent overhead benchmark, run with:
//   bash test/support/with-keyring.sh npx tsx test/bench/agent-overhead.bench.ts
// One sandbox, one run. (a) Through the app: a task whose pipeline.json picks
// claude-code runs every stage; per agent stage, the time from the stage's
// start (StageResult.startedAt) to the first request of that stage at the
// Messages API stub, split at the moment the stage's terminal session opened
// (the agent command's SSH exec). (b) By hand, in the same sandbox right after:
// a root shell over SSH (the app's terminal), the same CLI with the same
// flags, environment and prompt file, typed as one command; the time from
// typing it to its first request at the stub. Rounds alternate (a) and (b)
// (BENCH_ROUNDS, default 2; the app's later rounds are retries from plan, so
// the first round alone pays the cold start of the CLI). Prints both and their ratio.
import type { TerminalInfo } from '../../common/domain.js';
import { ClaudeCodeAdapter } from '../../main/pipeline/agents/claude-code.js';
import { shellWord } from '../../common/shell-quote.js';
import { GUEST_AGENT_HOME, GUEST_ENV_FILE, GUEST_REPO_DIR } from '../../main/guest/guest-shell.js';
import { GUEST_ARTIFACTS_DIR } from '../../main/pipeline/artifacts.js';
import { stageOfRequest, type StubReply } from '../support/anthropic-stub.js';
import { SandboxShell, startAgentApp, waitForTask } from '../support/agent-app.js';
import { testImage } from '../support/image.js';
import { makeRepo } from '../support/repo.js';
import os from 'node:os';

const STAGES = ['plan', 'build', 'review', 'document'] as const;
type Stage = (typeof STAGES)[number];
const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 2));

// Short conversations: the first request is what is measured.
const scripts: Record<Stage, StubReply[]> = {
  plan: [{ toolUses: [{ name: 'Write', input: { file_path: `${GUEST_ARTIFACTS_DIR}/PLAN.md`, content: '# Bench plan\n' } }] }, { text: 'Planned.' }],
  build: [{ text: 'Built.' }],
  review: [{ toolUses: [{ name: 'Write', input: { file_path: `${GUEST_ARTIFACTS_DIR}/REVIEW.md`, content: 'Verdict: approve\n' } }] }, { text: 'Approved.' }],
  document: [{ text: 'Nothing to document.' }],
};

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

const fmt = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

async function main() {
  const image = await testImage();
  let byHand = false;
  const env = await startAgentApp({
    stub: {
      script: (req, { assistantTurns }) => {
        if (byHand) return { text: 'Done.' };
        const stage = stageOfRequest(req) as Stage;
        // The document stage fails on purpose (a model-API error) so the task can be retried for the next round.
        if (stage === 'document') return { errorStatus: 400, text: 'bench: end of round' };
        return scripts[stage]?.[assistantTurns] ?? { text: 'Done.' };
      },
    },
  });
  const repo = await makeRepo({ files: { 'README.md': '# Bench\n', '.factory/pipeline.json': JSON.stringify({ agent: 'claude-code' }) } });
  try {
    console.log(`image ${image.version}, ${os.cpus().length} host cores, load ${os.loadavg()[0]!.toFixed(2)}, ${rounds} round(s), app and by hand alternating`);
    // When stage sessions opened (the agent command's SSH exec), host clock.
    const opened: Array<{ title: string; at: number }> = [];
    env.app.onEvent((e) => {
      if (e.type === 'terminal.opened') opened.push({ title: (e.info as TerminalInfo).title, at: Date.now() });
    });
    const app: Record<string, Array<{ total: number; toExec: number }>> = {};
    const hand: Record<string, number[]> = {};
    let shell: SandboxShell | undefined;
    let taskId = '';

    for (let round = 0; round < rounds; round++) {
      // (a) Through the app: the pipeline from plan (a fresh task the first time, a retry after).
      byHand = false;
      if (round === 0) taskId = (await env.app.api['tasks.create']({ repoPath: repo.dir, title: 'Benchmark the agent stages' })).id;
      else await env.app.api['tasks.retry']({ taskId, fromStage: 'plan' });
      // A retry answers with the task running again, so the next end is this round's.
      const t = await waitForTask(env.app, taskId, (x) => ['review', 'failed', 'cancelled'].includes(x.phase), 15 * 60_000);
      const failedAt = t.stages.find((s) => s.status !== 'passed')?.name;
      if (failedAt !== 'document') throw new Error(`round ${round + 1}: the pipeline stopped at ${failedAt}: ${JSON.stringify(t.error ?? t.stages)}`);
      if (round === 0) console.log(`sandbox booted in ${t.sandbox.bootMs} ms (${t.sandbox.accel})`);
      console.log(`round ${round + 1} app: ${t.stages.map((s) => `${s.name} ${s.durationMs} ms`).join(', ')}`);
      for (const stage of STAGES) {
        const s = t.stages.find((x) => x.name === stage)!;
        const start = Date.parse(s.startedAt!);
        const first = env.stub.requests.find((r) => r.at >= start && stageOfRequest(r) === stage);
        if (!first) throw new Error(`no request of stage ${stage} reached the stub`);
        const exec = opened.find((o) => o.title === stage && o.at >= start)?.at ?? start;
        (app[stage] ??= []).push({ total: first.at - start, toExec: exec - start });
      }

      // (b) By hand: the same CLI, flags, placeholder environment and prompt file, typed into a root shell.
      byHand = true;
      if (!shell) {
        shell = await SandboxShell.open(env, taskId);
        await shell.run(`cd ${GUEST_REPO_DIR} && . ${GUEST_ENV_FILE}`);
      }
      for (const stage of STAGES) {
        const promptFile = (await shell.run(`ls -t ${GUEST_AGENT_HOME}/.factory-prompts/${taskId}-${stage}-*.md | head -1`)).trim();
        if (!promptFile) throw new Error(`no prompt file of stage ${stage} in the guest`);
        const spec = new ClaudeCodeAdapter().command({ promptFile, cwd: GUEST_REPO_DIR, env: { ANTHROPIC_BASE_URL: 'x', ANTHROPIC_API_KEY: 'x' } });
        // The adapter's program, flags and quiet variables; the broker's two values from the sourced env file.
        const quiet = Object.entries(spec.env)
          .filter(([k]) => !k.startsWith('ANTHROPIC_'))
          .map(([k, v]) => `${k}=${shellWord(v)}`);
        const command = [
          'runuser -u agent -- env -i HOME=/home/agent USER=agent LOGNAME=agent PATH=/usr/local/bin:/usr/bin:/bin TERM=xterm-256color LANG=C.UTF-8',
          ...quiet,
          '"ANTHROPIC_BASE_URL=$ANTHROPIC_BASE_URL" "ANTHROPIC_API_KEY=$ANTHROPIC_API_KEY"',
          ...spec.argv.map(shellWord),
          `< ${shellWord(promptFile)} > /dev/null`,
        ].join(' ');
        const before = env.stub.requests.length;
        const t0 = Date.now();
        const done = shell.run(command, 5 * 60_000);
        const first = await env.stub.waitFor((r) => env.stub.requests.indexOf(r) >= before && stageOfRequest(r) === stage, 5 * 60_000);
        (hand[stage] ??= []).push(first.at - t0);
        await done;
      }
      console.log(`round ${round + 1} by hand: ${STAGES.map((s) => `${s} ${hand[s]!.at(-1)} ms`).join(', ')}`);
    }
    await shell?.close();

    console.log('\nmedians over rounds');
    console.log('stage     | app: start → first request (of which to exec) | by hand over SSH | ratio | added by the app');
    for (const stage of STAGES) {
      const a = median(app[stage]!.map((x) => x.total));
      const x = median(app[stage]!.map((y) => y.toExec));
      const h = median(hand[stage]!);
      console.log(`${stage.padEnd(9)} | ${fmt(a).padStart(8)} (${fmt(x).padStart(7)})                    | ${fmt(h).padStart(8)}         | ${(a / h).toFixed(2)}  | ${fmt(a - h)}`);
    }
    const all = STAGES.flatMap((s) => app[s]!.map((x) => x.total));
    const allHand = STAGES.flatMap((s) => hand[s]!);
    console.log(`all       | ${fmt(median(all))} app vs ${fmt(median(allHand))} by hand, ratio ${(median(all) / median(allHand)).toFixed(2)}, added ${fmt(median(all) - median(allHand))}`);
  } finally {
    await env.dispose();
    repo.cleanup();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
