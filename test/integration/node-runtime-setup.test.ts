// A user's repository pins Node 26, whose official build links libatomic.so.1
// (the base image carries libatomic1), and pnpm by packageManager with corepack's
// sha512 of its tarball. Through the whole app with real parts (the base image
// under QEMU, the proxy, the npm registry), setup finds nothing missing for
// Node 26 (no Debian step: the npm registry is the only host it reaches), checks
// node starts, installs that very pnpm from the registry with both hashes
// checked, and the test stage runs them. An image without the library gets it
// from Debian: setup-script.test.ts runs that path with ldd and apt stood in.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FactoryApp } from '../../main/app.js';
import { NodeRegistry } from '../../main/environment/node-version.js';
import { sha512Hex } from '../../main/environment/setup-script.js';
import { egressRulesForThisNetwork, hostsReached } from '../support/egress-network.js';
import { testImage } from '../support/image.js';
import { makeRepo, type FixtureRepo } from '../support/repo.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { waitForTask } from '../support/wait-for-task.js';

const PNPM = '10.34.9';
let env: TestApp | undefined;
let app: FactoryApp;
let output: Map<string, string>;
let repo: FixtureRepo | undefined;

beforeAll(async () => {
  await testImage();
  env = await startTestApp('factory-node-runtime-', { settings: { maxParallelTasks: 1, egressRules: await egressRulesForThisNetwork() } });
  ({ app, output } = env);
}, 10 * 60_000);

afterAll(async () => {
  await env?.dispose();
  repo?.cleanup();
});

describe('Node 26 and a pinned pnpm in a real sandbox', () => {
  it('sets up Node 26 with no Debian step, that very pnpm with its hash checked, and the tests run with both', async () => {
    // The hash corepack writes into packageManager: the hex sha512 of the registry tarball.
    const hex = sha512Hex((await new NodeRegistry().packageDist('pnpm', PNPM)).integrity);
    repo = await makeRepo({
      files: {
        '.nvmrc': '26\n',
        'package.json': JSON.stringify({ name: 'pinned', version: '1.0.0', packageManager: `pnpm@${PNPM}+sha512.${hex}`, scripts: { test: 'node --test' } }),
        'sum.test.js': "const test = require('node:test');\nconst assert = require('node:assert');\ntest('adds', () => assert.strictEqual(1 + 1, 2));\n",
        '.factory/pipeline.json': JSON.stringify({ stages: { test: { command: 'node --version && pnpm --version && node --test' } } }),
      },
    });
    const created = await app.api['tasks.create']({ repoPath: repo.dir, title: 'Run the tests on Node 26', agent: 'command' });
    const t = await waitForTask(app, created.id, (x) => ['review', 'failed', 'cancelled', 'interrupted'].includes(x.phase), 20 * 60_000);
    const setupLog = output.get(t.setup?.sessionId ?? '') ?? '';
    expect(t.phase, `${JSON.stringify(t.error)}\n${setupLog.slice(-3000)}`).toBe('review');

    expect(t.setup!.lines[0]).toMatch(/^Node 26\.\d+\.\d+: no LTS release satisfies 26: newest release that does/);
    expect(t.setup!.lines).toContain(`pnpm ${PNPM} from packageManager, its sha512 checked`);
    // Node 26 starts on the image's own libraries: nothing for apt, nothing asked of Debian's mirror.
    expect(setupLog).toMatch(/node v26\.\d+\.\d+, npm /);
    expect(setupLog).not.toMatch(/needs lib|apt-get/);
    const reached = await hostsReached(app, t.id);
    expect(reached.length).toBeGreaterThan(0);
    for (const host of reached) expect(host).toMatch(/^registry\.npmjs\.org(:443)?$/);
    expect(setupLog).toContain(`pnpm ${PNPM}`);
    const test = t.stages.find((s) => s.name === 'test')!;
    expect(test.status).toBe('passed');
    const testLog = output.get(test.sessionId!) ?? '';
    expect(testLog).toMatch(/v26\.\d+\.\d+/);
    expect(testLog).toContain(PNPM);
  }, 25 * 60_000);
});
