// A user runs tasks on small projects shaped like real ones (test/fixtures/real/),
// through the whole app with real parts: the base image under QEMU, the
// credential proxy, the npm registry and the Debian mirror. Each goes through
// setup, build and test with the command agent, one after another in one app,
// and the test card must show the runner's counts (or, for a suite that prints
// none, that they were not recognised), never a spinner frame. Two
// representative projects run here, a Node one and a C one (each takes a
// minute or more under software emulation, several on a busy machine); the C
// one also proves Debian packages through the proxy (gcc and make from Debian's
// hosts only), so real-projects.test.ts keeps to Node;
// test/bench/real-corpus.bench.ts runs all of them and prints the lines
// behind test/fixtures/real/MATRIX.md.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFactoryApp, type FactoryApp } from '../../main/app.js';
import { appPaths } from '../../main/state/paths.js';
import { egressRulesForThisNetwork, hostsReached } from '../support/egress-network.js';
import { testImage } from '../support/image.js';
import { corpusProject, describeRun, runCorpusProject } from '../support/real-corpus.js';
import type { Task } from '../../common/domain.js';
import { tempDir } from '../support/repo.js';

let app: FactoryApp;
let dataDir: string;
const repoPaths = new Set<string>();
const output = new Map<string, string>();

beforeAll(async () => {
  await testImage();
  dataDir = tempDir('fcorpus-');
  app = await createFactoryApp({
    host: 'web',
    paths: appPaths({ ...process.env, FACTORY_DATA_DIR: dataDir }),
    settings: { maxParallelTasks: 1, egressRules: await egressRulesForThisNetwork() },
  });
  app.onTerminalData((e) => output.set(e.sessionId, (output.get(e.sessionId) ?? '') + Buffer.from(e.data).toString('utf8')));
}, 10 * 60_000);

afterAll(async () => {
  // Layers live in the shared cache next to the base image: this run's go with its repositories.
  if (app) {
    for (const t of await app.api['tasks.list']({})) repoPaths.add(t.repoPath);
    for (const l of await app.api['layers.list']({})) if (repoPaths.has(l.repo)) await app.api['layers.remove']({ id: l.id });
  }
  await app?.dispose();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

async function run(name: string, beforeDestroy?: (task: Task) => Promise<void>) {
  const r = await runCorpusProject(app, corpusProject(name), beforeDestroy ? { beforeDestroy } : {});
  repoPaths.add(r.task.repoPath);
  console.log(describeRun(r));
  return r;
}

describe('projects shaped like real ones, set up, built and tested in a sandbox', () => {
  it("clsx's shape (uvu behind npm, a build step, engines >=6): both cards read the tools' own lines, the test card uvu's counts", async () => {
    const r = await run('clsx-like');
    expect(r.setup?.status, JSON.stringify(r.task.error)).toBe('passed');
    expect(r.build).toMatchObject({ status: 'passed', summary: 'built dist/clsx.js and dist/clsx.mjs' });
    expect(r.test).toMatchObject({ status: 'passed', summary: '5 passed, 0 failed' });
    expect(r.task.phase).toBe('review');
  });

  it("uthash's shape (metadata-only package.json, tests/Makefile): gcc and make from Debian through the proxy, make -C tests passes by its exit status and says it could not count", async () => {
    let allowedHosts: string[] = [];
    const r = await run('uthash-like', async (task) => {
      allowedHosts = await hostsReached(app, task.id);
    });
    expect(r.setup?.status, JSON.stringify(r.task.error)).toBe('passed');
    expect(r.setup?.lines).toContainEqual(expect.stringMatching(/^Debian: .*\bgcc\b/));
    expect(output.get(r.setup!.sessionId!) ?? '').toMatch(/Setting up gcc/);
    // Setup reached Debian's mirror, and nothing else, through the proxy.
    expect(allowedHosts.length).toBeGreaterThan(0);
    for (const host of allowedHosts) expect(host).toMatch(/^(deb|security)\.debian\.org(:80)?$/);
    expect(r.test?.status, r.test?.summary).toBe('passed');
    expect(r.test?.summary).toMatch(/\(test counts not recognised\)$/);
  });
});
