// The corpus in test/fixtures/real/: small projects shaped like public ones
// (see each README), copied into a fresh git repository as a user's checkout,
// with the `.factory/pipeline.json` a user must add when the sandbox cannot
// set the project up alone (test/fixtures/real/MATRIX.md). One app runs them
// one after another through setup, build and test with the command agent.
// Used by test/integration/real-corpus.test.ts (two) and
// test/bench/real-corpus.bench.ts (all of them).
import fs from 'node:fs';
import path from 'node:path';
import type { StageResult, Task } from '../../common/domain.js';
import type { EgressRule } from '../../common/egress.js';
import type { FactoryApp } from '../../main/app.js';
import { makeRepo, type FixtureRepo } from './repo.js';
import { waitForTask } from './wait-for-task.js';

export const CORPUS_DIR = path.join(import.meta.dirname, '../fixtures/real');

export interface CorpusProject {
  /** Its folder under test/fixtures/real/. */
  name: string;
  /** What the test card says when it works. */
  test: RegExp;
  /** What the build card says, when the project has a build. */
  build?: RegExp;
  /** The `.factory/pipeline.json` a user adds; absent when the project works out of the box. */
  pipeline?: Record<string, unknown>;
  /** Egress rules a user adds in Settings for it (beyond the default rules). */
  egress?: EgressRule[];
}

const CMAKE_PIPELINE = {
  environment: { packages: ['cmake', 'gcc', 'libc6-dev', 'make'] },
  stages: { build: { command: 'cmake -S . -B build && cmake --build build' }, test: { command: 'ctest --test-dir build' } },
};

export const CORPUS: CorpusProject[] = [
  { name: 'clsx-like', test: /^5 passed, 0 failed$/, build: /^built dist\/clsx\.js and dist\/clsx\.mjs$/ },
  { name: 'is-number-like', test: /^4 passed, 0 failed$/ },
  { name: 'uthash-like', test: /\(test counts not recognised\)$/ },
  { name: 'node-test-like', test: /^3 passed, 0 failed$/ },
  // Its own C addon: node-gyp builds it on install against the installed Node's headers.
  { name: 'native-addon-like', test: /^3 passed, 0 failed$/ },
  { name: 'ms-like', test: /^4 passed, 0 failed$/ },
  { name: 'vitest-like', test: /^4 passed, 0 failed$/ },
  // node-tap gives each test file 30 s; starting its TypeScript loader under emulation takes longer.
  { name: 'tap-like', test: /^4 passed, 0 failed$/, pipeline: { env: { TAP_TIMEOUT: '300' } } },
  // Yarn classic lockfiles fetch from registry.yarnpkg.com, among the default rules.
  { name: 'yarn-like', test: /^3 passed, 0 failed$/ },
  { name: 'workspaces-like', test: /^5 passed, 0 failed$/ },
  { name: 'go-like', test: /^1 passed, 0 failed \(packages\)$/ },
  { name: 'pytest-like', test: /^6 passed, 0 failed$/, pipeline: { environment: { packages: ['python3-pytest'] } } },
  { name: 'cmake-like', test: /^3 passed, 0 failed$/, pipeline: CMAKE_PIPELINE },
];

/** The Settings rules the corpus's projects need, for the app that runs them. */
export function corpusEgressRules(projects: CorpusProject[] = CORPUS): EgressRule[] {
  return projects.flatMap((p) => p.egress ?? []);
}

export function corpusProject(name: string): CorpusProject {
  const p = CORPUS.find((c) => c.name === name);
  if (!p) throw new Error(`no corpus project ${name}`);
  return p;
}

/** The project as a user's repository: its files in one commit, plus the pipeline.json it needs (unless `outOfTheBox`). */
export async function corpusRepo(project: CorpusProject, opts: { outOfTheBox?: boolean } = {}): Promise<FixtureRepo> {
  const repo = await makeRepo({ commit: false });
  fs.cpSync(path.join(CORPUS_DIR, project.name), repo.dir, { recursive: true });
  if (project.pipeline && !opts.outOfTheBox) repo.write('.factory/pipeline.json', JSON.stringify(project.pipeline, null, 2) + '\n');
  repo.commit(`${project.name}, as a user's checkout`);
  return repo;
}

export interface CorpusRun {
  project: string;
  outOfTheBox: boolean;
  task: Task;
  setup: Task['setup'];
  build?: StageResult;
  test?: StageResult;
  /** Start to the task's end. */
  ms: number;
  /** The test card as expected (status passed, summary matching). */
  ok: boolean;
}

const ended = (t: Task) => ['review', 'failed', 'cancelled', 'interrupted'].includes(t.phase);

/** Runs one project through setup, build and test with the command agent; the task is destroyed after. */
export async function runCorpusProject(
  app: FactoryApp,
  project: CorpusProject,
  opts: { outOfTheBox?: boolean; timeoutMs?: number; /** Looks at the ended task while its sandbox still exists (its audit, its terminals). */ beforeDestroy?: (task: Task) => Promise<void> } = {},
): Promise<CorpusRun> {
  const repo = await corpusRepo(project, opts);
  const started = Date.now();
  try {
    const created = await app.api['tasks.create']({ repoPath: repo.dir, title: `Run the tests of ${project.name}`, agent: 'command' });
    const task = await waitForTask(app, created.id, ended, opts.timeoutMs ?? 15 * 60_000);
    const stage = (name: string) => task.stages.find((s) => s.name === name);
    const test = stage('test');
    const run: CorpusRun = {
      project: project.name,
      outOfTheBox: !project.pipeline || !!opts.outOfTheBox,
      task,
      setup: task.setup,
      build: stage('build'),
      test,
      ms: Date.now() - started,
      ok: test?.status === 'passed' && project.test.test(test.summary ?? ''),
    };
    try {
      await opts.beforeDestroy?.(task);
    } finally {
      await app.api['tasks.destroy']({ taskId: task.id });
    }
    return run;
  } finally {
    repo.cleanup();
  }
}

/** One line of the measured matrix: setup, build and test as the cards said. */
export function describeRun(r: CorpusRun): string {
  const card = (s?: StageResult) => (s ? `${s.status}${s.summary ? `: ${s.summary}` : ''}` : '-');
  const setup = r.setup ? `${r.setup.status}${r.setup.status === 'failed' ? `: ${r.setup.summary ?? r.task.error?.message ?? ''}` : ''} [${r.setup.lines.join('; ')}]` : '-';
  const secs = (ms?: number) => (ms === undefined ? '-' : `${(ms / 1000).toFixed(0)} s`);
  const bootMs = r.setup?.startedAt ? Date.parse(r.setup.startedAt) - Date.parse(r.task.createdAt) : undefined;
  const times = [`to setup ${secs(bootMs)}`, `setup ${secs(r.setup?.durationMs)}`, ...r.task.stages.filter((s) => s.durationMs !== undefined).map((s) => `${s.name} ${secs(s.durationMs)}`)].join(', ');
  return `${r.ok ? 'OK  ' : 'FAIL'} ${r.project}${r.outOfTheBox ? '' : ' (with pipeline.json)'} in ${(r.ms / 1000).toFixed(0)} s (${times}) | setup ${setup} | build ${card(r.build)} | test ${card(r.test)}`;
}
