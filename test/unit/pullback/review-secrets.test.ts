// The secret scan of returned work: credential patterns in added lines are
// found with secretlint's recommended rules plus a high-entropy assignment
// check, named by file and line with the value masked, and Approve must confirm
// them. The values are generated here (never real keys) and committed in the
// sandbox clone as an agent would.
import { describe, expect, it } from 'vitest';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import type { PullbackReview } from '../../../common/review.js';
import { guestFixtures } from '../../support/pullback-guest.js';

const fixture = guestFixtures();

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
function random(n: number, alphabet = ALNUM): string {
  return [...randomBytes(n)].map((b) => alphabet[b % alphabet.length]).join('');
}

function expectNoValue(review: PullbackReview, values: string[]) {
  const json = JSON.stringify({ flags: review.flags, secrets: review.secrets, confirmations: review.confirmations });
  for (const v of values) expect(json).not.toContain(v);
}

describe('secret scan', () => {
  it('finds an AWS key, a private key and a GitHub token in added lines, masked, and makes Approve confirm them', async () => {
    const { guest, verify } = await fixture();
    const awsId = `AKIA${random(16, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567')}`;
    const awsSecret = random(40);
    const github = `ghp_${random(36)}`;
    const pem = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
    guest.write('src/a.txt', 'one\ntwo\nthree\n' + [`aws_access_key_id = ${awsId}`, `AWS_SECRET_ACCESS_KEY=${awsSecret}`, ''].join('\n'));
    guest.write('deploy/key.pem', pem);
    guest.write('scripts/release.sh', `#!/bin/sh\n# release\nexport GITHUB_TOKEN="${github}"\n`);
    guest.commit('leak some keys');
    const { review } = await verify();
    const found = review.secrets.map((s) => [s.path, s.line, s.rule]);
    expect(found).toEqual([
      ['deploy/key.pem', 1, 'secretlint/privatekey:PrivateKey'],
      ['scripts/release.sh', 3, 'secretlint/github:GITHUB_TOKEN'],
      ['src/a.txt', 4, 'secretlint/aws:AWSAccessKeyID'],
      ['src/a.txt', 5, 'secretlint/aws:AWSSecretAccessKey'],
    ]);
    expect(review.secrets.find((s) => s.path === 'scripts/release.sh')!.masked).toBe(`${github.slice(0, 4)}************ (40 characters)`);
    expect(review.secrets.find((s) => s.path === 'deploy/key.pem')!.masked).toMatch(/^-----BEGIN RSA PRIVATE KEY-----\*{6} \(\d+ characters\)$/);
    expectNoValue(review, [awsId, awsSecret, github, pem.split('\n')[1]!]);
    expect(review.flags.filter((f) => f.kind === 'secret').map((f) => [f.path, f.line, f.severity])).toEqual([
      ['deploy/key.pem', 1, 'danger'],
      ['scripts/release.sh', 3, 'danger'],
      ['src/a.txt', 4, 'danger'],
      ['src/a.txt', 5, 'danger'],
    ]);
    const confirm = review.confirmations.filter((c) => c.kind === 'secrets');
    expect(confirm).toEqual([{
      kind: 'secrets',
      message: '4 possible secrets in added lines: deploy/key.pem line 1 (secretlint/privatekey:PrivateKey), scripts/release.sh line 3 (secretlint/github:GITHUB_TOKEN), ' +
        'src/a.txt line 4 (secretlint/aws:AWSAccessKeyID), src/a.txt line 5 (secretlint/aws:AWSSecretAccessKey)',
    }]);
  });

  it('cannot be switched off by a secretlint-disable comment in the returned work', async () => {
    const { guest, verify } = await fixture();
    const github = `ghp_${random(36)}`;
    guest.write('config.js', `/* secretlint-disable */\n// secretlint-disable-next-line\nconst token = "${github}";\n`);
    guest.commit('hide it');
    const { review } = await verify();
    expect(review.secrets.map((s) => [s.path, s.line, s.rule])).toContainEqual(['config.js', 3, 'secretlint/github:GITHUB_TOKEN']);
  });

  it('finds a high-entropy value assigned to a secret-sounding name, not ordinary code', async () => {
    const { guest, verify } = await fixture();
    const value = random(32);
    guest.write('settings.py', [
      'import os',
      `SIGNING_SECRET = "${value}"`,
      'API_TOKEN = os.environ["API_TOKEN"]',
      'password_hint = "ask the admin"',
      '',
    ].join('\n'));
    guest.commit('settings');
    const { review } = await verify();
    expect(review.secrets.map((s) => [s.path, s.line, s.rule])).toEqual([['settings.py', 2, 'entropy:assignment']]);
    expectNoValue(review, [value]);
  });

  it('scans added lines of a file git takes for binary, and says which files it could not scan', async () => {
    const { guest, verify, quarantine } = await fixture();
    const github = `ghp_${random(36)}`;
    guest.write('blob.bin', Buffer.concat([Buffer.from([0, 1, 2, 10]), Buffer.from(`token=${github}\n`)]));
    for (let i = 0; i < 20; i++) guest.write(`zz/${i}.txt`, `filler ${i}\n`.repeat(50));
    guest.commit('binary with a token');
    const { review } = await verify(quarantine({ maxScanBytes: 2048 }));
    expect(review.secrets.map((s) => [s.path, s.line])).toEqual([['blob.bin', 2]]);
    const unscanned = review.confirmations.find((c) => c.kind === 'secrets' && c.message.includes('not scanned'))!;
    expect(unscanned.message).toMatch(/^\d+ files not scanned for secrets in full \(over the 2 KiB scan cap\): zz\//);
  });
});
