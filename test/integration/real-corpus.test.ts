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
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FactoryApp } from '../../main/app.js';
import { egressRulesForThisNetwork, hostsReached } from '../support/egress-network.js';
import { testImage } from '../support/image.js';
import { corpusProject, describeRun, runCorpusProject } from '../support/real-corpus.js';
import type { Task } from '../../common/domain.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

let env: TestApp | undefined;
let app: FactoryApp;
let output: Map<string, string>;

beforeAll(async () => {
  await testImage();
  env = await startTestApp('fcorpus-', { settings: { maxParallelTasks: 1, egressRules: await egressRulesForThisNetwork() } });
  ({ app, output } = env);
}, 10 * 60_000);

afterAll(async () => {
  await env?.dispose();
});

async function run(name: string, beforeDestroy?: (task: Task) => Promise<void>) {
  const r = await runCorpusProject(app, corpusProject(name), beforeDestroy ? { beforeDestroy } : {});
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
