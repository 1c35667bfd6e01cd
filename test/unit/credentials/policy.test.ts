import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { checkRefCommand, parseReceivePackCommands, refFormatProblem } from '../../../main/credentials/git-policy.js';
import { embeddedIpv4, forbiddenReason, ipv6Words } from '../../../main/credentials/net-guard.js';
import { proxyGuestForward, guestEnvScript } from '../../../main/credentials/routes.js';

const Z = '0'.repeat(40);
const A = 'a'.repeat(40);
const pkt = (s: string) => (s.length + 4).toString(16).padStart(4, '0') + s;

describe('address guard', () => {
  it.each(['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', '::', 'fe80::1', 'fe80::1%eth0', 'fd00:ec2::254', '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:10.0.0.1', '64:ff9b::10.0.0.1', '224.0.0.1', '2001:db8::1', '3fff::1'])(
    'refuses %s',
    (ip) => expect(forbiddenReason(ip)).toBeTruthy(),
  );
  it.each(['93.184.216.34', '1.1.1.1', '2606:4700:4700::1111', '::ffff:1.1.1.1'])('allows %s', (ip) => expect(forbiddenReason(ip)).toBeUndefined());

  // Every standard way an IPv6 address carries an IPv4 one, each with a refused
  // IPv4 address inside (refused, naming the form) and a public one (allowed).
  it.each([
    ['::7f00:1', '127.0.0.1', 'IPv4-compatible'],
    ['::127.0.0.1', '127.0.0.1', 'IPv4-compatible'],
    ['::a9fe:a9fe', '169.254.169.254', 'IPv4-compatible'],
    ['0:0:0:0:0:ffff:a00:1', '10.0.0.1', 'IPv4-mapped'],
    ['::FFFF:7F00:1', '127.0.0.1', 'IPv4-mapped'],
    ['::ffff:0:7f00:1', '127.0.0.1', 'IPv4-translated'],
    ['::ffff:0:192.168.1.1', '192.168.1.1', 'IPv4-translated'],
    ['2002:7f00:1::1', '127.0.0.1', '6to4'],
    ['2002:a9fe:a9fe::', '169.254.169.254', '6to4'],
    ['2002:c0a8:101:1::5', '192.168.1.1', '6to4'],
    ['64:ff9b::7f00:1', '127.0.0.1', 'NAT64 64:ff9b::/96'],
    ['64:ff9b::169.254.169.254', '169.254.169.254', 'NAT64 64:ff9b::/96'],
    // Teredo: client 127.0.0.1 / 10.0.0.1 stored inverted; server 65.54.227.120 public.
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', '127.0.0.1', 'Teredo 2001::/32 (client)'],
    ['2001:0:4136:e378::f5ff:fffe', '10.0.0.1', 'Teredo 2001::/32 (client)'],
    // Teredo with a private server and a public client (1.1.1.1 inverted).
    ['2001:0:a00:1::fefe:fefe', '10.0.0.1', 'Teredo 2001::/32 (server)'],
  ])('refuses %s: it embeds %s (%s)', (ip, ipv4, form) => {
    expect(forbiddenReason(ip)).toMatch(new RegExp(`embeds ${ipv4.replace(/\./g, '\\.')} \\(${form.replace(/[()/]/g, '\\$&')}[^)]*\\): ${ipv4.replace(/\./g, '\\.')} is a loopback`));
    expect(embeddedIpv4(ip)).toContainEqual({ form: expect.stringContaining(form), ipv4 });
  });
  it.each(['64:ff9b:1::7f00:1', '64:ff9b:1:7f00:1::', '64:ff9b:1:101:101::'])('refuses %s: local-use NAT64 embeds any address wherever its prefix length puts it', (ip) => {
    expect(forbiddenReason(ip)).toMatch(/local-use NAT64/);
  });
  it.each(['::1.1.1.1', '::ffff:0:101:101', '2002:101:101::1', '64:ff9b::1.1.1.1', '2001:0:4136:e378:8000:63bf:fefe:fefe'])('allows %s: it embeds only a public address', (ip) => {
    expect(forbiddenReason(ip)).toBeUndefined();
  });

  it('reads IPv6 text exactly as Node does (checked against net.BlockList on random addresses)', () => {
    let seed = 7;
    const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let i = 0; i < 500; i++) {
      // Runs of zero words, so the compressed forms vary.
      const words = Array.from({ length: 8 }, () => (rnd() < 0.4 ? 0 : Math.floor(rnd() * 0x10000)));
      const full = words.map((w) => w.toString(16)).join(':');
      const compressed = new URL(`http://[${full}]/`).hostname.slice(1, -1);
      const withQuad = `${words.slice(0, 6).map((w) => w.toString(16)).join(':')}:${words[6]! >> 8}.${words[6]! & 255}.${words[7]! >> 8}.${words[7]! & 255}`;
      for (const text of [full, compressed, withQuad]) {
        expect(ipv6Words(text), text).toEqual(words);
        const one = new net.BlockList();
        one.addAddress(ipv6Words(text).map((w) => w.toString(16)).join(':'), 'ipv6');
        expect(one.check(text, 'ipv6'), text).toBe(true);
      }
    }
  });
});

describe('receive-pack command parsing and push policy', () => {
  it('parses commands and capabilities up to the flush packet', () => {
    const body = Buffer.from(pkt(`${Z} ${A} refs/heads/factory/t1/x\0report-status side-band-64k\n`) + pkt(`${A} ${Z} refs/heads/old\n`) + '0000PACK...');
    const r = parseReceivePackCommands(body);
    expect(r).toMatchObject({ state: 'done', capabilities: ['report-status', 'side-band-64k'] });
    if (r.state !== 'done') throw new Error();
    expect(r.commands).toEqual([
      { oldId: Z, newId: A, ref: 'refs/heads/factory/t1/x' },
      { oldId: A, newId: Z, ref: 'refs/heads/old' },
    ]);
    expect(body.subarray(r.consumed).toString()).toBe('PACK...');
  });
  it('asks for more bytes on a partial stream and rejects garbage', () => {
    expect(parseReceivePackCommands(Buffer.from(pkt(`${Z} ${A} refs/heads/x\n`).slice(0, 20))).state).toBe('need-more');
    expect(parseReceivePackCommands(Buffer.from('GET / HTTP/1.1\r\n'))).toMatchObject({ state: 'invalid' });
    expect(parseReceivePackCommands(Buffer.from(pkt('push-cert\0report-status\n')))).toMatchObject({ state: 'invalid' });
  });
  it('allows only creation of new branches under the task prefix', () => {
    expect(checkRefCommand({ oldId: Z, newId: A, ref: 'refs/heads/factory/t1/x' }, 't1')).toBeUndefined();
    expect(checkRefCommand({ oldId: Z, newId: A, ref: 'refs/heads/factory/t1/' }, 't1')).toMatch(/only new branches/);
    expect(checkRefCommand({ oldId: Z, newId: A, ref: 'refs/heads/factory/t2/x' }, 't1')).toMatch(/only new branches/);
    expect(checkRefCommand({ oldId: Z, newId: A, ref: 'refs/heads/factory/t1x/x' }, 't1')).toMatch(/only new branches/);
    expect(checkRefCommand({ oldId: Z, newId: A, ref: 'refs/heads/main' }, 't1')).toMatch(/only new branches/);
    expect(checkRefCommand({ oldId: A, newId: Z, ref: 'refs/heads/factory/t1/x' }, 't1')).toMatch(/deleting/);
    expect(checkRefCommand({ oldId: A, newId: 'b'.repeat(40), ref: 'refs/heads/factory/t1/x' }, 't1')).toMatch(/no updates/);
    expect(checkRefCommand({ oldId: Z, newId: A, ref: 'refs/heads/factory/t1/../../main' }, 't1')).toMatch(/not a valid ref name \(.*"\.\."/);
  });
});

/** git's own verdict, with the name as an argument (never through a shell). */
const gitAccepts = (name: string) => {
  const r = spawnSync('git', ['check-ref-format', name], { encoding: 'utf8' });
  if (r.status !== 0 && r.status !== 1) throw new Error(`git check-ref-format ${JSON.stringify(name)}: ${r.stderr}`);
  return r.status === 0;
};
/** The proxy sees the ref as bytes decoded one char per byte. */
const asWire = (name: string) => Buffer.from(name, 'utf8').toString('latin1');

describe('ref names: git check-ref-format rules', () => {
  const T = 'refs/heads/factory/t1/';
  const names = [
    'x', 'a//b', '.hidden', 'x.', 'x.lock', 'x.lock/y', 'a..b', '..', '.', 'a/.b', 'a./b', 'a@{b', 'a@b', '@', '@{', 'a@/{b', '{}',
    'x/', 'a b', 'a\tb', 'a~1', 'a^', 'a:b', 'a?b', 'a*b', 'a[b', 'a]b', 'a\\b', 'x\x7f', 'x\x01', 'x\x1b[31m', 'é', 'a\u00a0b', 'x.LOCK',
    '.lock', 'lock', 'a.lockx', '-dash', 'a.b.c', 'a,b', 'a"b', "a'b", 'a#b', 'a%2fb', 'a+b', 'a=b', 'a!b', 'a$b', 'a&b', 'a;b', 'a<b>', 'a|b', 'a`b',
  ];
  const table = [...names.map((n) => T + n), '@', 'refs', '/refs/heads/x', 'refs/heads/x/', 'refs//heads', 'refs/heads/x.'];
  it.each(table)('%j: the proxy agrees with git', (name) => {
    const git = gitAccepts(name);
    const problem = refFormatProblem(asWire(name));
    expect(problem === undefined, `git says ${git ? 'valid' : 'invalid'}, the proxy says ${problem ?? 'valid'}`).toBe(git);
  });
  it('agrees with git on 250 generated names built from the characters the rules are about', () => {
    const alphabet = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', '-', 'é', '.', '.', '/', '/', '@', '{', '.lock', ' ', '~', '*', '\x01', '\\'];
    let seed = 11;
    const rnd = (n: number) => Math.floor((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31 * n);
    let invalid = 0;
    for (let i = 0; i < 250; i++) {
      const name = (rnd(4) ? 'refs/heads/' : 'x') + Array.from({ length: 1 + rnd(6) }, () => alphabet[rnd(alphabet.length)]).join('');
      const git = gitAccepts(name);
      if (!git) invalid++;
      expect(refFormatProblem(asWire(name)) === undefined, JSON.stringify(name)).toBe(git);
    }
    // Both verdicts were exercised.
    expect(invalid).toBeGreaterThan(40);
    expect(invalid).toBeLessThan(250 - 40);
  });
  it.each(['a//b', '.hidden', 'x.', 'x.lock', 'x\x01', 'a..b', 'a@{b', 'x/'])('refuses a push creating %j under the task prefix, naming the rule', (n) => {
    expect(checkRefCommand({ oldId: Z, newId: A, ref: asWire(T + n) }, 't1')).toMatch(/refused: not a valid ref name \(.+\)/);
  });
});

describe('guest wiring', () => {
  it('builds the guestfwd entry and refuses socket paths QEMU or socat would split', () => {
    expect(proxyGuestForward('/data/sandboxes/t1/proxy.sock')).toEqual({ guestAddress: '10.0.2.100', guestPort: 80, command: 'socat - UNIX-CONNECT:/data/sandboxes/t1/proxy.sock' });
    expect(() => proxyGuestForward('/data/a,b/proxy.sock')).toThrow(/must be absolute/);
    expect(() => proxyGuestForward('relative.sock')).toThrow(/must be absolute/);
  });
  it('quotes guest environment values for the shell', () => {
    expect(guestEnvScript({ A: "x'y" })).toBe(`export A='x'\\''y'\n`);
  });
});

describe('git route scope', () => {
  const now = new Date().toISOString();
  const ref = { id: 'gh', kind: 'git' as const, label: 'GitHub', target: { upstream: 'https://github.com/acme' }, createdAt: now, updatedAt: now };
  it('sends the token only to the host and path prefix it was stored for', async () => {
    const { planSandboxRoutes } = await import('../../../main/credentials/routes.js');
    expect(planSandboxRoutes([ref], { taskId: 't', git: { repoUrl: 'https://github.com/acme/app.git', credentialId: 'gh' } }).gitRemoteUrl).toMatch(
      /^http:\/\/factory:fiab-placeholder-[0-9a-f]+@10\.0\.2\.100\/git\/app\.git$/,
    );
    expect(() => planSandboxRoutes([ref], { taskId: 't', git: { repoUrl: 'https://evil.example/acme/app.git', credentialId: 'gh' } })).toThrow(/is for https:\/\/github.com\/acme, not for/);
    expect(() => planSandboxRoutes([ref], { taskId: 't', git: { repoUrl: 'https://github.com/acme-evil/app.git', credentialId: 'gh' } })).toThrow(/not for/);
    expect(() => planSandboxRoutes([ref], { taskId: 't', git: { repoUrl: 'http://github.com/acme/app.git', credentialId: 'gh' } })).toThrow(/https/);
    expect(() => planSandboxRoutes([ref], { taskId: 't', git: { repoUrl: 'https://u:p@github.com/acme/app.git', credentialId: 'gh' } })).toThrow(/must not contain/);
  });
});

describe('audit log', () => {
  it('is per sandbox, survives a new instance, and stops at its size cap with a marker', async () => {
    const { AuditLog } = await import('../../../main/credentials/audit.js');
    const { mkdtempSync, rmSync } = await import('node:fs');
    const os = await import('node:os');
    const path = await import('node:path');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'fiab-audit-'));
    try {
      const log = new AuditLog(dir, { maxBytesPerSandbox: 2000 });
      const entry = (i: number) => ({ time: new Date(0).toISOString(), sandboxId: 'a', method: 'GET', host: 'h', path: `/p${i}`, rule: 'r', status: 200, bytesIn: 0, bytesOut: 0, durationMs: 1 });
      for (let i = 0; i < 50; i++) log.record(entry(i));
      log.record({ ...entry(0), sandboxId: 'b' });
      await log.flush();
      const a = await new AuditLog(dir).list('a');
      expect(a.length).toBeGreaterThan(5);
      expect(a.length).toBeLessThan(50);
      expect(a.at(-1)!.rule).toBe('audit log full');
      expect(a.slice(0, -1).every((e) => e.rule === 'r')).toBe(true);
      expect(await log.list('b')).toHaveLength(1);
      expect(() => log.record({ ...entry(0), sandboxId: '../x' })).toThrow(/not a sandbox id/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
