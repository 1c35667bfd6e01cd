// A sandbox returns one of its own credentials in a form a line-by-line text
// match misses: UTF-16 (a file git diffs as binary, read with --text), and the
// secret scan must still name it before Approve. Likewise a token the rule set knows.
import { afterEach, describe, expect, it } from 'vitest';
import { guestFixture, type GuestFixture } from '../../support/pullback-guest.js';

const fixtures: GuestFixture[] = [];
afterEach(() => {
  while (fixtures.length) fixtures.pop()!.cleanup();
});

const VALUE = 'sk-ant-fixture-Zq8vR2mN5pL0xW7tY4kB';

function utf16be(s: string): Buffer {
  return Buffer.from(s, 'utf16le').swap16();
}

describe('the secret scan finds the sandbox credential in other encodings', () => {
  it.each([
    { name: 'UTF-16LE with a BOM', bytes: () => Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(`key = ${VALUE}\n`, 'utf16le')]) },
    { name: 'UTF-16BE with a BOM', bytes: () => Buffer.concat([Buffer.from([0xfe, 0xff]), utf16be(`key = ${VALUE}\n`)]) },
    { name: 'UTF-16LE without a BOM', bytes: () => Buffer.from(`notes\n${VALUE}\n`, 'utf16le') },
  ])('a file holding it as $name is named, with Approve needing confirmation', async ({ bytes }) => {
    const f = await guestFixture();
    fixtures.push(f);
    f.guest.write('notes/key.txt', bytes());
    f.guest.commit('keep the key');
    const q = f.quarantine({ credentialValues: async () => [{ id: 'anthropic', value: VALUE }] });
    const { review } = await f.verify(q);
    expect(review.secrets.filter((s) => s.path === 'notes/key.txt').map((s) => s.rule)).toContain('credential:anthropic');
    expect(review.confirmations.map((c) => c.kind)).toContain('secrets');
    expect(JSON.stringify(review)).not.toContain(VALUE);
  });

  it('a GitHub token written as UTF-16LE is found by the rule set', async () => {
    const f = await guestFixture();
    fixtures.push(f);
    const token = 'ghp_' + 'Zq8vR2mN5pL0xW7tY4kBa1C3dE5fG7hJ9kL2';
    f.guest.write('ci/env.ps1', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(`$env:GITHUB_TOKEN = "${token}"\r\n`, 'utf16le')]));
    f.guest.commit('ci');
    const { review } = await f.verify();
    expect(review.secrets.map((s) => [s.path, s.rule])).toContainEqual(['ci/env.ps1', 'secretlint/github:GITHUB_TOKEN']);
    expect(JSON.stringify(review)).not.toContain(token);
  });

  it('the leading bytes of that UTF-16 file, shown on request, hide the value', async () => {
    const f = await guestFixture();
    fixtures.push(f);
    f.guest.write('notes/key.txt', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(`key = ${VALUE}\n`, 'utf16le')]));
    f.guest.commit('keep the key');
    const q = f.quarantine({ credentialValues: async () => [{ id: 'anthropic', value: VALUE }] });
    const verified = await f.verify(q);
    const detail = await q.fileDetail({ taskId: f.id, baseCommit: f.base, headCommit: verified.headCommit, path: 'notes/key.txt' });
    const shown = detail.leadingBytes.replace(/\\x00/g, '');
    expect(shown).toContain('key = ');
    expect(shown).not.toContain(VALUE.slice(0, 12));
  });
});
