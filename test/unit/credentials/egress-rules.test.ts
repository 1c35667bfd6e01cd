// Egress rules as a user (or a repository asking for egress) writes them, and
// the policy's decisions for what a program in the sandbox asks to reach:
// every refusal names why.
import { describe, expect, it } from 'vitest';
import { defaultEgressRules, EgressRule, egressHostMatches } from '../../../common/egress.js';
import { EgressPolicy } from '../../../main/credentials/egress-policy.js';

const rule = (r: Partial<EgressRule> & { host: string }): EgressRule => ({ name: 'r', port: 443, scheme: 'https', ...r });
const problem = (r: unknown) => {
  const parsed = EgressRule.safeParse(r);
  return parsed.success ? undefined : parsed.error.issues.map((i) => i.message).join('; ');
};

describe('egress rules', () => {
  it('refuses IP literals in every spelling a resolver accepts', () => {
    for (const host of ['127.0.0.1', '10.0.2.2', '127.1', '2130706433', '0x7f.1', '[::1]', '::1', '::ffff:127.0.0.1']) {
      expect(problem(rule({ host })), host).toMatch(/IP literal/);
    }
  });

  it('refuses ports 0 and 65536 and takes 1 and 65535', () => {
    expect(problem(rule({ host: 'example.com', port: 0 }))).toBeTruthy();
    expect(problem(rule({ host: 'example.com', port: 65536 }))).toBeTruthy();
    expect(problem(rule({ host: 'example.com', port: 1 }))).toBeUndefined();
    expect(problem(rule({ host: 'example.com', port: 65535 }))).toBeUndefined();
  });

  it('refuses control characters, spaces, percent-encoding and a trailing dot in a host', () => {
    expect(problem(rule({ host: 'example.com\r\nx-evil: 1' }))).toMatch(/control characters/);
    expect(problem(rule({ host: 'exa\u0000mple.com' }))).toMatch(/control characters/);
    expect(problem(rule({ host: 'exa mple.com' }))).toMatch(/invalid label/);
    expect(problem(rule({ host: 'registry%2enpmjs.org' }))).toMatch(/invalid label/);
    expect(problem(rule({ host: 'registry.npmjs.org.' }))).toMatch(/ends with a dot/);
  });

  it('lowercases a host and asks for punycode for an internationalised name', () => {
    expect(EgressRule.parse(rule({ host: 'Registry.NPMJS.org' })).host).toBe('registry.npmjs.org');
    expect(problem(rule({ host: 'bücher.example' }))).toMatch(/not ASCII: give an internationalised name as punycode \(xn--/);
    expect(problem(rule({ host: 'xn--bcher-kva.example' }))).toBeUndefined();
  });

  it('accepts "*." only as a leading wildcard over at least two labels', () => {
    expect(problem(rule({ host: '*.npmjs.org' }))).toBeUndefined();
    expect(problem(rule({ host: '*.org' }))).toMatch(/too broad/);
    expect(problem(rule({ host: 'registry.*.org' }))).toMatch(/wildcards match subdomains only/);
    expect(problem(rule({ host: '*npmjs.org' }))).toMatch(/wildcards match subdomains only/);
  });

  it('refuses methods and paths on an https rule (the proxy cannot see inside a tunnel), and unplain path prefixes', () => {
    expect(problem(rule({ host: 'example.com', methods: ['GET'] }))).toMatch(/CONNECT tunnel/);
    for (const p of ['/a/../b', '/a//b', '/a\\b', '/a%2fb', '/%2E%2E/', 'debian/']) {
      expect(problem(rule({ host: 'example.com', scheme: 'http', port: 80, pathPrefixes: [p] })), p).toBeTruthy();
    }
    expect(problem({ ...rule({ host: 'example.com' }), extra: 1 })).toBeTruthy();
  });

  it('the default rules are valid and cover npm, the Yarn registry, Debian over HTTP, PyPI, crates and Go, in setup and build only', () => {
    const rules = defaultEgressRules();
    for (const r of rules) expect(problem(r), r.name).toBeUndefined();
    const hosts = rules.map((r) => `${r.scheme}://${r.host}:${r.port}`);
    expect(hosts).toEqual(
      expect.arrayContaining([
        'https://registry.npmjs.org:443', 'https://registry.yarnpkg.com:443', 'http://deb.debian.org:80', 'http://security.debian.org:80', 'https://pypi.org:443',
        'https://files.pythonhosted.org:443', 'https://crates.io:443', 'https://static.crates.io:443', 'https://index.crates.io:443',
        'https://proxy.golang.org:443', 'https://sum.golang.org:443',
      ]),
    );
    for (const r of rules) expect(r.steps).toEqual(['setup', 'build']);
    expect(rules.find((r) => r.host === 'deb.debian.org')).toMatchObject({ methods: ['GET', 'HEAD'], pathPrefixes: ['/debian/', '/debian-security/'] });
  });
});

describe('EgressPolicy.decide', () => {
  const policy = () => new EgressPolicy([...defaultEgressRules(), { name: 'npm mirrors', host: '*.npmjs.org', port: 443, scheme: 'https' }]);

  it('allows a listed host:port in a step of its rule and names the rule', () => {
    expect(policy().decide({ scheme: 'https', host: 'registry.npmjs.org', port: 443 })).toEqual({ allowed: true, rule: expect.objectContaining({ name: 'npm registry' }) });
    expect(policy().decide({ scheme: 'http', host: 'deb.debian.org', port: 80, method: 'GET', path: '/debian/dists/bookworm/InRelease' })).toMatchObject({ allowed: true });
  });

  it('refuses an unlisted host, another port, another scheme, saying which', () => {
    const p = policy();
    expect(p.decide({ scheme: 'https', host: 'evil.example', port: 443 })).toEqual({ allowed: false, reason: 'no egress rule for https://evil.example:443' });
    expect(p.decide({ scheme: 'https', host: 'pypi.org', port: 8443 })).toEqual({ allowed: false, reason: 'no egress rule for https://pypi.org:8443 (rules for pypi.org allow only https port 443)' });
    expect(p.decide({ scheme: 'http', host: 'pypi.org', port: 443 })).toMatchObject({ allowed: false, reason: expect.stringMatching(/no egress rule for http:\/\/pypi\.org:443/) });
  });

  it('does not let a wildcard match look-alikes or the bare domain', () => {
    const p = policy();
    for (const host of ['evilnpmjs.org', 'registry.npmjs.org.evil.com', 'npmjs.org', 'npmjs.org.evil.com', 'xnpmjs.org']) {
      expect(p.decide({ scheme: 'https', host, port: 443 }), host).toMatchObject({ allowed: false });
    }
    expect(p.decide({ scheme: 'https', host: 'a.b.npmjs.org', port: 443 })).toMatchObject({ allowed: true, rule: { name: 'npm mirrors' } });
    expect(egressHostMatches('*.npmjs.org', '.npmjs.org')).toBe(false);
  });

  it('refuses a rule outside its steps, and follows setStep', () => {
    const p = policy();
    p.setStep('test');
    expect(p.decide({ scheme: 'https', host: 'pypi.org', port: 443 })).toEqual({ allowed: false, reason: 'rule "PyPI" does not apply in step test (only in setup, build)' });
    p.setStep('build');
    expect(p.decide({ scheme: 'https', host: 'pypi.org', port: 443 })).toMatchObject({ allowed: true });
  });

  it('refuses other methods and paths on an http rule, checking the raw target', () => {
    const p = policy();
    const deb = (method: string, path: string) => p.decide({ scheme: 'http', host: 'deb.debian.org', port: 80, method, path });
    expect(deb('POST', '/debian/x')).toEqual({ allowed: false, reason: 'rule "Debian packages" does not allow method POST (only GET, HEAD)' });
    expect(deb('GET', '/other/x')).toMatchObject({ allowed: false, reason: expect.stringMatching(/allows only paths under \/debian\/, \/debian-security\/, not \/other\/x/) });
    for (const path of ['/debian/../etc/passwd', '/debian/%2e%2e/x', '/debian/%2F/x', '/debian//x', '/debian/a\\b', '/debian/a b', '/debian/x#f', '/debian/x?a=\\']) {
      expect(deb('GET', path), path).toMatchObject({ allowed: false });
    }
    expect(deb('GET', '/debian-evil/x')).toMatchObject({ allowed: false });
    expect(deb('HEAD', '/debian-security/dists/x?y=1')).toMatchObject({ allowed: true });
  });

  it('refuses IP literals, trailing dots and percent-encoded request hosts, and lowercases mixed case', () => {
    const p = policy();
    expect(p.decide({ scheme: 'https', host: '104.16.0.1', port: 443 })).toMatchObject({ allowed: false, reason: expect.stringMatching(/IP literal/) });
    expect(p.decide({ scheme: 'https', host: 'registry.npmjs.org.', port: 443 })).toMatchObject({ allowed: false, reason: expect.stringMatching(/trailing dot/) });
    expect(p.decide({ scheme: 'https', host: 'registry%2enpmjs.org', port: 443 })).toMatchObject({ allowed: false, reason: expect.stringMatching(/invalid label/) });
    expect(p.decide({ scheme: 'https', host: 'Registry.NpmJS.org', port: 443 })).toMatchObject({ allowed: true });
  });

  it('takes rules added later, and refuses an invalid one naming the problem', () => {
    const p = new EgressPolicy();
    expect(p.decide({ scheme: 'https', host: 'example.com', port: 443 })).toMatchObject({ allowed: false });
    p.allow([{ name: 'example', host: 'example.com', port: 443, scheme: 'https' }]);
    expect(p.decide({ scheme: 'https', host: 'example.com', port: 443 })).toMatchObject({ allowed: true });
    expect(() => p.allow([{ name: 'bad', host: '10.0.0.1', port: 443, scheme: 'https' }])).toThrow(/egress rule 0 \("bad"\) is invalid: host: .*IP literal/);
  });
});
