// The agent's commits in the review, and the message of the commit Approve
// makes instead of them: the list and each message are capped and say so, and
// the landed message is made of what the user typed and the app knows only.
import { describe, expect, it } from 'vitest';
import path from 'node:path';
import { landingMessage } from '../../../main/pullback/landing.js';
import { readAgentHistory } from '../../../main/pullback/review/commits.js';
import { guestFixtures } from '../../support/pullback-guest.js';

const fixture = guestFixtures();

describe("the agent's commits in the review", () => {
  it('lists the newest commits up to the cap and cuts long messages, saying so for each', async () => {
    const fx = await fixture();
    fx.guest.write('a.txt', '1\n');
    fx.guest.commit('first');
    fx.guest.write('a.txt', '2\n');
    // Over the read cap (scan cap plus room for headers): read in part, and its token found in what was read.
    const long = fx.guest.commit(`long one\n\ntoken ghp_${'A1b2C3d4E5'.repeat(3)}Zz9Yy8\n${'filler line\n'.repeat(2000)}`);
    fx.guest.write('a.txt', '3\n');
    const newest = fx.guest.commit('newest');
    const v = await fx.verify();
    const qrepo = path.join(fx.quarantine().dirFor(fx.id), 'repo.git');
    const { history, scan } = await readAgentHistory(qrepo, fx.base, v.headCommit, { timeoutMs: 30_000, maxCommits: 2, maxMessageChars: 20, maxScanBytes: 64 });
    expect(history).toMatchObject({ total: 3, merges: 0, maxCommits: 2, maxMessageChars: 20, maxScanBytes: 64 });
    expect(history.commits.map((c) => [c.id, c.message, c.messageCut, c.scannedInPart])).toEqual([
      [newest, 'newest\n', false, false],
      [long, 'long one\n\ntoken ghp_', true, true],
    ]);
    expect(scan.paths).toEqual([`message of commit ${newest}`, `message of commit ${long}`]);
    expect(scan.added.byFile.get(1)!.texts[2]).toBe(`token ghp_${'A1b2C3d4E5'.repeat(3)}Zz9Yy8`);
    expect(scan.added.byFile.get(1)!.lines.slice(0, 3)).toEqual([1, 2, 3]);
  });
});

describe('the message of the landed commit', () => {
  it('is the task text with the task id and agent, a long first line cut to a subject, control characters dropped', () => {
    const title = `${'Make the parser faster '.repeat(5)}\r\nand keep \u001b[31mits API\u0007.`;
    const message = landingMessage({ id: 'abc123', title, agent: 'codex' }, 3);
    const [subject, blank, ...rest] = message.split('\n');
    expect(subject).toHaveLength(72);
    expect(subject!.endsWith('…')).toBe(true);
    expect(blank).toBe('');
    expect(rest.join('\n')).toContain('and keep [31mits API.');
    expect(message).not.toMatch(/[\u0000-\u0009\u000b-\u001f]/);
    expect(message).toContain("Task abc123, made by agent codex in a Factory in a Box sandbox.\nApproved after review: this commit holds the reviewed tree on the task's base; the agent's 3 commits and their messages were not kept.\n");
    expect(landingMessage({ id: 'x1', title: 'Fix the typo' }, 1)).toBe(
      "Fix the typo\n\nTask x1, made by agent command in a Factory in a Box sandbox.\nApproved after review: this commit holds the reviewed tree on the task's base; the agent's 1 commit and its message were not kept.\n",
    );
  });
});
