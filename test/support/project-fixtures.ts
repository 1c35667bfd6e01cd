// An ordinary project, made by the tests as a user's repository would be: a Node
// project with a real dependency from the npm registry (its lockfile written by
// the host's npm, never a checked-in node_modules) and a `node --test` suite.
// Used by the real-projects integration test, the Chromium spec and the
// environment bench. (A C project that needs Debian's gcc and make is in the
// corpus, test/fixtures/real/uthash-like.)
import { execFileSync } from 'node:child_process';
import { makeRepo, type FixtureRepo } from './repo.js';

export const NODE_TESTS = ['recognises numbers', 'refuses words', 'adds numbers'] as const;

function nodeTestFile(failing: boolean): string {
  return [
    "const { test } = require('node:test');",
    "const assert = require('node:assert');",
    "const isNumber = require('is-number');",
    `test(${JSON.stringify(NODE_TESTS[0])}, () => { assert.ok(isNumber(5)); });`,
    `test(${JSON.stringify(NODE_TESTS[1])}, () => { assert.ok(!isNumber('five')); });`,
    `test(${JSON.stringify(NODE_TESTS[2])}, () => { assert.strictEqual(2 + 2, ${failing ? 5 : 4}); });`,
    '',
  ].join('\n');
}

/** Writes package-lock.json with the host's npm (the registry answers here, as for any user). */
export function writeLockfile(repo: FixtureRepo): void {
  execFileSync('npm', ['install', '--package-lock-only', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: repo.dir, stdio: 'pipe', timeout: 120_000 });
}

/**
 * A Node project: package.json with one dependency, its lockfile, `.nvmrc`,
 * `"test": "node --test"`. `extra` files are added (e.g. a pipeline.json with stage commands).
 */
export async function makeNodeProject(opts: { failing?: boolean; extra?: Record<string, string>; dependencies?: Record<string, string> } = {}): Promise<FixtureRepo> {
  const repo = await makeRepo({
    commit: false,
    files: {
      'package.json': JSON.stringify({ name: 'fixture-node', version: '1.0.0', private: true, scripts: { test: 'node --test' }, dependencies: opts.dependencies ?? { 'is-number': '7.0.0' } }, null, 2) + '\n',
      '.nvmrc': '22\n',
      '.gitignore': 'node_modules/\n',
      'test/numbers.test.js': nodeTestFile(!!opts.failing),
      ...(opts.extra ?? {}),
    },
  });
  writeLockfile(repo);
  repo.commit('Node fixture');
  return repo;
}

/** Makes the Node fixture's tests fail in a new commit (the lockfile stays the same). */
export function makeFailingCommit(repo: FixtureRepo): string {
  repo.write('test/numbers.test.js', nodeTestFile(true));
  return repo.commit('A failing test');
}
