// `npm run factory -- <command>` from a clone, as the README says: npm runs the
// script in the package's folder and says where the user typed it in INIT_CWD
// (with `npm --prefix <clone> run factory` the two differ). A path the user
// gives, and the repository `hooks install` writes into, are the user's.
// npm's environment is set here as npm sets it; the CLI is the real one.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cliArgs } from '../../support/cli.js';
import { makeRepo, type FixtureRepo } from '../../support/repo.js';

const repos: FixtureRepo[] = [];
afterEach(() => {
  for (const r of repos.splice(0)) r.cleanup();
});

describe('factory through npm run', () => {
  it("hooks install writes into the repository the user is in, not the package's folder", async () => {
    const clone = await makeRepo({ files: { 'package.json': '{"name":"factory-in-a-box"}\n' } });
    const mine = await makeRepo({ files: { 'README.md': '# mine\n' } });
    repos.push(clone, mine);
    const r = spawnSync(process.execPath, cliArgs('hooks', 'install', '--project', '--json'), {
      cwd: clone.dir,
      env: { ...process.env, npm_lifecycle_event: 'factory', npm_package_name: 'factory-in-a-box', INIT_CWD: mine.dir },
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ file: path.join(fs.realpathSync(mine.dir), '.claude', 'settings.json'), changed: true });
    expect(fs.existsSync(path.join(mine.dir, '.claude', 'settings.json'))).toBe(true);
    expect(fs.existsSync(path.join(clone.dir, '.claude'))).toBe(false);
  });
});
