// The soak's model-upstream faults (issue 30): tasks run by the real Claude Code
// CLI in real sandboxes, through the app's real credential proxy, against the
// scripted Messages API stub, which from a seeded moment in each task's
// conversation on answers 500, hangs, resets the connection or breaks its SSE
// stream. The agent's own retries are cut to one (the repository's pipeline
// env), so a fault that lasts ends the task. After each: the task ends in a
// terminal state with a named error that says the model API failed and how,
// and nothing of it runs any more; at the end nothing is left.
//
// This phase runs its own app in this process (test/support/agent-app.ts): the
// proxy must trust the stub's test CA and reach it on loopback, which the app
// run as a separate process (the rest of the soak) refuses by design.
import fs from 'node:fs';
import path from 'node:path';
import type { Task, TaskPhase } from '../../common/domain.js';
import { TaskRecord } from '../../main/state/state-store.js';
import { GUEST_ARTIFACTS_DIR } from '../../main/pipeline/artifacts.js';
import { stageOfRequest, type StubReply } from '../support/anthropic-stub.js';
import { startAgentApp, waitForTask, type AgentApp } from '../support/agent-app.js';
import { makeRepo, type FixtureRepo } from '../support/repo.js';
import { alive, credentialHits, leftoversIn, processesUnder, type Leftover } from './leftovers.js';
import type { Rng } from './rng.js';

export const MODEL_FAULT_KINDS = ['model-500', 'model-hang', 'model-reset', 'model-broken-sse'] as const;
export type ModelFault = (typeof MODEL_FAULT_KINDS)[number];

/** What each fault must be named by in the task's error, besides "model API". */
export const MODEL_FAULT_WORDS: Record<ModelFault, RegExp> = {
  'model-500': /\b500\b/,
  'model-hang': /did not answer in time|timed? ?out/i,
  'model-reset': /reset|ECONNRESET|socket hang up|connection/i,
  'model-broken-sse': /stream|aborted|terminated|reset|ECONNRESET|connection/i,
};

export interface ModelFaultHooks {
  rng: Rng;
  parallel: number;
  vmMemoryMb: number;
  say(line: string): void;
  check(at: string, invariant: string, ok: boolean, detail: () => string): void;
  count(key: 'faultsInjected' | 'faultsMissed' | 'tasksByOutcome' | 'actions', name: string): void;
  note(line: string): void;
  /** Files and processes left behind, reported with the rest of the soak's. */
  leftovers(files: Leftover[]): void;
  leftoverProcesses(procs: Array<{ pid: number; command: string }>): void;
}

const REPO = '/work/repo';
const TERMINAL: TaskPhase[] = ['review', 'approved', 'rejected', 'failed', 'cancelled', 'interrupted', 'closed'];
/** Agent-loop requests of one task's good run: plan 2, build 2, review 2, document 1. */
const REQUESTS_PER_TASK = 7;

const SCRIPT: Record<string, StubReply[]> = {
  plan: [
    { toolUses: [{ name: 'Write', input: { file_path: `${GUEST_ARTIFACTS_DIR}/PLAN.md`, content: '# Add soak.txt\n' } }] },
    { text: 'The plan adds soak.txt.' },
  ],
  build: [{ toolUses: [{ name: 'Write', input: { file_path: `${REPO}/soak.txt`, content: 'soak\n' } }] }, { text: 'Added soak.txt.' }],
  review: [
    { toolUses: [{ name: 'Write', input: { file_path: `${GUEST_ARTIFACTS_DIR}/REVIEW.md`, content: 'Fine.\n\nVerdict: approve\n' } }] },
    { text: 'Approved.' },
  ],
  document: [{ text: 'Nothing to document.' }],
};

function qemuPidOf(dataDir: string, id: string): number | undefined {
  try {
    return TaskRecord.parse(JSON.parse(fs.readFileSync(path.join(dataDir, 'state', 'tasks', `${id}.json`), 'utf8'))).qemuPid;
  } catch {
    return undefined;
  }
}

function faultReply(fault: ModelFault): StubReply {
  switch (fault) {
    case 'model-500':
      return { errorStatus: 500, text: 'soak: internal server error' };
    case 'model-hang':
      return { hold: new Promise(() => undefined) }; // never answers: the proxy's upstream time limit must end it
    case 'model-reset':
      return { fault: 'reset' };
    case 'model-broken-sse':
      return { fault: 'broken-sse' };
  }
}

interface TaskPlan {
  fault: ModelFault;
  /** The task's agent-loop request (0-based) from which on every answer is the fault. */
  at: number;
  seen: number;
  faulted: number;
}

/** Runs one task per planned fault, `parallel` at a time, and checks the invariants after each and at the end. */
export async function runModelFaults(faults: ModelFault[], hooks: ModelFaultHooks): Promise<void> {
  if (!faults.length) return;
  const { rng, say, check, count } = hooks;
  const plans = faults.map((fault): TaskPlan => ({ fault, at: rng.int(0, REQUESTS_PER_TASK - 1), seen: 0, faulted: 0 }));
  const marker = `soak-model-${rng.int(1000, 9999)}`;
  const planOf = (body: string): TaskPlan | undefined => {
    const m = new RegExp(`${marker}-(\\d+)`).exec(body);
    return m ? plans[Number(m[1])] : undefined;
  };
  let env: AgentApp | undefined;
  let repo: FixtureRepo | undefined;
  try {
    env = await startAgentApp({
      stub: {
        script: (req, { assistantTurns }) => {
          const plan = planOf(req.rawBody);
          if (plan && plan.seen++ >= plan.at) {
            plan.faulted++;
            return faultReply(plan.fault);
          }
          return SCRIPT[stageOfRequest(req)]?.[assistantTurns] ?? { text: 'Done.' };
        },
      },
    });
    const app = env.app;
    await app.api['settings.set']({ maxParallelTasks: hooks.parallel, vmMemoryMb: hooks.vmMemoryMb, keepSandboxAfterDecisionMinutes: 0, warmPoolSize: 0 });
    // One retry of the agent's own (not ten with backoff): a fault that lasts ends the stage
    // in minutes. The stage's time limit is the app's last word should the agent hang anyway.
    const agentStage = { command: 'agent', timeoutSeconds: 420 };
    repo = await makeRepo({
      files: {
        'README.md': '# soak model faults\n',
        '.factory/pipeline.json': JSON.stringify({
          agent: 'claude-code',
          env: { CLAUDE_CODE_MAX_RETRIES: '1' },
          stages: { plan: agentStage, build: agentStage, review: agentStage, document: agentStage, test: { command: 'echo "1 passed, 0 failed"' } },
        }),
      },
    });
    const dataDir = env.paths.data;

    const lifeOf = async (index: number) => {
      const plan = plans[index]!;
      const at = `model task #${index} (${plan.fault} from request ${plan.at})`;
      const created = await app.api['tasks.create']({ repoPath: repo!.dir, title: `Add soak.txt (${marker}-${index})` });
      say(`${at}: created ${created.id}`);
      let end: Task | undefined;
      try {
        end = await waitForTask(app, created.id, (t) => TERMINAL.includes(t.phase), 15 * 60_000);
      } catch (err) {
        check(at, 'a task reaches a terminal state', false, () => (err as Error).message);
        end = await app.api['tasks.get']({ taskId: created.id });
      }
      if (plan.faulted === 0) {
        count('faultsMissed', plan.fault);
        hooks.note(`${at}: the conversation ended before request ${plan.at}; ended ${end.phase}`);
      } else {
        count('faultsInjected', plan.fault);
        const words = `${end.error?.name}: ${end.error?.message}`;
        say(`${at}: ${end.phase} after ${plan.faulted} faulty answers (${words.slice(0, 300)})`);
        check(at, 'a model fault ends the task as failed', end.phase === 'failed', () => `task ${end!.id} is ${end!.phase}`);
        check(at, 'a failed task carries a named error', !!end.error?.name && end.error.name !== 'Error', () => words);
        check(at, 'the error says the model API failed', /model API/i.test(end.error?.message ?? ''), () => words);
        check(at, `the error says how the model API failed (${plan.fault})`, MODEL_FAULT_WORDS[plan.fault].test(end.error?.message ?? ''), () => words);
      }
      if (end.phase !== 'closed') await app.api['tasks.destroy']({ taskId: created.id }).catch((err: Error) => say(`${at}: destroy: ${err.name}: ${err.message}`));
      const gone = await waitForTask(app, created.id, (t) => !['running', 'booting', 'stopping'].includes(t.sandbox.status), 120_000).catch((err: Error) => {
        check(at, 'a destroyed sandbox stops', false, () => err.message);
        return undefined;
      });
      if (gone) count('tasksByOutcome', `model:${end.phase}`);
      // Nothing of this task runs any more: its QEMU went with its sandbox.
      const qemuPid = qemuPidOf(dataDir, created.id);
      check(at, 'no QEMU is left that no live task owns', !qemuPid || !alive(qemuPid), () => `QEMU ${qemuPid} still runs`);
    };

    for (let next = 0; next < plans.length; next += hooks.parallel) {
      const wave = [...Array(Math.min(hooks.parallel, plans.length - next)).keys()].map((k) => next + k);
      say(`model-fault wave: tasks ${wave.join(', ')}`);
      await Promise.all(wave.map((i) => lifeOf(i).catch((err: Error) => check(`model task #${i}`, 'the API answers (no crash of the harness)', false, () => `${err.name}: ${err.message}`))));
    }

    // ---- the end of the phase: everything settled, nothing left ----
    for (const t of await app.api['tasks.list']({})) {
      check('model faults end', 'no task is stuck running', !['running', 'provisioning', 'seeding', 'pulling-back'].includes(t.phase), () => `task ${t.id} is ${t.phase}`);
      check('model faults end', 'no task runs without a sandbox', !(t.phase === 'running' && !['running', 'booting'].includes(t.sandbox.status)), () => `task ${t.id}`);
    }
    const live = (await app.api['terminal.list']({})).filter((x) => x.status === 'live');
    check('model faults end', 'no terminal session outlives its task', live.length === 0, () => JSON.stringify(live));
    const files = leftoversIn(dataDir, { appRunning: true });
    hooks.leftovers(files.map((f) => ({ ...f, what: `model-fault app: ${f.what}` })));
    check('model faults end', 'no socket, overlay, quarantine or temp file is left', files.length === 0, () => JSON.stringify(files.slice(0, 20)));
    const hits = await credentialHits(dataDir, env.credentialId, env.apiKey);
    check('model faults end', 'no credential value anywhere in the data folder', hits.length === 0, () => hits.join(', '));
    const requests = env.stub.messageRequests().length;
    hooks.note(`model faults: ${plans.length} Claude Code tasks, ${requests} Messages requests reached the stub through the proxy, ${plans.reduce((n, p) => n + p.faulted, 0)} of them answered with a fault`);
  } finally {
    const roots = [env?.paths.data, repo?.dir].filter((r): r is string => !!r);
    await env?.dispose();
    const procs = processesUnder(roots);
    hooks.leftoverProcesses(procs);
    for (const p of procs) if (alive(p.pid)) process.kill(p.pid, 'SIGKILL'); // reported above; not left for the next run
    check('model faults, after the app stopped', 'no QEMU, socat, ssh or git process is left', procs.length === 0, () => JSON.stringify(procs));
    repo?.cleanup();
  }
}
